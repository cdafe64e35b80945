"""Start-up time of `python -m tidelog serve`: process start -> listening socket accepts, -> first
ApiVersions answered, and -> first Metadata answered (logs loaded). Not a unit test (timings on a shared machine vary); run by hand:

    python bench/startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tidelog.testing import free_port  # noqa: E402

API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
METADATA_V1 = struct.pack(">hhih", 3, 1, 2, 5) + b"bench" + struct.pack(">i", -1)  # all topics


def request(sock: socket.socket, frame: bytes) -> None:
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            raise RuntimeError("broker closed the connection")
        head += chunk
    size = struct.unpack(">i", head)[0]
    got = 0
    while got < size:
        chunk = sock.recv(size - got)
        if not chunk:
            raise RuntimeError("broker closed the connection")
        got += len(chunk)


def one_run(overrides: list[str]) -> tuple[float, float, float]:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="tidelog-bench-") as tmp:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        cmd = [
            sys.executable,
            "-m",
            "tidelog",
            "serve",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--log-dirs",
            tmp,
            *[arg for override in overrides for arg in ("--override", override)],
        ]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            while True:
                try:
                    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                    break
                except OSError:
                    if proc.poll() is not None:
                        raise RuntimeError("broker exited") from None
                    time.sleep(0.002)
            t_listen = time.perf_counter() - t0
            with sock:
                request(sock, API_VERSIONS_V0)
                t_first = time.perf_counter() - t0
                request(sock, METADATA_V1)
                t_metadata = time.perf_counter() - t0
        finally:
            proc.terminate()
            proc.wait(30)
    return t_listen, t_first, t_metadata


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--override", action="append", default=[],
                        help="NAME=VALUE passed to `tidelog serve`, e.g. metrics.port=0 (with the web console) and "
                             "console.enable=false to compare")
    args = parser.parse_args()
    listen, first, metadata = [], [], []
    for _ in range(args.runs):
        a, b, c = one_run(args.override)
        listen.append(a)
        first.append(b)
        metadata.append(c)
    print(
        f"listening after: median {statistics.median(listen) * 1000:.0f} ms "
        f"(min {min(listen) * 1000:.0f}, max {max(listen) * 1000:.0f})"
    )
    print(
        f"first ApiVersions answered after: median {statistics.median(first) * 1000:.0f} ms "
        f"(min {min(first) * 1000:.0f}, max {max(first) * 1000:.0f})"
    )
    print(
        f"first Metadata answered after: median {statistics.median(metadata) * 1000:.0f} ms "
        f"(min {min(metadata) * 1000:.0f}, max {max(metadata) * 1000:.0f})"
    )


if __name__ == "__main__":
    main()
