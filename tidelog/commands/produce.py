"""`tidelog produce TOPIC`: records from stdin (a line each) or from `-v` arguments, with keys and headers
(kcat -P / rpk topic produce over kafka-python's KafkaProducer)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from tidelog.commands.common import (
    Client,
    CommandError,
    add_client_options,
    describe_kafka_error,
    name_value,
    progress,
)

FLUSH_EVERY = 1000  # records in flight before their results are printed


def configure(parser: argparse.ArgumentParser) -> None:
    add_client_options(parser)
    parser.add_argument("topic", metavar="TOPIC")
    parser.add_argument("-v", "--value", action="append", default=None, metavar="VALUE",
                        help="a record value (repeatable); without -v, each line of stdin is a record")
    parser.add_argument("-k", "--key", help="the key of every record")
    parser.add_argument("-K", "--key-delimiter", metavar="DELIM",
                        help="each input is KEY<DELIM>VALUE, split at the first DELIM (kcat -K)")
    parser.add_argument("-H", "--header", metavar="NAME=VALUE", action="append", default=[], type=name_value,
                        help="a header on every record; repeatable")
    parser.add_argument("-p", "--partition", type=int, help="the partition (default: the producer's partitioner)")
    parser.add_argument("-Z", "--null-empty", action="store_true",
                        help="an empty value is sent as null: a tombstone on a compacted topic")
    parser.add_argument("-z", "--compression", choices=("none", "gzip", "snappy", "lz4", "zstd"), default="none")
    parser.add_argument("--acks", choices=("0", "1", "all"), default="all")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing for records delivered")
    parser.set_defaults(func=produce)


def _inputs(args: argparse.Namespace) -> Iterator[str]:
    if args.value is not None:
        yield from args.value
        return
    for line in sys.stdin:
        yield line[:-1] if line.endswith("\n") else line


def _record(args: argparse.Namespace, text: str) -> tuple[bytes | None, bytes | None]:
    key = args.key.encode() if args.key is not None else None
    if args.key_delimiter:
        key_text, sep, text = text.partition(args.key_delimiter)
        if not sep:  # kcat: no delimiter on the line -> the whole line is the value, no key
            key_text, text = "", key_text
        else:
            key = key_text.encode()
    value = None if args.null_empty and text == "" else text.encode()
    return key, value


def produce(args: argparse.Namespace, client: Client) -> int:
    producer = client.producer(acks="all" if args.acks == "all" else int(args.acks),
                               compression_type=None if args.compression == "none" else args.compression,
                               linger_ms=5, max_block_ms=int(client.timeout * 1000))
    headers = [(name, value.encode()) for name, value in args.header]
    pending: list[Any] = []
    failed = 0
    for text in _inputs(args):
        key, value = _record(args, text)
        try:
            pending.append(producer.send(args.topic, value=value, key=key, headers=headers or None,
                                         partition=args.partition))
        except ValueError as exc:  # kafka-python checks the partition against the topic's metadata
            raise CommandError(str(exc)) from None
        if len(pending) >= FLUSH_EVERY:
            failed += _report(args, producer, pending)
            pending = []
    failed += _report(args, producer, pending)
    if failed:
        raise CommandError(f"{failed} record(s) not delivered")
    return 0


def _report(args: argparse.Namespace, producer: Any, pending: list[Any]) -> int:
    """Wait for the records in flight; print where each landed (JSON lines with --format json)."""
    if not pending:
        return 0
    with progress(f"waiting for {len(pending)} record(s) to be acknowledged"):
        producer.flush()
    failed = 0
    for future in pending:
        try:
            meta = future.get(timeout=0)
        except Exception as exc:
            failed += 1
            print(f"tidelog produce: not delivered: {describe_kafka_error(exc) or exc}", file=sys.stderr)
            continue
        if args.quiet:
            continue
        if args.format == "json":
            print(json.dumps({"topic": meta.topic, "partition": meta.partition, "offset": meta.offset,
                              "timestamp": meta.timestamp}))
        else:
            print(f"Produced to partition {meta.partition} at offset {meta.offset} with timestamp {meta.timestamp}.")
    sys.stdout.flush()
    return failed
