"""What the test handle of `tidelog.testing.run_broker()` offers beyond addresses: fault controls and record
helpers. Kept apart from testing.py so each stays small; users import everything from `tidelog.testing`.

Fault controls (`BrokerFaultsMixin`), each returning once the broker has done it:

* `inject_errors(api, errors, topic=None)`, `set_latency(ms, api=None)`, `clear_faults()`: see
  `tidelog.broker.faults.FaultInjector`.
* `pause()` / `resume()`: the listener closes and every connection is dropped, so clients see a down broker
  (connection refused); `resume()` listens on the same port again with all state kept (nothing is reloaded).
* `drop_connections() -> int`: close every client connection now (the listener stays open).
* `restart(overrides=None)`: a clean shutdown (flush, checkpoints) and a start on the same port and log
  directory, with `overrides` applied to the settings if given; `.state`
  and `.server` are new objects afterwards, the FaultInjector (and what is injected in it) stays.

Record helpers (`RecordsMixin`) read the broker's logs directly (no consumer, no group):
`records(topic)`, `wait_for_records(topic, n)`, `committed_offsets(group)`, `create_topic(name, spec)`, and
`produce(topic, records, partition)`, which writes through a Produce request on a real connection.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, NamedTuple, TypeVar

from tidelog.protocol.messages import request_class
from tidelog.protocol.record_batch import iter_batches
from tidelog.protocol.records import Record, build_batch, iter_records
from tidelog.storage import TopicPartition

T = TypeVar("T")
WAIT_TIMEOUT_S = 30.0
PRODUCE, PRODUCE_VERSION = 0, 9


class TopicRecord(NamedTuple):
    """One record as a consumer would see it."""

    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class BrokerFaultsMixin:
    faults: Any
    server: Any

    def run_coroutine(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:  # pragma: no cover
        raise NotImplementedError

    # Loop-side implementations, provided by the handle.
    async def _pause(self) -> None:  # pragma: no cover
        raise NotImplementedError

    async def _resume(self) -> None:  # pragma: no cover
        raise NotImplementedError

    async def _drop_connections(self) -> int:  # pragma: no cover
        raise NotImplementedError

    async def _restart(self, overrides: Mapping[str, Any] | None = None) -> None:  # pragma: no cover
        raise NotImplementedError

    def inject_errors(self, api: str | int, errors: list[str | int] | tuple[str | int, ...],
                      topic: str | None = None) -> None:
        """The next len(errors) requests of `api` are answered with these errors, in order, and not applied."""
        self.faults.inject_errors(api, errors, topic)

    def inject_handler_exceptions(self, api: str | int, count: int = 1) -> None:
        """The next `count` requests of `api` fail inside their handler (an unexpected exception): the broker
        answers them with the API's error response, UNKNOWN_SERVER_ERROR (Kafka's KafkaApis.handleError)."""
        self.faults.inject_handler_exceptions(api, count)

    def set_latency(self, ms: int, api: str | int | None = None) -> None:
        """Delay every response (or those of `api`) by `ms` milliseconds."""
        self.faults.set_latency(ms, api)

    def clear_faults(self) -> None:
        self.faults.clear()

    def pause(self) -> None:
        self.run_coroutine(self._pause())

    def resume(self) -> None:
        self.run_coroutine(self._resume())

    def drop_connections(self) -> int:
        return self.run_coroutine(self._drop_connections())

    def restart(self, overrides: Mapping[str, Any] | None = None) -> None:
        """A clean shutdown and a start on the same port and log dir; `overrides` change settings for the new
        start (e.g. a static config that differs from the one the data dir was first started with)."""
        self.run_coroutine(self._restart(overrides))


class ProcessFaultsMixin:
    """The fault controls of `BrokerFaultsMixin` for a broker subprocess, over its loopback control channel
    (tidelog/broker/fault_control.py): one short connection per call."""

    host: str
    control_port: int | None

    def _control(self, op: str, **arguments: Any) -> Any:
        if self.control_port is None:
            raise RuntimeError("this BrokerProcess was started with fault_control=False")
        with socket.create_connection((self.host, self.control_port), timeout=WAIT_TIMEOUT_S) as sock:
            sock.sendall(json.dumps({"op": op, **arguments}).encode() + b"\n")
            with sock.makefile("rb") as answers:
                answer = json.loads(answers.readline())
        if not answer["ok"]:
            raise RuntimeError(f"broker refused {op}: {answer['error']}")
        return answer["result"]

    def inject_errors(self, api: str | int, errors: list[str | int] | tuple[str | int, ...],
                      topic: str | None = None) -> None:
        self._control("inject_errors", api=api, errors=list(errors), topic=topic)

    def inject_handler_exceptions(self, api: str | int, count: int = 1) -> None:
        self._control("inject_handler_exceptions", api=api, count=count)

    def set_latency(self, ms: int, api: str | int | None = None) -> None:
        self._control("set_latency", ms=ms, api=api)

    def clear_faults(self) -> None:
        self._control("clear_faults")

    def pending_errors(self, api: str | int) -> int:
        return int(self._control("pending_errors", api=api))

    def pause(self) -> None:
        self._control("pause")

    def resume(self) -> None:
        self._control("resume")

    def drop_connections(self) -> int:
        return int(self._control("drop_connections"))


def join_warm_up_threads(timeout: float = 60.0) -> None:
    """Server.start's warm-up thread imports handler classes in the background: wait for it, so a test
    session never ends with a broker thread still running."""
    for thread in threading.enumerate():
        if thread.name == "tidelog-warm-up" and thread is not threading.current_thread():
            thread.join(timeout)


class RecordsMixin:
    state: Any

    def call(self, fn: Callable[[], T], timeout: float = 60.0) -> T:  # pragma: no cover
        raise NotImplementedError

    def wire(self) -> Any:  # pragma: no cover - a KafkaWire on the broker, provided by the handle
        raise NotImplementedError

    def produce(self, topic: str, records: Iterable[bytes | None | tuple[bytes | None, bytes | None]],
                partition: int = 0, timestamp: int | None = None) -> int:
        """Write `records` (values, or (key, value) pairs) to one partition as one batch through a Produce
        request on a real connection (acks=all); returns the batch's base offset, AssertionError if refused."""
        ts = int(time.time() * 1000) if timestamp is None else timestamp
        pairs = [r if isinstance(r, tuple) else (None, r) for r in records]
        batch = build_batch([Record(i, ts, k, v) for i, (k, v) in enumerate(pairs)], 0)
        cls = request_class(PRODUCE)[PRODUCE_VERSION]
        data = cls.TopicProduceData(name=topic, partition_data=[
            cls.TopicProduceData.PartitionProduceData(index=partition, records=bytes(batch))])
        with self.wire() as wire:
            response = wire.request(PRODUCE, PRODUCE_VERSION, cls(transactional_id=None, acks=-1,
                                                                   timeout_ms=30_000, topic_data=[data]))
        [answer] = response.responses[0].partition_responses
        if answer.error_code:
            raise AssertionError(f"{topic}-{partition}: produce refused with error {answer.error_code}")
        return int(answer.base_offset)

    def create_topic(self, name: str, spec: int | Mapping[str, Any] = 1, *,
                     configs: Mapping[str, Any] | None = None) -> bytes:
        """Create `name` and return its topic id (16 bytes): `spec` is the partition count or {"partitions": n,
        "configs": {name: value}}; `configs` adds topic configs (`create_topic("t", 3, configs={...})`)."""
        if isinstance(spec, int):
            partitions, merged = spec, {}
        else:
            partitions = int(spec.get("partitions", 1))
            merged = dict(spec.get("configs", {}))
        merged.update(configs or {})
        info = self.state.topics.create_topic(name, partitions, 1, {k: str(v) for k, v in merged.items()})
        return bytes(info.topic_id)

    def records(self, topic: str, partition: int | None = None) -> list[TopicRecord]:
        """Every record of `topic` (or one partition) up to the high watermark, ordered by partition then
        offset; control records (transaction markers) are left out."""
        info = self.state.topics.get(topic)
        if info is None:
            return []
        out: list[TopicRecord] = []
        for p in range(info.partitions) if partition is None else [partition]:
            log = self.state.topics.log(TopicPartition(topic, p))
            if log is None:
                continue
            offset, end = log.log_start_offset, log.high_watermark
            while offset < end:
                data = bytes(log.read(offset, 1 << 20, end, True))
                if not data:
                    break
                for pos, header in iter_batches(data):
                    if not header.is_control:
                        out.extend(TopicRecord(p, r.offset, r.timestamp, r.key, r.value, r.headers)
                                   for r in iter_records(data, pos) if r.offset >= offset)
                    offset = max(offset, header.next_offset)
        return out

    def wait_for_records(self, topic: str, count: int, timeout: float = WAIT_TIMEOUT_S,
                         partition: int | None = None) -> list[TopicRecord]:
        """The records of `topic` once there are at least `count`; AssertionError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.records(topic, partition)
            if len(found) >= count:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: {len(found)} records after {timeout} s, expected {count}")
            time.sleep(0.02)

    def committed_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """{(topic, partition): committed offset} of a consumer group ({} for an unknown group)."""
        groups = self.state.groups
        if groups is None:
            return {}
        _error, offsets = self.call(lambda: groups.fetch_offsets(group, None))  # the coordinator's thread
        return {(tp.topic, tp.partition): o.offset for tp, o in sorted(offsets.items()) if o is not None}
