"""Broker CPU per Produce request with no client library in the way: a `tidelog serve` subprocess gets pre-built
Produce v9 requests (one batch of 1 KiB records each, round robin over 4 partitions) over one raw socket, a few
in flight, and the broker's own utime/stime per request is printed. Prints figures only; no pass/fail.

    python bench/raw_produce.py [--batch BYTES] [--codec none|lz4] [--mb MB] [--inflight N] [--acks 1|-1]

What bench/compare.py cannot show: the broker's cost alone, without librdkafka sharing the machine's two cores.
The kernel's share (socket copies, page-cache writes) is printed apart: on a VM that backs guest memory lazily it
moves with the machine's memory (see bench/compare.py).
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tidelog.protocol.records import LZ4, NONE, Record, build_batch  # noqa: E402
from tidelog.protocol.wire import array_length_bytes, string_bytes, write_uvarint  # noqa: E402
from tidelog.testing import free_port, wait_for_port  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
PARTITIONS = 4


def cpu_times(pid: int) -> tuple[float, float]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def produce_request(topic: str, partition: int, batch: bytes, correlation_id: int, acks: int) -> bytes:
    """A Produce v9 frame (size prefix included) carrying `batch` for one partition."""
    body = (struct.pack(">hhih", 0, 9, correlation_id, 3) + b"raw" + b"\x00"  # request header v2
            + string_bytes(None, True) + struct.pack(">hi", acks, 30_000)
            + array_length_bytes(1, True) + string_bytes(topic, True)
            + array_length_bytes(1, True) + struct.pack(">i", partition)
            + write_uvarint(len(batch) + 1) + batch + b"\x00" + b"\x00" + b"\x00")
    return struct.pack(">i", len(body)) + body


def read_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise RuntimeError("the broker closed the connection")
        out += chunk
    return bytes(out)


def run_load(port: int, requests: list[bytes], total: int, inflight: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sent = answered = 0
        while answered < total:
            while sent < total and sent - answered < inflight:
                sock.sendall(requests[sent % len(requests)])
                sent += 1
            size = struct.unpack(">i", read_exact(sock, 4))[0]
            read_exact(sock, size)
            answered += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=65536, help="bytes of records per batch")
    parser.add_argument("--codec", choices=("none", "lz4"), default="none")
    parser.add_argument("--mb", type=float, default=300, help="MB of record values per measured run")
    parser.add_argument("--inflight", type=int, default=8)
    parser.add_argument("--acks", type=int, choices=(1, -1), default=1)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    size = 1024
    value = os.urandom(size // 4).hex().encode()[: size // 2] + os.urandom(size - size // 2)
    count = max(1, args.batch // (size + 10))
    batch = bytes(build_batch([Record(i, int(time.time() * 1000), None, value) for i in range(count)], 0,
                              compression=LZ4 if args.codec == "lz4" else NONE))
    requests = [produce_request("raw", i % PARTITIONS, batch, i, args.acks) for i in range(64)]
    per_request = count * size
    total = max(1, int(args.mb * 1e6 / per_request))

    from confluent_kafka.admin import AdminClient, NewTopic

    with tempfile.TemporaryDirectory(prefix="tidelog-raw-") as tmp:
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "tidelog", "serve", "--override",
                                 f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={tmp}/logs",
                                 "--log-level", "WARNING"], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            wait_for_port("127.0.0.1", port)
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 3})
            admin.create_topics([NewTopic("raw", PARTITIONS, 1)])["raw"].result(30)
            run_load(port, requests, max(1, total // 3), args.inflight)  # warm-up
            print(f"{total} requests of {len(batch)} B ({count} x {size} B records, {args.codec}), "
                  f"acks={args.acks}, {args.inflight} in flight")
            for _ in range(args.runs):
                user0, sys0 = cpu_times(proc.pid)
                t0 = time.perf_counter()
                run_load(port, requests, total, args.inflight)
                elapsed = time.perf_counter() - t0
                user1, sys1 = cpu_times(proc.pid)
                user, kernel = (user1 - user0) / total * 1e6, (sys1 - sys0) / total * 1e6
                gb = total * per_request / 1e9
                print(f"  {gb / elapsed * 1000:6.0f} MB/s   broker {user + kernel:6.1f} us/request (user {user:.1f},"
                      f" sys {kernel:.1f}) = {(user + kernel) * total / 1e6 / gb:.2f} CPU s/GB")
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
