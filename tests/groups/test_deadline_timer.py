"""The coordinators' keyed deadline timer (tidelog.coordinator.timer, Kafka's CoordinatorTimer) on a ManualClock:
schedule and cancel by key, replacement, order, operations scheduling more, a failing operation, and the event
loop timer it arms once started."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from tidelog.clock import ManualClock
from tidelog.coordinator.timer import DeadlineTimer


def make() -> tuple[DeadlineTimer, ManualClock, list[str]]:
    clock = ManualClock(start_ms=1_000)
    return DeadlineTimer(clock.monotonic_ms, "test"), clock, []


def test_an_operation_runs_once_when_its_deadline_has_passed() -> None:
    timer, clock, ran = make()
    timer.schedule("a", 1_500, lambda: ran.append("a"))
    assert timer.is_scheduled("a") and timer.deadline("a") == 1_500 and len(timer) == 1
    clock.advance(499)
    assert timer.run_due() == 0 and ran == []
    clock.advance(1)
    assert timer.run_due() == 1 and ran == ["a"]
    assert not timer.is_scheduled("a") and timer.deadline("a") is None and len(timer) == 0
    clock.advance(10_000)
    assert timer.run_due() == 0 and ran == ["a"]


def test_scheduling_a_key_again_replaces_its_operation_and_deadline() -> None:
    timer, clock, ran = make()
    timer.schedule("k", 1_100, lambda: ran.append("first"))
    timer.schedule("k", 1_300, lambda: ran.append("second"))  # later
    clock.set(1_200)
    assert timer.run_due() == 0
    clock.set(1_300)
    assert timer.run_due() == 1 and ran == ["second"]
    timer.schedule("k", 2_000, lambda: ran.append("third"))
    timer.schedule("k", 1_400, lambda: ran.append("fourth"))  # earlier
    clock.set(1_400)
    assert timer.run_due() == 1 and ran == ["second", "fourth"]
    clock.set(5_000)
    assert timer.run_due() == 0


def test_schedule_if_absent_keeps_the_first() -> None:
    timer, clock, ran = make()
    timer.schedule_if_absent("k", 1_100, lambda: ran.append("first"))
    timer.schedule_if_absent("k", 1_050, lambda: ran.append("second"))
    clock.set(1_100)
    timer.run_due()
    assert ran == ["first"]


def test_cancel_forgets_a_key_and_cancelling_an_unknown_one_is_harmless() -> None:
    timer, clock, ran = make()
    timer.schedule("a", 1_100, lambda: ran.append("a"))
    timer.schedule("b", 1_100, lambda: ran.append("b"))
    timer.cancel("a")
    timer.cancel("never")
    clock.set(2_000)
    assert timer.run_due() == 1 and ran == ["b"]


def test_due_operations_run_in_deadline_order_ties_in_scheduling_order() -> None:
    timer, clock, ran = make()
    for key, due in (("c", 1_300), ("a", 1_100), ("b2", 1_200), ("b1", 1_200), ("late", 9_000)):
        timer.schedule(key, due, lambda key=key: ran.append(key))  # type: ignore[misc]
    clock.set(1_300)
    assert timer.run_due() == 4
    assert ran == ["a", "b2", "b1", "c"]
    assert timer.is_scheduled("late")


def test_an_operation_may_schedule_others_and_one_due_already_runs_in_the_same_pass() -> None:
    timer, clock, ran = make()

    def first() -> None:
        ran.append("first")
        timer.schedule("again", clock.monotonic_ms(), lambda: ran.append("again"))  # due now
        timer.schedule("later", clock.monotonic_ms() + 100, lambda: ran.append("later"))

    timer.schedule("first", 1_000, first)
    assert timer.run_due() == 2 and ran == ["first", "again"]
    clock.advance(100)
    assert timer.run_due() == 1 and ran == ["first", "again", "later"]


def test_an_operation_may_reschedule_its_own_key() -> None:
    """As a member's heartbeat operation does when the member heartbeated since it was scheduled."""
    timer, clock, _ = make()
    ran: list[int] = []

    def check() -> None:
        ran.append(clock.monotonic_ms())
        if len(ran) < 3:
            timer.schedule("session", clock.monotonic_ms() + 50, check)

    timer.schedule("session", 1_050, check)
    for _ in range(4):
        clock.advance(50)
        timer.run_due()
    assert ran == [1_050, 1_100, 1_150] and len(timer) == 0


def test_a_failing_operation_is_logged_and_the_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    timer, clock, ran = make()

    def boom() -> None:
        raise RuntimeError("boom")

    timer.schedule("bad", 1_000, boom)
    timer.schedule("good", 1_000, lambda: ran.append("good"))
    with caplog.at_level(logging.ERROR, logger="tidelog.coordinator.timer"):
        assert timer.run_due() == 2
    assert ran == ["good"]
    assert any("test timer operation 'bad' failed" in r.getMessage() for r in caplog.records)


def test_many_replacements_do_not_grow_without_bound() -> None:
    """A heap entry per schedule, compacted once replaced entries outnumber the live ones."""
    timer, clock, ran = make()
    for i in range(10_000):
        timer.schedule(i % 10, 2_000 + i, lambda: None)
    assert len(timer) == 10
    assert len(timer._heap) <= 2 * 10 + 64 + 1
    clock.set(20_000)
    assert timer.run_due() == 10


def test_once_started_on_a_loop_it_runs_what_is_due_by_itself() -> None:
    """The event-loop timer is armed for the earliest deadline (real seconds from the clock's now) and re-armed
    as keys change; stopped, it runs nothing by itself."""
    async def until(done: Callable[[], bool]) -> None:
        for _ in range(500):
            if done():
                return
            await asyncio.sleep(0.01)

    async def body() -> list[str]:
        clock = ManualClock(start_ms=1_000)
        timer = DeadlineTimer(clock.monotonic_ms, "loop")
        ran: list[str] = []
        timer.schedule("soon", 1_020, lambda: ran.append("soon"))
        timer.schedule("far", 1_000 + 3_600_000, lambda: ran.append("far"))
        await asyncio.sleep(0.05)
        assert ran == []  # not started: only run_due runs operations
        timer.start()
        clock.advance(20)  # "soon" is due on the clock; the loop timer armed at start() fires within 20 ms
        await until(lambda: bool(ran))
        assert ran == ["soon"]
        timer.schedule("now", clock.monotonic_ms(), lambda: ran.append("now"))  # earlier than "far": re-armed
        await until(lambda: len(ran) == 2)
        assert ran == ["soon", "now"]
        timer.stop()
        timer.schedule("after-stop", clock.monotonic_ms(), lambda: ran.append("after-stop"))
        await asyncio.sleep(0.05)
        assert ran == ["soon", "now"]
        assert timer.run_due() == 1
        return ran

    assert asyncio.run(body()) == ["soon", "now", "after-stop"]
