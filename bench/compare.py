"""tidelog vs librdkafka's mock cluster, one interleaved run, same client (confluent-kafka / librdkafka) for both.
Prints figures and tidelog/mock ratios only; there is no pass/fail.

    python bench/compare.py [--seconds S] [--quick] [--only SUBSTRING] [--tidelog-root CHECKOUT]

Before/after: `git archive main | tar -x -C /tmp/base` then `--tidelog-root /tmp/base` measures that checkout's
broker with this same bench (copy a built tidelog/protocol/_record_walk*.so along, or it runs the pure-Python walk).

Both brokers run as subprocesses so their CPU time and memory can be read from /proc/<pid>:
  * tidelog: `python -m tidelog serve` on an ephemeral port with a fresh log dir;
  * mock: a Python process holding a librdkafka handle with `test.mock.num.brokers=1` (the mock cluster's
    broker threads live in it; it keeps only the tail of each partition in memory).
Phases, each bounded by volume and by --seconds. Each produce case runs twice on each broker in ABBA order
(tidelog, mock, then mock, tidelog: into a fresh topic each time) and its figures are the two runs together,
so neither broker always loads the machine right after the other (with tidelog always first, the first case
after start-up read 0.68x on average against 0.78x with the mock first, over 4 runs each way; later cases moved
both ways, by as much):
  produce 100 B / 1 KiB records x none/lz4 x acks=1/all x 64 KiB/1 MiB producer batches (batch.size, linger.ms 5),
  consume (the same data set re-read from the start), broker CPU-seconds per GB of produced payload
  (utime+stime of the broker process, with the stime share shown as "sys"), end-to-end p99 latency at
  1000 msg/s, start-up to the first Metadata answer (fresh process each time), and RSS / anonymous (heap) /
  file-backed memory of the brokers after the run.
Each produce case's topic is deleted on tidelog once measured (except the first 1 KiB uncompressed one, re-read
later), which frees its page cache at once. The "sys" share of a case says how much of its CPU was the kernel's:
on this VM (Firecracker, whose host backs guest memory lazily and takes idle memory back) a page-cache page the
guest has not used lately costs its writer several times the system time. A bare Python loop of 64 KiB pwrites
to 4 new files, no broker involved: 0.22-0.30 s of sys per GB for the first ~1.5 GB (memory recently freed),
then 1.4-2.9 s per GB for the rest; the same loop evicting what it wrote behind itself (sync_file_range +
POSIX_FADV_DONTNEED, so freed pages are reused at once) stayed at 0.41-0.50 s per GB for 4 GB. Uncompressed
cases therefore move with the machine's memory, not with the broker; a broker that writes its log to files
(Kafka too) cannot spend less than that loop. The mock keeps only partition tails in memory and writes no
file.
This VM reclaims and hands back memory on its own: a DAMON kdamond runs a `pageout` scheme over physical memory
(/sys/kernel/mm/damon/admin/kdamonds/0: pages cold for a 5 s aggregation window, up to 128 MiB per second), and
the virtio-balloon device reports freed guest pages to the host (feature bit 5, page_reporting_order 9: freed
2 MiB blocks are handed back), which is why a page the guest has not used lately is dear. The phase flips within
seconds: the same broker writing 600 MB five times in a row took 0.53-2.35 CPU s per GB, the sys share moving
with it. A small probe cannot tell the phase beforehand (an 8 MiB pwrite loop took ~1 us per page just before
cases that then spent 2.3 s of sys per GB): the case's own "sys" share is the sign.
The same machinery rules out large page-cache folios here: extending a segment with zeros to the next 256 KiB
boundary before each smaller append (so the kernel caches it in 256 KiB folios, ext4 on Linux 6.16+) cut the
pwrite loop's sys from 0.28 to 0.19 s per GB while freed memory was at hand, yet took 2.3-2.6 s per GB (plain
appends: 0.28) once it was not, and a broker with it spent 1.75-3.25 CPU s per GB where the one without spent
0.85-0.98: a folio of that order is carved out of the 2 MiB blocks the balloon has handed back, while small
pages still come from memory the guest freed itself. It was not kept.
Consumers set fetch.queue.backoff.ms=0: librdkafka otherwise pauses fetching for 1 s whenever
queued.min.messages are queued, which measures the client's back-off instead of the broker.
"""

