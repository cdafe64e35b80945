"""The Java test drivers in tests/java/, compiled once per source change against the Kafka client jar."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("TIDELOG_CACHE_DIR", ROOT / ".cache"))
JAR_DIR = CACHE / "java"


def compile_driver(source: Path, prefix: str) -> Path:
    """The directory holding `source` compiled (its main class is the file's stem), cached under .cache by the
    source's digest; safe when several test processes compile the same source at once."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    classes = CACHE / f"{prefix}-{digest}"
    if not (classes / f"{source.stem}.class").is_file():
        tmp = classes.with_suffix(f".tmp{os.getpid()}")
        tmp.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-cp", str(JAR_DIR / "kafka-clients.jar"), "-d", str(tmp), str(source)],
                       check=True, timeout=300)
        if classes.exists():  # another process compiled the same source meanwhile
            shutil.rmtree(tmp)
        else:
            tmp.rename(classes)
    return classes
