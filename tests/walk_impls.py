"""An autouse fixture for the test modules that import it: every test runs on the C record walk and fast-lane scan
(when built) and on the pure-Python fallback, which must give the same answers."""

from __future__ import annotations

import pytest

from tests.accelerators import require_built


@pytest.fixture(autouse=True, params=["c", "python"])
def walk_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs on the C record walk (when built) and on the pure-Python fallback."""
    from tidelog.protocol import record_walk

    if request.param == "python":
        monkeypatch.setattr(record_walk, "_c_walk", None)
        monkeypatch.setattr(record_walk, "check_batch", None)
    else:
        require_built(record_walk._c_walk is not None, "the C record walk")
    return str(request.param)
