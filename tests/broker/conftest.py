"""Fixtures for the broker suites: one in-process broker per test module and a raw-protocol client on it.
Modules that need a differently configured broker define their own `broker` fixture."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tidelog.testing import BrokerHandle, KafkaWire, run_broker


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerHandle]:
    with run_broker() as handle:
        yield handle


@pytest.fixture
def client(broker: BrokerHandle) -> Iterator[KafkaWire]:
    # 120 s: long-poll fetches and a loaded 2-core machine; the broker answers far sooner when it works.
    with KafkaWire(broker.bootstrap, client_id="raw-test", timeout=120) as c:
        yield c
