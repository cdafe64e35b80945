"""The README's security section: its server.properties loads into a working SASL_SSL broker config, and its
Python example runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tidelog.config.broker_config import BrokerConfig
from tidelog.security.manager import BrokerSecurity
from tidelog.security.throwaway_ca import ThrowawayCA

ROOT = Path(__file__).resolve().parents[2]


def section() -> str:
    return (ROOT / "README.md").read_text().split("## Security", 1)[1].split("\n## ", 1)[0]


def test_readme_server_properties(tmp_path: Path) -> None:
    text = re.findall(r"```properties\n(.*?)```", section(), re.S)[0]
    cert = ThrowawayCA(tmp_path).issue("localhost", server=True, key_password="key-secret")
    text = text.replace("/etc/tidelog/server.pem", str(cert.keystore_pem))
    (tmp_path / "server.properties").write_text(text + f"log.dirs={tmp_path / 'data'}\n")
    config = BrokerConfig.load(str(tmp_path / "server.properties"))
    assert config.unknown == {}
    security = BrokerSecurity(config)
    clients = security.listeners["CLIENTS"]
    assert (clients.protocol, clients.mechanisms) == ("SASL_SSL", ("SCRAM-SHA-512", "PLAIN"))
    assert clients.jaas["PLAIN"].options == {"user_alice": "alice-secret", "user_admin": "admin-secret"}
    assert security.uses_tls("CLIENTS") and not security.uses_tls("INTERNAL")
    assert security.authorizer is not None and security.authorizer.super_users == {"User:admin", "User:ANONYMOUS"}


def test_readme_python_example(tmp_path: Path) -> None:
    block = re.findall(r"```python\n(.*?)```", section(), re.S)[0]
    proc = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, env={"PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
