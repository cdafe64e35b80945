"""The metadata store (tidelog.metadata): every `tidelog-*.json` file is declared in metadata/files.py and read and
written by metadata/store.py only; older layouts are migrated; a damaged file gets the README's rule (start-up
stops with one line, except the topics file, which is set aside and rebuilt); a file from a newer tidelog stops
start-up; files in the layout the previous release wrote still load. Brokers here are real, on real files."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tidelog.metadata import OnDamage, StateFileError, files
from tidelog.metadata.store import MetadataFile
from tidelog.protocol.messages import request_class
from tidelog.testing import KafkaWire, run_broker

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tidelog"
FILE_NAME = re.compile(r"tidelog-[a-z-]+\.json")
# Calls that make a file durable or replace one: only the metadata store and storage (Kafka's own formats:
# segments, indexes, checkpoints, snapshots) may make them.
DURABLE_WRITES = {"os.replace", "os.rename", "os.fsync", "write_atomic", "write_durably"}


def _call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return f"{func.value.id}.{func.attr}" if isinstance(func.value, ast.Name) else func.attr
    return func.id if isinstance(func, ast.Name) else ""


def test_file_names_and_durable_writes_live_only_in_the_metadata_store() -> None:
    """Structural: a `tidelog-*.json` name is spelled only in metadata/files.py, and no module outside
    tidelog/metadata and tidelog/storage replaces or fsyncs a file (so none can write a metadata file
    its own way)."""
    names: dict[str, list[str]] = {}
    writers: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and FILE_NAME.fullmatch(node.value):
                names.setdefault(node.value, []).append(module)
            if isinstance(node, ast.Call) and module.split("/")[1] not in ("metadata", "storage"):
                name = _call_name(node)
                if name in DURABLE_WRITES or name.split(".")[-1] in DURABLE_WRITES:
                    writers.append(f"{module}:{node.lineno} {name}")
    assert set(names) == {f.name for f in files.ALL}
    assert {module for spelled in names.values() for module in spelled} == {"tidelog/metadata/files.py"}
    assert writers == []


def test_every_file_a_broker_writes_is_declared_and_written_by_the_store(tmp_path: Path) -> None:
    """A broker that uses every subsystem writes exactly the declared files, each in the store's layout
    (sorted keys, the current `version`): none is written another way."""
    from confluent_kafka import Producer, ShareConsumer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    from tests.broker.test_admin_wire import incremental

    quiet = {"log_level": 0}
    overrides = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "super.users": "User:ANONYMOUS"}
    with run_broker(tmp_path, overrides=overrides) as b, KafkaWire(b.bootstrap) as wire:
        admin = AdminClient({"bootstrap.servers": b.bootstrap, **quiet})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion("ann", info, b"pw")])["ann"].result(30)
        binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:ann", "*",
                             AclOperation.READ, AclPermissionType.ALLOW)
        admin.create_acls([binding])[binding].result(30)
        wire.alter_client_quota("client-id", "c1", "producer_byte_rate", 1e6)
        assert incremental(wire, 0, 16, "sub", [("metrics", 0, "org.apache.kafka.")]).error_code == 0
        earliest = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
        for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, "sg",
                                                                      incremental_configs=[earliest])]).values():
            future.result(30)
        b.create_topic("shared", 1)
        producer = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, **quiet})
        producer.produce("shared", b"v")
        assert producer.flush(30) == 0  # InitProducerId reserved a producer id block
        consumer = ShareConsumer({"bootstrap.servers": b.bootstrap, "group.id": "sg", **quiet})
        try:
            consumer.subscribe(["shared"])
            got: list[Any] = []
            for _ in range(100):
                got += consumer.poll(timeout=0.3)
                if got:
                    break
            assert [m.value() for m in got] == [b"v"]
        finally:
            consumer.close()  # acknowledges what it got (implicit mode): the share state is written
        hb = request_class(88)[1]  # a streams group joins: the streams groups file is written
        sub = hb.Topology.Subtopology(subtopology_id="0", source_topics=["shared"], source_topic_regex=[],
                                      state_changelog_topics=[], repartition_sink_topics=[],
                                      repartition_source_topics=[], copartition_groups=[])
        joined = wire.request(88, 1, hb(group_id="st", member_id="m", member_epoch=0, endpoint_information_epoch=-1,
                                        rebalance_timeout_ms=1000, topology=hb.Topology(epoch=1, subtopologies=[sub]),
                                        active_tasks=[], standby_tasks=[], warmup_tasks=[], process_id="p"))
        assert joined.error_code == 0
    written = {p.name for p in tmp_path.glob("tidelog-*")}
    assert written == {f.name for f in files.ALL}
    for spec in files.ALL:
        text = spec.path(tmp_path).read_text(encoding="utf-8")
        document = json.loads(text)
        assert document["version"] == spec.version
        layout = (json.dumps(document, sort_keys=True, separators=(",", ":")) if spec.compact
                  else json.dumps(document, sort_keys=True, indent=1))
        assert text == layout, spec.name
        mode = spec.path(tmp_path).stat().st_mode & 0o777
        assert mode == (0o600 if spec.private else 0o644), (spec.name, oct(mode))


# --- the documented damaged-file rule, on a real `tidelog serve` ---------------------------------------------

WRONG_SHAPE = {  # a JSON object that is not what each file's reader expects
    files.CLIENT_METRICS.name: '{"subscriptions": {"s": 3}}',
    files.QUOTAS.name: '{"entities": [{"entity": 3}]}',
    files.FEATURES.name: '{"finalized": {"metadata.version": "x"}, "epoch": 1}',
    files.PRODUCER_IDS.name: '{"block_end": -5}',
    files.SCRAM_CREDENTIALS.name: '{"users": {"alice": {"SCRAM-SHA-256": {"salt": "AA"}}}}',
    files.ACLS.name: '{"acls": [3]}',
    files.GROUP_CONFIGS.name: '{"groups": {"g": 3}}',
    files.SHARE_STATE.name: '{"groups": {"g": {"group_epoch": 1, "partitions": {"00:0": {}}}}}',
    files.TOPICS.name: '{"topics": []}',
    files.STREAMS_GROUPS.name: '{"groups": {"g": {"group_epoch": "x"}}}',
}


def serve(log_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tidelog", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                           "--override", f"log.dirs={log_dir}"], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def assert_refused(out: subprocess.CompletedProcess[str], path: Path, reason: str = "") -> None:
    assert out.returncode == 1, (out.stdout[-500:], out.stderr[-2000:])
    assert "tidelog ready" not in out.stdout
    assert "Traceback" not in out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(f"tidelog: cannot read {path}: ") and reason in last, last


def test_every_file_has_a_damaged_document_below() -> None:
    assert set(WRONG_SHAPE) == {f.name for f in files.ALL}


REFUSING = sorted(f.name for f in files.ALL if f.on_damage is OnDamage.REFUSE)


@pytest.mark.parametrize("broken", ["not json", "wrong shape"])
@pytest.mark.parametrize("name", REFUSING)
def test_serve_refuses_to_start_on_a_damaged_file_with_one_line_naming_it(tmp_path: Path, name: str,
                                                                         broken: str) -> None:
    """README "Durability": serving without what a damaged file held would be wrong (a reused producer id, a
    dropped ACL, redelivered acknowledged records), so the broker does not start: one line names the file and
    the fault, exit code 1, no traceback. Those built lazily are read at start-up when their file exists."""
    path = tmp_path / name
    path.write_text("{not json" if broken == "not json" else WRONG_SHAPE[name], encoding="utf-8")
    assert_refused(serve(tmp_path), path)


@pytest.mark.parametrize("broken", ["{not json", WRONG_SHAPE[files.TOPICS.name], "[1, 2]"])
def test_a_damaged_topics_file_is_set_aside_and_rebuilt_from_the_log_dirs(tmp_path: Path, broken: str) -> None:
    """The README's one exception: the topics the file held are in the partition directories too."""
    with run_broker(tmp_path) as b:
        b.create_topic("kept", 2)
    files.TOPICS.path(tmp_path).write_text(broken, encoding="utf-8")
    with run_broker(tmp_path) as b, KafkaWire(b.bootstrap) as wire:
        cls = request_class(3)[12]
        topics = wire.request(3, 12, cls(topics=None, allow_auto_topic_creation=False)).topics
        assert {(t.name, len(t.partitions)) for t in topics} == {("kept", 2)}
    assert (tmp_path / "tidelog-topics.json.corrupt").read_text(encoding="utf-8") == broken
    assert json.loads(files.TOPICS.path(tmp_path).read_text())["topics"]["kept"]["partitions"] == 2


