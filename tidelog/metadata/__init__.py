"""tidelog's metadata files: what Kafka keeps in its KRaft metadata log, as small JSON documents in the first
log dir. `files` declares each one; `store` is the one reader and writer (format versions, migrations, the
damaged-file rule, atomic and fsync'd replacement); `writer` writes a busy one off the event loop."""

from tidelog.metadata.store import MetadataFile, OnDamage, StateFileError

__all__ = ["MetadataFile", "OnDamage", "StateFileError"]
