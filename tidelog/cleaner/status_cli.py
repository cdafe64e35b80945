"""`tidelog cleaner status` and `tidelog cleaner explain TOPIC`: GET /api/cleaner of a running broker, as a table
or one sentence per partition (tidelog/cleaner/explain.py computes both on the broker)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, TextIO

# json, urllib and datetime are imported when a cleaner command runs: `tidelog serve` builds this parser too

DEFAULT_METRICS_PORT = 9308  # the README's suggested metrics.port

COLUMNS = (
    ("TOPIC", lambda r: r["topic"]),
    ("PART", lambda r: r["partition"]),
    ("DIRTY_RATIO", lambda r: f"{r['dirty_ratio']:.2f}"),
    ("CLEAN_BYTES", lambda r: r["clean_bytes"]),
    ("DIRTY_BYTES", lambda r: r["dirty_bytes"]),
    ("FIRST_DIRTY", lambda r: r["first_dirty_offset"]),
    ("FIRST_UNCLEANABLE", lambda r: r["first_uncleanable_offset"]),
    ("BLOCKED_BY", lambda r: r["blocked_by"]),
    ("BLOCKED_UNTIL", lambda r: _time(r["blocked_until_ms"])),
    ("MAX_LAG_DUE", lambda r: _time(r["max_compaction_lag_due_ms"])),
    ("LAST_CLEANED", lambda r: _time(r["last_cleaned_ms"])),
    ("LAST_RECORDS", lambda r: _pair(r["last_cleaning"], "records_read", "records_retained")),
    ("LAST_BYTES", lambda r: _pair(r["last_cleaning"], "bytes_read", "bytes_written")),
    ("LAST_SECS", lambda r: "-" if r["last_cleaning"] is None else f"{r['last_cleaning']['seconds']:.3f}"),
)


def build_parser() -> argparse.ArgumentParser:
    cleaner = argparse.ArgumentParser(prog="tidelog cleaner",
                                      description="Why compacted partitions are (not) being cleaned, from a running "
                                                  "broker's GET /api/cleaner.")
    actions = cleaner.add_subparsers(dest="cleaner_command", required=True)
    for name, text in (("status", "every compacted partition's cleaning state, as a table"),
                       ("explain", "one sentence per partition of TOPIC: what holds compaction back and what "
                                   "would release it")):
        action = actions.add_parser(name, help=text)
        if name == "explain":
            action.add_argument("topic", metavar="TOPIC")
        action.add_argument("--url", help="the broker's metrics HTTP address (default: http://metrics.host:"
                                          f"metrics.port from --config and TIDELOG_* variables, port "
                                          f"{DEFAULT_METRICS_PORT} when metrics.port is unset)")
        action.add_argument("--config", metavar="FILE", help="the broker's server.properties, for the default --url")
        action.add_argument("--json", action="store_true", help="print GET /api/cleaner's JSON as it is")
    return cleaner


def main(argv: list[str], out: TextIO = sys.stdout) -> int:
    return run(build_parser().parse_args(argv), out)


def run(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    from tidelog.config.definitions import ConfigError

    try:
        url = args.url or default_url(args.config)
    except ConfigError as exc:
        print(f"tidelog cleaner: configuration error: {exc}", file=sys.stderr)
        return 2
    try:
        rows = fetch(url)
    except (OSError, ValueError) as exc:  # connection refused, HTTP error, not JSON
        print(f"tidelog cleaner: cannot read {url.rstrip('/')}/api/cleaner: {exc}", file=sys.stderr)
        return 1
    if args.cleaner_command == "explain":
        rows = [r for r in rows if r["topic"] == args.topic]
        if not rows:
            print(f"tidelog cleaner: no compacted topic {args.topic!r} on this broker", file=sys.stderr)
            return 1
    if args.json:
        import json

        json.dump(rows, out, indent=2)
        out.write("\n")
    elif args.cleaner_command == "explain":
        for row in rows:
            out.write(f"{row['explanation']}\n")
    else:
        out.write(table(rows))
    return 0


def default_url(config_file: str | None) -> str:
    from tidelog.config.broker_config import BrokerConfig

    config = BrokerConfig.load(config_file, os.environ, {})
    port = config.metrics_port if config.metrics_port > 0 else DEFAULT_METRICS_PORT
    host = config.metrics_host if config.metrics_host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def fetch(url: str) -> list[dict[str, Any]]:
    import json
    import urllib.request

    with urllib.request.urlopen(f"{url.rstrip('/')}/api/cleaner", timeout=30) as response:
        rows = json.loads(response.read())
    if not isinstance(rows, list):
        raise ValueError(f"expected a JSON array, got {type(rows).__name__}")
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    cells = [[str(get(r)) for _, get in COLUMNS] for r in rows]
    widths = [max([len(name)] + [len(c[i]) for c in cells]) for i, (name, _) in enumerate(COLUMNS)]
    lines = [[name for name, _ in COLUMNS], *cells]
    return "".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() + "\n"
                   for line in lines)


def _time(ms: int | None) -> str:
    if ms is None:
        return "-"
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pair(last: dict[str, Any] | None, a: str, b: str) -> str:
    return "-" if last is None else f"{last[a]}->{last[b]}"
