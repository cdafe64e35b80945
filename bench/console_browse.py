"""The broker's memory while the web console browses a big partition (issue 31: within 50 MiB of idle).

A `tidelog serve` process gets a partition of --mb MiB (10 KiB values, confluent-kafka), then sits idle; then
the console's record API browses it the way a person would: pages from the beginning, the end, random offsets and
timestamps, and key/value/header searches that scan 20,000 records. The broker's RSS is sampled from /proc every
10 ms throughout. Not a unit test (figures vary on a shared machine); run by hand:

    python bench/console_browse.py [--mb 1024]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tidelog.testing import BrokerProcess, free_port, wait_for_port  # noqa: E402

VALUE = 10 * 1024


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def fill(bootstrap: str, mib: int) -> int:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "queue.buffering.max.kbytes": 262144})
    count = mib * 1024 * 1024 // VALUE
    payload = bytes(random.getrandbits(8) for _ in range(VALUE))
    for i in range(count):
        while True:
            try:
                producer.produce("big", key=f"key-{i}".encode(), value=payload, partition=0,
                                 headers=[("n", str(i).encode())])
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(300) == 0
    return count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--requests", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tidelog-bench-") as tmp:
        http_port = free_port()
        broker = BrokerProcess(Path(tmp) / "data", overrides={"metrics.port": http_port, "num.partitions": 1},
                               fault_control=False).start()
        try:
            assert broker.proc is not None
            pid = broker.proc.pid
            started = time.monotonic()
            count = fill(broker.bootstrap, args.mb)
            print(f"filled {args.mb} MiB ({count} records) in {time.monotonic() - started:.0f} s")
            base = f"http://127.0.0.1:{http_port}"
            wait_for_port("127.0.0.1", http_port, 60)  # the console starts after the broker is ready
            urllib.request.urlopen(base + "/api/topics/big", timeout=60).read()  # console clients connected
            time.sleep(5)
            idle = max(rss_mib(pid) for _ in range(50) if time.sleep(0.02) is None)
            samples: list[float] = []
            done = threading.Event()

            def sample() -> None:
                while not done.is_set():
                    samples.append(rss_mib(pid))
                    time.sleep(0.01)

            sampler = threading.Thread(target=sample)
            sampler.start()
            now_ms = int(time.time() * 1000)
            queries = ["offset=beginning&limit=500", "offset=end&limit=500", "key=key-99999&limit=10",
                       "value=nothing-like-this&limit=10", "header=n%3D123456&limit=10", "offset=5&limit=1&full=1"]
            t0 = time.monotonic()
            after: list[float] = []
            for i in range(args.requests):
                query = queries[i % len(queries)] if i < len(queries) else random.choice([
                    f"offset={random.randrange(count)}&limit=500",
                    f"timestamp={now_ms - random.randrange(600_000)}&limit=200",
                    *queries])
                body = json.loads(urllib.request.urlopen(f"{base}/api/topics/big/records?{query}", timeout=120).read())
                assert body["records"] or "limit=10" in query, query
                after.append(rss_mib(pid))
            seconds = time.monotonic() - t0
            done.set()
            sampler.join()
            print(f"browsing: {args.requests} requests in {seconds:.1f} s; RSS after requests 1, 6, 30, last: "
                  f"{after[0]:.0f}, {after[5]:.0f}, {after[29]:.0f}, {after[-1]:.0f} MiB")
            print(f"broker RSS: idle {idle:.0f} MiB, browsing max {max(samples):.0f} MiB "
                  f"(+{max(samples) - idle:.0f} MiB; issue 31 allows +50 MiB)")
        except BaseException:
            print(broker.output()[-3000:], file=sys.stderr)
            raise
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
