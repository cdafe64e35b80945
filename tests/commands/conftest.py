"""Helpers for the client-command tests: each `tidelog <command>` runs as a real subprocess (`python -m tidelog`,
as the console script runs it) against a real broker from the tidelog pytest plugin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def command(*args: str, bootstrap: str | None = None,
            env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of `tidelog ARGS [-b BOOTSTRAP]` (TIDELOG_BOOTSTRAP unset unless `env` sets it)."""
    environment = {k: v for k, v in os.environ.items() if k != "TIDELOG_BOOTSTRAP"}
    environment["PYTHONPATH"] = str(ROOT) + (os.pathsep + environment["PYTHONPATH"]
                                             if environment.get("PYTHONPATH") else "")
    environment.update(env or {})
    return [sys.executable, "-m", "tidelog", *args, *(["-b", bootstrap] if bootstrap else [])], environment


def tidelog(*args: str, bootstrap: str | None = None, stdin: str | None = None,
            env: dict[str, str] | None = None, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """`tidelog ARGS [-b BOOTSTRAP]` in a subprocess, its output captured."""
    cmd, environment = command(*args, bootstrap=bootstrap, env=env)
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout, env=environment)


def tidelog_json(*args: str, bootstrap: str, stdin: str | None = None, expect_rc: int = 0) -> Any:
    """`tidelog ARGS --format json`: its exit code checked, its stdout parsed as one JSON document."""
    out = tidelog(*args, "--format", "json", bootstrap=bootstrap, stdin=stdin)
    assert out.returncode == expect_rc, f"exit {out.returncode}\nstdout: {out.stdout}\nstderr: {out.stderr}"
    return json.loads(out.stdout)


def json_lines(text: str) -> list[Any]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def unique(stem: str) -> str:
    return f"{stem}-{uuid.uuid4().hex[:8]}"
