"""Apache Kafka's own FileRecords (Java client 3.9.1) reads the segments we write, and our index files
agree with the batches it sees (Kafka's DefaultRecordBatch)."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from storage_testlib import TOPIC_ID, TP, TS, client_batch

from tidelog.clock import ManualClock
from tidelog.config.log_config import LogConfig
from tidelog.protocol.records import GZIP
from tidelog.storage.log_manager import LogManager

ROOT = Path(__file__).resolve().parents[2]
JAR_DIR = Path(os.environ.get("TIDELOG_CACHE_DIR", ROOT / ".cache")) / "java"
JARS = [JAR_DIR / name for name in ("kafka-clients.jar", "slf4j-api.jar")]
SOURCE = Path(__file__).with_name("KafkaLogCheck.java")

pytestmark = pytest.mark.java


def test_kafka_file_records_read_our_segments(tmp_path: Path, clock: ManualClock) -> None:
    if not shutil.which("java") or not all(j.is_file() for j in JARS):
        pytest.skip("needs java and the Kafka client jar in .cache/java (make test fetches it)")
    config = LogConfig(segment_bytes=4000, index_interval_bytes=300)
    m = LogManager([str(tmp_path / "data")], config, clock)
    m.startup()
    lg = m.get_or_create_log(TP, config, TOPIC_ID)
    for i in range(40):
        compression = GZIP if i % 5 == 0 else 0
        lg.append_as_leader(client_batch(3, ts=TS + i * 100, ts_step=10, value=b"x" * (i * 3),
                                         compression=compression), leader_epoch=i // 20)
    expected_search = lg.fetch_offset_for_timestamp(TS + 1505)
    m.shutdown()
    part = tmp_path / "data" / "orders-0"
    logs = sorted(part.glob("*.log"))
    assert len(logs) > 2
    proc = subprocess.run(
        ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-cp", os.pathsep.join(map(str, JARS)), str(SOURCE),
         str(TS + 1505), *map(str, logs)],
        capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    batches = [x for x in lines if "pos" in x]
    assert [b["base"] for b in batches] == list(range(0, 120, 3))
    assert all(b["count"] == 3 and b["last"] == b["base"] + 2 for b in batches)
    assert [b["epoch"] for b in batches] == [i // 20 for i in range(40)]
    assert [b["maxTs"] for b in batches] == [TS + i * 100 + 20 for i in range(40)]
    # Kafka's own timestamp search, within the segment holding the answer, finds what we answer.
    searches = [x for x in lines if "searchTs" in x]
    assert expected_search is not None
    assert (expected_search[0], expected_search[1]) in {(s["searchTs"], s["searchOffset"]) for s in searches}
    # Every index entry is valid for the batches Kafka sees (§9).
    for file_no, path in enumerate(logs, start=1):
        base = int(path.name.split(".")[0])
        mine = [b for b in batches if b["file"] == file_no]
        by_pos = {b["pos"]: b for b in mine}
        idx = path.with_suffix(".index").read_bytes()
        for rel, pos in struct.iter_unpack(">ii", idx):
            assert pos in by_pos and by_pos[pos]["last"] == base + rel
            assert all(b["last"] < base + rel for b in mine if b["pos"] < pos)
        tidx = path.with_suffix(".timeindex").read_bytes()
        assert tidx  # at least the final entry
        for ts, rel in struct.iter_unpack(">qi", tidx):
            holder = [b for b in mine if b["last"] == base + rel]
            assert holder and max(b["maxTs"] for b in mine if b["last"] <= base + rel) == ts
