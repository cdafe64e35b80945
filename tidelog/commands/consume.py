"""`tidelog consume TOPIC...`: print records with a kcat-like format string or as JSON lines (kcat -C / rpk topic
consume over kafka-python's KafkaConsumer). Without `-g` the partitions are assigned, nothing is committed."""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import re
import sys
import time
from collections.abc import Callable
from typing import Any

from tidelog.commands.common import Client, CommandError, add_client_options, parse_time_ms, progress

POLL_MS = 200

FORMAT_HELP = ("output format: %%t topic, %%p partition, %%o offset, %%k key, %%v (or %%s) value, %%h headers "
               "(name=value,...), %%T timestamp (ms), %%d timestamp (ISO-8601), %%K / %%S key / value length, "
               "%%%% a percent sign; \\n \\t \\r \\\\ escapes (default '%%v\\n')")


def configure(parser: argparse.ArgumentParser) -> None:
    add_client_options(parser)
    parser.add_argument("topics", nargs="+", metavar="TOPIC")
    parser.add_argument("-p", "--partitions", metavar="P[,P...]", help="only these partitions (not with -g)")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at each partition's log start")
    start.add_argument("-o", "--offset", metavar="OFFSET",
                       help="start at: start, end, an offset N, or -N (N before the end of each partition)")
    start.add_argument("--timestamp", metavar="TIME",
                       help="start at the first record at or after TIME (ms since the epoch or ISO-8601)")
    parser.add_argument("-n", "--num", type=int, metavar="N", help="exit after N records")
    parser.add_argument("-e", "--exit-at-end", action="store_true",
                        help="exit once every partition is read up to the end it had at the start")
    parser.add_argument("-g", "--group", help="consume as this consumer group, committing its offsets")
    parser.add_argument("-f", "--format-string", dest="format_string", metavar="FORMAT", default="%v\\n",
                        help=FORMAT_HELP)
    parser.add_argument("--read-committed", action="store_true", help="skip aborted transactional records")
    parser.set_defaults(func=consume)


# ---------------------------------------------------------------------------------------------------- format

_TOKEN = re.compile(r"%(.)|\\(.)|([^%\\]+)", re.S)
_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\", "0": b"\0"}


def compile_format(text: str) -> Callable[[Any], bytes]:
    """A kcat-like format string as a function of a kafka-python ConsumerRecord to bytes."""
    parts: list[Callable[[Any], bytes]] = []
    pos = 0
    for match in _TOKEN.finditer(text):
        if match.start() != pos:
            break
        pos = match.end()
        spec, escape, literal = match.groups()
        if literal is not None:
            parts.append(_constant(literal.encode()))
        elif escape is not None:
            parts.append(_constant(_ESCAPES.get(escape, b"\\" + escape.encode())))
        elif spec in _FIELDS:
            parts.append(_FIELDS[spec])
        else:
            raise CommandError(f"format {text!r}: unknown %{spec} (see --help)")
    if pos != len(text):
        raise CommandError(f"format {text!r}: a lone '%' or '\\' at the end")
    return lambda record: b"".join(part(record) for part in parts)


def _constant(raw: bytes) -> Callable[[Any], bytes]:
    return lambda record: raw


def _headers_text(record: Any) -> bytes:
    return b",".join(name.encode() + b"=" + (value or b"") for name, value in (record.headers or []))


_FIELDS: dict[str, Callable[[Any], bytes]] = {
    "t": lambda r: r.topic.encode(),
    "p": lambda r: str(r.partition).encode(),
    "o": lambda r: str(r.offset).encode(),
    "k": lambda r: r.key or b"",
    "v": lambda r: r.value or b"",
    "s": lambda r: r.value or b"",
    "K": lambda r: str(-1 if r.key is None else len(r.key)).encode(),
    "S": lambda r: str(-1 if r.value is None else len(r.value)).encode(),
    "h": _headers_text,
    "T": lambda r: str(r.timestamp).encode(),
    "d": lambda r: (_iso(r.timestamp) or "").encode(),
    "%": lambda r: b"%",
}


def _iso(ms: int) -> str | None:
    from tidelog.commands.common import format_time_ms

    return format_time_ms(ms)


def _json_line(record: Any) -> bytes:
    return json.dumps(record_json(record)).encode() + b"\n"


