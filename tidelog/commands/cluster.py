"""`tidelog cluster info`: cluster id, controller, brokers and finalized feature levels (DescribeCluster,
ApiVersions' features as kafka-python's describe_features reads them)."""

from __future__ import annotations

import argparse
from typing import Any

from tidelog.commands.common import Client, client_options, emit, key_values, table


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    info = sub.add_parser("info", parents=[client_options()], help="cluster id, controller, brokers, features")
    info.set_defaults(func=cluster_info)


def cluster_info(args: argparse.Namespace, client: Client) -> int:
    admin = client.admin()
    cluster = admin.describe_cluster()
    features = {}
    for name, feature in sorted(admin.describe_features().items()):
        finalized = feature.get("finalized")
        supported = feature.get("supported") or (None, None)
        features[name] = {"finalized_level": finalized[1] if finalized else None,
                          "supported_min": supported[0], "supported_max": supported[1]}
    brokers = [{"node_id": b.get("broker_id", b.get("node_id")), "host": b["host"], "port": b["port"],
                "rack": b.get("rack"), "fenced": bool(b.get("is_fenced"))}
               for b in sorted(cluster["brokers"], key=lambda b: b.get("broker_id", b.get("node_id")))]
    data: dict[str, Any] = {"cluster_id": cluster.get("cluster_id"), "controller_id": cluster.get("controller_id"),
                            "brokers": brokers, "features": features}
    emit(args, data, lambda: "\n\n".join([
        key_values([("CLUSTER", data["cluster_id"]), ("CONTROLLER", data["controller_id"])]),
        table(["id", "host", "port", "rack"], [(b["node_id"], b["host"], b["port"], b["rack"]) for b in brokers]),
        table(["feature", "finalized", "supported"],
              [(n, f["finalized_level"], f"{f['supported_min']}-{f['supported_max']}") for n, f in features.items()]),
    ]))
    return 0
