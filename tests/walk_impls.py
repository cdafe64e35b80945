"""An autouse fixture for the test modules that import it: every test runs on the C record walk and fast-lane scan
(when built) and on the pure-Python fallback, which must give the same answers."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, params=["c", "python"])
def walk_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs on the C record walk (when built) and on the pure-Python fallback."""
    from tidelog.protocol import record_walk

    if request.param == "python":
        monkeypatch.setattr(record_walk, "_c_walk", None)
        monkeypatch.setattr(record_walk, "check_batch", None)
    elif record_walk._c_walk is None:
        pytest.skip("the C record walk is not built")
    return str(request.param)
