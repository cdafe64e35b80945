"""docs/APIS.md, generated from the code (issue #15), so the served versions, the notes and the differences from
Kafka 4.4 cannot drift from what the broker does.

The sources: `API_TABLE` (versions; `difference`: why an advertised range is not Kafka 4.4's), each API module's
`NOTES` (Markdown, one table cell), `NOT_SERVED` below (why an API key is not served), Kafka 4.4's ranges
(`tidelog.broker.kafka_versions.KAFKA_44`, with its sources) and the free text of docs/APIS.template.md.
`scripts/gen_apis_doc.py` (`make docs`) writes the file; tests/test_apis_doc.py fails when it is stale.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass

from tidelog.broker.apis import API_TABLE, ApiEntry
from tidelog.broker.kafka_versions import KAFKA_44
from tidelog.protocol.api_keys import ApiKey

REFERENCE = "Kafka 4.4"
KAFKA: Mapping[int, tuple[int, int]] = KAFKA_44  # the release docs/APIS.md and the parity tests compare with

# Placeholders in docs/APIS.template.md, each replaced by a generated table.
SERVED_TABLE = "@@SERVED_TABLE@@"
NOT_SERVED_TABLE = "@@NOT_SERVED_TABLE@@"
OTHER_KEYS_TABLE = "@@OTHER_KEYS_TABLE@@"

_SHARE_STATE = ("share-group state kept by the share coordinator (KIP-932), sent between brokers; on one node the "
                "share coordinator is part of the broker (`coordinator/share/`), nothing goes over the wire")
_DELEGATION_TOKENS = "delegation tokens are not implemented (a SCRAM login with `tokenauth` is refused)"
_ZOOKEEPER = "ZooKeeper-era inter-broker API, removed in Kafka 4.0; tidelog has no replication"
_QUORUM = "KRaft traffic between controller voters; this node is the only voter of `__cluster_metadata`"
_TO_CONTROLLER = "broker-to-controller API; broker and controller are one process here, nothing goes over the wire"

# Why each API key tidelog does not serve is left out: keys Kafka 4.4 advertises first, then the others.
NOT_SERVED: dict[ApiKey, str] = {
    ApiKey.WRITE_TXN_MARKERS: "transaction coordinator to partition leader only: on one node the coordinator writes "
                              "the markers into the local logs itself",
    ApiKey.CREATE_DELEGATION_TOKEN: _DELEGATION_TOKENS,
    ApiKey.RENEW_DELEGATION_TOKEN: _DELEGATION_TOKENS,
    ApiKey.EXPIRE_DELEGATION_TOKEN: _DELEGATION_TOKENS,
    ApiKey.DESCRIBE_DELEGATION_TOKEN: _DELEGATION_TOKENS,
    ApiKey.UNREGISTER_BROKER: "removes another broker's registration from the KRaft controller; this node is the "
                              "only broker and is never unregistered",
    ApiKey.UNREGISTER_CONTROLLER: "removes a controller's registration (Kafka 4.4, KAFKA-20395); this node is the only "
                                  "controller and the single voter, never unregistered",
    ApiKey.ADD_RAFT_VOTER: "dynamic KRaft quorum membership (KIP-853): there is no other controller to add; this "
                           "node stays the single voter",
    ApiKey.REMOVE_RAFT_VOTER: "dynamic KRaft quorum membership (KIP-853): the single voter cannot be removed",
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: _SHARE_STATE,
    ApiKey.READ_SHARE_GROUP_STATE: _SHARE_STATE,
    ApiKey.WRITE_SHARE_GROUP_STATE: _SHARE_STATE,
    ApiKey.DELETE_SHARE_GROUP_STATE: _SHARE_STATE,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: _SHARE_STATE,
    # not in Kafka 4.4's broker ApiVersions answer either
    ApiKey.LEADER_AND_ISR: _ZOOKEEPER,
    ApiKey.STOP_REPLICA: _ZOOKEEPER,
    ApiKey.UPDATE_METADATA: _ZOOKEEPER,
    ApiKey.CONTROLLED_SHUTDOWN: _ZOOKEEPER,
    ApiKey.VOTE: _QUORUM,
    ApiKey.BEGIN_QUORUM_EPOCH: _QUORUM,
    ApiKey.END_QUORUM_EPOCH: _QUORUM,
    ApiKey.FETCH_SNAPSHOT: _QUORUM,
    ApiKey.UPDATE_RAFT_VOTER: _QUORUM,
    ApiKey.ALTER_PARTITION: _TO_CONTROLLER,
    ApiKey.BROKER_REGISTRATION: _TO_CONTROLLER,
    ApiKey.BROKER_HEARTBEAT: _TO_CONTROLLER,
    ApiKey.ALLOCATE_PRODUCER_IDS: _TO_CONTROLLER,
    ApiKey.CONTROLLER_REGISTRATION: _TO_CONTROLLER,
    ApiKey.ASSIGN_REPLICAS_TO_DIRS: _TO_CONTROLLER,
    ApiKey.ENVELOPE: "a broker forwarding a client's request to the controller (KIP-590); nothing is forwarded on "
                     "one node",
}


@dataclass(frozen=True)
class ServedApi:
    entry: ApiEntry
    notes: str  # the module's NOTES on one line
    kafka: tuple[int, int] | None  # Kafka 4.4's advertised range; None when it does not advertise the key

    @property
    def advertised(self) -> tuple[int, int]:
        _, low, high = self.entry.advertised
        return low, high

    @property
    def differs(self) -> bool:
        return self.kafka != self.advertised

    def difference(self) -> str:
        """'same', or what differs from Kafka 4.4's advertised range followed by the entry's reason."""
        if not self.differs:
            return "same"
        return f"{range_difference(self.advertised, self.kafka)}: {self.entry.difference}"


def versions(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}–{high}"


def range_difference(ours: tuple[int, int], kafka: tuple[int, int] | None) -> str:
    """What tidelog's advertised range lacks or adds next to Kafka's, e.g. 'v5 not offered'."""
    if kafka is None:
        return f"not advertised by {REFERENCE}"
    parts: list[str] = []
    if ours[0] > kafka[0]:
        parts.append(f"v{versions(kafka[0], ours[0] - 1)} not offered")
    if ours[0] < kafka[0]:
        parts.append(f"v{versions(ours[0], kafka[0] - 1)} offered, removed in {REFERENCE}")
    if ours[1] < kafka[1]:
        parts.append(f"v{versions(ours[1] + 1, kafka[1])} not offered")
    if ours[1] > kafka[1]:
        parts.append(f"v{versions(kafka[1] + 1, ours[1])} beyond {REFERENCE}")
    return "; ".join(parts)


def one_line(markdown: str) -> str:
    """A NOTES string as one Markdown table cell: whitespace runs become one space, `|` is escaped."""
    return " ".join(markdown.split()).replace("|", "\\|")


def served_apis() -> list[ServedApi]:
    """Every API_TABLE entry by key, with its module's NOTES (importing the handler modules)."""
    apis = []
    for entry in sorted(API_TABLE, key=lambda e: int(e.key)):
        module = importlib.import_module(f"tidelog.broker.apis.{entry.module}")
        notes: str = module.NOTES  # AttributeError names the module that lacks it
        apis.append(ServedApi(entry, one_line(notes), KAFKA.get(int(entry.key))))
    return apis


