"""Checkpoint and identity files: exact bytes as Kafka writes them (docs/STORAGE.md)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from storage_testlib import TOPIC_ID

from tidelog.storage import TopicPartition
from tidelog.storage.checkpoints import (
    CheckpointError,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    random_kafka_uuid,
    read_properties,
    uuid_from_base64,
    uuid_to_base64,
)
from tidelog.storage.leader_epoch import LeaderEpochFileCache


def test_offset_checkpoint_text_and_round_trip(tmp_path: Path) -> None:
    f = OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint")
    entries = {
        TopicPartition("orders", 0): 1500,
        TopicPartition("orders", 1): 42,
        TopicPartition("__consumer_offsets", 17): 9,
    }
    f.write(entries)
    assert f.path.read_bytes() == b"0\n3\norders 0 1500\norders 1 42\n__consumer_offsets 17 9\n"
    assert f.read() == entries
    assert not (tmp_path / "replication-offset-checkpoint.tmp").exists()


def test_empty_checkpoint_is_two_zero_lines(tmp_path: Path) -> None:
    f = OffsetCheckpointFile(tmp_path / "log-start-offset-checkpoint")
    f.write({})
    assert f.path.read_bytes() == b"0\n0\n"
    assert f.read() == {}


def test_missing_checkpoint_is_created_empty(tmp_path: Path) -> None:
    f = OffsetCheckpointFile(tmp_path / "cleaner-offset-checkpoint")
    assert f.read() == {}
    assert f.path.exists() and f.path.stat().st_size == 0


def test_readers_split_on_any_whitespace(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_text("0\n1\norders   3\t77\n")
    assert OffsetCheckpointFile(path).read() == {TopicPartition("orders", 3): 77}


@pytest.mark.parametrize(
    "text",
    ["1\n0\n", "0\n2\norders 0 1\n", "0\n1\norders 0\n", "zero\n0\n", "0\n1\norders x 1\n"],
)
def test_bad_checkpoints_are_rejected(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CheckpointError):
        OffsetCheckpointFile(path).read()
    assert OffsetCheckpointFile(path).read_or_empty() == {}


def test_leader_epoch_checkpoint_text(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(tmp_path)
    assert cache.assign(0, 0)
    assert not cache.assign(0, 10)  # not newer
    assert cache.assign(3, 1500)
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == b"0\n2\n0 0\n3 1500\n"
    assert LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint").read() == [(0, 0), (3, 1500)]
    assert cache.end_offset_for(0, 2000) == (0, 1500)
    assert cache.end_offset_for(3, 2000) == (3, 2000)
    assert cache.end_offset_for(1, 2000) == (0, 1500)
    assert cache.end_offset_for(4, 2000) == (-1, -1)
    cache.truncate_from_start(1600)
    assert cache.epochs == [(3, 1600)]
    cache.truncate_from_end(1600)
    assert cache.epochs == []
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == b"0\n0\n"


def test_truncate_from_start_collapses_into_latest_entry(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(tmp_path)
    for epoch, start in [(0, 0), (1, 10), (2, 20), (4, 40)]:
        cache.assign(epoch, start)
    cache.truncate_from_start(25)
    assert cache.epochs == [(2, 25), (4, 40)]


def test_partition_metadata_bytes(tmp_path: Path) -> None:
    PartitionMetadataFile(tmp_path).write(TOPIC_ID)
    expected_id = base64.urlsafe_b64encode(TOPIC_ID).decode().rstrip("=")
    data = (tmp_path / "partition.metadata").read_bytes()
    assert data == f"version: 0\ntopic_id: {expected_id}".encode()
    assert not data.endswith(b"\n")
    assert PartitionMetadataFile(tmp_path).read() == TOPIC_ID
    with pytest.raises(ValueError):
        PartitionMetadataFile(tmp_path).write(bytes(16))


def test_kafka_uuid_form() -> None:
    for _ in range(200):
        raw = random_kafka_uuid()
        text = uuid_to_base64(raw)
        assert len(text) == 22 and "=" not in text and not text.startswith("-")
        assert set(text) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        assert uuid_from_base64(text) == raw
    # Kafka's documented example id decodes to 16 bytes and re-encodes identically.
    assert uuid_to_base64(uuid_from_base64("4IlVrPwaRvOeEr8Ck6fEeA")) == "4IlVrPwaRvOeEr8Ck6fEeA"


def test_read_java_properties(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    path.write_text("#\n#Fri Oct 25 10:00:00 UTC 2024\nnode.id=1\ndirectory.id=J8aAPcfLQt2bqs1JT_DefQ\n"
                    "version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n")
    assert read_properties(path) == {
        "node.id": "1",
        "directory.id": "J8aAPcfLQt2bqs1JT_DefQ",
        "version": "1",
        "cluster.id": "MkU3OEVBNTcwNTJENDM2Qk",
    }
    assert os.path.getsize(path) > 0
