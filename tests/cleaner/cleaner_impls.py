"""An autouse fixture for the cleaner test modules that import it: every test runs on the C cleaner core
(protocol/_cleaner_core.c) and on the pure-Python cleaner, which must give the same answers. Without the core the
C half skips on a developer machine and fails when CI=true (tests/accelerators.py)."""

from __future__ import annotations

import pytest

from tests.accelerators import require_built


@pytest.fixture(autouse=True, params=["c", "python"])
def cleaner_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    from tidelog.cleaner import core

    if request.param == "python":
        monkeypatch.setattr(core, "accelerator", None)
    else:
        require_built(core.accelerator is not None, "the C cleaner core")
    return str(request.param)
