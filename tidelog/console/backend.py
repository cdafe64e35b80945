"""What the console shows and does, as plain functions returning JSON-able dicts.

Kafka-level facts (topics, partition offsets, configs with their source, groups and their offsets, records) come
from a kafka-python client connected to this broker over loopback: the console then goes through exactly the
paths a client does (Fetch's bounded reads, DescribeConfigs' masking of sensitive values, the authorizer) and
never takes a broker lock of its own. What the protocol does not carry (segments, feature levels, uptime,
request counters) is read from the broker's objects under their own locks, as a metrics scrape does.

Every function here blocks: the HTTP layer calls them on its worker threads, never on the broker's event loop.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafka import IsolationLevel, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    OffsetSpec,
    OffsetTimestamp,
    ResourcePatternFilter,
    ResourceType,
)

from tidelog.console.records import contains as bytes_contain
from tidelog.console.records import header_matches, record_json
from tidelog.protocol.admin_raw import AdminRequestError, describe_client_quotas, describe_modern_group
from tidelog.storage import TopicPartition as LogTp

if TYPE_CHECKING:
    from tidelog.console.view import BrokerServer as Server

# A browse never scans more than this many records or waits longer than this for them (Fetch-sized reads).
MAX_LIMIT = 500
SCAN_RECORDS = 20_000
SCAN_SECONDS = 5.0
FETCH_MAX_BYTES = 1 << 20
TOPIC_COLUMNS = ("cleanup.policy", "retention.ms", "retention.bytes")
TOPIC_AUTHORIZATION_FAILED = 29
DEFAULT_ENTITY = "<default>"  # a quota entity's default (a null name), as kafka-configs prints it


class ConsoleError(Exception):
    """An answer other than 200: `status` and a message for the user."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Credentials:
    """A console user's SASL login, used for every request the console makes for them (their ACLs apply)."""

    listener: str
    mechanism: str
    username: str
    password: str = field(repr=False)


