"""pytest fixtures (registered through the `pytest11` entry point `tidelog`).

* `tidelog_broker`: an in-process broker (fresh log dir under tmp_path, ephemeral port); yields the handle
  (`.bootstrap`, `.port`, `.log_dir`, `.state`).
* `tidelog_bootstrap`: its "127.0.0.1:PORT" string.
* `tidelog_broker_factory`: `factory(log_dir=None, overrides=None, clock=None)` starts more brokers (each
  stopped at teardown), e.g. with `auto.create.topics.enable=false` or on an existing log dir.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tidelog.testing import BrokerHandle, run_broker


@pytest.fixture
def tidelog_broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerHandle]]:
    with contextlib.ExitStack() as stack:
        counter = 0

        def factory(log_dir: str | Path | None = None, overrides: dict[str, Any] | None = None,
                    clock: Any = None, port: int = 0) -> BrokerHandle:
            nonlocal counter
            if log_dir is None:
                counter += 1
                log_dir = tmp_path / f"broker-{counter}"
            return stack.enter_context(run_broker(log_dir=log_dir, port=port, overrides=overrides, clock=clock))

        yield factory


@pytest.fixture
def tidelog_broker(tidelog_broker_factory: Callable[..., BrokerHandle]) -> BrokerHandle:
    return tidelog_broker_factory()


@pytest.fixture
def tidelog_bootstrap(tidelog_broker: BrokerHandle) -> str:
    return tidelog_broker.bootstrap