@pytest.mark.parametrize("name", sorted(f.name for f in files.ALL))
def test_a_file_from_a_newer_tidelog_stops_start_up_even_the_topics_file(tmp_path: Path, name: str) -> None:
    """A newer format is neither guessed at nor set aside (that would lose what the newer tidelog wrote)."""
    spec = next(f for f in files.ALL if f.name == name)
    path = spec.path(tmp_path)
    path.write_text(json.dumps({"version": spec.version + 1}), encoding="utf-8")
    assert_refused(serve(tmp_path), path, f"format version {spec.version + 1} is newer than this tidelog reads")
    assert path.exists() and not path.with_name(path.name + ".corrupt").exists()


# --- migrations -------------------------------------------------------------------------------------------------

def test_features_version_1_is_migrated_on_a_real_broker(tmp_path: Path) -> None:
    """tidelog-features.json version 1 (before group.version existed; that tidelog served KIP-848 groups) reads as
    group.version 1 with the other levels it held; the file keeps its layout until the next change writes
    version 2 (franz-go kfake's rule: read old, write current)."""
    from tests.broker.test_features import SAFE, api_versions, features, update

    old = {"version": 1, "epoch": 4, "finalized": {"metadata.version": 29, "kraft.version": 1}}
    path = files.FEATURES.path(tmp_path)
    path.write_text(json.dumps(old), encoding="utf-8")
    with run_broker(tmp_path) as b, KafkaWire(b.bootstrap) as wire:
        _, finalized, epoch = features(api_versions(wire, 4))
        assert (finalized, epoch) == ({"metadata.version": (29, 29), "kraft.version": (1, 1),
                                       "group.version": (1, 1)}, 4)
        assert json.loads(path.read_text()) == old  # reading does not rewrite
        assert update(wire, [("group.version", 0, SAFE)]).error_code == 0
    assert json.loads(path.read_text()) == {"version": 2, "epoch": 5, "finalized": {
        "metadata.version": 29, "kraft.version": 1, "group.version": 0}}


