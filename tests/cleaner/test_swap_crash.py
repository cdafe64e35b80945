"""A broker process killed at each step of the cleaner's swap recovers at restart with no kept record lost,
no duplicate, and a consistent checkpoint (docs/STORAGE.md; issue 4 "done when" 4).

The crash is injected with `tidelog serve --crash-at <step>` (storage.fault_hooks.ExitAt): the process
exits abruptly at that step."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka_helpers import (
    COMPACT_TOPIC_CONFIG,
    alter_topic_config,
    consume_all,
    create_topic,
    latest_per_key,
    produce_keyed,
)

from tidelog.storage import TopicPartition
from tidelog.storage.checkpoints import OffsetCheckpointFile
from tidelog.testing import BrokerProcess

STEPS = ["cleaned", "swap", "deleted-first", "deleted", "live", "before-checkpoint"]
TOPIC = "crashy"


def check_log(bootstrap: str, produced: dict[int, tuple]) -> None:
    records = consume_all(bootstrap, TOPIC)
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets)), "duplicate or out-of-order offsets"
    for offset, key, value in records:
        assert produced[offset] == (key, value)
    seen = {}
    for _, key, value in records:
        seen[key] = value
    for key, (offset, value) in latest_per_key(produced).items():
        assert seen.get(key) == value, f"latest value of {key!r} (offset {offset}) lost"
        assert offset in offsets


@pytest.mark.parametrize("step", STEPS)
def test_crash_at_swap_step_recovers(tmp_path: Path, step: str) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(str(data), overrides={"log.cleaner.backoff.ms": 100}, args=["--crash-at", step]).start()
    try:
        # written under `delete`, then switched to `compact` at runtime: the cleaner starts only then
        create_topic(broker.bootstrap, TOPIC, {**COMPACT_TOPIC_CONFIG, "cleanup.policy": "delete"})
        # 10 keys, 6 rounds: plenty of superseded records across ~1 KiB segments
        records = [(f"k{i % 10}".encode(), f"value-{i}".encode()) for i in range(60)]
        produced = produce_keyed(broker.bootstrap, TOPIC, records)
        alter_topic_config(broker.bootstrap, TOPIC, COMPACT_TOPIC_CONFIG)
        assert broker.proc is not None
        broker.proc.wait(timeout=180)  # the cleaner thread hits the step and the process exits
        assert broker.proc.returncode == 137, broker.output()[-2000:]
        part = data / f"{TOPIC}-0"
        leftovers = sorted(p.name for p in part.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted"))
        # the crashed swap's temporary files, by inode: a new pass of the restarted cleaner may create files
        # of the same names, which are not leftovers
        crashed = {p: p.stat().st_ino for p in part.iterdir() if p.suffix in (".cleaned", ".swap")}
        if step in ("swap", "deleted-first", "deleted"):
            assert any(n.endswith(".swap") for n in leftovers), leftovers
        broker.args = []
        broker.start()
        check_log(broker.bootstrap, produced)
        assert not [p for p, ino in crashed.items() if p.exists() and p.stat().st_ino == ino]
        # the checkpoint, if any, lies within the log; the restarted cleaner completes a pass
        checkpoint_file = OffsetCheckpointFile(data / "cleaner-offset-checkpoint")
        deadline = time.monotonic() + 120
        active_base = max(int(p.name.split(".")[0]) for p in part.glob("*.log"))
        while time.monotonic() < deadline:
            cp = checkpoint_file.read().get(TopicPartition(TOPIC, 0))
            if cp == active_base:  # a complete pass over everything but the active segment
                break
            time.sleep(0.2)
        assert cp == active_base, (cp, active_base)
        check_log(broker.bootstrap, produced)
    finally:
        broker.stop()
