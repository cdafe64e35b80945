"""Fixtures for the security suites: a broker with PLAINTEXT, SSL, SASL_SSL and SASL_PLAINTEXT listeners and
SASL users (tidelog.testing.run_secure_broker), plus the Java driver and kcat of the client suites."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from clients.conftest import JAR_DIR, JavaClient, java_client, kcat  # noqa: F401 - fixtures re-exported

from tests.java_drivers import compile_driver
from tidelog.testing import SecureBrokerHandle, run_secure_broker

USERS = {"alice": "alice-secret", "admin": "admin-secret"}


@pytest.fixture(scope="module")
def secure() -> Iterator[SecureBrokerHandle]:
    with run_secure_broker(users=USERS) as handle:
        yield handle


__all__ = ["JAR_DIR", "JavaClient", "USERS", "java_client", "kcat", "secure"]


@pytest.fixture(scope="session")
def java_security_admin(java_client: JavaClient) -> JavaClient:  # noqa: F811 - the fixture above
    """tests/java/SecurityAdmin.java compiled next to the client driver (same jars)."""
    import os
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "java" / "SecurityAdmin.java"
    classes = compile_driver(src, "java-security")
    return JavaClient(os.pathsep.join([str(classes), java_client.classpath]))
