"""Fixtures for the broker suites: a raw-protocol client on the module's broker (the plugin's
`tidelog_module_broker`; a module configures it with `pytestmark = pytest.mark.tidelog(overrides=...)`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tidelog.testing import BrokerHandle, KafkaWire


@pytest.fixture
def client(tidelog_module_broker: BrokerHandle) -> Iterator[KafkaWire]:
    # 120 s: long-poll fetches and a loaded 2-core machine; the broker answers far sooner when it works.
    with KafkaWire(tidelog_module_broker.bootstrap, client_id="raw-test", timeout=120) as c:
        yield c
