"""The classic group state machine driven directly, with a ManualClock deciding every timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tidelog.clock import ManualClock
from tidelog.coordinator.group import (
    GroupCoordinator,
    GroupCoordinatorConfig,
    GroupState,
    LeaveMember,
    OffsetAndMetadata,
)
from tidelog.coordinator.group.classic.member import JoinResult
from tidelog.protocol.errors import ErrorCode as E
from tidelog.storage import TopicPartition

SESSION = 10_000
REBALANCE = 30_000


def run(coro_fn: Callable[..., Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(coro_fn(), 15))


def make(delay: int = 0, **kw: Any) -> tuple[GroupCoordinator, ManualClock]:
    clock = ManualClock()
    coord = GroupCoordinator(clock, GroupCoordinatorConfig(group_initial_rebalance_delay_ms=delay, **kw))
    coord.startup()
    return coord, clock


def join(coord: GroupCoordinator, member_id: str = "", group: str = "g", protocols: Any = None,
         instance_id: str | None = None, require_known: bool = True, client_id: str = "c",
         session: int = SESSION) -> asyncio.Task[JoinResult]:
    return asyncio.ensure_future(coord.join_group(
        group, member_id, instance_id, client_id, "/127.0.0.1", session, REBALANCE, "consumer",
        protocols or [("range", b"sub-" + client_id.encode())], require_known_member_id=require_known))


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def new_member(coord: GroupCoordinator, client_id: str = "c", group: str = "g") -> asyncio.Task[JoinResult]:
    """KIP-394 flow: the first join hands out an id, the second one (parked) uses it."""
    first = await join(coord, client_id=client_id, group=group)
    assert first.error == E.MEMBER_ID_REQUIRED and first.member_id.startswith(client_id + "-")
    task = join(coord, first.member_id, client_id=client_id, group=group)
    await settle()
    return task


async def stable_single(coord: GroupCoordinator, group: str = "g") -> JoinResult:
    result = await (await new_member(coord, "a", group))
    sync = await coord.sync_group(group, result.generation_id, result.member_id, None, None, None,
                                  {result.member_id: b"assign-a"})
    assert sync.error == E.NONE and sync.assignment == b"assign-a"
    return result


def test_single_member_join_sync_heartbeat() -> None:
    async def body() -> None:
        coord, _ = make()
        a = await stable_single(coord)
        assert a.generation_id == 1 and a.leader_id == a.member_id and a.protocol_name == "range"
        assert a.members == [(a.member_id, None, b"sub-a")]  # the leader sees every member's metadata
        group = coord.groups["g"]
        assert group.state is GroupState.STABLE
        assert coord.heartbeat("g", a.member_id, None, 1) == E.NONE
        assert coord.heartbeat("g", a.member_id, None, 7) == E.ILLEGAL_GENERATION
        assert coord.heartbeat("g", "nobody", None, 1) == E.UNKNOWN_MEMBER_ID
        assert coord.heartbeat("other", a.member_id, None, 1) == E.UNKNOWN_MEMBER_ID

    run(body)


def test_second_member_triggers_rebalance_and_follower_gets_leader_bytes() -> None:
    async def body() -> None:
        coord, _ = make()
        a = await stable_single(coord)
        b_task = await new_member(coord, "b")
        assert not b_task.done()
        group = coord.groups["g"]
        assert group.state is GroupState.PREPARING_REBALANCE
        assert coord.heartbeat("g", a.member_id, None, 1) == E.REBALANCE_IN_PROGRESS
        a2 = await join(coord, a.member_id, client_id="a")
        b = await b_task
        assert a2.generation_id == b.generation_id == 2
        assert a2.leader_id == b.leader_id == a.member_id          # the existing leader stays leader
        assert {m[0] for m in a2.members} == {a.member_id, b.member_id} and b.members == []
        assert group.state is GroupState.COMPLETING_REBALANCE
        # the follower's SyncGroup parks until the leader's arrives, then gets exactly its bytes
        b_sync = asyncio.ensure_future(coord.sync_group("g", 2, b.member_id, None, None, None, {}))
        await settle()
        assert not b_sync.done()
        assert coord.commit_offsets("g", b.member_id, None, 2, {
            TopicPartition("t", 0): OffsetAndMetadata(1, -1, "", 0)})[TopicPartition("t", 0)] \
            == E.REBALANCE_IN_PROGRESS
        a_sync = await coord.sync_group("g", 2, a.member_id, None, "consumer", "range",
                                        {a.member_id: b"A", b.member_id: b"\x00\x01B"})
        assert a_sync.assignment == b"A"
        assert (await b_sync).assignment == b"\x00\x01B"
        assert group.state is GroupState.STABLE

    run(body)


def test_leader_omitting_a_member_gives_it_an_empty_assignment() -> None:
    async def body() -> None:
        coord, _ = make()
        a = await stable_single(coord)
        b_task = await new_member(coord, "b")
        await join(coord, a.member_id, client_id="a")
        b = await b_task
        b_sync = asyncio.ensure_future(coord.sync_group("g", 2, b.member_id, None, None, None, {}))
        await coord.sync_group("g", 2, a.member_id, None, None, None, {a.member_id: b"A"})
        assert (await b_sync).assignment == b""

    run(body)


def test_session_timeout_removes_member_and_rebalances() -> None:
    async def body() -> None:
        coord, clock = make()
        a = await stable_single(coord)
        b_task = await new_member(coord, "b")
        await join(coord, a.member_id, client_id="a")
        b = await b_task
        b_sync = asyncio.ensure_future(coord.sync_group("g", 2, b.member_id, None, None, None, {}))
        await coord.sync_group("g", 2, a.member_id, None, None, None, {a.member_id: b"A", b.member_id: b"B"})
        await b_sync
        group = coord.groups["g"]
        # b keeps heartbeating, a goes silent
        clock.advance(SESSION - 1)
        assert coord.heartbeat("g", b.member_id, None, 2) == E.NONE
        coord.check_expirations()
        assert group.has_member(a.member_id)
        clock.advance(2)
        coord.check_expirations()
        assert not group.has_member(a.member_id)
        assert group.state is GroupState.PREPARING_REBALANCE
        assert group.leader_id == b.member_id
        assert coord.heartbeat("g", b.member_id, None, 2) == E.REBALANCE_IN_PROGRESS
        b3 = await join(coord, b.member_id, client_id="b")
        assert b3.generation_id == 3 and b3.leader_id == b.member_id
        # and when the last member goes silent the group becomes Empty
        await coord.sync_group("g", 3, b.member_id, None, None, None, {b.member_id: b"all"})
        clock.advance(SESSION + 1)
        coord.check_expirations()
        assert group.state is GroupState.EMPTY and not group.members and group.generation_id == 4

    run(body)


def test_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() -> None:
    async def body() -> None:
        coord, clock = make()
        a = await stable_single(coord)
        b_task = await new_member(coord, "b")
        clock.advance(REBALANCE - 1)
        coord.check_expirations()
        assert not b_task.done()
        clock.advance(1)
        coord.check_expirations()
        b = await b_task
        assert b.error == E.NONE and b.generation_id == 2 and b.leader_id == b.member_id
        assert not coord.groups["g"].has_member(a.member_id)
        assert coord.heartbeat("g", a.member_id, None, 1) == E.UNKNOWN_MEMBER_ID

    run(body)


def test_initial_rebalance_delay_waits_for_more_members() -> None:
    async def body() -> None:
        coord, clock = make(delay=3000)
        a_task = await new_member(coord, "a")
        clock.advance(2000)
        coord.check_expirations()
        b_task = await new_member(coord, "b")
        clock.advance(1000)            # first window ends; b arrived inside it, so it is extended
        coord.check_expirations()
        assert not a_task.done() and not b_task.done()
        clock.advance(3000)
        coord.check_expirations()
        a, b = await a_task, await b_task
        assert a.generation_id == b.generation_id == 1
        assert len(a.members) == 2 and b.members == []

    run(body)


def test_pending_member_that_never_rejoins_expires() -> None:
    async def body() -> None:
        coord, clock = make()
        a = await stable_single(coord)
        first = await join(coord, client_id="b")
        assert first.error == E.MEMBER_ID_REQUIRED
        a2_task = join(coord, a.member_id, client_id="a", protocols=[("range", b"changed")])
        await settle()
        assert not a2_task.done()      # waits for the pending member
        clock.advance(SESSION)
        coord.check_expirations()
        a2 = await a2_task
        assert a2.generation_id == 2 and [m[0] for m in a2.members] == [a.member_id]

    run(body)


def test_join_validation_errors() -> None:
    async def body() -> None:
        coord, _ = make()
        assert (await join(coord, group="")).error == E.INVALID_GROUP_ID
        assert (await join(coord, session=5999)).error == E.INVALID_SESSION_TIMEOUT
        assert (await join(coord, member_id="ghost")).error == E.UNKNOWN_MEMBER_ID
        await stable_single(coord)
        bad = await coord.join_group("g", "", None, "x", "h", SESSION, REBALANCE, "consumer",
                                     [("roundrobin", b"")], require_known_member_id=False)
        assert bad.error == E.INCONSISTENT_GROUP_PROTOCOL
        other_type = await coord.join_group("g", "", None, "x", "h", SESSION, REBALANCE, "connect",
                                            [("range", b"")], require_known_member_id=False)
        assert other_type.error == E.INCONSISTENT_GROUP_PROTOCOL

    run(body)


def test_protocol_selection_by_vote() -> None:
    async def body() -> None:
        coord, _ = make()
        protos = {"a": [("range", b""), ("roundrobin", b"")], "b": [("roundrobin", b""), ("range", b"")],
                  "c": [("roundrobin", b""), ("range", b""), ("sticky", b"")]}
        a = await join(coord, client_id="a", protocols=protos["a"], require_known=False)
        assert a.generation_id == 1 and a.protocol_name == "range"   # alone, a's first choice
        others = [join(coord, client_id=c, protocols=protos[c], require_known=False) for c in "bc"]
        await settle()
        a2 = await join(coord, a.member_id, client_id="a", protocols=protos["a"])
        results = [a2] + [await t for t in others]
        # candidates {range, roundrobin}; votes: a -> range, b and c -> roundrobin
        assert {r.generation_id for r in results} == {2}
        assert {r.protocol_name for r in results} == {"roundrobin"}


    run(body)


def test_static_member_rejoin_keeps_assignment_without_rebalance() -> None:
    async def body() -> None:
        coord, _ = make()

        def static_join(member_id: str, instance: str) -> asyncio.Task[JoinResult]:
            return asyncio.ensure_future(coord.join_group(
                "g", member_id, instance, "c", "h", SESSION, REBALANCE, "consumer", [("range", instance.encode())]))

        s1 = await static_join("", "inst-1")
        assert s1.error == E.NONE and s1.member_id.startswith("inst-1-") and s1.generation_id == 1
        await coord.sync_group("g", 1, s1.member_id, "inst-1", None, None, {s1.member_id: b"A"})
        s2_task = static_join("", "inst-2")
        await settle()
        s1b = await static_join(s1.member_id, "inst-1")
        s2 = await s2_task
        assert s1b.generation_id == s2.generation_id == 2 and s1b.leader_id == s1.member_id
        s2_sync = asyncio.ensure_future(coord.sync_group("g", 2, s2.member_id, "inst-2", None, None, {}))
        await coord.sync_group("g", 2, s1.member_id, "inst-1", None, None,
                               {s1.member_id: b"A", s2.member_id: b"B"})
        assert (await s2_sync).assignment == b"B"
        group = coord.groups["g"]
        # inst-2 restarts: new member id, same generation, same assignment, no rebalance; the old id is fenced
        again = await static_join("", "inst-2")
        assert again.error == E.NONE and again.member_id != s2.member_id
        assert again.generation_id == 2 and group.state is GroupState.STABLE
        assert (await coord.sync_group("g", 2, again.member_id, "inst-2", None, None, {})).assignment == b"B"
        assert coord.heartbeat("g", s2.member_id, "inst-2", 2) == E.FENCED_INSTANCE_ID
        assert coord.heartbeat("g", again.member_id, "inst-2", 2) == E.NONE

    run(body)


def test_leave_group_batched_and_last_member_empties_group() -> None:
    async def body() -> None:
        coord, _ = make()
        a = await stable_single(coord)
        top, errors = coord.leave_group("g", [LeaveMember("ghost"), LeaveMember(a.member_id)])
        assert top == E.NONE and errors == [E.UNKNOWN_MEMBER_ID, E.NONE]
        group = coord.groups["g"]
        assert group.state is GroupState.EMPTY and group.generation_id == 2
        assert coord.leave_group("nope", [LeaveMember("x")]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])

    run(body)


def test_leaving_member_completes_parked_rebalance() -> None:
    async def body() -> None:
        coord, _ = make()
        a = await stable_single(coord)
        b_task = await new_member(coord, "b")
        coord.leave_group("g", [LeaveMember(a.member_id)])   # a leaves instead of rejoining
        b = await b_task
        assert b.error == E.NONE and b.leader_id == b.member_id and b.generation_id == 2

    run(body)


def test_offset_commit_validation_and_fetch() -> None:
    async def body() -> None:
        coord, clock = make()
        tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
        om = OffsetAndMetadata(42, 3, "meta", clock.milliseconds())
        # simple (generation -1) commits create an Empty group
        assert coord.commit_offsets("simple", "", None, -1, {tp0: om}) == {tp0: E.NONE}
        assert coord.groups["simple"].state is GroupState.EMPTY
        err, got = coord.fetch_offsets("simple", [tp0, tp1])
        assert err == E.NONE and got[tp0] == om and got[tp1] is None
        assert coord.fetch_offsets("simple", None)[1] == {tp0: om}
        assert coord.fetch_offsets("unknown", [tp0]) == (E.NONE, {tp0: None})
        # a generation for an unknown group
        assert coord.commit_offsets("nope", "m", None, 1, {tp0: om}) == {tp0: E.ILLEGAL_GENERATION}
        assert coord.commit_offsets("nope", "m", None, 1, {tp0: om}, E.GROUP_ID_NOT_FOUND) == \
            {tp0: E.GROUP_ID_NOT_FOUND}
        big = OffsetAndMetadata(1, -1, "x" * 4097, 0)
        assert coord.commit_offsets("simple", "", None, -1, {tp1: big}) == {tp1: E.OFFSET_METADATA_TOO_LARGE}
        a = await stable_single(coord)
        assert coord.commit_offsets("g", a.member_id, None, 1, {tp0: om}) == {tp0: E.NONE}
        assert coord.commit_offsets("g", a.member_id, None, 0, {tp0: om}) == {tp0: E.ILLEGAL_GENERATION}
        assert coord.commit_offsets("g", "other", None, 1, {tp0: om}) == {tp0: E.UNKNOWN_MEMBER_ID}
        assert coord.commit_offsets("g", "", None, -1, {tp0: om}) == {tp0: E.UNKNOWN_MEMBER_ID}

    run(body)


def test_delete_groups_and_offsets() -> None:
    async def body() -> None:
        coord, clock = make()
        tp = TopicPartition("t", 0)
        coord.commit_offsets("simple", "", None, -1, {tp: OffsetAndMetadata(1, -1, "", clock.milliseconds())})
        await stable_single(coord)
        assert coord.delete_groups(["g", "simple", "missing"]) == {
            "g": E.NON_EMPTY_GROUP, "simple": E.NONE, "missing": E.GROUP_ID_NOT_FOUND}
        assert "simple" not in coord.groups
        assert coord.delete_offsets("missing", [tp]) == (E.GROUP_ID_NOT_FOUND, {})

    run(body)


def test_offset_delete_refuses_subscribed_topics() -> None:
    async def body() -> None:
        coord, clock = make()
        sub = b"\x00\x01" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"  # subscription v1 to "t"
        r = await coord.join_group("g", "", None, "c", "h", SESSION, REBALANCE, "consumer", [("range", sub)])
        await coord.sync_group("g", r.generation_id, r.member_id, None, None, None, {})
        now = clock.milliseconds()
        tps = {TopicPartition("t", 0): OffsetAndMetadata(1, -1, "", now),
               TopicPartition("u", 0): OffsetAndMetadata(2, -1, "", now)}
        assert set(coord.commit_offsets("g", r.member_id, None, r.generation_id, tps).values()) == {E.NONE}
        err, errors = coord.delete_offsets("g", list(tps))
        assert err == E.NONE
        assert errors == {TopicPartition("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, TopicPartition("u", 0): E.NONE}
        assert list(coord.groups["g"].offsets) == [TopicPartition("t", 0)]

    run(body)


def test_offsets_of_empty_groups_expire_after_retention() -> None:
    async def body() -> None:
        coord, clock = make(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1000)
        tp = TopicPartition("t", 0)
        a = await stable_single(coord)
        coord.commit_offsets("g", a.member_id, None, 1, {tp: OffsetAndMetadata(5, -1, "", clock.milliseconds())})
        coord.commit_offsets("simple", "", None, -1, {tp: OffsetAndMetadata(7, -1, "", clock.milliseconds())})
        clock.advance(61_000)
        coord.heartbeat("g", a.member_id, None, 1)
        coord.check_expirations()
        # the active group keeps its offsets (its member subscribes nothing parseable: kept as-is); simple expired
        assert "simple" not in coord.groups
        assert coord.groups["g"].offsets
        coord.leave_group("g", [LeaveMember(a.member_id)])
        clock.advance(59_000)
        coord.check_expirations()
        assert coord.groups["g"].offsets
        clock.advance(2_000)
        coord.check_expirations()
        assert "g" not in coord.groups

    run(body)


def test_timer_fires_on_the_event_loop_with_a_real_clock() -> None:
    """With the system clock the armed loop timer (not the test) applies the session timeout."""
    from tidelog.clock import Clock

    async def body() -> None:
        coord = GroupCoordinator(Clock(), GroupCoordinatorConfig(group_initial_rebalance_delay_ms=0,
                                                                 group_min_session_timeout_ms=10))
        coord.startup()
        r = await coord.join_group("g", "", None, "c", "h", 50, 50, "consumer", [("range", b"")])
        await coord.sync_group("g", r.generation_id, r.member_id, None, None, None, {})
        for _ in range(200):
            if coord.groups["g"].state is GroupState.EMPTY:
                break
            await asyncio.sleep(0.05)
        assert coord.groups["g"].state is GroupState.EMPTY
        coord.shutdown()

    run(body)


@pytest.mark.parametrize("name", ["", "group", "consumer-group-1", "日本"])
def test_partition_for_matches_java_hash(name: str) -> None:
    from tidelog.coordinator.group.store import java_string_hash, partition_for

    # Java: "".hashCode()==0, "group".hashCode()==98629247
    expected = {"": 0, "group": 98629247}
    if name in expected:
        assert java_string_hash(name) == expected[name]
    assert 0 <= partition_for(name, 50) < 50


def test_group_max_size() -> None:
    async def body() -> None:
        coord, _ = make(group_max_size=1)
        await stable_single(coord)
        extra = await join(coord, client_id="b")
        assert extra.error == E.GROUP_MAX_SIZE_REACHED

    run(body)


def test_stable_consumer_group_expires_only_unsubscribed_topics() -> None:
    async def body() -> None:
        coord, clock = make(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1000)
        sub = b"\x00\x01" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
        r = await coord.join_group("g", "", None, "c", "h", SESSION, REBALANCE, "consumer", [("range", sub)])
        await coord.sync_group("g", r.generation_id, r.member_id, None, None, None, {})
        now = clock.milliseconds()
        coord.commit_offsets("g", r.member_id, None, r.generation_id, {
            TopicPartition("t", 0): OffsetAndMetadata(1, -1, "", now),
            TopicPartition("old", 0): OffsetAndMetadata(2, -1, "", now)})
        clock.advance(61_000)
        coord.heartbeat("g", r.member_id, None, r.generation_id)
        coord.check_expirations()
        assert list(coord.groups["g"].offsets) == [TopicPartition("t", 0)]

    run(body)


def test_shutdown_answers_parked_calls() -> None:
    async def body() -> None:
        coord, _ = make()
        a = await stable_single(coord)
        b_task = await new_member(coord, "b")
        coord.shutdown()
        assert (await b_task).error == E.COORDINATOR_NOT_AVAILABLE
        assert a.error == E.NONE

    run(body)
