"""`tidelog dump-log`: print the batches and records of segment files, like Kafka's kafka-dump-log.sh
(DumpLogSegments). Handles `.log` (and `.log.cleaned/.swap/.deleted`), `.index`, `.timeindex`, `.txnindex`.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from tidelog.coordinator.transaction.records import decode_key, decode_value
from tidelog.protocol.record_batch import compute_crc, iter_batches
from tidelog.protocol.records import CorruptRecordError, iter_records
from tidelog.storage.log_file_utils import offset_from_file_name
from tidelog.storage.transaction_index import ENTRY_SIZE as TXN_ENTRY_SIZE

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _text(blob: bytes | None) -> str:
    if blob is None:
        return "null"
    return blob.decode("utf-8", errors="backslashreplace")


RecordDecoder = Callable[[bytes | None, bytes | None], str]


def transaction_log_decoder(key: bytes | None, value: bytes | None) -> str:
    """`__transaction_state` records as Kafka's DumpLogSegments TransactionLogMessageParser prints them
    (TransactionLogKey v0 / TransactionLogValue v0-1 as JSON)."""
    if key is None:
        return "key: null payload: null"
    try:
        key_json = json.dumps({"type": "0", "data": {"transactionalId": decode_key(key)}}, separators=(",", ":"))
        if value is None:
            return f"key: {key_json} payload: <DELETE>"
        v = decode_value(value)
    except ValueError as e:
        return f"key: {_text(key)} payload: could not decode as a transaction log record ({e})"
    partitions = None if v.transaction_partitions is None else [
        {"topic": t, "partitionIds": ids} for t, ids in v.transaction_partitions.items()]
    data = {"producerId": v.producer_id, "producerEpoch": v.producer_epoch,
            "transactionTimeoutMs": v.transaction_timeout_ms, "transactionStatus": v.transaction_status,
            "transactionPartitions": partitions,
            "transactionLastUpdateTimestampMs": v.transaction_last_update_timestamp_ms,
            "transactionStartTimestampMs": v.transaction_start_timestamp_ms}
    if v.version >= 1:
        data.update(previousProducerId=v.previous_producer_id, nextProducerId=v.next_producer_id,
                    clientTransactionVersion=v.client_transaction_version)
    payload = json.dumps({"version": str(v.version), "data": data}, separators=(",", ":"))
    return f"key: {key_json} payload: {payload}"


def dump_log_file(path: Path, out: TextIO, print_data: bool, deep: bool,
                  decoder: RecordDecoder | None = None) -> None:
    data = path.read_bytes()
    base = offset_from_file_name(path.name)
    print(f"Log starting offset: {base if base is not None else 0}", file=out)
    end = 0
    for pos, h in iter_batches(data):
        end = pos + h.size
        ts_type = "LogAppendTime" if h.is_log_append_time else "CreateTime"
        horizon = f"OptionalLong[{h.delete_horizon_ms}]" if h.has_delete_horizon else "OptionalLong.empty"
        valid = compute_crc(data, pos, h.size) == h.crc
        print(
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} producerId: {h.producer_id} "
            f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {str(h.is_transactional).lower()} isControl: {str(h.is_control).lower()} "
            f"deleteHorizonMs: {horizon} position: {pos} {ts_type}: {h.max_timestamp} size: {h.size} "
            f"magic: {h.magic} compresscodec: {CODECS.get(h.compression, h.compression)} crc: {h.crc} "
            f"isvalid: {str(valid).lower()}",
            file=out,
        )
        if not (deep or print_data):
            continue
        try:
            for r in iter_records(data, pos):
                seq = -1 if h.base_sequence < 0 else (h.base_sequence + r.offset - h.base_offset) & 0x7FFFFFFF
                line = (f"| offset: {r.offset} {ts_type}: {r.timestamp} "
                        f"keySize: {-1 if r.key is None else len(r.key)} "
                        f"valueSize: {-1 if r.value is None else len(r.value)} sequence: {seq} "
                        f"headerKeys: [{','.join(k for k, _ in r.headers)}]")
                if h.is_control and r.key is not None and len(r.key) >= 4:
                    kind = struct.unpack_from(">hh", r.key)[1]
                    epoch = struct.unpack_from(">i", r.value, 2)[0] if r.value and len(r.value) >= 6 else -1
                    line += f" endTxnMarker: {'COMMIT' if kind == 1 else 'ABORT' if kind == 0 else kind} " \
                            f"coordinatorEpoch: {epoch}"
                elif decoder is not None:
                    line += " " + decoder(r.key, r.value)
                elif print_data:
                    line += f" key: {_text(r.key)} payload: {_text(r.value)}"
                print(line, file=out)
        except CorruptRecordError as e:
            print(f"| records could not be decoded: {e}", file=out)
    if end < len(data):
        print(f"Found {len(data) - end} invalid bytes at the end of {path.name}", file=out)


def dump_index(path: Path, out: TextIO, entry: struct.Struct, time_index: bool) -> None:
    data = path.read_bytes()
    base = offset_from_file_name(path.name) or 0
    for pos in range(0, len(data) - entry.size + 1, entry.size):
        a, b = entry.unpack_from(data, pos)
        if time_index:
            if a == 0 and b == 0 and pos > 0:
                break  # preallocated zeros
            print(f"timestamp: {a} offset: {base + b}", file=out)
        else:
            if a == 0 and b == 0 and pos > 0:
                break
            print(f"offset: {base + a} position: {b}", file=out)


def dump_txn_index(path: Path, out: TextIO) -> None:
    data = path.read_bytes()
    entry = struct.Struct(">hqqqq")
    for pos in range(0, len(data) - TXN_ENTRY_SIZE + 1, TXN_ENTRY_SIZE):
        version, pid, first, last, lso = entry.unpack_from(data, pos)
        print(f"version: {version} producerId: {pid} firstOffset: {first} lastOffset: {last} "
              f"lastStableOffset: {lso}", file=out)


def dump_file(path: Path, out: TextIO, print_data: bool = False, deep: bool = False,
              decoder: RecordDecoder | None = None) -> None:
    print(f"Dumping {path}", file=out)
    name = path.name
    for temp in (".cleaned", ".swap", ".deleted"):
        if name.endswith(temp):
            name = name[: -len(temp)]
    if name.endswith(".log"):
        dump_log_file(path, out, print_data, deep, decoder)
    elif name.endswith(".index"):
        dump_index(path, out, struct.Struct(">ii"), time_index=False)
    elif name.endswith(".timeindex"):
        dump_index(path, out, struct.Struct(">qi"), time_index=True)
    elif name.endswith(".txnindex"):
        dump_txn_index(path, out)
    else:
        print(f"Ignoring unknown file {path}", file=out)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tidelog dump-log", description=__doc__)
    parser.add_argument("paths", nargs="*", help="segment files (.log/.index/.timeindex/.txnindex)")
    parser.add_argument("--files", help="comma-separated list of files (kafka-dump-log.sh style)")
    parser.add_argument("--print-data-log", action="store_true", help="print record keys and values")
    parser.add_argument("--deep-iteration", action="store_true", help="print every record, not just batches")
    parser.add_argument("--transaction-log-decoder", action="store_true",
                        help="decode __transaction_state records (implies --print-data-log)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    out = out or sys.stdout
    paths = list(args.paths) + ([p for p in args.files.split(",") if p] if args.files else [])
    if not paths:
        parser.error("no files given")
    status = 0
    for p in paths:
        path = Path(p)
        try:
            decoder = transaction_log_decoder if args.transaction_log_decoder else None
            dump_file(path, out, args.print_data_log or decoder is not None, args.deep_iteration, decoder)
        except OSError as e:
            print(f"Could not read {path}: {e}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
