"""Atomic, private JSON files for security metadata Kafka keeps in its metadata log (SCRAM credentials, ACLs)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tidelog.storage.log_file_utils import fsync_dir


def write_json(path: Path, document: Any) -> None:
    """Write `<path>.tmp` (mode 0600), fsync, rename over `path`, fsync the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, json.dumps(document, sort_keys=True, indent=1).encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
