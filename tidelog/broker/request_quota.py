"""Request quotas (`request_percentage`, KIP-124): Kafka's ClientRequestQuotaManager.

Kafka counts the time its request handler (and network) threads spend on a client's requests, as a percentage
of one thread's time: `request_percentage = 25` lets an entity keep one thread busy a quarter of the time. tidelog
has no I/O thread pool; its one request handler thread is the event loop. So the time recorded for a request is
the wall-clock time the event loop spent on it: decoding it and every step of its handler coroutine (timed by
`timed`, which drives the coroutine, with the perf counter; the windows and throttle times run on the broker's
injectable Clock), not the time the handler spent suspended (a Fetch long-poll, an fsync on a
worker thread), just as Kafka's `requestThreadTimeNanos` leaves out the time a request waits in a purgatory.
Wall-clock rather than CPU time because Kafka measures wall-clock (`Time.nanoseconds`): a handler that blocks the
thread (a synchronous disk write) keeps every other client waiting and is charged for it. Encoding the response
is charged afterwards without throttling (Kafka's `recordNetworkThreadTimeCallback`, `recordNoThrottle`).

The recorded value is `nanos * 100 / 1e9` in the same windowed Rate as the byte rates, so the rate is a
percentage; the quota is `request_percentage` (Kafka multiplies by nothing: the percentage is of one thread).
Over quota, the throttle time is Kafka's QuotaUtils.throttleTime bounded by one window
(`quota.window.size.seconds`, ClientRequestQuotaManager.maxThrottleTimeMs). Requests Kafka never hands to
KafkaApis (SASL handshake/authenticate and the ApiVersions before authentication, answered by the
SaslServerAuthenticator) are recorded as exempt (`exempt-request-time`); nothing is measured at all until some
entity has a `request_percentage` (Kafka's `quotasEnabled`).
"""

from __future__ import annotations

import threading
import time
import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

from tidelog.broker.quotas import REQUEST_PERCENTAGE, ClientQuotaManager, ClientQuotaStore, WindowedRate
from tidelog.clock import Clock

T = TypeVar("T")

NANOS_TO_PERCENTAGE = 100.0 / 1e9  # Kafka's ClientRequestQuotaManager.NanosToPercentagePerSecond


class LoopTime:
    """The event-loop time spent on one request, in nanoseconds."""

    __slots__ = ("nanos",)

    def __init__(self) -> None:
        self.nanos = 0


@types.coroutine
def timed(awaitable: Awaitable[T], spent: LoopTime,
          clock: Callable[[], int] = time.perf_counter_ns) -> Generator[Any, Any, T]:
    """Await `awaitable`, adding the wall-clock time of each of its steps (the time it holds the event loop) to
    `spent`; the time it is suspended is not counted. Delegates sends, throws and close as `await` does.
    `clock` measures work done, in nanoseconds (the quota's windows run on the broker's injectable Clock)."""
    coro = awaitable.__await__()
    value: Any = None
    error: BaseException | None = None
    while True:
        start = clock()
        try:
            future = coro.send(value) if error is None else coro.throw(error)
        except StopIteration as done:  # re-raised inside a generator it would become a RuntimeError (PEP 479)
            spent.nanos += clock() - start
            return done.value  # type: ignore[no-any-return]
        except BaseException:
            spent.nanos += clock() - start
            raise
        spent.nanos += clock() - start
        error = None
        try:
            value = yield future
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - thrown into the awaiting task: passed on to the handler
            value, error = None, exc


class ClientRequestQuotaManager(ClientQuotaManager):
    """Kafka's ClientRequestQuotaManager: `request-time` per entity, throttled at most one window."""

    def __init__(self, store: ClientQuotaStore, clock: Clock, samples: int, window_s: int) -> None:
        super().__init__(REQUEST_PERCENTAGE, store, clock, samples, window_s)
        self.max_throttle_ms = self.window_ms
        self._exempt = WindowedRate(samples, self.window_ms)
        self._exempt_lock = threading.Lock()

    def record_time_and_get_throttle_ms(self, user: str, client_id: str, nanos: int) -> int:
        throttle = self.record_and_get_throttle_ms(user, client_id, nanos * NANOS_TO_PERCENTAGE)
        return min(throttle, self.max_throttle_ms)

    def record_time_no_throttle(self, user: str, client_id: str, nanos: int) -> None:
        self.record_no_throttle(user, client_id, nanos * NANOS_TO_PERCENTAGE)

    def record_exempt(self, nanos: int) -> None:
        with self._exempt_lock:
            self._exempt.record(nanos * NANOS_TO_PERCENTAGE, self.clock.milliseconds())

    def exempt_rate(self) -> float:
        """Kafka's `exempt-request-time` (type Request, no tags): percentage of a thread spent on exempt requests."""
        with self._exempt_lock:
            return self._exempt.measure(self.clock.milliseconds())
