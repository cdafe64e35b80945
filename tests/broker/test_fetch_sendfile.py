"""Fetch responses written with sendfile (protocol/file_records.py, broker/frame_stream.py), on a real broker,
real sockets and real segment files: the bytes a client gets are the segment's bytes; a client reading slowly
(its socket buffer full mid-response) still gets the whole response, in order with what follows it; a segment
deleted by retention or swapped out by the cleaner while its bytes wait to be sent still sends those bytes;
TLS connections get the bytes through the transport; read_committed still lists aborted transactions; no
file descriptor outlives its response.

`os.sendfile` is wrapped (same function, called through) only to count what went through it."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from broker_testlib import API_VERSIONS, FETCH, produce
from test_fetch import fetch, fetch_request, partition_data

from tidelog.protocol.messages import request_class, response_class
from tidelog.protocol.record_batch import iter_batches
from tidelog.protocol.records import Record, build_batch, iter_records
from tidelog.storage import TopicPartition
from tidelog.testing import BrokerHandle, KafkaWire


class SendfileCounter:
    def __init__(self) -> None:
        self.calls = 0
        self.bytes = 0
        self.would_block = 0
        self.lock = threading.Lock()

    def reset(self) -> None:
        with self.lock:
            self.calls = self.bytes = self.would_block = 0


@pytest.fixture
def sendfile(monkeypatch: pytest.MonkeyPatch) -> SendfileCounter:
    counter = SendfileCounter()
    real = os.sendfile

    def counting(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        with counter.lock:
            counter.calls += 1
        try:
            sent = real(out_fd, in_fd, offset, count)
        except BlockingIOError:
            with counter.lock:
                counter.would_block += 1
            raise
        with counter.lock:
            counter.bytes += sent
        return sent

    monkeypatch.setattr(os, "sendfile", counting)
    return counter


# file.delete.delay.ms 0: segments deleted by retention or the cleaner are unlinked (and their fds closed)
# as soon as the scheduler runs; the cleaner is driven by the tests (clean_once).
pytestmark = pytest.mark.tidelog(overrides={"log.segment.delete.delay.ms": 0, "log.cleaner.backoff.ms": 3_600_000})


def log_of(broker: BrokerHandle, topic: str) -> Any:
    return broker.state.log_manager.get_log(TopicPartition(topic, 0))


def segment_bytes(broker: BrokerHandle, topic: str, index: int = -1) -> bytes:
    log = log_of(broker, topic)
    segments = broker.call(lambda: list(log.segments))
    segment = segments[index]
    return Path(segment.log_path).read_bytes()[: segment.size]


def append(broker: BrokerHandle, topic: str, records: bytes) -> int:
    return int(broker.call(lambda: log_of(broker, topic).append_as_leader(records).first_offset))


def big_batches(n: int, records: int = 256, value_size: int = 2000, start: int = 0,
                keys: bool = False) -> list[bytes]:
    """n uncompressed batches of ~records * value_size bytes, values unique (random) so byte mix-ups show."""
    out = []
    for b in range(n):
        out.append(bytes(build_batch([
            Record(i, 1_700_000_000_000 + i, b"key%d" % (i % 8) if keys else None,
                   b"%08d" % (start + b * records + i) + os.urandom(value_size // 2).hex().encode()[: value_size - 8])
            for i in range(records)], 0)))
    return out


def fd_links(path_part: str) -> int:
    """Open fds of this process whose target contains `path_part` (a segment file name)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if path_part in os.readlink(f"/proc/self/fd/{fd}"):
                count += 1
        except OSError:
            pass
    return count


class SlowClient(KafkaWire):
    """A raw client whose socket has a tiny receive buffer: the broker's send buffer fills mid-response."""

    def __init__(self, bootstrap: str, rcvbuf: int = 4096) -> None:
        host, _, port = bootstrap.rpartition(":")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)  # before connect: the window follows it
        sock.settimeout(120)
        sock.connect((host, int(port)))
        self.sock = sock
        self.client_id = "slow-reader"
        self.correlation_id = 0

    def read_slowly(self, n: int, chunk: int = 65536, pause: float = 0.0) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            got = self.sock.recv(min(chunk, n - len(buf)))
            if not got:
                raise EOFError(f"closed after {len(buf)} of {n} bytes")
            buf += got
            if pause:
                time.sleep(pause)
        return bytes(buf)

    def read_response(self, api_key: int, version: int, pause: float = 0.0) -> tuple[int, Any]:
        size = struct.unpack(">i", self.read_slowly(4))[0]
        data = self.read_slowly(size, pause=pause)
        (cid,) = struct.unpack_from(">i", data)
        cls = response_class(api_key)
        pos = 4 + (1 if api_key != API_VERSIONS and cls.flexible_version_q(version) else 0)
        return cid, cls[version].decode(data[pos:], version=version)


