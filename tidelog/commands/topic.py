"""`tidelog topic list|create|describe|alter-config|delete` (kafka-topics / rpk topic over the Kafka protocol:
Metadata, CreateTopics, DescribeConfigs, IncrementalAlterConfigs, DeleteTopics, ListOffsets)."""

from __future__ import annotations

import argparse
from typing import Any

from tidelog.commands.common import (
    Client,
    CommandError,
    client_options,
    emit,
    error_name,
    name_value,
    parse_error_text,
    table,
)


def configure(parser: argparse.ArgumentParser) -> None:
    common = client_options()
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = sub.add_parser("list", parents=[common], help="list topics")
    listing.add_argument("-i", "--internal", action="store_true", help="include internal topics (__consumer_offsets)")
    listing.set_defaults(func=list_topics)

    create = sub.add_parser("create", parents=[common], help="create topics")
    create.add_argument("topics", nargs="+", metavar="TOPIC")
    create.add_argument("-p", "--partitions", type=int, default=-1, help="partitions (default: the broker's)")
    create.add_argument("-r", "--replicas", type=int, default=-1, help="replication factor (default: the broker's)")
    create.add_argument("-c", "--config", metavar="NAME=VALUE", action="append", default=[], type=name_value,
                        help="a topic config, e.g. cleanup.policy=compact; repeatable")
    create.add_argument("--dry-run", action="store_true", help="have the broker validate only")
    create.set_defaults(func=create_topics)

    describe = sub.add_parser("describe", parents=[common], help="partitions, offsets and configs of topics")
    describe.add_argument("topics", nargs="+", metavar="TOPIC")
    describe.add_argument("-a", "--all-configs", action="store_true",
                          help="text output: list every config, not only those set away from Kafka's defaults "
                               "(JSON always has them all, with their source)")
    describe.set_defaults(func=describe_topics)

    alter = sub.add_parser("alter-config", parents=[common], help="set or delete topic configs (incrementally)")
    alter.add_argument("topics", nargs="+", metavar="TOPIC")
    alter.add_argument("-s", "--set", metavar="NAME=VALUE", action="append", default=[], type=name_value)
    alter.add_argument("-d", "--delete", metavar="NAME", action="append", default=[],
                       help="back to the default; repeatable")
    alter.add_argument("--append", metavar="NAME=VALUE", action="append", default=[], type=name_value,
                       help="add to a list config")
    alter.add_argument("--subtract", metavar="NAME=VALUE", action="append", default=[], type=name_value,
                       help="remove from a list config")
    alter.add_argument("--dry-run", action="store_true", help="have the broker validate only")
    alter.set_defaults(func=alter_config)

    delete = sub.add_parser("delete", parents=[common], help="delete topics")
    delete.add_argument("topics", nargs="+", metavar="TOPIC")
    delete.set_defaults(func=delete_topics)


def list_topics(args: argparse.Namespace, client: Client) -> int:
    topics = sorted(client.admin().describe_topics(), key=lambda t: t["name"])
    rows = [{"name": t["name"], "partitions": len(t["partitions"]),
             "replicas": max((len(p["replica_nodes"]) for p in t["partitions"]), default=0),
             "internal": bool(t["is_internal"])}
            for t in topics if args.internal or not t["is_internal"]]
    emit(args, rows, lambda: table(["name", "partitions", "replicas"],
                                   [(r["name"], r["partitions"], r["replicas"]) for r in rows]))
    return 0


def create_topics(args: argparse.Namespace, client: Client) -> int:
    spec = {name: {"num_partitions": args.partitions, "replication_factor": args.replicas,
                   "configs": dict(args.config)} for name in args.topics}
    response = client.admin().create_topics(spec, validate_only=args.dry_run, raise_errors=False)
    results = [{"name": t["name"], "error": None if not t["error_code"] else error_name(t["error_code"]),
                "message": t.get("error_message"), "partitions": t.get("num_partitions"),
                "replication_factor": t.get("replication_factor")} for t in response["topics"]]
    return _report(args, results, "OK (validated only)" if args.dry_run else "OK")


