"""File naming of a partition directory (Kafka's LogFileUtils / LocalLog naming helpers), docs/STORAGE.md "Directory layout"."""

from __future__ import annotations

import os
from pathlib import Path

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
DELETED_FILE_SUFFIX = ".deleted"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

SEGMENT_SUFFIXES = (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)


def filename_prefix_from_offset(offset: int) -> str:
    """The 20-digit zero-padded decimal form Kafka uses for segment and snapshot names."""
    return f"{offset:020d}"


def log_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / f"{filename_prefix_from_offset(offset)}{LOG_FILE_SUFFIX}{suffix}"


def offset_index_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / f"{filename_prefix_from_offset(offset)}{INDEX_FILE_SUFFIX}{suffix}"


def time_index_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / f"{filename_prefix_from_offset(offset)}{TIME_INDEX_FILE_SUFFIX}{suffix}"


def transaction_index_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / f"{filename_prefix_from_offset(offset)}{TXN_INDEX_FILE_SUFFIX}{suffix}"


def producer_snapshot_file(directory: Path, offset: int) -> Path:
    return directory / f"{filename_prefix_from_offset(offset)}{PRODUCER_SNAPSHOT_FILE_SUFFIX}"


def offset_from_file_name(name: str) -> int | None:
    """A file's offset is the text before its first '.' (None when that is not a number)."""
    head = name.split(".", 1)[0]
    if not head.isdigit():
        return None
    return int(head)


def parse_topic_partition_name(name: str) -> tuple[str, int] | None:
    """`<topic>-<partition>`: split at the last '-', since topic names may contain '-'."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def fsync_dir(directory: Path) -> None:
    """Make renames/creates inside `directory` durable (Kafka's Utils.flushDir)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_tree(path: Path) -> None:
    """shutil.rmtree, errors ignored. shutil is imported at the first delete: it pulls in bz2 and lzma, ~2 ms
    of start-up."""
    # lazy for start-up time (see the docstring)
    import shutil

    shutil.rmtree(path, ignore_errors=True)
