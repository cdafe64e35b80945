"""Request framing through broker/frame_stream.py, on a real socket: frames split at every byte, many frames in
one send, frames bigger than the staging buffer (read into their own buffer), pipelined Produce requests whose
responses go out together (in order), and a request cut off by EOF."""

from __future__ import annotations

import logging
import socket
import struct
import time

import pytest

from tests.broker.broker_testlib import FETCH, PRODUCE, batch, produce_request
from tidelog.broker.frame_stream import STAGING_BYTES
from tidelog.protocol.messages import request_class
from tidelog.protocol.record_batch import iter_batches
from tidelog.protocol.records import iter_records
from tidelog.testing import BrokerHandle, KafkaWire

PRODUCE_V = 9


def fetch_request(topic: str, offset: int, max_bytes: int = 64 << 20) -> object:
    cls = request_class(FETCH)[12]
    T = cls.FetchTopic
    return cls(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=0, session_id=0,
               session_epoch=-1, topics=[T(topic=topic, partitions=[T.FetchPartition(
                   partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                   log_start_offset=-1, partition_max_bytes=max_bytes)])], forgotten_topics_data=[], rack_id="")


def values_at(wire: KafkaWire, topic: str, offset: int = 0) -> list[bytes]:
    response = wire.request(FETCH, 12, fetch_request(topic, offset))
    data = response.responses[0].partitions[0].records or b""
    out: list[bytes] = []
    for pos, header in iter_batches(data):
        out.extend(r.value or b"" for r in iter_records(memoryview(data)[pos:pos + header.size]))
    return out


def receive_produce(wire: KafkaWire) -> tuple[int, int, int]:
    """(correlation id, error code, base offset) of one Produce response."""
    correlation_id, response = wire.receive(PRODUCE, PRODUCE_V)
    p = response.responses[0].partition_responses[0]
    return correlation_id, p.error_code, p.base_offset


def test_a_request_sent_one_byte_at_a_time(tidelog_module_broker: BrokerHandle) -> None:
    tidelog_module_broker.create_topic("trickle")
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        wire.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        frame = wire.frame(PRODUCE, PRODUCE_V, produce_request("trickle", 0, batch(3), -1, PRODUCE_V))
        for i in range(len(frame)):
            wire.sock.sendall(frame[i:i + 1])
            if i % 50 == 0:
                time.sleep(0.001)  # separate segments, so the broker sees partial frames
        assert receive_produce(wire)[1:] == (0, 0)
        assert values_at(wire, "trickle") == [b"v0", b"v1", b"v2"]  # batch() numbers the values


def test_many_pipelined_requests_in_one_send_answered_in_order(tidelog_module_broker: BrokerHandle) -> None:
    tidelog_module_broker.create_topic("pipelined")
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        frames = [wire.frame(PRODUCE, PRODUCE_V, produce_request("pipelined", 0, batch(1, value=f"m{i}".encode()),
                                                                 -1, PRODUCE_V)) for i in range(200)]
        wire.sock.sendall(b"".join(frames))
        answers = [receive_produce(wire) for _ in frames]
        assert [c for c, _, _ in answers] == list(range(1, 201))  # in request order
        assert [(e, o) for _, e, o in answers] == [(0, i) for i in range(200)]
        assert values_at(wire, "pipelined") == [f"m{i}0".encode() for i in range(200)]


def test_gathered_produce_answers_are_not_held_behind_a_long_polling_fetch(tidelog_module_broker: BrokerHandle) -> None:
    """Answers to pipelined Produce requests go out together, but never wait for a request that may block: here a
    Fetch that is only answered once data arrives on another topic, which the test writes after it has read every
    Produce answer (held back, they would never come and the read would time out)."""
    tidelog_module_broker.create_topic("gathered")
    tidelog_module_broker.create_topic("awaited")
    with KafkaWire(tidelog_module_broker.bootstrap, timeout=20) as wire:
        produces = [wire.frame(PRODUCE, PRODUCE_V, produce_request("gathered", 0, batch(1, value=f"g{i}".encode()),
                                                                   1, PRODUCE_V)) for i in range(20)]
        waiting = fetch_request("awaited", 0)
        waiting.max_wait_ms, waiting.min_bytes = 600_000, 1  # type: ignore[attr-defined]
        fetch = wire.frame(FETCH, 12, waiting)
        wire.sock.sendall(b"".join(produces) + fetch)
        assert [receive_produce(wire)[1:] for _ in produces] == [(0, i) for i in range(20)]
        with KafkaWire(tidelog_module_broker.bootstrap) as other:
            other.sock.sendall(other.frame(PRODUCE, PRODUCE_V, produce_request("awaited", 0, batch(1), 1, PRODUCE_V)))
            assert receive_produce(other)[1:] == (0, 0)
        correlation_id, response = wire.receive(FETCH, 12)
        assert correlation_id == len(produces) + 1
        assert response.responses[0].partitions[0].high_watermark == 1


