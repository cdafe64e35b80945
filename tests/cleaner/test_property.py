"""Property test: random produces, tombstones, clock advances, cleanings and restarts against a dict model
(issue 4, "done when" 1)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from cleaner_env import COMPACT, Env, produce, read_all
from cleaner_impls import cleaner_impl  # noqa: F401 - autouse: the C cleaner core and the Python cleaner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tidelog.clock import ManualClock
from tidelog.storage import TopicPartition
from tidelog.storage.checkpoints import OffsetCheckpointFile

RETENTION = 1000
KEYS = ["a", "b", "c"]
TP = TopicPartition("t", 0)

produce_op = st.tuples(st.just("produce"), st.sampled_from(KEYS), st.integers(0, 99))
op = st.one_of(
    produce_op,
    produce_op,
    produce_op,
    st.tuples(st.just("tombstone"), st.sampled_from(KEYS)),
    st.tuples(st.just("roll")),
    st.tuples(st.just("advance"), st.sampled_from([0, 300, 999, 1000, 1500])),
    st.tuples(st.just("clean")),
    st.tuples(st.just("clean")),
    st.tuples(st.just("clean-only")),
    st.tuples(st.just("restart")),
)


def check_after_cleaning(env: Env, produced: dict[int, tuple[bytes, bytes | None]], horizons: dict[int, int]) -> None:
    log = env.log("t", COMPACT)
    now = env.clock.milliseconds()
    checkpoint = OffsetCheckpointFile(env.path / "cleaner-offset-checkpoint").read()[TP]
    records = read_all(log)
    offsets = [r.offset for r in records]
    # offsets preserved and increasing; every record is exactly what was produced at its offset
    assert offsets == sorted(set(offsets))
    for r in records:
        assert produced[r.offset] == (r.key, r.value)
    latest: dict[bytes, int] = {}
    for offset, (key, _) in produced.items():
        latest[key] = max(latest.get(key, -1), offset)
    # reading from the start yields the latest value of every live key
    seen: dict[bytes, bytes | None] = {}
    for r in records:
        seen[r.key] = r.value
    for key, offset in latest.items():
        value = produced[offset][1]
        if value is not None:
            assert seen.get(key) == value
        else:
            assert seen.get(key) is None  # an older value never comes back
    # no superseded record remains below the cleaned point
    below = [r for r in records if r.offset < checkpoint]
    keys_below = [r.key for r in below]
    assert len(keys_below) == len(set(keys_below))
    for r in below:
        newer = [o for o, (k, _) in produced.items() if k == r.key and r.offset < o < checkpoint]
        assert not newer, f"offset {r.offset} superseded by {newer} below checkpoint {checkpoint}"
    # tombstones: readable until the horizon, gone after a cleaning at or past it
    present = {r.offset for r in records}
    for offset in latest.values():
        if produced[offset][1] is not None or offset >= checkpoint:
            continue
        horizons.setdefault(offset, now + RETENTION)
        if now < horizons[offset]:
            assert offset in present, f"tombstone {offset} vanished before its horizon"
        else:
            assert offset not in present, f"tombstone {offset} outlived its horizon"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=40))
@example([("produce", "a", 1), ("tombstone", "a"), ("clean",), ("advance", 999), ("clean",), ("advance", 1), ("clean",)])
@example([("produce", "a", 1), ("produce", "b", 2), ("tombstone", "a"), ("clean",), ("restart",), ("advance", 1500),
          ("produce", "a", 3), ("clean",), ("tombstone", "b"), ("roll",), ("clean-only",), ("advance", 1000),
          ("clean",), ("restart",), ("clean",)])
def test_compaction_matches_dict_model(ops: list[tuple]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="tidelog-prop-"))
    env = Env(tmp / "data", ManualClock())
    produced: dict[int, tuple[bytes, bytes | None]] = {}
    horizons: dict[int, int] = {}
    try:
        log = env.log("t", COMPACT)
        for step in ops:
            kind = step[0]
            if kind == "produce":
                offset = produce(log, step[1], f"v{step[2]}")
                produced[offset] = (step[1].encode(), f"v{step[2]}".encode())
            elif kind == "tombstone":
                offset = produce(log, step[1], None)
                produced[offset] = (step[1].encode(), None)
            elif kind == "roll":
                log.roll()
            elif kind == "advance":
                env.clock.advance(step[1])
            elif kind == "restart":
                env.restart()
                log = env.log("t", COMPACT)
            elif kind == "clean":
                # new dirty bytes so the log is chosen, and a roll so they are cleanable (never the active segment)
                offset = produce(log, "filler", "f")
                produced[offset] = (b"filler", b"f")
                log.roll()
                if env.cleaner.clean_once():
                    check_after_cleaning(env, produced, horizons)
            elif kind == "clean-only" and env.cleaner.clean_once():
                check_after_cleaning(env, produced, horizons)
        # whatever happened, a final read agrees with the model on every live key
        final = {}
        for r in read_all(log):
            final[r.key] = r.value
        latest: dict[bytes, int] = {}
        for offset, (key, _) in produced.items():
            latest[key] = max(latest.get(key, -1), offset)
        for key, offset in latest.items():
            if produced[offset][1] is not None:
                assert final[key] == produced[offset][1]
    finally:
        env.close()
        shutil.rmtree(tmp, ignore_errors=True)
