"""`tidelog group list|describe|reset-offsets|delete` (kafka-consumer-groups / rpk group over ListGroups,
DescribeGroups or ConsumerGroupDescribe, OffsetFetch, ListOffsets, OffsetCommit and DeleteGroups)."""

from __future__ import annotations

import argparse
from typing import Any

import kafka.errors as errors
from kafka.admin import OffsetSpec, OffsetTimestamp
from kafka.structs import OffsetAndMetadata, TopicPartition

from tidelog.commands.common import (
    Client,
    CommandError,
    client_options,
    emit,
    error_name,
    key_values,
    parse_error_text,
    parse_time_ms,
    progress,
    table,
)
from tidelog.protocol.admin_raw import AdminRequestError, describe_modern_group, send_to_coordinator
from tidelog.protocol.share import DescribeShareGroupOffsetsRequest

# States in which kafka-consumer-groups --reset-offsets moves a group's offsets (ResetOffsetsCommand: the group
# must be inactive). A group nobody has joined is Dead (unknown) or Empty.
RESETTABLE_STATES = ("Empty", "Dead")


def configure(parser: argparse.ArgumentParser) -> None:
    common = client_options()
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = sub.add_parser("list", parents=[common], help="list groups (classic, consumer and share)")
    listing.set_defaults(func=list_groups)

    describe = sub.add_parser("describe", parents=[common],
                              help="state, members, committed offsets and lag per partition")
    describe.add_argument("groups", nargs="+", metavar="GROUP")
    describe.set_defaults(func=describe_groups)

    reset = sub.add_parser("reset-offsets", parents=[common],
                           help="move an empty group's committed offsets (a dry run unless --execute)")
    reset.add_argument("group", metavar="GROUP")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument("-t", "--topic", action="append", metavar="TOPIC[:P,P...]",
                       help="a topic (all its partitions, or those listed); repeatable")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has offsets for")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-datetime", metavar="TIME", help="ISO-8601 (no zone = local time) or ms since epoch")
    target.add_argument("--to-offset", type=int, metavar="N")
    target.add_argument("--shift-by", type=int, metavar="N", help="move each committed offset by N (may be < 0)")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the new offsets only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    reset.set_defaults(func=reset_offsets)

    delete = sub.add_parser("delete", parents=[common], help="delete empty groups and their offsets")
    delete.add_argument("groups", nargs="+", metavar="GROUP")
    delete.set_defaults(func=delete_groups)


def list_groups(args: argparse.Namespace, client: Client) -> int:
    groups = sorted(client.admin().list_groups(), key=lambda g: g["group_id"])
    rows = [{"group": g["group_id"], "state": g.get("group_state"), "type": g.get("group_type"),
             "protocol_type": g.get("protocol_type")} for g in groups]
    emit(args, rows, lambda: table(["group", "state", "type", "protocol type"],
                                   [(r["group"], r["state"], r["type"], r["protocol_type"]) for r in rows]))
    return 0


# ---------------------------------------------------------------------------------------------------- describe

def describe_groups(args: argparse.Namespace, client: Client) -> int:
    admin = client.admin()
    with progress("describing groups"):
        described = [describe_group(admin, group_id) for group_id in args.groups]
    emit(args, described,
         lambda: "\n\n".join(_describe_text(d) for d in described))
    return 0