def test_a_migration_chain_runs_in_order_and_a_gap_is_damage(tmp_path: Path) -> None:
    """The store's rule itself, on real files: each step takes version N to N + 1; a version no step reaches
    is damaged (the file's policy applies)."""
    spec = MetadataFile("tidelog-example.json", 3, migrations={
        1: lambda d: {"items": [d["item"]]},
        2: lambda d: {**d, "items": [i.upper() for i in d["items"]]}})
    spec.path(tmp_path).write_text(json.dumps({"version": 1, "item": "a"}))
    assert spec.read(tmp_path, lambda d: d) == {"version": 3, "items": ["A"]}
    spec.write(tmp_path, {"items": ["B"]})
    assert json.loads(spec.path(tmp_path).read_text()) == {"version": 3, "items": ["B"]}
    spec.path(tmp_path).write_text(json.dumps({"version": 0, "item": "a"}))
    with pytest.raises(StateFileError, match="format version 0 is not one this tidelog reads \\(it reads 1-3\\)"):
        spec.read(tmp_path, lambda d: d)
    spec.path(tmp_path).write_text(json.dumps({"version": "2"}))
    with pytest.raises(StateFileError, match="is not a number"):
        spec.read(tmp_path, lambda d: d)


# --- files the previous release wrote ---------------------------------------------------------------------------

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"  # base64 of a 16-byte id
PREVIOUS_RELEASE = {  # byte for byte the layouts the landed main wrote (its own json.dumps arguments)
    files.TOPICS.name: json.dumps({"version": 1, "topics": {"old": {"topic_id": TOPIC_ID, "partitions": 3,
                                   "configs": {"retention.ms": "60000"}}}, "deleted_topic_ids": [],
                                   "broker_configs": {"cluster_default": {}, "broker": {}}}, indent=1),
    files.PRODUCER_IDS.name: json.dumps({"version": 1, "block_end": 5000}),
    files.FEATURES.name: json.dumps({"version": 2, "finalized": {"metadata.version": 30, "kraft.version": 1,
                                    "group.version": 1, "eligible.leader.replicas.version": 1,
                                    "share.version": 0}, "epoch": 9}, sort_keys=True),
    files.QUOTAS.name: json.dumps({"version": 1, "entities": [{"entity": [["client-id", "c1"]],
                                   "quotas": {"producer_byte_rate": 1024.0}}]}, sort_keys=True),
    files.CLIENT_METRICS.name: json.dumps({"version": 1, "subscriptions": {"sub": {"metrics": "org.apache.kafka."}}},
                                          sort_keys=True, indent=1),
    files.GROUP_CONFIGS.name: json.dumps({"version": 1, "groups": {"g": {"consumer.session.timeout.ms": "50000"}}},
                                         sort_keys=True, indent=1),
    files.SHARE_STATE.name: json.dumps({"version": 1, "groups": {}}, separators=(",", ":")),
    # new with streams groups: its first layout
    files.STREAMS_GROUPS.name: json.dumps({"version": 1, "groups": {}}, separators=(",", ":")),
    files.ACLS.name: json.dumps({"version": 1, "acls": [["TOPIC", "old", "LITERAL", "User:ann", "*", "READ", "ALLOW"]]},
                                sort_keys=True, indent=1),
    files.SCRAM_CREDENTIALS.name: json.dumps({"version": 1, "users": {"ann": {"SCRAM-SHA-256": {
        "salt": "c2FsdHNhbHRzYWx0", "stored_key": "AAAA", "server_key": "AAAA", "iterations": 4096}}}},
        sort_keys=True, indent=1),
}