class Backend:
    def __init__(self, server: Server, credentials: Credentials | None = None,
                 started_s: float | None = None) -> None:
        self.server = server
        self.credentials = credentials
        self.started_s = time.time() if started_s is None else started_s
        self._admin: Any = None
        self._producer: Any = None
        self._lock = threading.Lock()  # one admin request at a time (kafka-python's admin is not thread-safe)

    # --- clients -------------------------------------------------------------------------------------

    def client_config(self) -> dict[str, Any]:
        """kafka-python settings for the loopback connection: the user's SASL_PLAINTEXT listener and login, or
        without credentials the first PLAINTEXT listener."""
        creds = self.credentials
        wanted = creds.listener if creds is not None else None
        for name, host, _port in self.server.endpoints.listeners:
            if name == wanted or (wanted is None and self.server.security.listeners[name].protocol == "PLAINTEXT"):
                loopback = "::1" if ":" in host else "127.0.0.1"
                conf: dict[str, Any] = {"bootstrap_servers": f"{loopback}:{self.server.ports[name]}",
                                        "client_id": "tidelog-console", "request_timeout_ms": 30_000}
                if creds is not None:
                    conf.update({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": creds.mechanism,
                                 "sasl_plain_username": creds.username, "sasl_plain_password": creds.password})
                return conf
        raise ConsoleError(503, "the console needs a PLAINTEXT (or, with SASL, SASL_PLAINTEXT) listener")

    def check_login(self, timeout_ms: int) -> None:
        """Connect as the user now: a wrong user or password fails here (kafka-python retries a failed SASL
        login until its bootstrap timeout, so that bounds the wait)."""
        try:
            self._admin = KafkaAdminClient(**self.client_config(), bootstrap_timeout_ms=timeout_ms)
        except Exception as exc:
            raise ConsoleError(401, "login refused: wrong user name or password") from exc

    def visible_topics(self) -> set[str]:
        """The topics this user may describe (Metadata filters the others out, as for any client)."""
        topics: set[str] = self.call_admin(lambda admin: set(admin.list_topics()))
        return topics

    def admin(self) -> Any:
        if self._admin is None:
            self._admin = KafkaAdminClient(**self.client_config())
        return self._admin

    def call_admin(self, fn: Callable[[Any], Any]) -> Any:
        with self._lock:
            try:
                return fn(self.admin())
            except ConsoleError:
                raise
            except Exception as exc:
                raise _kafka_error(exc) from exc

    def close(self) -> None:
        for client in (self._admin, self._producer):
            if client is not None:
                try:
                    client.close()
                except Exception:  # noqa: BLE001 - closing at shutdown
                    pass
        self._admin = self._producer = None

    # --- overview ------------------------------------------------------------------------------------

    def overview(self) -> dict[str, Any]:
        server = self.server
        levels, epoch = server.features.finalized_levels()
        return {
            "node_id": int(server.config.node_id),
            "cluster_id": server.broker.cluster_id,
            "listeners": [{"name": name, "host": host or "0.0.0.0", "port": server.ports.get(name, port),
                           "security_protocol": server.security.listeners[name].protocol}
                          for name, host, port in server.endpoints.listeners],
            "features": {"finalized": levels, "epoch": epoch,
                         "supported": {k: list(v) for k, v in server.features.supported().items()}},
            "uptime_s": round(time.time() - self.started_s, 1),
            "read_only": bool(server.config.get("console.read.only")),
        }

    def traffic(self) -> dict[str, Any]:
        """Cumulative counters for the overview's live chart (the page turns them into rates)."""
        m = self.server.metrics
        by_api: dict[str, int] = {}
        for (api, _code), n in list(m.request_counts.items()):
            by_api[api] = by_api.get(api, 0) + n
        return {"time_ms": int(time.time() * 1000), "bytes_in": m.bytes_in, "bytes_out": m.bytes_out,
                "requests": by_api}

    # --- topics --------------------------------------------------------------------------------------

    def topics(self) -> list[dict[str, Any]]:
        def read(admin: Any) -> list[dict[str, Any]]:
            described = [t for t in admin.describe_topics() if t["error_code"] == 0]
            tps = [TopicPartition(t["name"], p["partition_index"]) for t in described for p in t["partitions"]]
            start = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.EARLIEST)) if tps else {}
            end = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.LATEST)) if tps else {}
            names = [t["name"] for t in described]
            configs = _described_configs(admin, [ConfigResource(ConfigResourceType.TOPIC, n,
                                                                configs=dict.fromkeys(TOPIC_COLUMNS))
                                                 for n in names]) if names else {}
            sizes = self._sizes()
            out = []
            for t in sorted(described, key=lambda t: t["name"]):
                name = t["name"]
                parts = [TopicPartition(name, p["partition_index"]) for p in t["partitions"]]
                out.append({
                    "name": name, "internal": t["is_internal"], "partitions": len(parts),
                    "records": sum(max(0, end[tp].offset - start[tp].offset) for tp in parts if tp in end),
                    "size_bytes": sum(sizes.get((name, tp.partition), 0) for tp in parts),
                    **dict.fromkeys(TOPIC_COLUMNS),  # shown empty without DESCRIBE_CONFIGS on the topic
                    **{k: v.get("value") for k, v in configs.get(name, {}).items()},
                })
            return out

        result: list[dict[str, Any]] = self.call_admin(read)
        return result

    def _sizes(self) -> dict[tuple[str, int], int]:
        return {(tp.topic, tp.partition): lg.size_in_bytes()
                for tp, lg in list(self.server.broker.log_manager.all_logs().items())}

    def topic(self, name: str) -> dict[str, Any]:
        def read(admin: Any) -> dict[str, Any]:
            described = admin.describe_topics([name])
            if described and described[0]["error_code"] == TOPIC_AUTHORIZATION_FAILED:
                raise ConsoleError(403, f"not authorized to describe topic {name!r}")
            if not described or described[0]["error_code"] != 0:
                raise ConsoleError(404, f"no topic {name!r}")
            t = described[0]
            tps = [TopicPartition(name, p["partition_index"]) for p in t["partitions"]]
            start = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.EARLIEST))
            hw = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.LATEST))
            lso = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.LATEST),
                                               isolation_level=IsolationLevel.READ_COMMITTED)
            configs = _described_configs(admin, [ConfigResource(ConfigResourceType.TOPIC, name)]).get(name, {})
            partitions = [{"partition": tp.partition, "log_start_offset": start[tp].offset,
                           "high_watermark": hw[tp].offset, "last_stable_offset": lso[tp].offset,
                           "segments": self._segments(name, tp.partition)} for tp in tps]
            return {"name": name, "topic_id": str(t["topic_id"]), "internal": t["is_internal"],
                    "partitions": sorted(partitions, key=lambda p: p["partition"]),
                    "configs": [{"name": k, **v} for k, v in sorted(configs.items())]}

        result: dict[str, Any] = self.call_admin(read)
        return result

    def _segments(self, topic: str, partition: int) -> list[dict[str, Any]]:
        lg = self.server.broker.log_manager.get_log(LogTp(topic, partition))
        if lg is None:
            return []
        now = int(time.time() * 1000)
        with lg.lock:  # a snapshot of the segment list, as a retention pass takes it
            segments = list(lg.segments)
            active = lg.segments.last_segment
        return [{"base_offset": s.base_offset, "size_bytes": s.size, "created_ms": s.created,
                 "age_ms": max(0, now - s.created), "active": s is active} for s in segments]

    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> dict[str, Any]:
        def create(admin: Any) -> dict[str, Any]:
            admin.create_topics({name: {"num_partitions": partitions, "replication_factor": -1,
                                        "configs": configs}})
            return {"name": name, "partitions": partitions}

        result: dict[str, Any] = self.call_admin(create)
        return result

    def delete_topic(self, name: str) -> dict[str, Any]:
        self.call_admin(lambda admin: admin.delete_topics([name]))
        return {"deleted": name}

    def alter_topic_configs(self, name: str, configs: dict[str, str | None]) -> dict[str, Any]:
        """Incremental: a value sets the config, None deletes it (back to the broker default)."""
        ops = {k: ("DELETE", None) if v is None else ("SET", str(v)) for k, v in configs.items()}

        def alter(admin: Any) -> None:
            result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs=ops)],
                                         incremental=True)
            for per_type in result.values():
                for outcome in (per_type.values() if isinstance(per_type, dict) else [per_type]):
                    if isinstance(outcome, Exception):
                        raise outcome

        self.call_admin(alter)
        return {"altered": name, "configs": configs}

    # --- records -------------------------------------------------------------------------------------

    def records(self, topic: str, partition: int, offset: str | None = None, timestamp: int | None = None,
                limit: int = 50, key: str | None = None, value: str | None = None, header: str | None = None,
                full: bool = False) -> dict[str, Any]:
        """Up to `limit` records of one partition from `offset` (a number, "beginning" or "end": the last
        `limit`) or the first at/after `timestamp`, keeping those that match the substring filters. Reads are
        Fetches of at most FETCH_MAX_BYTES, and the scan stops at the high watermark, after SCAN_RECORDS
        records or SCAN_SECONDS; `next_offset` says where to go on."""
        limit = max(1, min(int(limit), MAX_LIMIT))
        tp = TopicPartition(topic, partition)
        consumer = KafkaConsumer(**self.client_config(), enable_auto_commit=False, group_id=None,
                                 max_partition_fetch_bytes=FETCH_MAX_BYTES, fetch_max_bytes=FETCH_MAX_BYTES,
                                 isolation_level="read_uncommitted")
        try:
            try:
                if partition not in (consumer.partitions_for_topic(topic) or set()):
                    raise ConsoleError(404, f"no partition {topic}-{partition}")
                consumer.assign([tp])
                start = consumer.beginning_offsets([tp])[tp]
                end = consumer.end_offsets([tp])[tp]
                position = self._start_position(consumer, tp, start, end, offset, timestamp, limit)
            except ConsoleError:
                raise
            except Exception as exc:
                raise _kafka_error(exc) from exc
            found: list[dict[str, Any]] = []
            scanned = 0
            deadline = time.monotonic() + SCAN_SECONDS
            next_offset = position
            if position < end:
                consumer.seek(tp, position)
                while next_offset < end and len(found) < limit and scanned < SCAN_RECORDS \
                        and time.monotonic() < deadline:
                    batch = consumer.poll(timeout_ms=500, max_records=limit - len(found)).get(tp, [])
                    for record in batch:
                        scanned += 1
                        next_offset = record.offset + 1
                        if _matches(record, key, value, header):
                            found.append(record_json(record, full))
                    if not batch:
                        next_offset = max(next_offset, consumer.position(tp) or next_offset)
            return {"topic": topic, "partition": partition, "log_start_offset": start, "high_watermark": end,
                    "start_offset": position, "next_offset": next_offset, "scanned": scanned,
                    "end_reached": next_offset >= end, "records": found}
        finally:
            consumer.close()

    @staticmethod
    def _start_position(consumer: Any, tp: Any, start: int, end: int, offset: str | None,
                        timestamp: int | None, limit: int) -> int:
        if timestamp is not None:
            found = consumer.offsets_for_times({tp: int(timestamp)}).get(tp)
            return end if found is None else int(found.offset)
        if offset in (None, "", "beginning"):
            return int(start)
        if offset == "end":
            return int(max(start, end - limit))
        try:
            return int(min(max(int(str(offset)), start), end))
        except ValueError:
            raise ConsoleError(400, f"offset must be a number, 'beginning' or 'end', not {offset!r}") from None

    def produce(self, topic: str, partition: int | None, key: str | None, value: str | None,
                headers: list[tuple[str, str]]) -> dict[str, Any]:
        with self._lock:
            if self._producer is None:
                self._producer = KafkaProducer(**self.client_config(), acks="all", linger_ms=0)
            producer = self._producer
        try:
            meta = producer.send(topic, key=None if key is None else key.encode(),
                                 value=None if value is None else value.encode(), partition=partition,
                                 headers=[(k, v.encode()) for k, v in headers]).get(30)
        except Exception as exc:
            raise _kafka_error(exc) from exc
        return {"topic": topic, "partition": meta.partition, "offset": meta.offset}

    # --- groups --------------------------------------------------------------------------------------

    def groups(self) -> list[dict[str, Any]]:
        def read(admin: Any) -> list[dict[str, Any]]:
            listed = admin.list_groups()
            return sorted(({"group_id": g["group_id"], "state": g.get("group_state"),
                            "type": g.get("group_type") or "classic", "protocol_type": g.get("protocol_type")}
                           for g in listed), key=lambda g: str(g["group_id"]))

        result: list[dict[str, Any]] = self.call_admin(read)
        return result

    def group(self, group_id: str) -> dict[str, Any]:
        def read(admin: Any) -> dict[str, Any]:
            described = admin.describe_groups([group_id]).get(group_id) or {}
            committed = admin.list_group_offsets({group_id: None}).get(group_id, {})
            ends = admin.list_partition_offsets(dict.fromkeys(committed, OffsetSpec.LATEST)) if committed else {}
            partitions = []
            for tp, meta in sorted(committed.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
                end = ends[tp].offset if tp in ends else None
                lag = None if end is None or meta.offset < 0 else max(0, end - meta.offset)
                partitions.append({"topic": tp.topic, "partition": tp.partition, "committed_offset": meta.offset,
                                   "log_end_offset": end, "lag": lag})
            per_topic: dict[str, int] = {}
            for p in partitions:
                per_topic[p["topic"]] = per_topic.get(p["topic"], 0) + (p["lag"] or 0)
            listed = _listed_group(admin, group_id)
            if listed is None and not committed:
                raise ConsoleError(404, f"no group {group_id!r}")
            group_type = str((listed or {}).get("group_type") or "classic")
            # DescribeGroups knows classic groups only; a KIP-848 or share group's state and members come from
            # ConsumerGroupDescribe / ShareGroupDescribe, which kafka-python lacks (sent with tidelog's codecs)
            members = [_member(m) for m in described.get("members", [])]
            modern_state = None
            if group_type != "classic":
                try:
                    modern = describe_modern_group(admin, group_id)
                except AdminRequestError as exc:
                    raise ConsoleError(403 if "AUTHORIZATION" in exc.error else 502,
                                       f"group {group_id!r}: {exc}") from None
                members = [] if modern is None else [_modern_member(m) for m in modern[2]]
                modern_state = None if modern is None else modern[1]["group_state"]
            state = (described.get("group_state") if group_type == "classic" else modern_state) \
                or (listed or {}).get("group_state") or "Dead"
            return {"group_id": group_id, "state": state, "type": group_type,
                    "protocol_type": described.get("protocol_type") or (listed or {}).get("protocol_type", ""),
                    "members": members,
                    "offsets": partitions, "lag_per_topic": per_topic, "lag": sum(per_topic.values())}

        result: dict[str, Any] = self.call_admin(read)
        return result

    def reset_group_offsets(self, group_id: str, topic: str, to: str, value: int | None) -> dict[str, Any]:
        """As `kafka-consumer-groups --reset-offsets --to-earliest|--to-latest|--to-datetime|--to-offset`,
        refused unless the group is empty (Kafka refuses a reset of a group with members)."""
        def reset(admin: Any) -> dict[str, Any]:
            described = admin.describe_groups([group_id]).get(group_id) or {}
            listed = _listed_group(admin, group_id) or {}
            state = str(listed.get("group_state") or described.get("group_state") or "Dead")
            if described.get("members") or state not in ("Empty", "Dead"):
                raise ConsoleError(409, f"group {group_id!r} is {state}, not empty: stop its members first")
            partitions = admin.describe_topics([topic])
            if not partitions or partitions[0]["error_code"] != 0:
                raise ConsoleError(404, f"no topic {topic!r}")
            spec: Any
            if to == "earliest":
                spec = OffsetSpec.EARLIEST
            elif to == "latest":
                spec = OffsetSpec.LATEST
            elif to == "timestamp" and value is not None:
                spec = OffsetTimestamp(int(value))
            elif to == "offset" and value is not None:
                spec = int(value)
            else:
                raise ConsoleError(400, "to must be earliest, latest, timestamp or offset (with a value)")
            specs = {TopicPartition(topic, p["partition_index"]): spec for p in partitions[0]["partitions"]}
            done = admin.reset_group_offsets(group_id, specs)
            return {"group_id": group_id, "offsets": {f"{tp.topic}-{tp.partition}": getattr(o, "offset", o)
                                                      for tp, o in done.items()}}

        result: dict[str, Any] = self.call_admin(reset)
        return result

    # --- transactions, producers, ACLs, SCRAM users (read-only views) ----------------------------------

    def transactions(self) -> list[dict[str, Any]]:
        """Transactions the coordinator knows (ListTransactions + DescribeTransactions)."""
        def read(admin: Any) -> list[dict[str, Any]]:
            ids = sorted({t.transactional_id for per_broker in admin.list_transactions().values()
                          for t in per_broker})
            described = admin.describe_transactions(ids) if ids else {}
            return [{"transactional_id": tid, "state": _enum_value(d.state), "producer_id": d.producer_id,
                     "producer_epoch": d.producer_epoch, "timeout_ms": d.transaction_timeout_ms,
                     "start_time_ms": d.transaction_start_time_ms,
                     "partitions": sorted(f"{tp.topic}-{tp.partition}" for tp in d.topic_partitions)}
                    for tid, d in sorted(described.items())]

        result: list[dict[str, Any]] = self.call_admin(read)
        return result

    def producers(self, topic: str) -> list[dict[str, Any]]:
        """Active producers of each partition of `topic` (DescribeProducers)."""
        def read(admin: Any) -> list[dict[str, Any]]:
            described = admin.describe_topics([topic])
            if not described or described[0]["error_code"] != 0:
                raise ConsoleError(404, f"no topic {topic!r}")
            tps = [TopicPartition(topic, p["partition_index"]) for p in described[0]["partitions"]]
            states = admin.describe_producers(tps)
            return [{"partition": tp.partition, "producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
                     "last_sequence": p.last_sequence, "last_timestamp": p.last_timestamp,
                     "current_transaction_start_offset": p.current_transaction_start_offset}
                    for tp in sorted(states, key=lambda tp: tp.partition) for p in states[tp].active_producers]

        result: list[dict[str, Any]] = self.call_admin(read)
        return result

    def security(self) -> dict[str, Any]:
        """ACLs (DescribeAcls) and SCRAM users with their mechanisms and iteration counts only: never a salt or
        a key (DescribeUserScramCredentials carries neither)."""
        def read(admin: Any) -> dict[str, Any]:
            any_acl = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                                permission_type=ACLPermissionType.ANY,
                                resource_pattern=ResourcePatternFilter(ResourceType.ANY, None,
                                                                       ACLResourcePatternType.ANY))
            try:
                acls, _ = admin.describe_acls(any_acl)
                authorizer = True
            except Exception as exc:  # noqa: BLE001 - no authorizer: SecurityDisabledError
                if "SecurityDisabled" not in type(exc).__name__:
                    raise
                acls, authorizer = [], False
            users = admin.describe_user_scram_credentials()
            return {
                "authorizer": authorizer,
                "acls": sorted(({"principal": a.principal, "host": a.host, "operation": _enum_name(a.operation),
                                 "permission": _enum_name(a.permission_type),
                                 "resource_type": _enum_name(a.resource_pattern.resource_type),
                                 "resource_name": a.resource_pattern.resource_name,
                                 "pattern_type": _enum_name(a.resource_pattern.pattern_type)} for a in acls),
                                key=lambda a: (a["resource_type"], a["resource_name"], a["principal"])),
                "scram_users": [{"user": name, "credentials": [
                    {"mechanism": _enum_name(c["mechanism"]).replace("_", "-"), "iterations": c["iterations"]}
                    for c in info.get("credential_infos", [])]} for name, info in sorted(users.items())],
            }

        result: dict[str, Any] = self.call_admin(read)
        return result

    def quotas(self) -> list[dict[str, Any]]:
        """Every client quota (DescribeClientQuotas matching all entities: user, client-id, ip and their
        defaults, shown as "<default>"), sorted by entity."""
        def read(admin: Any) -> list[dict[str, Any]]:
            try:
                found = describe_client_quotas(admin)
            except AdminRequestError as exc:
                raise ConsoleError(403 if "AUTHORIZATION" in exc.error else 502, f"quotas: {exc}") from None
            rows = [{"entity": {t: DEFAULT_ENTITY if n is None else n for t, n in q["entity"].items()},
                     "values": dict(sorted(q["values"].items()))} for q in found]
            return sorted(rows, key=lambda r: sorted(r["entity"].items()))

        result: list[dict[str, Any]] = self.call_admin(read)
        return result

    # --- compaction ----------------------------------------------------------------------------------

    def cleaner(self) -> Any:
        route = self.server.metrics.json_routes.get("/api/cleaner")
        if route is None:
            return []
        body = route()
        rows = json.loads(body) if isinstance(body, bytes) else body
        if self.credentials is None:
            return rows
        visible = self.visible_topics()
        return [r for r in rows if r.get("topic") in visible]