def problems(apis: list[ServedApi]) -> list[str]:
    """Reasons missing or stale: what keeps the generated file from being true."""
    found = []
    served = {int(api.entry.key) for api in apis}
    for api in apis:
        name = api.entry.key.api_name
        if api.differs and not api.entry.difference.strip():
            found.append(f"{name}: advertises {api.advertised}, {REFERENCE} {api.kafka}; give API_TABLE's entry a "
                         f"`difference` saying why")
        if not api.differs and api.entry.difference:
            found.append(f"{name}: advertises {REFERENCE}'s range now; drop its `difference`")
        if not api.notes:
            found.append(f"{name}: tidelog.broker.apis.{api.entry.module}.NOTES is empty")
    for key in ApiKey:
        reason = NOT_SERVED.get(key, "").strip()
        if int(key) in served and key in NOT_SERVED:
            found.append(f"{key.api_name} is served: drop it from NOT_SERVED")
        if int(key) not in served and not reason:
            found.append(f"{key.api_name} (key {int(key)}) is not served: say why in NOT_SERVED")
    for unknown in sorted(set(KAFKA) - {int(k) for k in ApiKey}):
        found.append(f"{REFERENCE} advertises key {unknown}, unknown to tidelog.protocol.api_keys.ApiKey")
    return found


def served_table(apis: list[ServedApi]) -> str:
    rows = [f"| Key | API | Served | Advertised | {REFERENCE} | Difference from {REFERENCE} | Notes |",
            "|---|---|---|---|---|---|---|"]
    for api in apis:
        e = api.entry
        kafka = versions(*api.kafka) if api.kafka else "not advertised"
        rows.append(f"| {int(e.key)} | {e.key.api_name} | {versions(e.min_version, e.max_version)} "
                    f"| {versions(*api.advertised)} | {kafka} | {one_line(api.difference())} | {api.notes} |")
    return "\n".join(rows)


def not_served_table(in_kafka: bool) -> str:
    """The keys tidelog does not serve that Kafka 4.4 advertises (in_kafka) or does not."""
    rows = ([f"| Key | API | {REFERENCE} | Why not served |", "|---|---|---|---|"] if in_kafka
            else ["| Key | API | Why not served |", "|---|---|---|"])
    for key in sorted(NOT_SERVED):
        kafka = KAFKA.get(int(key))
        if (kafka is not None) != in_kafka:
            continue
        cells = [str(int(key)), key.api_name] + ([versions(*kafka)] if kafka else []) + [one_line(NOT_SERVED[key])]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def render(template: str) -> str:
    """docs/APIS.md from its template; ValueError when a reason is missing or stale."""
    apis = served_apis()
    found = problems(apis)
    if found:
        raise ValueError("docs/APIS.md cannot be generated:\n  " + "\n  ".join(found))
    for placeholder in (SERVED_TABLE, NOT_SERVED_TABLE, OTHER_KEYS_TABLE):
        if template.count(placeholder) != 1:
            raise ValueError(f"docs/APIS.template.md must hold {placeholder} exactly once")
    header = ("<!-- Generated by scripts/gen_apis_doc.py (`make docs`) from tidelog/broker/apis (API_TABLE, each "
              "module's NOTES),\n     tidelog/broker/apis_doc.py (NOT_SERVED) and docs/APIS.template.md: edit "
              "those, not this file. -->\n")
    return header + (template.replace(SERVED_TABLE, served_table(apis))
                     .replace(NOT_SERVED_TABLE, not_served_table(in_kafka=True))
                     .replace(OTHER_KEYS_TABLE, not_served_table(in_kafka=False)))
