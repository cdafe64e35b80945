"""SkimpyOffsetMap (docs/STORAGE.md): MD5 slots in one bytearray, probing, fill limit."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.cleaner.offset_map import SLOT_SIZE, SkimpyOffsetMap


def test_put_get_and_overwrite() -> None:
    m = SkimpyOffsetMap(24 * 100)
    assert m.slots == 100 and m.max_entries == 90
    assert len(m._bytes) == 100 * SLOT_SIZE  # the whole memory cost
    assert m.get(b"a") == -1
    m.put(b"a", 5)
    m.put(b"b", 7)
    m.put(b"a", 9)
    assert (m.get(b"a"), m.get(b"b"), m.size) == (9, 7, 2)
    assert m.latest_offset == 9
    m.clear()
    assert (m.get(b"a"), m.size, m.latest_offset) == (-1, 0, -1)


def test_same_md5_is_the_same_key() -> None:
    m = SkimpyOffsetMap(24 * 10)
    digest = hashlib.md5(b"x").digest()
    m.put_digest(digest, 3)
    assert m.get(b"x") == 3


def test_probe_positions_follow_kafka() -> None:
    m = SkimpyOffsetMap(24 * 1000)
    digest = bytes(range(16))
    # attempt 0 reads int32 at bytes [0,4) = 0x00010203
    assert m._position(digest, 0) == (0x00010203 % 1000) * SLOT_SIZE
    assert m._position(digest, 12) == (0x0C0D0E0F % 1000) * SLOT_SIZE
    # later attempts: bytes [12,16) + (i - 12)
    assert m._position(digest, 15) == ((0x0C0D0E0F + 3) % 1000) * SLOT_SIZE
    neg = bytes([0x80, 0, 0, 0]) + bytes(12)  # INT32_MIN -> 0
    assert m._position(neg, 0) == 0


def test_too_small_map_is_refused() -> None:
    with pytest.raises(ValueError):
        SkimpyOffsetMap(24)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=8), st.integers(0, 2**40)), max_size=60))
def test_behaves_like_a_dict(ops: list[tuple[bytes, int]]) -> None:
    m = SkimpyOffsetMap(24 * 80)
    model: dict[bytes, int] = {}
    for key, offset in ops:
        m.put(key, offset)
        model[key] = offset
    assert m.size == len(model)
    for key, offset in model.items():
        assert m.get(key) == offset


@pytest.mark.parametrize("impl", ["c", "python"])
def test_clear_zeroes_every_written_slot(impl: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """clear() zeroes the dirty blocks a put wrote, slots straddling two blocks included, on the
    C core's zero_dirty_blocks and on the Python loop: the map is all zeros again and no mark is left."""
    from tests.accelerators import require_built
    from tidelog.cleaner import core

    if impl == "python":
        monkeypatch.setattr(core, "accelerator", None)
    else:
        require_built(core.accelerator is not None, "the C cleaner core")
    m = SkimpyOffsetMap(24 * 5000)
    for i in range(3000):
        m.put(f"key-{i}".encode(), i)
    assert any(m.dirty) and any(m.buffer[:])
    m.clear()
    assert not any(m.dirty)
    assert m.buffer[:] == bytes(len(m.buffer))
    m.put(b"again", 1)  # usable afterwards
    assert (m.get(b"again"), m.get(b"key-1"), m.size) == (1, -1, 1)
