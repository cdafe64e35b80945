"""cProfile of a produce-heavy run: a `tidelog serve` subprocess under cProfile, loaded by confluent-kafka
(librdkafka), then the broker's time in the produce path (handler, Log.append_as_leader, LogValidator, record walk).
Prints figures only.

    python bench/profile_produce.py [--checkout DIR] [--count N] [--size BYTES] [--compression CODEC]

`--checkout` runs another source tree's broker (e.g. an unpacked `git archive` of an older commit) for a
before/after comparison with the same load.
"""

from __future__ import annotations

import argparse
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tidelog.testing import free_port, wait_for_port  # noqa: E402

FUNCTIONS = ("handle", "append_as_leader", "validate_records", "walk_batch", "walk_uncompressed",
             "_walk_compressed", "crc_is_valid")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--count", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--compression", default="none")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tidelog-prof-") as tmp:
        port = free_port()
        prof = os.path.join(tmp, "broker.prof")
        env = dict(os.environ, PYTHONPATH=os.path.abspath(args.checkout))
        cmd = [sys.executable, "-m", "cProfile", "-o", prof, "-m", "tidelog", "serve",
               "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
               "--override", f"log.dirs={os.path.join(tmp, 'logs')}"]
        proc = subprocess.Popen(cmd, env=env, cwd=os.path.abspath(args.checkout), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            wait_for_port("127.0.0.1", port)
            bootstrap = f"127.0.0.1:{port}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic("prof", num_partitions=3, replication_factor=1)])["prof"].result(60)
            producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 10,
                                 "batch.size": 1_000_000, "compression.type": args.compression,
                                 "queue.buffering.max.messages": 200_000})
            payload = os.urandom(args.size // 2).hex().encode()[:args.size]
            start = time.perf_counter()
            for i in range(args.count):
                while True:
                    try:
                        producer.produce("prof", value=payload, key=str(i).encode())
                        break
                    except BufferError:
                        producer.poll(0.01)
            producer.flush(120)
            elapsed = time.perf_counter() - start
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
        stats = pstats.Stats(prof)
        print(f"{args.count:,} x {args.size} B, compression={args.compression}: {args.count / elapsed:,.0f} msgs/s "
              f"({elapsed:.1f} s wall)")
        rows = {}
        for (filename, _line, func), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
            if func in FUNCTIONS and ("apis/produce" in filename or func != "handle"):
                rows[func] = rows.get(func, 0.0) + ct
        for func in FUNCTIONS:
            if func in rows:
                print(f"  {func:>20}: {rows[func]:7.3f} s cumulative "
                      f"({rows[func] / args.count * 1e6:6.2f} us per record)")


if __name__ == "__main__":
    main()