def describe_topics(args: argparse.Namespace, client: Client) -> int:
    from kafka.admin import ConfigResource, OffsetSpec
    from kafka.structs import TopicPartition

    admin = client.admin()
    metadata = {t["name"]: t for t in admin.describe_topics(args.topics)}
    for name in args.topics:
        if metadata.get(name, {}).get("error_code"):
            raise CommandError(f"topic {name!r}: {error_name(metadata[name]['error_code'])}")
    described = admin.describe_configs([ConfigResource("TOPIC", name) for name in args.topics],
                                       config_filter="all").get("topic", {})
    partitions = [TopicPartition(name, p["partition_index"]) for name in args.topics
                  for p in metadata[name]["partitions"]]
    earliest = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in partitions}) if partitions else {}
    latest = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in partitions}) if partitions else {}
    topics = []
    for name in args.topics:
        meta = metadata[name]
        parts = [{"partition": p["partition_index"], "leader": p["leader_id"], "leader_epoch": p.get("leader_epoch"),
                  "replicas": p["replica_nodes"], "isr": p["isr_nodes"],
                  "log_start_offset": earliest[TopicPartition(name, p["partition_index"])].offset,
                  "high_watermark": latest[TopicPartition(name, p["partition_index"])].offset}
                 for p in sorted(meta["partitions"], key=lambda p: p["partition_index"])]
        configs = [{"name": key, "value": None if c.get("is_sensitive") else c.get("value"),
                    "source": c.get("config_source"), "read_only": c.get("read_only"),
                    "sensitive": bool(c.get("is_sensitive"))}
                   for key, c in sorted(described.get(name, {}).items())]
        topics.append({"name": name, "topic_id": meta.get("topic_id"), "internal": bool(meta["is_internal"]),
                       "partitions": parts, "configs": configs})
    emit(args, topics, lambda: "\n\n".join(_describe_text(t, args.all_configs) for t in topics))
    return 0


def _describe_text(topic: dict[str, Any], all_configs: bool) -> str:
    summary = table(["name", "partitions", "replicas", "internal", "topic id"],
                    [(topic["name"], len(topic["partitions"]),
                      max((len(p["replicas"]) for p in topic["partitions"]), default=0), topic["internal"],
                      topic["topic_id"])])
    partitions = table(["partition", "leader", "epoch", "replicas", "isr", "log-start-offset", "high-watermark"],
                       [(p["partition"], p["leader"], p["leader_epoch"], _ids(p["replicas"]), _ids(p["isr"]),
                         p["log_start_offset"], p["high_watermark"]) for p in topic["partitions"]])
    configs = table(["config", "value", "source"],
                    [(c["name"], "(sensitive)" if c["sensitive"] else c["value"], c["source"])
                     for c in topic["configs"] if all_configs or c["source"] != "DEFAULT_CONFIG"])
    return f"{summary}\n\n{partitions}\n\n{configs}"


def _ids(ids: list[int]) -> str:
    return "[" + ",".join(map(str, ids)) + "]"


def alter_config(args: argparse.Namespace, client: Client) -> int:
    from kafka.admin import AlterConfigOp, ConfigResource

    changes: dict[str, tuple[Any, str | None]] = {}
    for name, value in args.set:
        changes[name] = (AlterConfigOp.SET, value)
    for name in args.delete:
        changes[name] = (AlterConfigOp.DELETE, None)
    for name, value in args.append:
        changes[name] = (AlterConfigOp.APPEND, value)
    for name, value in args.subtract:
        changes[name] = (AlterConfigOp.SUBTRACT, value)
    if not changes:
        raise CommandError("nothing to change: give --set NAME=VALUE or --delete NAME")
    response = client.admin().alter_configs(
        [ConfigResource("TOPIC", name, dict(changes)) for name in args.topics],
        validate_only=args.dry_run, raise_on_unknown=False).get("topic", {})
    results = []
    for name in args.topics:
        outcome = response.get(name, "no answer")
        error, message = (None, None) if outcome == "OK" else parse_error_text(outcome)
        results.append({"name": name, "error": error, "message": message,
                        "changes": {k: {"op": op.name, "value": v} for k, (op, v) in changes.items()}})
    return _report(args, results, "OK (validated only)" if args.dry_run else "OK")


def delete_topics(args: argparse.Namespace, client: Client) -> int:
    response = client.admin().delete_topics(args.topics, raise_errors=False)
    results = [{"name": t["name"], "error": None if not t["error_code"] else error_name(t["error_code"]),
                "message": t.get("error_message")} for t in response["topics"]]
    return _report(args, results, "OK")


def _report(args: argparse.Namespace, results: list[dict[str, Any]], ok: str) -> int:
    """Per-topic outcome (rpk's TOPIC STATUS table); exit code 1 when any topic failed."""
    emit(args, results, lambda: table(["topic", "status"], [
        (r["name"], ok if r["error"] is None else f"{r['error']}" + (f": {r['message']}" if r["message"] else ""))
        for r in results]))
    return 1 if any(r["error"] is not None for r in results) else 0
