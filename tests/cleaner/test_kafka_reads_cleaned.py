"""Apache Kafka's own FileRecords (Java client 3.9.1) reads the segments the cleaner writes, on the C core and on
pure Python: every batch and record passes Kafka's ensureValid (CRC, lengths, varints) and Kafka sees exactly the
batches and record counts tidelog sees (issue 29, done-when 3)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cleaner_env import Env
from cleaner_impls import cleaner_impl  # noqa: F401 - every test on the C core and on pure Python
from test_core_parity import SMALL_SEGMENTS, fill

from tests.accelerators import on_ci
from tidelog.clock import ManualClock
from tidelog.protocol.records import GZIP, LZ4, NONE, SNAPPY, ZSTD, iter_records

ROOT = Path(__file__).resolve().parents[2]
JAR_DIR = Path(os.environ.get("TIDELOG_CACHE_DIR", ROOT / ".cache")) / "java"
# Kafka's FileRecords inflates compressed batches with the codec jars the client ships with.
JARS = [JAR_DIR / name for name in ("kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar",
                                    "zstd-jni.jar")]
KAFKA_LOG_CHECK = ROOT / "tests" / "storage" / "KafkaLogCheck.java"

pytestmark = pytest.mark.java


def kafka_view(logs: list[Path]) -> list[tuple[int, int, int]]:
    """(base offset, last offset, record count) of every batch, as Kafka's FileRecords reads the files."""
    if not shutil.which("java") or not all(j.is_file() for j in JARS):
        if on_ci():
            pytest.fail("java or the Kafka client jar is missing on CI (make test fetches the jar)")
        pytest.skip("needs java and the Kafka client jar in .cache/java (make test fetches it)")
    proc = subprocess.run(
        ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-cp", os.pathsep.join(map(str, JARS)),
         str(KAFKA_LOG_CHECK), "0", *map(str, logs)],
        capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]  # ensureValid threw: a batch or record Kafka refuses
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return [(r["base"], r["last"], r["count"]) for r in rows if "pos" in r]


def tidelog_view(env: Env) -> tuple[list[Path], list[tuple[int, int, int]]]:
    log = env.log(config=SMALL_SEGMENTS)
    logs, batches = [], []
    for segment in log.segments:
        logs.append(Path(segment.log_path))
        data = Path(segment.log_path).read_bytes()
        for pos, header in segment.batches():
            batches.append((header.base_offset, header.last_offset, sum(1 for _ in iter_records(data, pos))))
    return logs, batches


def test_kafka_reads_cleaned_segments_of_every_codec(tmp_path: Path) -> None:
    clock = ManualClock()
    env = Env(tmp_path, clock)
    try:
        fill(env, seed=29, codecs=[NONE, GZIP, SNAPPY, LZ4, ZSTD])
        log = env.log(config=SMALL_SEGMENTS)
        size_before = log.size_in_bytes()
        assert env.cleaner.clean_once()
        clock.advance(2_000)  # past delete.retention.ms: the second pass drops tombstones and markers
        assert env.cleaner.clean_once() or log.size_in_bytes() < size_before
        assert log.size_in_bytes() < size_before  # it did clean
        logs, ours = tidelog_view(env)
        assert len(logs) > 1 and ours
        assert kafka_view(logs) == ours
    finally:
        env.close()
