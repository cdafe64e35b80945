"""Print the Kafka APIs this broker serves (tidelog/broker/apis/__init__.py API_TABLE) as a Markdown table, next
to what Apache Kafka 4.3 advertises (from kafka-python's record of each release's ApiVersions answer). Used to
keep docs/APIS.md true:

    .venv/bin/python scripts/list_apis.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kafka.protocol.broker_version_data import BROKER_API_VERSIONS  # noqa: E402

from tidelog.broker.apis import API_TABLE  # noqa: E402

KAFKA = (4, 3)


def main() -> None:
    kafka = BROKER_API_VERSIONS[KAFKA]
    print("| Key | API | Served | Advertised | Kafka 4.3 |")
    print("|---|---|---|---|---|")
    for entry in sorted(API_TABLE):
        key, low, high = entry.advertised
        ref = kafka.get(key)
        ref_text = f"{ref[0]}–{ref[1]}" if ref else "not served"
        same = " (=)" if ref == (low, high) else ""
        print(f"| {key} | {entry.key.api_name} | {entry.min_version}–{entry.max_version} | {low}–{high}{same} "
              f"| {ref_text} |")


if __name__ == "__main__":
    main()