def describe_group(admin: Any, group_id: str) -> dict[str, Any]:
    """The group's state and members, its committed offsets and each partition's lag against the log end offset
    (ListOffsets latest). Classic groups: DescribeGroups and OffsetFetch. A group DescribeGroups does not know
    (GROUP_ID_NOT_FOUND: unknown, or not classic) is asked for with ConsumerGroupDescribe (KIP-848), then
    ShareGroupDescribe and DescribeShareGroupOffsets (KIP-932, whose start offset stands for the committed one)."""
    info = admin.describe_groups([group_id])[group_id]
    error, message = parse_error_text(info["error"]) if info.get("error") else (None, None)
    if error is not None and error != "GROUP_ID_NOT_FOUND":
        raise CommandError(f"group {group_id!r}: {error}{': ' + message if message else ''}")
    kind, members = "classic", [_classic_member(m) for m in info.get("members", [])]
    modern = _describe_modern(admin, group_id) if error == "GROUP_ID_NOT_FOUND" else None
    share_offsets: dict[Any, tuple[int | None, int | None]] = {}
    if modern is not None:
        kind, info, members = modern
        if kind == "share":
            share_offsets = _share_offsets(admin, group_id)
    committed = {} if kind == "share" else admin.list_group_offsets({group_id: None}).get(group_id, {})
    if error == "GROUP_ID_NOT_FOUND" and modern is None and not committed:
        raise CommandError(f"group {group_id!r} not found (GROUP_ID_NOT_FOUND)")
    owner = {(a["topic"], p): m for m in members for a in m["assignments"] for p in a["partitions"]}
    partitions = sorted(set(committed) | set(share_offsets) | {_tp(t, p) for t, p in owner})
    ends = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in partitions}) if partitions else {}
    offsets = []
    for tp in partitions:
        meta = committed.get(tp)
        current, lag = share_offsets.get(tp, (meta.offset if meta is not None and meta.offset >= 0 else None, None))
        end = ends[tp].offset
        if lag is None and current is not None:
            lag = max(end - current, 0)
        member = owner.get((tp.topic, tp.partition), {})
        offsets.append({"topic": tp.topic, "partition": tp.partition, "current_offset": current,
                        "log_end_offset": end, "lag": lag, "member_id": member.get("member_id"),
                        "client_id": member.get("client_id"), "host": member.get("host")})
    state = info.get("group_state") or ("Dead" if error else None)
    return {"group": group_id, "state": state, "type": kind, "protocol_type": info.get("protocol_type"),
            "protocol": info.get("protocol_data") or info.get("assignor_name") or None, "members": members,
            "offsets": offsets, "total_lag": sum(o["lag"] or 0 for o in offsets)}


def _tp(topic: str, partition: int) -> Any:
    return TopicPartition(topic, partition)


def _classic_member(member: dict[str, Any]) -> dict[str, Any]:
    assignment = member.get("member_assignment")
    assigned = assignment.get("assigned_partitions", []) if isinstance(assignment, dict) else []
    return {"member_id": member["member_id"], "group_instance_id": member.get("group_instance_id"),
            "client_id": member.get("client_id"), "host": member.get("client_host"),
            "assignments": [{"topic": a["topic"], "partitions": sorted(a["partitions"])} for a in assigned]}


def _describe_modern(admin: Any, group_id: str) -> tuple[str, dict[str, Any], list[dict[str, Any]]] | None:
    """ConsumerGroupDescribe, else ShareGroupDescribe (tidelog.protocol.admin_raw); None if neither knows it."""
    try:
        return describe_modern_group(admin, group_id)
    except AdminRequestError as exc:
        raise CommandError(f"group {group_id!r}: {exc}") from None


def _share_offsets(admin: Any, group_id: str) -> dict[Any, tuple[int | None, int | None]]:
    """Each share-partition's start offset and (DescribeShareGroupOffsets v1) lag."""
    G = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    response = send_to_coordinator(admin, group_id, DescribeShareGroupOffsetsRequest(
        groups=[G(group_id=group_id, topics=None)]))
    found: dict[Any, tuple[int | None, int | None]] = {}
    for group in response.groups if response is not None else []:
        for topic in group.topics:
            for p in topic.partitions:
                if p.error_code == 0 and p.start_offset >= 0:
                    lag = getattr(p, "lag", -1)
                    found[_tp(topic.topic_name, p.partition_index)] = (p.start_offset, lag if lag >= 0 else None)
    return found


def _describe_text(group: dict[str, Any]) -> str:
    head = key_values([("GROUP", group["group"]), ("STATE", group["state"]), ("TYPE", group["type"]),
                       ("PROTOCOL", group["protocol"]), ("MEMBERS", len(group["members"])),
                       ("TOTAL-LAG", group["total_lag"])])
    rows = [(o["topic"], o["partition"], o["current_offset"], o["log_end_offset"], o["lag"], o["member_id"],
             o["host"], o["client_id"]) for o in group["offsets"]]
    return head + "\n\n" + table(["topic", "partition", "current-offset", "log-end-offset", "lag",
                                  "member-id", "host", "client-id"], rows)


# ---------------------------------------------------------------------------------------------------- reset

