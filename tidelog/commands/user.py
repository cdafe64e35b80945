"""`tidelog user list|create|delete`: SCRAM credentials (KIP-554: DescribeUserScramCredentials and
AlterUserScramCredentials; the salted password is derived here, the password never goes over the wire)."""

from __future__ import annotations

import argparse
import getpass
import sys

from tidelog.commands.common import Client, CommandError, client_options, emit, table

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def configure(parser: argparse.ArgumentParser) -> None:
    common = client_options()
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = sub.add_parser("list", parents=[common], help="users with SCRAM credentials, and their mechanisms")
    listing.add_argument("users", nargs="*", metavar="USER", help="only these users")
    listing.set_defaults(func=list_users)

    create = sub.add_parser("create", parents=[common], help="create a SCRAM user (or change its password)")
    create.add_argument("user", metavar="USER")
    secret = create.add_mutually_exclusive_group()
    secret.add_argument("--password", help="the password (else read from stdin, or asked on a terminal)")
    secret.add_argument("--password-stdin", action="store_true", help="read the password from stdin's first line")
    create.add_argument("--mechanism", choices=MECHANISMS, action="append",
                        help="repeatable (default SCRAM-SHA-256)")
    create.add_argument("--iterations", type=int, default=4096, help="PBKDF2 iterations (default 4096, as kafka-configs)")
    create.set_defaults(func=create_user)

    delete = sub.add_parser("delete", parents=[common], help="delete a user's SCRAM credentials")
    delete.add_argument("user", metavar="USER")
    delete.add_argument("--mechanism", choices=MECHANISMS, action="append",
                        help="only this mechanism's credential; repeatable (default: every mechanism it has)")
    delete.set_defaults(func=delete_user)


def list_users(args: argparse.Namespace, client: Client) -> int:
    described = client.admin().describe_user_scram_credentials(args.users or None)
    rows = [{"user": user, "error": info["error"],
             "credentials": [{"mechanism": _mechanism_name(c["mechanism"]), "iterations": c["iterations"]}
                             for c in info["credential_infos"]]}
            for user, info in sorted(described.items())]
    emit(args, rows, lambda: table(["user", "mechanisms", "status"], [
        (r["user"], ", ".join(f"{c['mechanism']} ({c['iterations']})" for c in r["credentials"]),
         r["error"] or "OK") for r in rows]))
    return 1 if any(r["error"] for r in rows) else 0


def _mechanism_name(mechanism: object) -> str:
    return str(getattr(mechanism, "name", mechanism)).replace("_", "-")


def _password(args: argparse.Namespace) -> str:
    if args.password is not None:
        return str(args.password)
    if not args.password_stdin and sys.stdin.isatty():
        first = getpass.getpass(f"password for {args.user}: ")
        if first != getpass.getpass("again: "):
            raise CommandError("the passwords differ")
        return first
    line = sys.stdin.readline()
    if not line:
        raise CommandError("no password: give --password, or one line on stdin")
    return line.rstrip("\r\n")


def create_user(args: argparse.Namespace, client: Client) -> int:
    from kafka.admin import UserScramCredentialUpsertion

    password = _password(args)
    if not password:
        raise CommandError("the password is empty")
    mechanisms = args.mechanism or ["SCRAM-SHA-256"]
    result = client.admin().alter_user_scram_credentials(
        [UserScramCredentialUpsertion(args.user, m, password, iterations=args.iterations) for m in mechanisms])
    return _report(args, result, mechanisms)


def delete_user(args: argparse.Namespace, client: Client) -> int:
    from kafka.admin import UserScramCredentialDeletion

    admin = client.admin()
    mechanisms = args.mechanism
    if not mechanisms:
        info = admin.describe_user_scram_credentials([args.user]).get(args.user, {})
        if info.get("error"):
            raise CommandError(f"user {args.user!r}: {info['error']}")
        mechanisms = [_mechanism_name(c["mechanism"]) for c in info.get("credential_infos", [])]
    result = admin.alter_user_scram_credentials([UserScramCredentialDeletion(args.user, m) for m in mechanisms])
    return _report(args, result, mechanisms)


def _report(args: argparse.Namespace, result: dict[str, str | None], mechanisms: list[str]) -> int:
    error = result.get(args.user, "no answer")
    row = {"user": args.user, "mechanisms": mechanisms, "error": error}
    emit(args, row, lambda: table(["user", "mechanisms", "status"],
                                  [(args.user, ", ".join(mechanisms), error or "OK")]))
    return 1 if error else 0
