"""The compression libraries (cramjam's snappy, lz4.frame, zstandard), each imported when a batch first needs it:
together they are 5-10 ms of a restart otherwise (tests/broker/test_startup_imports.py). The one home of those
lazy imports, for records.py (compress, decompress), inflaters.py (bounded streams) and the registry's warm-up."""

from __future__ import annotations

from typing import Any


def snappy() -> Any:
    """cramjam.snappy (xerial framing is ours: records.py, inflaters.py)."""
    import cramjam  # lazy for start-up time (see the module docstring)

    return cramjam.snappy


def lz4_frame() -> Any:
    import lz4.frame  # lazy for start-up time (see the module docstring)

    return lz4.frame


def zstandard() -> Any:
    import zstandard  # lazy for start-up time (see the module docstring)

    return zstandard


def load_all() -> None:
    """Import all three now (the registry's warm-up, off the loop after start-up)."""
    snappy(), lz4_frame(), zstandard()