from __future__ import annotations

import argparse
import compileall
import logging
import os
import re
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PARTITIONS = 4  # the mock auto-creates topics with 4 partitions; tidelog gets the same
CLK_TCK = os.sysconf("SC_CLK_TCK")
QUIET = {"log_level": 4}  # librdkafka's informational lines (telemetry ids, purged queues) would bury the table
BACKOFF_NOTE = "consumers run with fetch.queue.backoff.ms=0 (librdkafka's 1 s pause once queued.min.messages are queued)"


# --- the mock cluster process --------------------------------------------------------------------------------

def mock_server() -> None:
    """Child mode: start librdkafka's mock cluster, print its bootstrap address, live until stdin closes."""
    from confluent_kafka import Producer

    found: list[str] = []

    class _Grab(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            m = re.search(r"replaced with (\S+)", record.getMessage())
            if m:
                found.append(m.group(1))

    logger = logging.getLogger("mock")
    logger.addHandler(_Grab())
    logger.setLevel(logging.DEBUG)
    handle = Producer({"test.mock.num.brokers": 1, "bootstrap.servers": "unused:9092", "logger": logger})
    while not found:
        handle.poll(0.005)
    print(found[0], flush=True)
    sys.stdin.read()  # the parent closes our stdin when done (or dies)
    del handle


# --- brokers under test --------------------------------------------------------------------------------------

class Broker:
    name = ""
    proc: subprocess.Popen[bytes]
    bootstrap = ""

    def delete_topic(self, topic: str) -> None:
        """Free what a finished case wrote (the mock keeps only partition tails anyway)."""

    def cpu_seconds(self) -> float:
        return sum(self.cpu_times())

    def cpu_times(self) -> tuple[float, float]:
        """(user, system) CPU seconds of the broker process so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK  # utime, stime

    def memory(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)

    def create_topic(self, topic: str) -> None:
        raise NotImplementedError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tidelog_command(port: int, log_dir: str) -> list[str]:
    return [sys.executable, "-m", "tidelog", "serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={log_dir}", "--log-level", "WARNING"]


# --tidelog-root: the checkout whose broker is measured (e.g. a snapshot of main, "before"). Brokers start with
# it as their working directory too: `python -m` puts the working directory ahead of PYTHONPATH.
TIDELOG_ROOT = ROOT


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(TIDELOG_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


class Tidelog(Broker):
    name = "tidelog"

    def __init__(self, log_dir: str) -> None:
        port = free_port()
        self.bootstrap = f"127.0.0.1:{port}"
        self.proc = subprocess.Popen(tidelog_command(port, log_dir), env=child_env(), cwd=TIDELOG_ROOT,
                                     stdout=subprocess.DEVNULL,
                                     stderr=open(Path(log_dir).parent / "tidelog-bench.out", "ab"))  # noqa: SIM115
        metadata_answered(port, 30.0)

    def create_topic(self, topic: str) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)

    def delete_topic(self, topic: str) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
        admin.delete_topics([topic])[topic].result(30)


class Mock(Broker):
    name = "mock"

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--mock-server"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=child_env())
        assert self.proc.stdout is not None
        self.bootstrap = self.proc.stdout.readline().decode().strip()

    def create_topic(self, topic: str) -> None:
        from confluent_kafka import Producer

        Producer({"bootstrap.servers": self.bootstrap, **QUIET}).list_topics(topic, timeout=30)  # auto-created, 4 partitions

    def stop(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.close()
        super().stop()


# --- start-up ------------------------------------------------------------------------------------------------

METADATA_V1 = struct.pack(">hhih", 3, 1, 2, 5) + b"bench" + struct.pack(">i", -1)


def _roundtrip(sock: socket.socket, frame: bytes) -> None:
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    need, got = 4, b""
    while len(got) < need:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("broker closed the connection")
        got += chunk
        if len(got) >= 4:
            need = 4 + struct.unpack(">i", got[:4])[0]


def metadata_answered(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
                _roundtrip(sock, METADATA_V1)
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.002)


def startup_tidelog() -> float:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="tidelog-start-") as tmp:
        t0 = time.perf_counter()
        proc = subprocess.Popen(tidelog_command(port, tmp), env=child_env(), cwd=TIDELOG_ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            metadata_answered(port, 30.0)
            return time.perf_counter() - t0
        finally:
            proc.terminate()
            proc.wait(30)


def startup_mock() -> float:
    t0 = time.perf_counter()
    mock = Mock()
    try:
        metadata_answered(int(mock.bootstrap.rsplit(":", 1)[1]), 30.0)
        return time.perf_counter() - t0
    finally:
        mock.stop()


# --- load phases ---------------------------------------------------------------------------------------------

@dataclass
class Produced:
    """One or more produce runs: delivered bytes, wall time, broker CPU (user, sys) and failed records."""

    delivered: int
    seconds: float
    user: float
    sys: float
    errors: int = 0

    def __add__(self, other: Produced) -> Produced:
        return Produced(self.delivered + other.delivered, self.seconds + other.seconds, self.user + other.user,
                        self.sys + other.sys, self.errors + other.errors)

    @property
    def mb_s(self) -> float:
        return self.delivered / self.seconds / 1e6

    @property
    def cpu_per_gb(self) -> float:
        return (self.user + self.sys) / max(self.delivered / 1e9, 1e-9)

    @property
    def sys_per_gb(self) -> float:
        """The kernel's share (socket copies, page-cache writes) of cpu_per_gb."""
        return self.sys / max(self.delivered / 1e9, 1e-9)


def produce(broker: Broker, topic: str, size: int, codec: str, acks: str, batch: int, max_mb: float,
            seconds: float) -> Produced:
    from confluent_kafka import Producer

    errors = [0]

    def on_error(err: object, _msg: object) -> None:
        if err is not None:
            errors[0] += 1

    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "acks": acks, "compression.type": codec,
        "batch.size": batch, "linger.ms": 5, "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576, "delivery.report.only.error": True, "on_delivery": on_error,
        **QUIET,
    })
    producer.list_topics(topic, timeout=30)
    # Half-random values: lz4 has something to compress, as in real payloads.
    value = os.urandom(size // 4).hex().encode()[: size // 2] + os.urandom(size - size // 2)
    # produce_batch ignores a per-message partition: each call goes to one partition, round robin.
    msgs = [{"value": value} for _ in range(max(1, 1_000_000 // size))]
    target = int(max_mb * 1e6 / size)
    user0, sys0 = broker.cpu_times()
    t0 = time.perf_counter()
    sent = calls = 0
    while sent < target and time.perf_counter() - t0 < seconds:
        n = producer.produce_batch(topic, msgs[: min(len(msgs), target - sent)], partition=calls % PARTITIONS)
        calls += 1
        sent += n
        producer.poll(0 if n else 0.002)
    left = producer.flush(60)
    elapsed = time.perf_counter() - t0
    user1, sys1 = broker.cpu_times()
    delivered = sent - left - errors[0]
    return Produced(delivered * size, elapsed, user1 - user0, sys1 - sys0, errors[0] + left)


def consume(broker: Broker, topic: str, seconds: float) -> tuple[float, float]:
    """(MB/s, broker CPU s per GB) re-reading the topic from the start until every partition's end,
    repeatedly, for about `seconds`."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": f"bench-{time.monotonic_ns()}",
        "enable.auto.commit": False, "fetch.queue.backoff.ms": 0, "fetch.wait.max.ms": 5,
        "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 8_388_608, **QUIET,
    })
    # The data set is fixed: each pass asks for exactly the records there are, so no call waits out a timeout.
    marks = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in range(PARTITIONS)]
    per_pass = sum(high - low for low, high in marks)
    nbytes = 0
    cpu0 = broker.cpu_seconds()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        consumer.assign([TopicPartition(topic, p, low) for p, (low, _) in enumerate(marks)])
        left = per_pass
        while left > 0 and time.perf_counter() - t0 < seconds:
            for m in consumer.consume(num_messages=min(10_000, left), timeout=1.0):
                if m.error() is None:
                    nbytes += len(m.value())
                    left -= 1
        consumer.unassign()
    elapsed = time.perf_counter() - t0
    cpu = broker.cpu_seconds() - cpu0
    consumer.close()
    return nbytes / elapsed / 1e6, cpu / max(nbytes / 1e9, 1e-9)


def latency(broker: Broker, topic: str, seconds: float, rate: int = 1000) -> tuple[float, float, int]:
    """(p50 ms, p99 ms, samples): produce `rate` msg/s (acks=all, linger 0), consume them in a thread."""
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": f"lat-{time.monotonic_ns()}",
        "enable.auto.commit": False, "fetch.queue.backoff.ms": 0, "fetch.wait.max.ms": 100, **QUIET,
    })
    consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0, **QUIET})
    producer.list_topics(topic, timeout=30)
    samples: list[float] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            m = consumer.poll(0.05)  # one message at a time: consume(n) would wait for n
            if m is not None and m.error() is None and m.value():
                samples.append(time.perf_counter() - struct.unpack(">d", m.value()[:8])[0])

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    time.sleep(1.0)  # consumer positioned at the end
    warm = int(rate * 0.5)
    total = int(rate * seconds) + warm
    t0 = time.perf_counter()
    for i in range(total):
        due = t0 + i / rate
        while (now := time.perf_counter()) < due:
            time.sleep(min(0.0005, due - now))
        producer.produce(topic, value=struct.pack(">d", time.perf_counter()) + b"x" * 92, partition=0)
        producer.poll(0)
    producer.flush(10)
    time.sleep(0.5)
    done.set()
    thread.join(5)
    consumer.close()
    kept = sorted(samples[warm:]) or [float("nan")]
    return (statistics.median(kept) * 1000, kept[min(len(kept) - 1, int(len(kept) * 0.99))] * 1000, len(kept))


# --- the run -------------------------------------------------------------------------------------------------

@dataclass
class Table:
    rows: list[tuple[str, str, str, str, str]] = field(default_factory=list)

    def add(self, case: str, tide: str, mock: str, ratio: str, note: str = "") -> None:
        self.rows.append((case, tide, mock, ratio, note))
        print(f"{case:<38} {tide:>14} {mock:>14} {ratio:>8}  {note}", flush=True)


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mock-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=2.5, help="time cap per produce/consume case")
    parser.add_argument("--quick", action="store_true", help="only the 1 KiB produce cases, fewer start-ups")
    parser.add_argument("--only", default="", help="substring filter on produce case names")
    parser.add_argument("--tidelog-root", type=Path, default=ROOT,
                        help="run the tidelog broker from this checkout (before/after comparisons)")
    args = parser.parse_args()
    global TIDELOG_ROOT
    TIDELOG_ROOT = args.tidelog_root.resolve()
    if args.mock_server:
        mock_server()
        return
    # Byte-compiled modules, as an installed wheel has them (PYTHONDONTWRITEBYTECODE keeps a checkout without
    # them, and the start-up figure would then measure compiling tidelog, ~0.1 s).
    compileall.compile_dir(str(TIDELOG_ROOT / "tidelog"), quiet=1)

    print(BACKOFF_NOTE)
    print(f"tidelog from {TIDELOG_ROOT}")
    print(f"{os.cpu_count()} CPUs, load average at start {load_average()} (a shared machine moves every figure; "
          "the ratios of one interleaved run are what to compare)")
    print(f"virtio-balloon free page reporting: {free_page_reporting()}")
    print(f"{'case':<38} {'tidelog':>14} {'mock':>14} {'ratio':>8}  (ratio = tidelog/mock; MB/s of record values)")
    table = Table()
    starts: dict[str, list[float]] = {"tidelog": [], "mock": []}
    for _ in range(5 if args.quick else 11):  # interleaved, fresh processes: the median of few moves by 10 ms
        starts["tidelog"].append(startup_tidelog())
        starts["mock"].append(startup_mock())
    st, sm = statistics.median(starts["tidelog"]), statistics.median(starts["mock"])
    table.add("start-up to first Metadata (median)", f"{st * 1000:.0f} ms", f"{sm * 1000:.0f} ms", ratio(st, sm))

    with tempfile.TemporaryDirectory(prefix="tidelog-compare-") as tmp:
        log_dir = os.path.join(tmp, "logs")
        tide: Broker = Tidelog(log_dir)
        mock: Broker = Mock()
        brokers = (tide, mock)
        try:
            cases = [(size, codec, acks, batch) for size in (1024, 100) for codec in ("none", "lz4")
                     for acks in ("1", "all") for batch in (65536, 1_000_000)]
            if args.quick:
                cases = [c for c in cases if c[0] == 1024]
            big_topic = ""
            for n, (size, codec, acks, batch) in enumerate(cases):
                name = f"produce {size} B {codec} acks={acks} batch={batch // 1024}K"
                if args.only and args.only not in name:
                    continue
                results: dict[str, Produced] = {}
                for round_, order in enumerate((brokers, brokers[::-1])):  # ABBA
                    topic = f"p{n}" if round_ == 0 else f"p{n}-again"
                    if size == 1024 and codec == "none":
                        big_topic = big_topic or topic
                    for b in order:
                        b.create_topic(topic)
                        run = produce(b, topic, size, codec, acks, batch, 600 if size >= 1024 else 150,
                                      args.seconds)
                        results[b.name] = results[b.name] + run if b.name in results else run
                    if topic != big_topic:
                        for b in brokers:
                            b.delete_topic(topic)
                t, m = results["tidelog"], results["mock"]
                note = (f"CPU s/GB {t.cpu_per_gb:.2f} (sys {t.sys_per_gb:.2f}) vs {m.cpu_per_gb:.2f} "
                        f"(sys {m.sys_per_gb:.2f})")
                if t.errors or m.errors:
                    note += f"; errors {t.errors}/{m.errors}"
                table.add(name, f"{t.mb_s:.0f} MB/s", f"{m.mb_s:.0f} MB/s", ratio(t.mb_s, m.mb_s), note)

            consumed: dict[str, tuple[float, float]] = {}
            for b in brokers:
                b.create_topic("consume")
                # 16 MB: within what the mock keeps per partition, so both serve the same data.
                produce(b, "consume", 1024, "none", "all", 1_000_000, 16, 30)
                consumed[b.name] = consume(b, "consume", args.seconds)
            (tc, tcpu), (mc, mcpu) = consumed["tidelog"], consumed["mock"]
            table.add("consume 1 KiB (re-read from start)", f"{tc:.0f} MB/s", f"{mc:.0f} MB/s", ratio(tc, mc),
                      f"CPU s/GB {tcpu:.2f} vs {mcpu:.2f}")

            # The mock keeps only each partition's tail, so this one is tidelog alone: read a big produced topic
            # from the start (what makes segment pages resident), then the memory figures below.
            if big_topic:
                big, _ = consume(tide, big_topic, args.seconds * 2)
                table.add("consume 1 KiB, a whole produced topic", f"{big:.0f} MB/s", "-", "-", "tidelog only")

            lat: dict[str, tuple[float, float, int]] = {}
            for b in brokers:
                b.create_topic("latency")
                lat[b.name] = latency(b, "latency", 3.0)
            table.add("end-to-end p99 at 1000 msg/s", f"{lat['tidelog'][1]:.2f} ms", f"{lat['mock'][1]:.2f} ms",
                      ratio(lat["tidelog"][1], lat["mock"][1]),
                      f"p50 {lat['tidelog'][0]:.2f} vs {lat['mock'][0]:.2f} ms, {lat['tidelog'][2]} samples")

            mem = {b.name: b.memory() for b in brokers}
            mib = 1024 * 1024
            for key, label in (("VmRSS", "RSS after the run"), ("RssAnon", "  anonymous (Python heap + malloc)"),
                               ("RssFile", "  file-backed (mapped files)"), ("VmHWM", "peak RSS")):
                a, b = mem["tidelog"].get(key, 0), mem["mock"].get(key, 0)
                table.add(label, f"{a / mib:.0f} MiB", f"{b / mib:.0f} MiB", ratio(a, b))
        finally:
            for b in brokers:
                b.stop()
    print(f"load average at the end {load_average()}")


def free_page_reporting() -> str:
    """Whether a virtio-balloon device reports freed guest pages to the host (VIRTIO_BALLOON_F_REPORTING)."""
    for device in Path("/sys/bus/virtio/devices").glob("*"):
        try:
            if (device / "device").read_text().strip() == "0x0005":
                return "on" if (device / "features").read_text()[5:6] == "1" else "off"
        except OSError:
            continue
    return "no balloon device"


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
