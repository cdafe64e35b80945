"""Checkpoint and identity files of a log directory (docs/STORAGE.md "Checkpoints").

Kafka's CheckpointFile / OffsetCheckpointFile / LeaderEpochCheckpointFile / PartitionMetadataFile /
MetaProperties / CleanShutdownFileHandler. Every write goes through `<name>.tmp`, fsync, atomic rename.
"""

from __future__ import annotations

import base64
import json
import os
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from tidelog.storage import TopicPartition
from tidelog.storage.log_file_utils import fsync_dir

CHECKPOINT_VERSION = 0
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
META_PROPERTIES_FILE = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"


class CheckpointError(Exception):
    """A checkpoint file that does not parse (unknown version, wrong count, bad line)."""


def write_atomic(path: Path, data: bytes, sync: bool = True) -> None:
    """Write `<path>.tmp`, fsync it, rename it over `path`, fsync the directory."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


class CheckpointFile:
    """The generic `version / count / entries` text format; entries are tuples of strings."""

    def __init__(self, path: Path, version: int = CHECKPOINT_VERSION) -> None:
        self.path = Path(path)
        self.version = version

    def write(self, entries: Iterable[tuple[object, ...]]) -> None:
        lines = [" ".join(str(f) for f in entry) for entry in entries]
        text = f"{self.version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
        write_atomic(self.path, text.encode())

    def read(self) -> list[list[str]]:
        """Entries as lists of fields. A missing file is created empty (Kafka does the same)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            self.path.touch()  # Kafka's CheckpointFile creates a missing file, empty
            return []
        if not text.strip():
            return []
        lines = text.split("\n")
        try:
            version = int(lines[0].strip())
            count = int(lines[1].strip())
        except (ValueError, IndexError) as e:
            raise CheckpointError(f"malformed header in {self.path}") from e
        if version != self.version:
            raise CheckpointError(f"unrecognized version {version} in {self.path}")
        body = [line.split() for line in lines[2:] if line.strip()]
        if len(body) != count:
            raise CheckpointError(f"expected {count} entries in {self.path}, found {len(body)}")
        return body


class OffsetCheckpointFile:
    """`topic partition offset` entries: recovery point, log start, HW and cleaner checkpoints."""

    def __init__(self, path: Path) -> None:
        self._file = CheckpointFile(path)

    @property
    def path(self) -> Path:
        return self._file.path

    def write(self, offsets: dict[TopicPartition, int]) -> None:
        self._file.write((tp.topic, tp.partition, off) for tp, off in offsets.items())

    def read(self) -> dict[TopicPartition, int]:
        result: dict[TopicPartition, int] = {}
        for fields in self._file.read():
            if len(fields) != 3:
                raise CheckpointError(f"malformed line {fields!r} in {self.path}")
            try:
                result[TopicPartition(fields[0], int(fields[1]))] = int(fields[2])
            except ValueError as e:
                raise CheckpointError(f"malformed line {fields!r} in {self.path}") from e
        return result

    def read_or_empty(self) -> dict[TopicPartition, int]:
        """Startup treats an unreadable checkpoint as empty (docs/STORAGE.md "Recovery")."""
        try:
            return self.read()
        except (CheckpointError, OSError, UnicodeDecodeError):
            return {}


class LeaderEpochCheckpointFile:
    """`epoch startOffset` entries, ascending, in the partition directory."""

    def __init__(self, path: Path) -> None:
        self._file = CheckpointFile(path)

    @property
    def path(self) -> Path:
        return self._file.path

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        self._file.write(entries)

    def read(self) -> list[tuple[int, int]]:
        result = []
        for fields in self._file.read():
            if len(fields) != 2:
                raise CheckpointError(f"malformed line {fields!r} in {self.path}")
            result.append((int(fields[0]), int(fields[1])))
        return result


# --- Kafka UUIDs ---------------------------------------------------------------------------------------

ZERO_UUID = bytes(16)


def uuid_to_base64(raw: bytes) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes without padding (22 characters)."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def uuid_from_base64(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "==")
    if len(raw) != 16:
        raise ValueError(f"not a Kafka UUID: {text!r}")
    return raw


def random_kafka_uuid() -> bytes:
    """Kafka's Uuid.randomUuid(): version-4 bytes, never the zero/one reserved ids nor one starting with '-'."""
    while True:
        raw = uuid.uuid4().bytes
        if raw == ZERO_UUID or raw == bytes(15) + b"\x01" or uuid_to_base64(raw).startswith("-"):
            continue
        return raw


# --- partition.metadata ----------------------------------------------------------------------------------


class PartitionMetadataFile:
    """`version: 0\\ntopic_id: <uuid>` with no final newline (Kafka's PartitionMetadataFile)."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / PARTITION_METADATA_FILE

    def exists(self) -> bool:
        return self.path.exists()

    def write(self, topic_id: bytes) -> None:
        if len(topic_id) != 16 or topic_id == ZERO_UUID:
            raise ValueError("topic id must be a non-zero 16-byte UUID")
        write_atomic(self.path, f"version: 0\ntopic_id: {uuid_to_base64(topic_id)}".encode())

    def read(self) -> bytes:
        text = self.path.read_text(encoding="utf-8")
        fields: dict[str, str] = {}
        for line in text.split("\n"):
            if ":" in line:
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
        if fields.get("version") != "0":
            raise CheckpointError(f"unrecognized version in {self.path}")
        if "topic_id" not in fields:
            raise CheckpointError(f"no topic_id in {self.path}")
        return uuid_from_base64(fields["topic_id"])


# --- meta.properties --------------------------------------------------------------------------------------


def read_properties(path: Path) -> dict[str, str]:
    """A (simple) Java properties file: `#`/`!` comments, `key=value` lines."""
    props: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, _, value = line.partition("=")
        props[key.strip()] = value.strip()
    return props


def write_meta_properties(path: Path, props: dict[str, str], now_ms: int) -> None:
    """KRaft form (version=1). The dated comment line mirrors java.util.Properties.store()."""
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(now_ms // 1000))  # not datetime: ~1 ms to import
    lines = ["#", f"#{stamp}"] + [f"{k}={v}" for k, v in props.items()]
    write_atomic(path, ("\n".join(lines) + "\n").encode())


# --- .kafka_cleanshutdown -----------------------------------------------------------------------------------


def write_clean_shutdown_file(log_dir: Path, broker_epoch: int = -1) -> None:
    data = json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":")).encode()
    write_atomic(Path(log_dir) / CLEAN_SHUTDOWN_FILE, data)
