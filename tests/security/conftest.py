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


@pytest.fixture(scope="session")
def java_security_admin(java_client: JavaClient) -> JavaClient:  # noqa: F811 - the fixture above
    """tests/java/SecurityAdmin.java compiled next to the client driver (same jars)."""
    import hashlib
    import os
    import subprocess
    from pathlib import Path

    from clients.conftest import CACHE

    src = Path(__file__).resolve().parents[1] / "java" / "SecurityAdmin.java"
    classes = CACHE / f"java-security-{hashlib.sha256(src.read_bytes()).hexdigest()[:12]}"
    if not (classes / "SecurityAdmin.class").is_file():
        tmp = classes.with_suffix(f".tmp{os.getpid()}")
        tmp.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-cp", str(JAR_DIR / "kafka-clients.jar"), "-d", str(tmp), str(src)],
                       check=True, timeout=300)
        if classes.exists():
            import shutil

            shutil.rmtree(tmp)
        else:
            tmp.rename(classes)
    return JavaClient(os.pathsep.join([str(classes), java_client.classpath]))