def reset_offsets(args: argparse.Namespace, client: Client) -> int:
    admin = client.admin()
    info = admin.describe_groups([args.group])[args.group]
    state = info.get("group_state") or "Dead"
    error, message = parse_error_text(info["error"]) if info.get("error") else (None, None)
    if error is not None and error != "GROUP_ID_NOT_FOUND":
        raise CommandError(f"group {args.group!r}: {error}{': ' + message if message else ''}")
    modern = _describe_modern(admin, args.group) if error == "GROUP_ID_NOT_FOUND" else None
    if modern is not None:
        kind, modern_info, _members = modern
        if kind == "share":
            raise CommandError(f"group {args.group!r} is a share group: its start offsets move with "
                               "AlterShareGroupOffsets (kafka-share-groups), which this command does not send")
        state = modern_info["group_state"]
    if state not in RESETTABLE_STATES:
        raise CommandError(f"group {args.group!r} is {state}: offsets can be reset only while the group is "
                           f"inactive (Empty); stop its consumers first")
    committed = admin.list_group_offsets({args.group: None}).get(args.group, {})
    partitions = _partitions(admin, args, committed)
    earliest = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in partitions})
    latest = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in partitions})

    def clamp(tp: Any, offset: int) -> int:
        return int(min(max(offset, earliest[tp].offset), latest[tp].offset))

    current = {tp: (committed[tp].offset if tp in committed and committed[tp].offset >= 0 else None)
               for tp in partitions}
    if args.to_earliest:
        new = {tp: earliest[tp].offset for tp in partitions}
    elif args.to_latest:
        new = {tp: latest[tp].offset for tp in partitions}
    elif args.to_datetime is not None:
        at = parse_time_ms(args.to_datetime)
        found = admin.list_partition_offsets({tp: OffsetTimestamp(at) for tp in partitions})
        # no record at or after the time: the log end offset, as kafka-consumer-groups does
        new = {tp: clamp(tp, found[tp].offset) if tp in found and found[tp].offset >= 0 else latest[tp].offset
               for tp in partitions}
    elif args.to_offset is not None:
        new = {tp: clamp(tp, args.to_offset) for tp in partitions}
    else:
        missing = [f"{tp.topic}:{tp.partition}" for tp in partitions if current[tp] is None]
        if missing:
            raise CommandError(f"--shift-by needs committed offsets; none for {', '.join(missing)}")
        new = {tp: clamp(tp, current[tp] + args.shift_by) for tp in partitions}
    errors: dict[Any, str | None] = {tp: None for tp in partitions}
    if args.execute:
        with progress("committing offsets"):
            result = admin.alter_group_offsets(
                args.group, {tp: OffsetAndMetadata(new[tp], "", None) for tp in partitions})
        for tp, err in result.items():
            errors[tp] = None if err.errno == 0 else err.message
    rows = [{"topic": tp.topic, "partition": tp.partition, "current_offset": current[tp], "new_offset": new[tp],
             "error": errors[tp]} for tp in partitions]
    emit(args, {"group": args.group, "executed": bool(args.execute), "partitions": rows},
         lambda: table(["group", "topic", "partition", "current-offset", "new-offset"] +
                       (["status"] if args.execute else []),
                       [(args.group, r["topic"], r["partition"], r["current_offset"], r["new_offset"]) +
                        ((r["error"] or "OK",) if args.execute else ()) for r in rows])
         + ("" if args.execute else "\n(dry run: nothing committed; add --execute to commit these offsets)"))
    return 1 if any(errors.values()) else 0


def _partitions(admin: Any, args: argparse.Namespace, committed: dict[Any, Any]) -> list[Any]:
    if args.all_topics:
        if not committed:
            raise CommandError(f"group {args.group!r} has no committed offsets: name the topics with --topic")
        return sorted(committed)
    chosen = []
    for spec in args.topic:
        topic, _, listed = spec.partition(":")
        meta = admin.describe_topics([topic])[0]
        if meta.get("error_code"):
            raise CommandError(f"topic {topic!r}: {error_name(meta['error_code'])}")
        known = {p["partition_index"] for p in meta["partitions"]}
        try:
            wanted = {int(p) for p in listed.split(",")} if listed else known
        except ValueError:
            raise CommandError(f"bad --topic {spec!r}: expected TOPIC or TOPIC:P,P...") from None
        if wanted - known:
            raise CommandError(f"topic {topic!r} has no partition {min(wanted - known)}")
        chosen += [_tp(topic, p) for p in sorted(wanted)]
    return chosen


# ---------------------------------------------------------------------------------------------------- delete

def delete_groups(args: argparse.Namespace, client: Client) -> int:
    result = client.admin().delete_groups(args.groups)
    rows = [{"group": g, "error": None if result.get(g) == "OK" else _error_class_name(result.get(g))}
            for g in args.groups]
    emit(args, rows, lambda: table(["group", "status"], [(r["group"], r["error"] or "OK") for r in rows]))
    return 1 if any(r["error"] for r in rows) else 0


def _error_class_name(name: str | None) -> str:
    """kafka-python's DeleteGroups outcome is an error class name (GroupNotEmptyError): Kafka's name for it."""
    cls = getattr(errors, name or "", None)
    return str(getattr(cls, "message", None) or name or "no answer")
