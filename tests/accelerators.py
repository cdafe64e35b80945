"""The C accelerators' tests run where the accelerator is built. Elsewhere they are skipped, except on CI (CI=true):
CI has a compiler, so an accelerator missing there is a build failure and its tests fail instead of passing empty."""

from __future__ import annotations

import os

import pytest


def on_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require_built(built: bool, what: str) -> None:
    """Skip (or, on CI, fail) the calling test when `what` is not built."""
    if built:
        return
    if on_ci():
        pytest.fail(f"{what} is not built, and CI has a compiler: the build of the extension failed")
    pytest.skip(f"{what} is not built")
