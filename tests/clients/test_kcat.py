"""kcat (librdkafka 2.0.2): the console round trip with a key delimiter, and 20,000 keyed records with
headers per codec. kcat 2.0.2 only compresses when Produce v0 is advertised (KAFKA-18659), which the on-disk
codec check catches."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from .records import CODECS, COUNT, PARTITIONS, Rec, assert_records, assert_stored_with, key, value

pytestmark = pytest.mark.kcat


def run_kcat(kcat: str, *args: str, stdin: str | None = None, timeout: float = 180) -> str:
    proc = subprocess.run([kcat, *args], input=stdin, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"kcat {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}"
    return proc.stdout


def test_console_round_trip(tidelog_module_broker, kcat: str) -> None:
    topic = "kcat-console"
    tidelog_module_broker.create_topic(topic)
    lines = [f"k{i}:line {i} with spaces, a second : delimiter and ünïcödé" for i in range(1000)]
    lines += ["empty-value:", "k-last:the end"]
    run_kcat(kcat, "-P", "-b", tidelog_module_broker.bootstrap, "-t", topic, "-K:", stdin="\n".join(lines) + "\n")
    out = run_kcat(kcat, "-C", "-b", tidelog_module_broker.bootstrap, "-t", topic, "-o", "beginning", "-e", "-K:")
    assert out.splitlines() == lines


def kcat_headers(raw: list) -> tuple[tuple[str, bytes], ...]:
    # kcat -J prints headers as a flat [name, value, name, value, ...] list.
    return tuple((raw[j], raw[j + 1].encode()) for j in range(0, len(raw), 2))


@pytest.mark.parametrize("codec", CODECS)
def test_codec_round_trip(tidelog_module_broker, kcat: str, codec: str) -> None:
    topic = f"kcat-{codec}"
    tidelog_module_broker.create_topic(topic, PARTITIONS)
    hdrs = (("codec", codec.encode()), ("origin", b"kcat"))
    compress = [] if codec == "none" else ["-z", codec]
    t0 = int(time.time() * 1000)
    for p in range(PARTITIONS):
        stdin = "".join(f"{key(i).decode()}:{value(i).decode()}\n" for i in range(p, COUNT, PARTITIONS))
        run_kcat(
            kcat,
            "-P",
            "-b",
            tidelog_module_broker.bootstrap,
            "-t",
            topic,
            "-p",
            str(p),
            "-K:",
            *compress,
            "-H",
            "codec=" + codec,
            "-H",
            "origin=kcat",
            "-X",
            "linger.ms=20",
            stdin=stdin,
        )
    t1 = int(time.time() * 1000)
    assert_stored_with(tidelog_module_broker.log_dir, topic, codec)

    got: list[Rec] = []
    for p in range(PARTITIONS):
        out = run_kcat(
            kcat, "-C", "-b", tidelog_module_broker.bootstrap, "-t", topic, "-p", str(p), "-o", "beginning", "-e", "-J"
        )
        for line in out.splitlines():
            d = json.loads(line)
            assert d["tstype"] == "create"
            assert t0 - 1000 <= d["ts"] <= t1 + 1000, "CreateTime set by librdkafka at produce time"
            got.append(
                Rec(
                    d["partition"],
                    d["offset"],
                    0,
                    d["key"].encode(),
                    d["payload"].encode(),
                    kcat_headers(d.get("headers") or []),
                )
            )
    want = [Rec(i % PARTITIONS, i // PARTITIONS, 0, key(i), value(i), hdrs) for i in range(COUNT)]
    assert_records(got, want)