def _described_configs(admin: Any, resources: list[Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """DescribeConfigs of `resources` in one request; if the user lacks DESCRIBE_CONFIGS on one of them, again
    one by one, so that such a topic shows no configs instead of failing the page."""
    try:
        return _topic_configs(admin.describe_configs(resources, config_filter="all"))
    except Exception as exc:  # noqa: BLE001 - kafka-python raises the first resource's error code
        if "Authorization" not in type(exc).__name__ or len(resources) == 1:
            if "Authorization" in type(exc).__name__:
                return {}
            raise
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for resource in resources:
        try:
            out.update(_topic_configs(admin.describe_configs([resource], config_filter="all")))
        except Exception as exc:  # noqa: BLE001 - kafka-python raises the resource's error code
            if "Authorization" not in type(exc).__name__:
                raise
    return out


def _topic_configs(described: dict[Any, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """{topic: {config: {value, config_source, is_sensitive, read_only}}} with sensitive values never kept."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for per_type in described.values():
        for name, configs in per_type.items():
            out[name] = {k: {"value": None if v.get("is_sensitive") else v.get("value"),
                             "source": v.get("config_source"), "sensitive": bool(v.get("is_sensitive")),
                             "read_only": bool(v.get("read_only"))} for k, v in configs.items()}
    return out


def _enum_name(value: Any) -> str:
    return str(getattr(value, "name", value))


def _enum_value(value: Any) -> str:
    return str(getattr(value, "value", value))


def _listed_group(admin: Any, group_id: str) -> dict[str, Any] | None:
    return next((dict(g) for g in admin.list_groups() if g["group_id"] == group_id), None)


def _member(m: dict[str, Any]) -> dict[str, Any]:
    assignment = m.get("member_assignment") or {}
    assigned = assignment.get("assigned_partitions") if isinstance(assignment, dict) else None
    return {"member_id": m.get("member_id"), "client_id": m.get("client_id"), "host": m.get("client_host"),
            "assignment": [{"topic": a["topic"], "partitions": list(a["partitions"])} for a in (assigned or [])]}


def _modern_member(m: dict[str, Any]) -> dict[str, Any]:
    return {"member_id": m["member_id"], "client_id": m["client_id"], "host": m["host"],
            "assignment": m["assignments"]}


def _matches(record: Any, key: str | None, value: str | None, header: str | None) -> bool:
    if key and not bytes_contain(record.key, key):
        return False
    if value and not bytes_contain(record.value, value):
        return False
    return not header or header_matches(list(record.headers or []), header)


def _kafka_error(exc: Exception) -> ConsoleError:
    """A client error as an HTTP answer: unknown topic 404, a refusal 403, the rest 400/502 by kind."""
    name = type(exc).__name__
    text = f"{name}: {exc}"
    if "UnknownTopicOrPartition" in name or "UNKNOWN_TOPIC" in str(exc):
        return ConsoleError(404, text)
    if "Authorization" in name or "AUTHORIZATION" in str(exc):
        return ConsoleError(403, text)
    if "TopicAlreadyExists" in name:
        return ConsoleError(409, text)
    if "Invalid" in name or "Policy" in name or isinstance(exc, ValueError):
        return ConsoleError(400, text)
    return ConsoleError(502, text)
