"""`tidelog dump-log` on real segment files, before and after cleaning."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
from pathlib import Path

from cleaner_env import Env, produce

from tidelog.protocol.records import Record, build_batch
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


def test_dump_log_prints_end_txn_markers(env: Env) -> None:
    log = env.log()
    ts = env.clock.milliseconds()
    log.append_as_leader(build_batch([Record(0, ts, b"k", b"v")], 0, producer_id=77, producer_epoch=1,
                                     base_sequence=0, is_transactional=True))
    log.append_control_marker(77, 1, coordinator_epoch=4, commit=True)
    log.append_control_marker(77, 1, coordinator_epoch=4, commit=False)
    out = io.StringIO()
    assert dump_log.main([str(log.segments.first_segment.log_path), "--deep-iteration"], out) == 0
    text = out.getvalue()
    assert "baseOffset: 1 lastOffset: 1 count: 1 baseSequence: -1" in text
    assert "isTransactional: true isControl: true" in text
    assert "| offset: 1 CreateTime:" in text and "endTxnMarker: COMMIT coordinatorEpoch: 4" in text
    assert "| offset: 2 CreateTime:" in text and "endTxnMarker: ABORT coordinatorEpoch: 4" in text


def test_transaction_log_decoder(env: Env) -> None:
    log = env.log()
    # TransactionLogKey v0 and TransactionLogValue v0 (Kafka's TransactionLog schemas), written by hand
    key = struct.pack(">hh", 0, 6) + b"txn-id"
    topic = b"orders"
    value = (struct.pack(">hqhib", 0, 1000, 2, 60_000, 1) + struct.pack(">i", 1) + struct.pack(">h", len(topic))
             + topic + struct.pack(">iii", 2, 0, 3) + struct.pack(">qq", 1_700_000_000_500, 1_700_000_000_000))
    ts = env.clock.milliseconds()
    log.append_as_leader(build_batch([Record(0, ts, key, value), Record(1, ts, key, None)], 0))
    out = io.StringIO()
    assert dump_log.main([str(log.segments.first_segment.log_path), "--transaction-log-decoder"], out) == 0
    text = out.getvalue()
    assert ('key: {"type":"0","data":{"transactionalId":"txn-id"}} payload: {"version":"0","data":{'
            '"producerId":1000,"producerEpoch":2,"transactionTimeoutMs":60000,"transactionStatus":1,'
            '"transactionPartitions":[{"topic":"orders","partitionIds":[0,3]}],'
            '"transactionLastUpdateTimestampMs":1700000000500,"transactionStartTimestampMs":1700000000000}}') in text
    assert 'key: {"type":"0","data":{"transactionalId":"txn-id"}} payload: <DELETE>' in text
