"""The registry's state lives on `_schemas`: acknowledged registrations survive a `tidelog serve` killed with
SIGKILL (ids, versions, configs, modes; a new registration gets a new id, never a reused one); the compacted
topic drops permanently deleted versions once cleaned; a topic a Confluent registry wrote is read as it is."""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from tests.schema_registry.conftest import Registry
from tidelog.schema_registry.store import TOPIC
from tidelog.storage import TopicPartition
from tidelog.testing import BrokerProcess, free_port, run_broker, wait_for_port


def record(name: str, fields: int = 1) -> str:
    return json.dumps({"type": "record", "name": name,
                       "fields": [{"name": f"f{i}", "type": "long", "default": 0} for i in range(fields)]})


def test_acknowledged_registrations_survive_kill_9(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    broker = BrokerProcess(tmp_path / "logs", args=["--schema-registry-port", str(port)])
    with broker:
        wait_for_port("127.0.0.1", port)
        client = SchemaRegistryClient({"url": url})
        ids = {f"kill-{i}": client.register_schema(f"kill-{i}", Schema(record(f"R{i}"), "AVRO")) for i in range(5)}
        ids["kill-0-v2"] = client.register_schema("kill-0", Schema(record("R0", 2), "AVRO"))
        client.set_compatibility("kill-1", "NONE")
        client.delete_version("kill-2", 1)
        Registry(url).ok("PUT", "/mode/kill-3", {"mode": "READONLY"})

        broker.restart(kill=True)
        wait_for_port("127.0.0.1", port)
        fresh = SchemaRegistryClient({"url": url})
        for i in range(5):
            assert json.loads(fresh.get_schema(ids[f"kill-{i}"]).schema_str)["name"] == f"R{i}"
        assert fresh.get_versions("kill-0") == [1, 2]
        assert fresh.get_latest_version("kill-0").schema_id == ids["kill-0-v2"]
        assert fresh.get_compatibility("kill-1") == "NONE"
        assert "kill-2" not in fresh.get_subjects() and "kill-2" in fresh.get_subjects(deleted=True)
        assert Registry(url).ok("GET", "/mode/kill-3") == {"mode": "READONLY"}
        new_id = fresh.register_schema("after-restart", Schema(record("Fresh"), "AVRO"))
        assert new_id > max(ids.values())  # ids keep growing: none is handed out twice
        # the same schema under a new subject keeps its id across the restart
        assert fresh.register_schema("kill-copy", Schema(record("R4"), "AVRO")) == ids["kill-4"]


def test_permanent_deletes_are_compacted_away(tmp_path: Path) -> None:
    """Soft delete, then permanent delete: the tombstones let the cleaner drop the versions from the log."""
    with run_broker(log_dir=tmp_path / "logs", overrides={"schema.registry.port": 0}) as broker:
        api = Registry(broker.schema_registry_url)
        kept = api.ok("POST", "/subjects/kept/versions", {"schema": record("Kept")})
        for i in range(3):
            api.ok("POST", "/subjects/gone/versions", {"schema": record("Gone", i + 1)})
        api.ok("DELETE", "/subjects/gone")
        assert api.ok("DELETE", "/subjects/gone?permanent=true") == [1, 2, 3]

        broker.state.topics.set_overrides(TOPIC, {"cleanup.policy": "compact", "flush.messages": "1",
                                                  "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"})
        log_ = broker.state.topics.log(TopicPartition(TOPIC, 0))
        assert log_ is not None
        broker.call(log_.roll)  # the active segment is never cleaned
        assert broker.state.services.get().cleaner.clean_once()
        left = [(json.loads(r.key), r.value) for r in broker.records(TOPIC)]
        # every version of "gone" is now only its tombstone (kept for delete.retention.ms, as Kafka does);
        # the DELETE_SUBJECT record stays, as Confluent's registry leaves it
        gone = [(key, value) for key, value in left if key.get("subject") == "gone" and key["keytype"] == "SCHEMA"]
        assert sorted(key["version"] for key, _ in gone) == [1, 2, 3] and all(v is None for _, v in gone), left
        assert ({"keytype": "SCHEMA", "subject": "kept", "version": 1, "magic": 1}, ) == tuple(
            key for key, value in left if key.get("subject") == "kept")

    with run_broker(log_dir=tmp_path / "logs", overrides={"schema.registry.port": 0}) as broker:
        api = Registry(broker.schema_registry_url)
        assert api.ok("GET", "/subjects?deleted=true") == ["kept"]
        assert api.ok("GET", "/subjects/kept/versions/1")["id"] == kept["id"]


def test_reads_a_topic_confluent_wrote(tmp_path: Path) -> None:
    """Records as Confluent's registry writes them (older ones with "subject":null keys and no schemaType, a NOOP,
    a protobuf schema, a global config and mode, a subject deletion) replay into the same state; records no
    registry wrote (not JSON, references that are not references) are skipped."""
    confluent_records = [
        (b'{"keytype":"NOOP","magic":0}', None),
        (b'{"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}',
         json.dumps({"subject": "orders-value", "version": 1, "id": 11, "schema": record("Order"),
                     "deleted": False}).encode()),
        (b'{"keytype":"SCHEMA","subject":"orders-value","version":2,"magic":1}',
         json.dumps({"subject": "orders-value", "version": 2, "id": 12, "md5": "q83vEjRWeJASNFZ4kBI0Vg==",
                     "schema": record("Order", 2), "deleted": False}).encode()),
        (b'{"keytype":"CONFIG","subject":null,"magic":0}', b'{"compatibilityLevel":"FULL"}'),
        (b'{"keytype":"SCHEMA","subject":"old-value","version":1,"magic":1}',
         json.dumps({"subject": "old-value", "version": 1, "id": 3, "schema": record("Old"),
                     "deleted": False}).encode()),
        (b'{"keytype":"DELETE_SUBJECT","subject":"old-value","magic":0}', b'{"subject":"old-value","version":1}'),
        (b'{"keytype":"MODE","magic":0}', b'{"mode":"READWRITE"}'),
        (b'{"keytype":"CONTEXT","tenant":"default","context":".","magic":0}', b'{"tenant":"default"}'),
        (b'not json at all', b'{}'),
        # any client may write to _schemas: records the registry cannot apply are skipped, not fatal at start-up
        (b'{"keytype":"SCHEMA","subject":"bad-value","version":1,"magic":1}',
         json.dumps({"subject": "bad-value", "version": 1, "id": 20, "schema": record("Bad"),
                     "references": [1]}).encode()),
        (b'{"keytype":"SCHEMA","subject":"bad-value","version":2,"magic":1}',
         json.dumps({"subject": "bad-value", "version": 2, "id": 21, "schema": record("Bad"),
                     "references": [{"name": "r", "subject": "s", "version": "zz"}]}).encode()),
    ]
    port = free_port()
    with run_broker(log_dir=tmp_path / "logs") as broker:
        broker.create_topic(TOPIC, {"partitions": 1, "configs": {"cleanup.policy": "compact"}})
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        for key, value in confluent_records:
            producer.produce(TOPIC, key=key, value=value)
        assert producer.flush(60) == 0
    with run_broker(log_dir=tmp_path / "logs", overrides={"schema.registry.port": port}) as broker:
        api = Registry(broker.schema_registry_url)
        assert api.ok("GET", "/subjects") == ["orders-value"]
        assert api.ok("GET", "/subjects?deleted=true") == ["old-value", "orders-value"]
        assert api.ok("GET", "/subjects/orders-value/versions/latest")["id"] == 12
        assert api.ok("GET", "/config") == {"compatibilityLevel": "FULL"}
        assert api.ok("GET", "/schemas/ids/3")["schema"] == record("Old")
        created = api.ok("POST", "/subjects/new-value/versions", {"schema": record("New")})
        assert created["id"] == 13  # after the largest id the topic holds
