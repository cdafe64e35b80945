"""rpk-style client commands of the `tidelog` console script: `tidelog topic|produce|consume|group|cluster|acl|user`
and `tidelog schema`.

They speak the Kafka protocol (kafka-python's clients, the project's own dependency) to any broker, tidelog or
Apache Kafka; `schema` speaks Confluent's Schema Registry REST API. This package's `__init__` holds only the
names: `tidelog serve` imports it to list the commands in its help, and imports a command's module (and
kafka-python) only when that command runs.
"""

from __future__ import annotations

from collections.abc import Sequence

# command -> (module under tidelog.commands, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "topic": ("topic", "list, create, describe, alter-config and delete topics"),
    "produce": ("produce", "produce records from stdin or arguments (keys, headers)"),
    "consume": ("consume", "consume records, printed with a kcat-like format or as JSON lines"),
    "group": ("group", "list, describe (members, offsets, lag), reset-offsets and delete consumer groups"),
    "cluster": ("cluster", "show the cluster: id, controller, brokers, feature levels"),
    "acl": ("acl", "list, create and delete ACLs"),
    "user": ("user", "list, create and delete SCRAM users"),
    "schema": ("schema", "list, get, register, check (compatibility) and delete Schema Registry subjects"),
}


def run_command(argv: Sequence[str]) -> int:
    """Run `tidelog <command> ...` (argv[0] is the command)."""
    # lazy for start-up time: kafka-python only when a command runs (see the docstring)
    from tidelog.commands import common

    return common.run_command(argv[0], list(argv[1:]))
