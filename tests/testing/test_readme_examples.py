"""The README's "Testing your application" examples, run as a user's suite would run them: each Python block
becomes a test module of a separate `python -m pytest -W error` session with the plugin loaded."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def readme_examples() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Testing your application", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_section_has_an_example_per_client() -> None:
    blocks = readme_examples()
    assert len(blocks) == 3
    for client in ("from kafka import", "from confluent_kafka import", "from aiokafka import"):
        assert any(client in block for block in blocks), client


@pytest.mark.slow
def test_readme_examples_pass_under_warnings_as_errors(tmp_path: Path) -> None:
    for i, block in enumerate(readme_examples()):
        (tmp_path / f"test_example_{i}.py").write_text(block)
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-W", "error", "-p", "no:cacheprovider",
                           "--basetemp", str(tmp_path / "basetemp")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "3 passed" in proc.stdout