def test_frames_larger_than_the_staging_buffer(tidelog_module_broker: BrokerHandle) -> None:
    tidelog_module_broker.create_topic("big", 1, configs={"max.message.bytes": str(8 << 20)})
    big_value = bytes(range(256)) * (3 * STAGING_BYTES // 256)  # one record of 3x the staging buffer
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        small = wire.frame(PRODUCE, PRODUCE_V, produce_request("big", 0, batch(1, value=b"before"), -1, PRODUCE_V))
        large = wire.frame(PRODUCE, PRODUCE_V, produce_request("big", 0, batch(1, value=big_value), -1, PRODUCE_V))
        after = wire.frame(PRODUCE, PRODUCE_V, produce_request("big", 0, batch(1, value=b"after"), -1, PRODUCE_V))
        medium_value = bytes(range(256)) * (STAGING_BYTES // 3 // 256)  # above the initial staging size
        medium = [wire.frame(PRODUCE, PRODUCE_V, produce_request("big", 0, batch(1, value=medium_value), -1,
                                                                PRODUCE_V)) for _ in range(4)]
        # The large frame starts inside the same send as a small one and ends with the next one; then medium
        # frames that straddle the staging buffer's end.
        wire.sock.sendall(small + large + after + b"".join(medium))
        assert [receive_produce(wire)[1:] for _ in range(7)] == [(0, i) for i in range(7)]
        assert values_at(wire, "big") == [b"before0", big_value + b"0", b"after0"] + [medium_value + b"0"] * 4


def test_truncated_frame_at_eof_is_logged_and_the_broker_keeps_serving(tidelog_module_broker: BrokerHandle,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tidelog.broker.connection"), \
            socket.create_connection(("127.0.0.1", tidelog_module_broker.port), timeout=60) as sock:
        sock.sendall(struct.pack(">i", 1000) + b"\x00" * 10)
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(60)
        assert sock.recv(1) == b""
        deadline = time.monotonic() + 30
        while not any("truncated request" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, "no log line for the truncated request"
            time.sleep(0.01)
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        assert wire.request(3, 1, request_class(3)[1](topics=None)).controller_id == tidelog_module_broker.state.node_id


# --- the staging buffer's rules, on a real socket and uvloop (the broker's loop) without the broker -------------

def _serve_frames(payloads: list[bytes], hold: bool, chunk: int,
                  lockstep: bool = False) -> tuple[list[bytes], list[memoryview], set[int]]:
    """Send `payloads` as size-prefixed frames in sends of `chunk` bytes to a FrameStream; its reader keeps every
    frame view (`hold`) or drops each at once. `lockstep`: each frame is sent once the one before was read.
    Returns (each frame's bytes as read when it arrived, the views kept, the ids of the staging buffers used)."""
    import asyncio

    import uvloop

    from tidelog.broker.frame_stream import FrameStream

    wire = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    seen: list[bytes] = []
    kept: list[memoryview] = []
    staging: set[int] = set()

    async def main() -> None:
        done = asyncio.get_running_loop().create_future()
        read_one = asyncio.Event()

        async def on_open(stream: FrameStream) -> None:
            for _ in payloads:
                frame = await stream.read_frame()
                assert frame is not None
                staging.add(id(stream._buf))
                seen.append(bytes(frame))
                if hold:
                    kept.append(frame)
                del frame
                read_one.set()
                await asyncio.sleep(0)  # let more bytes arrive behind the frames held
            stream.close()
            done.set_result(None)

        server = await asyncio.get_running_loop().create_server(lambda: FrameStream(16 << 20, on_open),
                                                                "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        if lockstep:
            for p in payloads:
                read_one.clear()
                writer.write(struct.pack(">i", len(p)) + p)
                await asyncio.wait_for(read_one.wait(), 60)
        else:
            for i in range(0, len(wire), chunk):
                writer.write(wire[i:i + chunk])
                await writer.drain()
        await asyncio.wait_for(done, 60)
        writer.close()
        server.close()

    loop = uvloop.new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return seen, kept, staging


def _mixed_payloads() -> list[bytes]:
    """Frames of every kind the rules treat apart: small ones, ones that straddle the staging buffer's end, ones
    larger than it, runs of large ones (read after a prefix-only read), each with distinct bytes."""
    sizes = [10, 3, 0, 5000, 70_000, 70_000, 70_000, 70_000, 1 << 20, (1 << 20) + 7, 300_000, 17, 65_000, 9,
             2 * STAGING_BYTES, 4, 120_000, 120_000, 120_000]
    cycle = bytes(range(251)) * (max(sizes) // 251 + 2)
    return [cycle[i:i + n] for i, n in enumerate(sizes)]  # frame i's byte j is (i + j) % 251


@pytest.mark.parametrize("chunk", [1, 4093, 65_536, 1 << 22])
def test_frames_handed_out_keep_their_bytes_while_later_ones_arrive(chunk: int) -> None:
    """Frames are views of the staging buffer: bytes received later never overwrite a frame still held (here all
    of them are held to the end), whatever the sizes and however the sends split them."""
    payloads = _mixed_payloads()
    if chunk == 1:
        payloads = payloads[:4] + [payloads[4][:3000]]  # a byte at a time is slow: small frames only
    seen, kept, _ = _serve_frames(payloads, hold=True, chunk=chunk)
    assert seen == payloads
    assert [bytes(f) for f in kept] == payloads  # unchanged since they arrived
    assert all(not f.readonly for f in kept)  # writable: LogValidator stamps offsets in place


def test_the_staging_buffer_is_reused_once_no_frame_views_it() -> None:
    """Frames dropped as soon as they are handled, each sent once the one before was read: one staging buffer
    takes all of them (no buffer per frame, no copy; 400 frames of 700 B would fill 17 buffers of 16 KiB)."""
    payloads = [bytes([i % 256]) * 700 for i in range(400)]
    seen, _, staging = _serve_frames(payloads, hold=False, chunk=0, lockstep=True)
    assert seen == payloads
    assert len(staging) == 1
