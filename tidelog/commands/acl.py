"""`tidelog acl list|create|delete` (kafka-acls / rpk security acl over DescribeAcls, CreateAcls, DeleteAcls).
The broker needs an authorizer (`authorizer.class.name`); without one it answers SECURITY_DISABLED."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from tidelog.commands.common import Client, CommandError, client_options, emit, error_name, table

CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name, as Kafka's ResourcePattern.CLUSTER
OPERATIONS = ("all", "read", "write", "create", "delete", "alter", "describe", "cluster-action",
              "describe-configs", "alter-configs", "idempotent-write", "create-tokens", "describe-tokens")


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = sub.add_parser("list", parents=[client_options(), _selection(filtering=True)],
                             help="ACLs matching the options (all of them by default)")
    listing.set_defaults(func=list_acls)
    create = sub.add_parser("create", parents=[client_options(), _selection(filtering=False)],
                            help="allow (or --deny) principals operations on a resource")
    create.set_defaults(func=create_acls)
    delete = sub.add_parser("delete", parents=[client_options(), _selection(filtering=True)],
                            help="delete the ACLs matching the options")
    delete.set_defaults(func=delete_acls)


def _selection(filtering: bool) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("ACL" + (" filter (omitted = any)" if filtering else ""))
    resource = group.add_mutually_exclusive_group(required=not filtering)
    resource.add_argument("--topic", metavar="NAME")
    resource.add_argument("--group", metavar="NAME")
    resource.add_argument("--transactional-id", metavar="NAME")
    resource.add_argument("--cluster", action="store_true")
    group.add_argument("--pattern", dest="pattern_type",
                       choices=("literal", "prefixed") + (("match", "any") if filtering else ()),
                       default="any" if filtering else "literal",
                       help="resource name pattern type (default %(default)s)")
    group.add_argument("--principal", action="append", metavar="TYPE:NAME",
                       required=not filtering, help="e.g. User:alice; repeatable")
    group.add_argument("--operation", action="append", choices=OPERATIONS, required=not filtering,
                       help="repeatable")
    group.add_argument("--host", default=None if filtering else "*", help="client host (default *)")
    if filtering:
        group.add_argument("--permission", choices=("allow", "deny", "any"), default="any")
    else:
        group.add_argument("--deny", action="store_true", help="a DENY ACL (default ALLOW)")
    return parent


def _pattern(args: argparse.Namespace, filtering: bool) -> Any:
    from kafka.admin import ACLResourcePatternType, ResourcePattern, ResourcePatternFilter, ResourceType

    if args.topic is not None:
        kind, name = ResourceType.TOPIC, args.topic
    elif args.group is not None:
        kind, name = ResourceType.GROUP, args.group
    elif args.transactional_id is not None:
        kind, name = ResourceType.TRANSACTIONAL_ID, args.transactional_id
    elif args.cluster:
        kind, name = ResourceType.CLUSTER, CLUSTER_NAME
    else:
        kind, name = ResourceType.ANY, None
    pattern_type = ACLResourcePatternType[args.pattern_type.upper()]
    return (ResourcePatternFilter if filtering else ResourcePattern)(kind, name, pattern_type)


def _operation(name: str | None) -> Any:
    from kafka.admin import ACLOperation

    return ACLOperation.ANY if name is None else ACLOperation[name.upper().replace("-", "_")]


def _filters(args: argparse.Namespace) -> list[Any]:
    from kafka.admin import ACLFilter, ACLPermissionType

    pattern = _pattern(args, filtering=True)
    permission = ACLPermissionType[args.permission.upper()]
    return [ACLFilter(principal=principal, host=args.host, operation=_operation(operation),
                      permission_type=permission, resource_pattern=pattern)
            for principal in (args.principal or [None]) for operation in (args.operation or [None])]


def _row(acl: Any) -> dict[str, Any]:
    pattern = acl.resource_pattern
    return {"principal": acl.principal, "host": acl.host, "resource_type": pattern.resource_type.name,
            "resource_name": pattern.resource_name, "pattern_type": pattern.pattern_type.name,
            "operation": acl.operation.name, "permission": acl.permission_type.name}


_HEADERS = ["principal", "host", "resource type", "resource name", "pattern", "operation", "permission"]
_FIELDS = ["principal", "host", "resource_type", "resource_name", "pattern_type", "operation", "permission"]


def _table(rows: list[dict[str, Any]], extra: Sequence[str] = ()) -> str:
    return table(_HEADERS + [e.replace("_", " ") for e in extra],
                 [[r[f] for f in _FIELDS + list(extra)] for r in rows])


def list_acls(args: argparse.Namespace, client: Client) -> int:
    admin = client.admin()
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for acl_filter in _filters(args):
        acls, _error = admin.describe_acls(acl_filter)
        for acl in acls:
            row = _row(acl)
            seen[tuple(row.values())] = row
    rows = sorted(seen.values(), key=lambda r: tuple(str(v) for v in r.values()))
    emit(args, rows, lambda: _table(rows))
    return 0


def create_acls(args: argparse.Namespace, client: Client) -> int:
    from kafka.admin import ACL, ACLPermissionType

    pattern = _pattern(args, filtering=False)
    permission = ACLPermissionType.DENY if args.deny else ACLPermissionType.ALLOW
    for principal in args.principal:
        if ":" not in principal:
            raise CommandError(f"principal {principal!r}: expected TYPE:NAME, e.g. User:{principal}")
    acls = [ACL(principal=p, host=args.host, operation=_operation(o), permission_type=permission,
                resource_pattern=pattern) for p in args.principal for o in args.operation]
    result = client.admin().create_acls(acls)
    failures = iter(result["failed"])
    rows = []
    for acl in acls:
        failed = acl not in result["succeeded"]
        error = next(failures, None) if failed else None
        rows.append({**_row(acl), "error": (getattr(error, "message", None) or "FAILED") if failed else None})
    emit(args, rows, lambda: _table([{**r, "status": r["error"] or "OK"} for r in rows], ["status"]))
    return 1 if any(r["error"] for r in rows) else 0


def delete_acls(args: argparse.Namespace, client: Client) -> int:
    results = client.admin().delete_acls(_filters(args))
    rows, errors = [], []
    for _filter, matching, error in results:
        if error.errno:
            errors.append(error_name(error.errno))
        rows += [_row(acl) for acl in matching]
    emit(args, rows, lambda: _table(rows) if rows else "no ACL matched")
    if errors:
        raise CommandError(", ".join(sorted(set(errors))))
    return 0
