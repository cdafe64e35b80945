"""An autouse fixture for the cleaner test modules that import it: every test runs on the C cleaner core
(protocol/_cleaner_core.c) and on the pure-Python cleaner, which must give the same answers. Without the core the
C half skips on a developer machine and fails when CI is set (CI builds the accelerators)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True, params=["c", "python"])
def cleaner_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    from tidelog.cleaner import core

    if request.param == "python":
        monkeypatch.setattr(core, "accelerator", None)
    elif core.accelerator is None:
        if os.environ.get("CI"):
            pytest.fail("the C cleaner core is not built (CI has a compiler: it must be)")
        pytest.skip("the C cleaner core is not built")
    return str(request.param)