def consume_values(conf: dict[str, Any], topic: str, count: int) -> list[bytes]:
    """Partition 0 of `topic` read from offset 0 by a confluent-kafka consumer until `count` values (or 60 s)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    consumer = Consumer({**conf, "enable.auto.commit": False})
    consumer.assign([CTP(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        for m in consumer.consume(1000, 1.0):
            assert m.error() is None, m.error()
            got.append(m.value())
    consumer.close()
    return got


def wait_until(cond: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


# --- bytes on the wire are the segment's bytes ---------------------------------------------------------------

@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_fetched_bytes_are_the_segment_file(tidelog_module_broker: BrokerHandle, sendfile: SendfileCounter, version: int) -> None:
    topic = f"sf-exact-{version}"
    tidelog_module_broker.create_topic(topic, 2)
    with KafkaWire(tidelog_module_broker.bootstrap, timeout=120) as client:
        for n in range(5):
            produce(client, topic, bytes(build_batch([Record(i, 1_700_000_000_000, b"k", b"v%d-%d" % (n, i))
                                                      for i in range(50)], 0)))
        for batch in big_batches(2):
            append(tidelog_module_broker, topic, batch)
        expected = segment_bytes(tidelog_module_broker, topic)
        sendfile.reset()
        key: Any = topic
        if version >= 13:
            from broker_testlib import topic_id
            key = topic_id(client, topic)
        # partition 1 is empty: its response piece has no records between the fields of partitions 0 and 1
        response = fetch(client, [(key, 0, 0), (key, 1, 0)], version=version, partition_max_bytes=32 << 20)
        p0, p1 = partition_data(response)
        assert p0.error_code == 0 and bytes(p0.records) == expected
        assert p1.error_code == 0 and not p1.records
        assert sendfile.bytes == len(expected)
        # from the middle of the log, limited in size: still a byte range of the file
        log = log_of(tidelog_module_broker, topic)
        mid = tidelog_module_broker.call(lambda: log.segments.active_segment.translate_offset(150))
        [p] = partition_data(fetch(client, [(key, 0, 150)], version=version, partition_max_bytes=100))
        assert bytes(p.records) == expected[mid.position: mid.position + mid.size]  # min one batch, whole


def test_real_consumers_read_what_was_produced(tidelog_module_broker: BrokerHandle, sendfile: SendfileCounter) -> None:
    from confluent_kafka import Producer
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    topic = "sf-clients"
    tidelog_module_broker.create_topic(topic)
    values = [b"%06d-" % i + os.urandom(300) for i in range(3000)]
    producer = Producer({"bootstrap.servers": tidelog_module_broker.bootstrap, "linger.ms": 20})
    for v in values:
        producer.produce(topic, v, partition=0)
    assert producer.flush(60) == 0
    sendfile.reset()

    assert consume_values({"bootstrap.servers": tidelog_module_broker.bootstrap, "group.id": "sf-confluent"}, topic,
                          len(values)) == values
    assert sendfile.bytes > 0

    sendfile.reset()
    kp = KafkaConsumer(bootstrap_servers=tidelog_module_broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=20_000)
    kp.assign([KTP(topic, 0)])
    kp.seek(KTP(topic, 0), 0)
    got = []
    for m in kp:
        got.append(m.value)
        if len(got) == len(values):
            break
    kp.close()
    assert got == values
    assert sendfile.bytes > 0


# --- a client that reads slowly --------------------------------------------------------------------------------

def test_slow_reader_gets_the_whole_response_in_order(tidelog_module_broker: BrokerHandle, sendfile: SendfileCounter) -> None:
    topic = "sf-slow"
    tidelog_module_broker.create_topic(topic)
    for batch in big_batches(16):  # ~8 MB: far more than the sockets hold
        append(tidelog_module_broker, topic, batch)
    expected = segment_bytes(tidelog_module_broker, topic)
    sendfile.reset()
    with SlowClient(tidelog_module_broker.bootstrap) as slow:
        slow.send(FETCH, 12, fetch_request([(topic, 0, 0)], partition_max_bytes=64 << 20, max_bytes=64 << 20))
        api_cls = request_class(API_VERSIONS)[0]
        slow.send(API_VERSIONS, 0, api_cls())  # pipelined: answered after the fetch, never inside it
        wait_until(lambda: sendfile.would_block > 0)
        # The broker is not blocked by this client: another one is served meanwhile.
        with KafkaWire(tidelog_module_broker.bootstrap, timeout=60) as other:
            [p] = partition_data(fetch(other, [(topic, 0, 0)], partition_max_bytes=1000))
            assert p.error_code == 0 and p.high_watermark == 16 * 256
            other_bytes = len(p.records)
        cid, response = slow.read_response(FETCH, 12, pause=0.0005)
        assert cid == 1
        [p] = partition_data(response)
        assert bytes(p.records) == expected
        cid, versions = slow.read_response(API_VERSIONS, 0)
        assert cid == 2 and versions.error_code == 0
    assert sendfile.bytes == len(expected) + other_bytes


def test_client_gone_mid_response_leaks_no_fd(tidelog_module_broker: BrokerHandle, sendfile: SendfileCounter) -> None:
    topic = "sf-gone"
    tidelog_module_broker.create_topic(topic)
    for batch in big_batches(16):
        append(tidelog_module_broker, topic, batch)
    name = str(log_of(tidelog_module_broker, topic).segments.active_segment.log_path)
    before = fd_links(name)
    assert before == 1  # the segment's own
    sendfile.reset()
    for _ in range(3):
        slow = SlowClient(tidelog_module_broker.bootstrap)
        slow.send(FETCH, 12, fetch_request([(topic, 0, 0)], partition_max_bytes=64 << 20, max_bytes=64 << 20))
        wait_until(lambda: sendfile.would_block > 0)
        sendfile.reset()
        slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
        slow.close()
    wait_until(lambda: fd_links(name) == before)


def test_no_fd_leak_over_many_fetches(tidelog_module_broker: BrokerHandle) -> None:
    topic = "sf-fds"
    tidelog_module_broker.create_topic(topic, 2)
    with KafkaWire(tidelog_module_broker.bootstrap, timeout=120) as client:
        for n in range(20):
            produce(client, topic, bytes(build_batch([Record(i, 1_700_000_000_000, b"k", b"v%d" % i)
                                                      for i in range(20)], 0)), partition=n % 2)
        name = str(log_of(tidelog_module_broker, topic).segments.active_segment.log_path)
        all_fds = len(os.listdir("/proc/self/fd"))
        for i in range(300):
            offset = i % 201  # 200 records per partition: 200 is the high watermark (nothing to read)
            isolation = i % 2
            [p0, p1] = partition_data(fetch(client, [(topic, 0, offset), (topic, 1, offset)],
                                            isolation_level=isolation, partition_max_bytes=200 + i * 10))
            assert p0.error_code == 0 and p1.error_code == 0
        # out of range, a partition with nothing new (HW), a sessioned fetch
        [p] = partition_data(fetch(client, [(topic, 0, 10_000)]))
        assert p.error_code == 1  # OFFSET_OUT_OF_RANGE
        [p] = partition_data(fetch(client, [(topic, 0, 200)]))
        assert not p.records
        response = fetch(client, [(topic, 0, 0)], version=12, session_id=0, session_epoch=0)
        session = response.session_id
        assert session != 0
        for epoch in range(1, 20):  # incremental: the unchanged partition's read is dropped from the response
            fetch(client, [], version=12, session_id=session, session_epoch=epoch)
        assert fd_links(name) == 1
        # a fetch parked for more bytes than there are holds no slice (it reads again when it wakes)
        client.send(FETCH, 12, fetch_request([(topic, 0, 0)], min_bytes=1 << 30, max_wait_ms=1000))
        time.sleep(0.4)
        assert fd_links(name) == 1
        _, response = client.receive(FETCH, 12)
        assert partition_data(response)[0].records  # answered at max_wait with what there is
        assert fd_links(name) == 1
        assert len(os.listdir("/proc/self/fd")) <= all_fds + 2  # other threads may hold a file open briefly


# --- the segment goes away while its bytes wait to be sent -----------------------------------------------------

def _stalled_fetch(broker: BrokerHandle, topic: str, sendfile: SendfileCounter) -> SlowClient:
    slow = SlowClient(broker.bootstrap)
    sendfile.reset()
    slow.send(FETCH, 12, fetch_request([(topic, 0, 0)], partition_max_bytes=64 << 20, max_bytes=64 << 20))
    wait_until(lambda: sendfile.would_block > 0)
    return slow


def test_retention_deletes_the_segment_while_its_bytes_are_sent(tidelog_module_broker: BrokerHandle,
                                                                sendfile: SendfileCounter) -> None:
    topic = "sf-retention"
    tidelog_module_broker.create_topic(topic)
    for batch in big_batches(16):
        append(tidelog_module_broker, topic, batch)
    log = log_of(tidelog_module_broker, topic)
    tidelog_module_broker.call(log.roll)
    append(tidelog_module_broker, topic, big_batches(1, records=4)[0])
    first = tidelog_module_broker.call(lambda: log.segments.first_segment)
    expected = segment_bytes(tidelog_module_broker, topic, 0)
    with _stalled_fetch(tidelog_module_broker, topic, sendfile) as slow:
        assert tidelog_module_broker.call(lambda: log.delete_segments([first], "test")) == 1
        tidelog_module_broker.call(tidelog_module_broker.state.log_manager.run_scheduled_deletions)
        assert first.is_closed and not Path(first.log_path).exists()
        assert log.log_start_offset == 16 * 256
        _, response = slow.read_response(FETCH, 12, pause=0.0005)
        [p] = partition_data(response)
        assert p.error_code == 0 and bytes(p.records) == expected
        # the next fetch at 0 is out of range, as for any deleted offset
        slow.send(FETCH, 12, fetch_request([(topic, 0, 0)]))
        _, response = slow.read_response(FETCH, 12)
        assert partition_data(response)[0].error_code == 1
    assert fd_links(str(first.log_path)) == 0


def test_cleaner_swaps_the_segment_while_its_bytes_are_sent(tidelog_module_broker: BrokerHandle,
                                                            sendfile: SendfileCounter) -> None:
    topic = "sf-compacted"
    tidelog_module_broker.create_topic(topic, 1, configs={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                                                  "segment.bytes": str(64 << 20)})
    for batch in big_batches(16, keys=True):  # 8 keys per batch: compaction keeps the last 8 records
        append(tidelog_module_broker, topic, batch)
    log = log_of(tidelog_module_broker, topic)
    tidelog_module_broker.call(log.roll)
    append(tidelog_module_broker, topic, big_batches(1, records=4, keys=True)[0])
    first = tidelog_module_broker.call(lambda: log.segments.first_segment)
    expected = segment_bytes(tidelog_module_broker, topic, 0)
    with _stalled_fetch(tidelog_module_broker, topic, sendfile) as slow:
        assert tidelog_module_broker.state.cleaner.clean_once()
        tidelog_module_broker.call(tidelog_module_broker.state.log_manager.run_scheduled_deletions)
        cleaned = tidelog_module_broker.call(lambda: log.segments.first_segment)
        assert cleaned is not first and cleaned.size < first.size and first.is_closed
        _, response = slow.read_response(FETCH, 12, pause=0.0005)
        [p] = partition_data(response)
        assert p.error_code == 0 and bytes(p.records) == expected  # the bytes as they were when read
        # a new fetch reads the cleaned segment
        slow.send(FETCH, 12, fetch_request([(topic, 0, 0)], partition_max_bytes=64 << 20))
        _, response = slow.read_response(FETCH, 12)
        [p] = partition_data(response)
        assert bytes(p.records) == segment_bytes(tidelog_module_broker, topic, 0)


# --- read_committed --------------------------------------------------------------------------------------------

def test_read_committed_lists_aborted_txns_of_a_trailing_partial_batch(tidelog_module_broker: BrokerHandle) -> None:
    topic = "sf-rc"
    tidelog_module_broker.create_topic(topic)
    now = int(time.time() * 1000)
    plain = bytes(build_batch([Record(0, now, b"p", b"plain")], 0))
    txn = bytes(build_batch([Record(i, now, b"t", b"x" * 500) for i in range(4)], 0, producer_id=200,
                            producer_epoch=0, base_sequence=0, is_transactional=True))
    assert append(tidelog_module_broker, topic, plain) == 0
    assert append(tidelog_module_broker, topic, txn) == 1
    log = log_of(tidelog_module_broker, topic)
    assert tidelog_module_broker.call(lambda: log.append_control_marker(200, 0, 0, False).first_offset) == 5
    with KafkaWire(tidelog_module_broker.bootstrap, timeout=60) as client:
        # the first batch and the whole header of the aborted transaction's batch: listed
        [p] = partition_data(fetch(client, [(topic, 0, 0)], isolation_level=1, partition_max_bytes=len(plain) + 61))
        assert len(p.records) == len(plain) + 61
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(200, 1)]
        # a cut inside that header: Kafka's bound (LocalLog.addAbortedTransactions: the first offset-index entry
        # at or after the cut, here none, so the log end) lists it too; no record of it is returned to skip
        [p] = partition_data(fetch(client, [(topic, 0, 0)], isolation_level=1, partition_max_bytes=len(plain) + 30))
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(200, 1)]
        assert len(p.records) == len(plain) + 30  # the first batch and a part of the header after it
        # everything: the aborted transaction, and its records are there for the client to skip
        [p] = partition_data(fetch(client, [(topic, 0, 0)], isolation_level=1))
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(200, 1)]
        data = bytes(p.records)
        assert [h.base_offset for _, h in iter_batches(data)] == [0, 1, 5]
        assert [r.value for pos, h in iter_batches(data) if h.base_offset == 1
                for r in iter_records(data, pos)] == [b"x" * 500] * 4


# --- TLS -------------------------------------------------------------------------------------------------------

def test_tls_listener_gets_the_bytes_through_the_transport(sendfile: SendfileCounter) -> None:
    from confluent_kafka import Producer

    from tidelog.testing import run_secure_broker

    with run_secure_broker() as secure:
        conf = secure.confluent_config("SSL")
        topic = "sf-tls"
        values = [b"%06d-" % i + os.urandom(500) for i in range(2000)]
        producer = Producer({**conf, "linger.ms": 20})
        for v in values:
            producer.produce(topic, v, partition=0)
        assert producer.flush(60) == 0
        sendfile.reset()
        assert consume_values({**conf, "group.id": "sf-tls"}, topic, len(values)) == values
        assert sendfile.calls == 0  # never written behind the TLS transport's back


# --- socket.send.buffer.bytes ------------------------------------------------------------------------------------

def _server_side_sndbuf(client: socket.socket, option: int = socket.SO_SNDBUF) -> int:
    """SO_SNDBUF (or `option`) of the broker's end of `client`'s connection (the broker runs in this process)."""
    wanted = client.getsockname()
    for fd in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            with socket.socket(fileno=os.dup(int(fd))) as s:
                if s.type == socket.SOCK_STREAM and s.getpeername() == wanted:
                    return s.getsockopt(socket.SOL_SOCKET, option)
        except OSError:
            continue
    raise AssertionError("broker side of the connection not found")


@pytest.mark.parametrize("size", [65536, -1])
def test_socket_send_buffer_bytes_is_applied(size: int, tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """Kafka's Acceptor sets SO_SNDBUF of accepted sockets to socket.send.buffer.bytes (-1: the OS default)."""
    b = tidelog_broker_factory(overrides={"socket.send.buffer.bytes": size})
    with KafkaWire(b.bootstrap) as client:
        client.request(API_VERSIONS, 0, request_class(API_VERSIONS)[0]())
        got = _server_side_sndbuf(client.sock)
        if size > 0:
            assert got == 2 * size  # Linux doubles the value for its bookkeeping
        else:
            assert got != 2 * 102400


@pytest.mark.parametrize("size", [40_000, None])  # 2 x 65536 would be tcp_rmem's usual initial size
def test_socket_receive_buffer_bytes_is_applied(size: int | None,
                                               tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """socket.receive.buffer.bytes sets SO_RCVBUF of the broker's sockets (Kafka sets it on its server socket, which
    accepted ones inherit); tidelog's default (-1) leaves Linux's autotuning, which grows the buffer past any
    fixed default once a producer sends."""
    overrides = {} if size is None else {"socket.receive.buffer.bytes": size}
    b = tidelog_broker_factory(overrides=overrides)
    with KafkaWire(b.bootstrap) as client:
        client.request(API_VERSIONS, 0, request_class(API_VERSIONS)[0]())
        got = _server_side_sndbuf(client.sock, socket.SO_RCVBUF)
        if size is not None:
            assert got == 2 * size  # Linux doubles the value for its bookkeeping
        else:
            with open("/proc/sys/net/ipv4/tcp_rmem") as f:
                assert got == int(f.read().split()[1])  # untouched: the kernel's initial autotuned size
