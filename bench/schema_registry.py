"""The Schema Registry through confluent-kafka's own client (issue 32, "Done when" 5): register --count distinct
Avro schemas (each one an fsynced append to `_schemas` before its answer), then look each up by id with a fresh
client (uncached: one HTTP request each) and again with the same client (cached), then restart the broker and time
the replay of `_schemas`. Not a unit test (figures vary on a shared machine); run by hand:

    python bench/schema_registry.py [--count 10000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tidelog.testing import BrokerProcess, free_port, wait_for_port  # noqa: E402


def schema(i: int) -> str:
    return json.dumps({"type": "record", "name": f"R{i}", "namespace": "bench",
                       "fields": [{"name": "id", "type": "long"}, {"name": f"f{i}", "type": "string"}]})


def rate(n: int, seconds: float) -> str:
    return f"{n} in {seconds:.2f} s ({n / seconds:,.0f}/s, {seconds / n * 1e3:.2f} ms each)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000)
    args = parser.parse_args()
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="tidelog-bench-sr-") as tmp:
        broker = BrokerProcess(Path(tmp) / "logs", args=["--schema-registry-port", str(port)], fault_control=False)
        with broker:
            wait_for_port("127.0.0.1", port)
            client = SchemaRegistryClient({"url": url})
            start = time.perf_counter()
            ids = [client.register_schema(f"bench-{i}-value", Schema(schema(i), "AVRO")) for i in range(args.count)]
            print("register:        ", rate(args.count, time.perf_counter() - start))

            uncached = SchemaRegistryClient({"url": url})
            start = time.perf_counter()
            for schema_id in ids:
                uncached.get_schema(schema_id)
            print("get by id, uncached:", rate(args.count, time.perf_counter() - start))
            start = time.perf_counter()
            for schema_id in ids:
                uncached.get_schema(schema_id)
            print("get by id, cached:  ", rate(args.count, time.perf_counter() - start))

            start = time.perf_counter()
            broker.restart()
            wait_for_port("127.0.0.1", port)
            print(f"restart until the registry answers: {time.perf_counter() - start:.2f} s "
                  f"({args.count} schemas replayed)")
            assert SchemaRegistryClient({"url": url}).get_schema(ids[-1]).schema_str


if __name__ == "__main__":
    main()