def record_json(record: Any) -> dict[str, Any]:
    """A record as JSON: key, value and header values as UTF-8 text, or base64 (with `*_encoding`) if not."""
    out: dict[str, Any] = {"topic": record.topic, "partition": record.partition, "offset": record.offset,
                           "timestamp": record.timestamp,
                           "timestamp_type": "LogAppendTime" if record.timestamp_type == 1 else "CreateTime"}
    for field in ("key", "value"):
        text, encoding = _text(getattr(record, field))
        out[field] = text
        if encoding:
            out[f"{field}_encoding"] = encoding
    headers = []
    for name, value in record.headers or []:
        text, encoding = _text(value)
        headers.append({"key": name, "value": text, **({"value_encoding": encoding} if encoding else {})})
    out["headers"] = headers
    return out


def _text(data: bytes | None) -> tuple[str | None, str | None]:
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return base64.b64encode(data).decode(), "base64"


# ---------------------------------------------------------------------------------------------------- consume

def consume(args: argparse.Namespace, client: Client) -> int:
    render: Callable[[Any], bytes] = _json_line if args.format == "json" else compile_format(args.format_string)
    if args.group and (args.offset or args.timestamp or args.partitions):
        raise CommandError("with -g the group's committed offsets say where to start: move them with "
                           "`tidelog group reset-offsets` (-o, --timestamp and -p are for group-less reads)")
    consumer = client.consumer(
        group_id=args.group, enable_auto_commit=bool(args.group),
        auto_offset_reset="earliest" if args.from_beginning else "latest",
        isolation_level="read_committed" if args.read_committed else "read_uncommitted")
    if args.group:
        for topic in args.topics:  # known before the group is joined: one rebalance, not two
            _partitions_for(consumer, topic)
        consumer.subscribe(args.topics)
    else:
        _assign(args, consumer)
    out = sys.stdout.buffer
    seen = 0
    ends: dict[Any, int] = {}
    with progress("waiting for records") as spinner, contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: stop
        while args.num is None or seen < args.num:
            # Until the group has assigned partitions, one long poll: kafka-python 3.0.12 drops a SyncGroup
            # answer that arrives after its poll timed out mid-join, and then never fetches.
            wait_ms = POLL_MS if consumer.assignment() else int(client.timeout * 1000)
            batches = consumer.poll(timeout_ms=wait_ms, max_records=None if args.num is None else args.num - seen)
            for records in batches.values():
                for record in records:
                    spinner.stop()
                    out.write(render(record))
                    seen += 1
            out.flush()
            if args.exit_at_end and _at_end(consumer, ends):
                break
    if args.group:
        consumer.commit()
    return 0


def _assign(args: argparse.Namespace, consumer: Any) -> None:
    from kafka.structs import TopicPartition

    wanted = {int(p) for p in args.partitions.split(",")} if args.partitions else None
    partitions = []
    for topic in args.topics:
        known = _partitions_for(consumer, topic)
        for p in sorted(known if wanted is None else wanted):
            if p not in known:
                raise CommandError(f"topic {topic!r} has no partition {p}")
            partitions.append(TopicPartition(topic, p))
    consumer.assign(partitions)
    if args.from_beginning or args.offset == "start":
        consumer.seek_to_beginning(*partitions)
    elif args.timestamp is not None:
        at = parse_time_ms(args.timestamp)
        found = consumer.offsets_for_times({tp: at for tp in partitions})
        ends = consumer.end_offsets(partitions)
        for tp in partitions:
            consumer.seek(tp, found[tp].offset if found.get(tp) is not None else ends[tp])
    elif args.offset in (None, "end"):
        consumer.seek_to_end(*partitions)
    else:
        try:
            offset = int(args.offset)
        except ValueError:
            raise CommandError(f"bad --offset {args.offset!r}: start, end, N or -N") from None
        starts = consumer.beginning_offsets(partitions)
        ends = consumer.end_offsets(partitions)
        for tp in partitions:
            target = ends[tp] + offset if offset < 0 else offset
            consumer.seek(tp, min(max(target, starts[tp]), ends[tp]))


def _partitions_for(consumer: Any, topic: str) -> set[int]:
    deadline = time.monotonic() + consumer.config["request_timeout_ms"] / 1000
    while True:
        found = consumer.partitions_for_topic(topic)
        if found:
            return set(found)
        if time.monotonic() > deadline:
            raise CommandError(f"topic {topic!r} not found")
        time.sleep(0.1)


def _at_end(consumer: Any, ends: dict[Any, int]) -> bool:
    """True when every assigned partition has been read up to the end offset it had when first seen."""
    assigned = consumer.assignment()
    if not assigned:
        return False
    new = [tp for tp in assigned if tp not in ends]
    if new:
        ends.update(consumer.end_offsets(new))
    return all(consumer.position(tp) >= ends[tp] for tp in assigned)
