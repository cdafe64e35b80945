"""The C record walk and the pure-Python one agree on every input: same stopping point, same timestamp range,
same order flag and null keys, and an error from one is an error from the other."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.accelerators import require_built
from tidelog.protocol import record_walk
from tidelog.protocol.record_walk import InvalidRecordError, RecordWalk
from tidelog.protocol.records import encode_record


@pytest.fixture(autouse=True)
def _built() -> None:
    require_built(record_walk._c_walk is not None, "the C record walk")


def _run(impl: str, data: bytes, count: int, partial: bool) -> tuple[object, ...]:
    walk = RecordWalk()
    saved = record_walk._c_walk
    if impl == "python":
        record_walk._c_walk = None
    try:
        pos, index = record_walk.walk_uncompressed(data, 0, len(data), 0, count, walk, True, partial)
    except InvalidRecordError:
        return ("error",)
    finally:
        record_walk._c_walk = saved
    return pos, index, walk.min_ts_delta, walk.max_ts_delta, walk.offsets_in_order, walk.null_key_indexes


records = st.lists(st.tuples(st.integers(-(2**40), 2**40), st.integers(-3, 300), st.none() | st.binary(max_size=80),
                             st.none() | st.binary(max_size=300),
                             st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3)),
                   max_size=6)


@settings(max_examples=400, deadline=None)
@given(records, st.data())
def test_c_and_python_walks_agree(recs: list[tuple], data: st.DataObject) -> None:
    raw = bytearray(b"".join(bytes(encode_record(od, ts, k, v, h)) for ts, od, k, v, h in recs))
    for _ in range(data.draw(st.integers(0, 3))):
        if raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    blob = bytes(raw[:cut])
    count = data.draw(st.integers(0, len(recs) + 1))
    partial = data.draw(st.booleans())
    assert _run("c", blob, count, partial) == _run("python", blob, count, partial)
