"""Fixtures of the cleaner tests (helpers live in cleaner_env.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cleaner_env import Env

from tidelog.clock import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def env(tmp_path: Path, clock: ManualClock) -> Iterator[Env]:
    e = Env(tmp_path / "data", clock)
    yield e
    e.close()
