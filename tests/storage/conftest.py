from __future__ import annotations

import pytest

from tidelog.clock import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000_000)
