"""Fixtures for the security suites: a broker with PLAINTEXT, SSL, SASL_SSL and SASL_PLAINTEXT listeners and
SASL users (tidelog.testing.run_secure_broker), plus the Java driver and kcat of the client suites."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from clients.conftest import JAR_DIR, JavaClient, java_client, kcat  # noqa: F401 - fixtures re-exported

from tidelog.testing import SecureBrokerHandle, run_secure_broker

USERS = {"alice": "alice-secret", "admin": "admin-secret"}


@pytest.fixture(scope="module")
def secure() -> Iterator[SecureBrokerHandle]:
    with run_secure_broker(users=USERS) as handle:
        yield handle


__all__ = ["JAR_DIR", "JavaClient", "USERS", "java_client", "kcat", "secure"]
