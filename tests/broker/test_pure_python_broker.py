"""A machine without a C compiler: `tidelog serve` with TIDELOG_PURE_PYTHON=1 loads none of the optional C
accelerators (record walk, batch check, Produce codec) and still serves real clients: produce of every batch shape
the fast lanes take (uncompressed and lz4) and a corrupt batch refused, read back byte for byte."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.records import Record, build_batch
from tidelog.testing import BrokerProcess

PROBE = """
from tidelog.protocol import frame, produce_codec, record_walk
print(produce_codec._accel, frame._accel, record_walk._accelerator, record_walk.check_batch)
"""


def _raw_produce(bootstrap: str, topic: str, records: bytes) -> int:
    """One Produce v9 request with `records` as partition 0's batch; its error code."""
    from tidelog.protocol.wire import array_length_bytes, string_bytes

    body = (struct.pack(">hhih", 0, 9, 7, 3) + b"raw" + b"\x00" + string_bytes(None, True)
            + struct.pack(">hi", -1, 30_000) + array_length_bytes(1, True) + string_bytes(topic, True)
            + array_length_bytes(1, True) + struct.pack(">i", 0))
    n, length = len(records) + 1, b""
    while n > 0x7F:
        length += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    body += length + bytes([n]) + records + b"\x00\x00\x00"
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(65536)
            assert chunk, "the broker closed the connection"
            data += chunk
    # size, correlation id, header tags, topics (1), name, partitions (1), index, then the error code
    pos = 4 + 4 + 1 + 1
    pos += 1 + data[pos] - 1
    pos += 1 + 4
    return int(struct.unpack_from(">h", data, pos)[0])


def test_a_broker_without_the_c_accelerators_serves_clients(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = dict(os.environ, TIDELOG_PURE_PYTHON="1")
    probe = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    assert probe.stdout.split() == ["None", "None", "None", "None"]

    with BrokerProcess(tmp_path / "logs", env=env, fault_control=False) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(30)
        sent: list[bytes] = []
        for codec in ("none", "lz4"):
            producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                                 "linger.ms": 20, "batch.size": 65536})
            for i in range(300):
                value = f"{codec}-{i}-".encode() * 20
                producer.produce("plain", value=value, partition=0)
                sent.append(value)
            assert producer.flush(30) == 0

        # A batch whose CRC does not match is refused (LogValidator, pure Python), nothing of it is stored.
        bad = bytearray(build_batch([Record(0, 1_700_000_000_000, b"k", b"v")], 0))
        bad[-1] ^= 0xFF
        assert _raw_produce(broker.bootstrap, "plain", bytes(bad)) == ErrorCode.CORRUPT_MESSAGE

        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "pure", "enable.auto.commit": False})
        consumer.assign([TopicPartition("plain", 0, 0)])
        got: list[bytes] = []
        while len(got) < len(sent):
            message = consumer.poll(10)
            assert message is not None, f"only {len(got)} of {len(sent)} records came back"
            assert message.error() is None
            got.append(message.value())
        consumer.close()
        assert got == sent
