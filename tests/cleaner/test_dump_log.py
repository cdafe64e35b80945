"""`tidelog dump-log` on real segment files, before and after cleaning."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from cleaner_env import Env, produce

from tidelog.storage import dump_log

ROOT = Path(__file__).resolve().parents[2]


def test_dump_log_prints_batches_records_and_horizon(env: Env) -> None:
    log = env.log()
    produce(log, "k", "v1")
    produce(log, "k", None)
    produce(log, "j", "w")
    log.roll()
    produce(log, "z", "z")
    assert env.cleaner.clean_once()
    seg = log.segments.first_segment
    out = io.StringIO()
    assert dump_log.main([str(seg.log_path), "--print-data-log"], out) == 0
    text = out.getvalue()
    assert "Log starting offset: 0" in text
    assert "baseOffset: 1 lastOffset: 1 count: 1" in text and "deleteHorizonMs: OptionalLong[" in text
    assert "| offset: 1 CreateTime:" in text and "key: k payload: null" in text
    assert "| offset: 2" in text and "key: j payload: w" in text
    assert "baseOffset: 0 " not in text  # the superseded record is gone
    assert "isvalid: true" in text and "isvalid: false" not in text


def test_cli_subcommand(env: Env) -> None:
    log = env.log()
    produce(log, "k", "v")
    log.flush()
    seg = log.segments.first_segment
    proc = subprocess.run([sys.executable, "-m", "tidelog", "dump-log", str(seg.log_path), "--deep-iteration"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert "baseOffset: 0 lastOffset: 0 count: 1" in proc.stdout
    assert "| offset: 0 CreateTime:" in proc.stdout
