"""pytest fixtures (registered through the `pytest11` entry point `tidelog`).

* `tidelog_broker`: an in-process broker for one test (fresh temporary log dir, removed afterwards; ephemeral
  port); the handle has `.bootstrap`, `.port`, `.log_dir`, `.state`, the fault controls (`inject_errors`,
  `set_latency`, `clear_faults`, `pause`, `resume`, `drop_connections`, `restart`) and record helpers
  (`records`, `wait_for_records`, `committed_offsets`, `create_topic`). Configure it with the marker
  `@pytest.mark.tidelog(overrides={"num.partitions": 3}, topics={"orders": 3, "events": {"partitions": 1,
  "configs": {"cleanup.policy": "compact"}}})`.
* `tidelog_bootstrap`: its "127.0.0.1:PORT" string.
* `tidelog_broker_factory`: `factory(log_dir=None, overrides=None, clock=None, port=0, topics=None, **more)`
  starts more brokers (each stopped at teardown; `more` is passed to `run_broker`: registry, faults,
  fault_hooks, load_services_after_ready), e.g. with `auto.create.topics.enable=false` or on a kept log dir.
* `tidelog_module_broker`: one broker shared by the tests of a module (unique topic and group names per test
  keep them apart). It takes the module's marker (`pytestmark = pytest.mark.tidelog(overrides={...},
  topics={...})`) and the `tidelog_broker_overrides` fixture, which a module overrides when its settings are
  computed (e.g. from another fixture); the fixture's overrides win over the marker's.
* `tidelog_session_broker`: one broker for the whole session (per pytest-xdist worker), for suites that prefer
  speed over isolation; pair it with `tidelog_topic`, a fresh topic per test (`@pytest.mark.tidelog(
  partitions=3, topic_configs={...})`), whose teardown also clears faults and resumes a paused broker.
* `tidelog_schema_registry`: one broker per test module with the Schema Registry on (an ephemeral loopback port);
  point Confluent's serializers at its `.schema_registry_url` and its `.bootstrap`.

The plugin never emits a warning (kafka-python's schemas are loaded without its deprecated resource API), leaves
no thread, file or port behind, and works under `-W error`, pytest-xdist and pytest-asyncio (the broker runs on
its own thread; `tidelog.testing.async_run_broker()` is the `async with` form).
"""

from __future__ import annotations

import contextlib
import itertools
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tidelog.protocol.messages import quiet_schema_loader
from tidelog.testing import BrokerHandle, run_broker

MARKER = "tidelog"
_BROKER_KWARGS = frozenset({"overrides", "topics", "clock", "log_dir", "port"})
_TOPIC_KWARGS = frozenset({"partitions", "topic_configs"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(overrides=None, topics=None, partitions=1, topic_configs=None): configure the tidelog_broker "
        "fixture (broker overrides, topics to create) or the topic made by tidelog_topic")
    # kafka-python (the broker's codecs, and the client most suites import) warns while loading its schemas:
    # load them through the non-deprecated API so `-W error` sessions can import it at collection time.
    with contextlib.suppress(ImportError):
        quiet_schema_loader()


def _marker_kwargs(request: pytest.FixtureRequest, allowed: frozenset[str]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers(MARKER))):  # the closest marker wins
        if marker.args:
            raise pytest.UsageError(f"@pytest.mark.{MARKER} takes keyword arguments only")
        kwargs.update(marker.kwargs)
    unknown = set(kwargs) - _BROKER_KWARGS - _TOPIC_KWARGS
    if unknown:
        raise pytest.UsageError(f"@pytest.mark.{MARKER}: unknown arguments {sorted(unknown)}")
    return {k: v for k, v in kwargs.items() if k in allowed}


@pytest.fixture
def tidelog_broker_factory() -> Iterator[Callable[..., BrokerHandle]]:
    with contextlib.ExitStack() as stack:

        def factory(log_dir: str | Path | None = None, overrides: Mapping[str, Any] | None = None,
                    clock: Any = None, port: int = 0,
                    topics: Mapping[str, int | Mapping[str, Any]] | None = None, **more: Any) -> BrokerHandle:
            """`more`: the other keyword arguments of `run_broker` (registry, faults, fault_hooks, ...)."""
            return stack.enter_context(run_broker(log_dir=log_dir, port=port, overrides=overrides, clock=clock,
                                                  topics=topics, **more))

        yield factory


@pytest.fixture
def tidelog_broker(request: pytest.FixtureRequest,
                   tidelog_broker_factory: Callable[..., BrokerHandle]) -> BrokerHandle:
    return tidelog_broker_factory(**_marker_kwargs(request, _BROKER_KWARGS))


@pytest.fixture
def tidelog_bootstrap(tidelog_broker: BrokerHandle) -> str:
    return tidelog_broker.bootstrap


@pytest.fixture(scope="module")
def tidelog_broker_overrides() -> Mapping[str, Any]:
    """Broker settings for `tidelog_module_broker`; override this fixture in a module or conftest."""
    return {}


@pytest.fixture(scope="module")
def tidelog_module_broker(request: pytest.FixtureRequest,
                          tidelog_broker_overrides: Mapping[str, Any]) -> Iterator[BrokerHandle]:
    """One broker for the module: the module marker's arguments, with `tidelog_broker_overrides` on top."""
    kwargs = _marker_kwargs(request, _BROKER_KWARGS)
    kwargs["overrides"] = {**(kwargs.get("overrides") or {}), **tidelog_broker_overrides}
    with run_broker(**kwargs) as broker:
        yield broker


@pytest.fixture(scope="session")
def tidelog_session_broker() -> Iterator[BrokerHandle]:
    with run_broker() as broker:
        yield broker


@pytest.fixture(scope="module")
def tidelog_schema_registry() -> Iterator[BrokerHandle]:
    with run_broker(overrides={"schema.registry.port": 0}) as broker:
        yield broker


_topic_numbers = itertools.count(1)


@pytest.fixture
def tidelog_topic(request: pytest.FixtureRequest, tidelog_session_broker: BrokerHandle) -> Iterator[str]:
    """A new topic on the session broker, named after the test; faults are cleared after the test."""
    kwargs = _marker_kwargs(request, _TOPIC_KWARGS)
    stem = "".join(c if c.isalnum() or c in "._-" else "-" for c in request.node.name)[:120]
    name = f"{stem}-{next(_topic_numbers)}-{uuid.uuid4().hex[:6]}"
    tidelog_session_broker.create_topic(name, {"partitions": kwargs.get("partitions", 1),
                                               "configs": kwargs.get("topic_configs") or {}})
    try:
        yield name
    finally:
        tidelog_session_broker.clear_faults()
        tidelog_session_broker.resume()