def test_files_in_the_previous_release_layout_load(tmp_path: Path) -> None:
    """Every file, as the release before the store wrote it, is read by a real broker."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    from tests.broker.test_admin_wire import describe
    from tests.broker.test_features import api_versions, features

    assert set(PREVIOUS_RELEASE) == {f.name for f in files.ALL}
    for name, text in PREVIOUS_RELEASE.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    overrides = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "super.users": "User:ANONYMOUS"}
    with run_broker(tmp_path, overrides=overrides) as b, KafkaWire(b.bootstrap) as wire:
        info = b.call(lambda: b.state.topics.get("old"))
        assert info is not None and info.partitions == 3 and info.overrides == {"retention.ms": "60000"}
        assert str(uuid.UUID(bytes=info.topic_id)) == "00000000-0000-0000-0000-000000000001"
        assert b.state.producer_ids.generate_producer_id() == 5000
        assert features(api_versions(wire, 4))[2] == 9
        assert b.call(lambda: b.state.quotas.store.snapshot()) == {(("client-id", "c1"),): {"producer_byte_rate": 1024.0}}
        metrics = describe(wire, 4, 16, "sub", ["metrics"])
        assert [(c.name, c.value) for c in metrics.configs] == [("metrics", "org.apache.kafka.")]
        group = describe(wire, 4, 32, "g", ["consumer.session.timeout.ms"])
        assert [(c.name, c.value) for c in group.configs] == [("consumer.session.timeout.ms", "50000")]
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                      AclOperation.ANY, AclPermissionType.ANY)
        assert [(a.name, a.principal) for a in admin.describe_acls(everything).result(30)] == [("old", "User:ann")]
        described = admin.describe_user_scram_credentials(["ann"])["ann"].result(30)
        assert [i.iterations for i in described.scram_credential_infos] == [4096]
