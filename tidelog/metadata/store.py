"""The one reader and writer of tidelog's metadata files (`<first log dir>/tidelog-*.json`).

Kafka keeps topics, features, quotas, ACLs, SCRAM credentials, producer id blocks, client-metrics
subscriptions, group configs and share-group state in its KRaft metadata log (and `__share_group_state`);
tidelog keeps each in one small JSON document. Every document is written and read here, by one rule:

* Writing: `<name>.tmp` is written, fsync'd and renamed over the file, then the directory is fsync'd, so a
  crash leaves the old document or the new one, never a mix. The document carries `"version"`, the format
  version this tidelog writes. A file that request paths change many times a second is written off the event
  loop through `writer.CoalescingWriter` (its own thread, latest state wins).
* Versions (the shape of franz-go kfake's persist.go format migration guide): a reader accepts the current
  version and every older one for which `migrations` holds a step (version N -> N+1, applied in turn). A
  file written by a newer tidelog stops start-up with one line, whatever the damage policy: setting it aside
  or reading it as an older layout would lose what the newer one wrote. A file without `"version"` is read as
  version 1, the first layout (tidelog has always written one; a hand-written file may lack it).
* Damage: a file that exists but cannot be read, is not a JSON object, has a version no migration reaches,
  or is not the shape its decoder expects is damaged. A damaged file stops start-up (StateFileError, which
  `tidelog serve` prints as one line naming the file before exiting 1: serving without the ACLs or producer ids
  it held would be wrong) -- unless what it holds can be rebuilt from the log dirs (`OnDamage.SET_ASIDE`,
  only the topics file), in which case it is moved to `<name>.corrupt` and the reader starts empty.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger(__name__)

_T = TypeVar("_T")
Document = dict[str, Any]
Migration = Callable[[Document], Document]


class StateFileError(RuntimeError):
    """A metadata file that exists but cannot be used. Start-up stops with one line naming it (`tidelog serve`
    exits 1), as Kafka stops on a metadata log it cannot read."""

    def __init__(self, path: Path, reason: object) -> None:
        super().__init__(f"cannot read {path}: {reason}")
        self.path = path


class OnDamage:
    """What a damaged file gets (plain constants, not an Enum: this module is imported before the first
    ApiVersions answer, and every millisecond of start-up counts)."""

    REFUSE = "refuse to start"  # StateFileError
    SET_ASIDE = "move aside and start empty"  # only for what the log dirs can rebuild


class MetadataFile:
    """One metadata file: its name, the format version written, the migrations from older versions, what a
    damaged one gets, and whether it is private (mode 0600: credentials)."""

    __slots__ = ("name", "version", "migrations", "on_damage", "private", "compact")

    def __init__(self, name: str, version: int, migrations: Mapping[int, Migration] | None = None,
                 on_damage: str = OnDamage.REFUSE, private: bool = False, compact: bool = False) -> None:
        self.name = name
        self.version = version
        self.migrations: Mapping[int, Migration] = migrations or {}  # from version N to N + 1
        self.on_damage = on_damage
        self.private = private
        self.compact = compact  # no indentation (large, machine-only documents)

    def __repr__(self) -> str:
        return f"MetadataFile({self.name!r}, version {self.version})"

    def path(self, directory: str | Path) -> Path:
        return Path(directory) / self.name

    def exists(self, directory: str | Path) -> bool:
        return self.path(directory).exists()

    # --- reading ---

    def read(self, directory: str | Path, decode: Callable[[Document], _T]) -> _T | None:
        """`decode` of the document (migrated to the current version); None if there is no file (or a damaged
        one was set aside). Raises StateFileError as the module docstring says."""
        path = self.path(directory)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            self._damaged(path, exc)
            return None
        try:
            document = json.loads(text)
            if not isinstance(document, dict):
                raise ValueError(f"a JSON {type(document).__name__}, not an object")
        except ValueError as exc:
            self._damaged(path, f"{type(exc).__name__}: {exc}")
            return None
        version = document.get("version", 1)
        if not isinstance(version, int) or isinstance(version, bool):
            self._damaged(path, f"format version {version!r} is not a number")
            return None
        if version > self.version:
            raise StateFileError(path, f"format version {version} is newer than this tidelog reads "
                                       f"({self.version}); start the tidelog that wrote it")
        try:
            return decode(self.migrate(document, version))
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
            self._damaged(path, f"{type(exc).__name__}: {exc}")
            return None

    def migrate(self, document: Document, version: int) -> Document:
        """`document` of `version` brought to the current version, one step at a time (ValueError if a step is
        missing)."""
        while version < self.version:
            step = self.migrations.get(version)
            if step is None:
                raise ValueError(f"format version {version} is not one this tidelog reads "
                                 f"(it reads {self._readable()})")
            document = step(dict(document))
            version += 1
        return {**document, "version": version}

    def _readable(self) -> str:
        first = self.version
        while first - 1 in self.migrations:
            first -= 1
        return str(first) if first == self.version else f"{first}-{self.version}"

    def _damaged(self, path: Path, reason: object) -> None:
        if self.on_damage == OnDamage.REFUSE:
            raise StateFileError(path, reason)
        aside = path.with_name(path.name + ".corrupt")
        try:
            os.replace(path, aside)
        except OSError as exc:
            raise StateFileError(path, f"{reason}; and it cannot be moved aside: {exc}") from exc
        log.error("Cannot read %s (%s); moved it to %s and starting without it", path, reason, aside)

    # --- writing ---

    def write(self, directory: str | Path, body: Mapping[str, Any]) -> None:
        """Replace the file with `body` at the current format version, atomically and durably (raises
        OSError)."""
        self.write_encoded(directory, self.encode(body))

    def encode(self, body: Mapping[str, Any]) -> bytes:
        """The document `write` puts in the file: `body` at the current format version."""
        document = {**body, "version": self.version}
        if self.compact:
            text = json.dumps(document, sort_keys=True, separators=(",", ":"))
        else:
            text = json.dumps(document, sort_keys=True, indent=1)
        return text.encode("utf-8")

    def write_encoded(self, directory: str | Path, data: bytes) -> None:
        """Replace the file with `data` from `encode`, atomically and durably (raises OSError)."""
        write_durably(self.path(directory), data, 0o600 if self.private else 0o644)


def write_durably(path: Path, data: bytes, mode: int) -> None:
    """Write `<path>.tmp` (with `mode`), fsync it, rename it over `path`, fsync the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)  # a .tmp left by an earlier crash keeps its old mode otherwise
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
