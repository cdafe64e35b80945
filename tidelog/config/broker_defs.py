"""Broker config definitions: Kafka's names, types and defaults (Kafka 3.9), plus tidelog's extensions.

Defaults differ from Kafka only where a single node demands it (replication factors 1) or the task says so
(`listeners`, `log.dir`, `node.id`); such lines say why. `dynamic=True` marks configs Kafka lets
AlterConfigs change at runtime (DynamicBrokerConfig.AllDynamicConfigs) that tidelog applies live.
"""

from __future__ import annotations

from tidelog.config.definitions import (
    DOUBLE_MAX,
    INT_MAX,
    LONG_MAX,
    ConfigDef,
    ConfigType,
    at_least,
    between,
    list_of,
    one_of,
)

B = ConfigType.BOOLEAN
S = ConfigType.STRING
I = ConfigType.INT  # noqa: E741
SH = ConfigType.SHORT
L = ConfigType.LONG
D = ConfigType.DOUBLE
LI = ConfigType.LIST
P = ConfigType.PASSWORD

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


def _gzip_level(name: str, value: int) -> None:
    # GzipCompression.LevelValidator: -1 (library default) or 1..9.
    if value != -1:
        between(1, 9)(name, value)


_DEFS: list[ConfigDef] = [
    # --- identity and listeners ---
    # Kafka's node.id has no default (required in KRaft); a single-node fixture defaults to 1.
    ConfigDef("node.id", I, 1, "The node id of this broker.", at_least(0)),
    ConfigDef("broker.id", I, -1, "Legacy name of node.id; used when node.id is not set."),
    # Kafka's default is PLAINTEXT://:9092 (all interfaces); a test fixture binds to localhost.
    ConfigDef("listeners", S, "PLAINTEXT://localhost:9092", "Listener URIs the broker binds: NAME://host:port,..."),
    ConfigDef("advertised.listeners", S, None, "Listener URIs given to clients; defaults to listeners."),
    ConfigDef("listener.security.protocol.map", S,
              "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
              "Maps listener names to security protocols."),
    ConfigDef("inter.broker.listener.name", S, None, "Listener used between brokers (unused on one node)."),
    ConfigDef("sasl.enabled.mechanisms", LI, ["GSSAPI"], "SASL mechanisms enabled on the broker."),
    # --- sockets and requests ---
    ConfigDef("socket.request.max.bytes", I, 104_857_600, "Largest request the broker accepts.", at_least(1)),
    ConfigDef("socket.send.buffer.bytes", I, 102_400, "SO_SNDBUF of server sockets (-1 = OS default)."),
    ConfigDef("socket.receive.buffer.bytes", I, 102_400, "SO_RCVBUF of server sockets (-1 = OS default)."),
    ConfigDef("connections.max.idle.ms", L, 600_000, "Idle connections are closed after this many ms."),
    ConfigDef("num.network.threads", I, 3, "Network threads (informational in tidelog).", at_least(1), dynamic=True),
    ConfigDef("num.io.threads", I, 8, "Request handler threads (informational in tidelog).", at_least(1), dynamic=True),
    ConfigDef("queued.max.requests", I, 500, "Queued requests before network threads block.", at_least(1)),
    ConfigDef("fetch.max.bytes", I, 57_671_680, "Largest Fetch response the broker builds.", at_least(1024)),
    ConfigDef("max.incremental.fetch.session.cache.slots", I, 1000, "Incremental fetch sessions kept.", at_least(0)),
    ConfigDef("request.timeout.ms", I, 30_000, "Timeout for inter-broker requests."),
    # --- topics ---
    ConfigDef("auto.create.topics.enable", B, True, "Create a topic when Metadata names an unknown one."),
    ConfigDef("num.partitions", I, 1, "Default partition count of new topics.", at_least(1)),
    # Kafka defaults both replication factors to 3 for offsets/transactions; a single node can only hold 1.
    ConfigDef("default.replication.factor", I, 1, "Default replication factor of new topics."),
    ConfigDef("delete.topic.enable", B, True, "Allow DeleteTopics."),
    ConfigDef("message.max.bytes", I, 1_048_588, "Largest record batch accepted (topic max.message.bytes).",
              at_least(0), dynamic=True),
    # --- group coordinator ---
    ConfigDef("offsets.topic.num.partitions", I, 50, "Partitions of __consumer_offsets.", at_least(1)),
    ConfigDef("offsets.topic.replication.factor", SH, 1, "Replication factor of __consumer_offsets.", at_least(1)),
    ConfigDef("offsets.topic.segment.bytes", I, 104_857_600, "segment.bytes of __consumer_offsets.", at_least(1)),
    ConfigDef("offsets.topic.compression.codec", I, 0, "Compression of offset commit batches (0 = none)."),
    ConfigDef("offsets.retention.minutes", I, 10_080, "Committed offsets of empty groups expire after this.",
              at_least(1)),
    ConfigDef("offsets.retention.check.interval.ms", L, 600_000, "How often stale offsets are checked.",
              at_least(1)),
    ConfigDef("offsets.commit.timeout.ms", I, 5000, "Offset commit wait limit.", at_least(1)),
    ConfigDef("offsets.load.buffer.size", I, 5_242_880, "Read buffer when loading group state.", at_least(1)),
    ConfigDef("offset.metadata.max.bytes", I, 4096, "Largest metadata string of a committed offset."),
    ConfigDef("group.initial.rebalance.delay.ms", I, 3000, "Delay of the first rebalance of an empty group."),
    ConfigDef("group.min.session.timeout.ms", I, 6000, "Smallest session timeout a member may ask for."),
    ConfigDef("group.max.session.timeout.ms", I, 1_800_000, "Largest session timeout a member may ask for."),
    ConfigDef("group.max.size", I, INT_MAX, "Most members in one consumer group.", at_least(1)),
    # --- transactions and idempotence ---
    ConfigDef("transaction.state.log.num.partitions", I, 50, "Partitions of __transaction_state.", at_least(1)),
    ConfigDef("transaction.state.log.replication.factor", SH, 1, "Replication factor of __transaction_state.",
              at_least(1)),
    ConfigDef("transaction.state.log.min.isr", I, 1, "min.insync.replicas of __transaction_state.", at_least(1)),
    ConfigDef("transaction.state.log.segment.bytes", I, 104_857_600, "segment.bytes of __transaction_state.",
              at_least(1)),
    ConfigDef("transaction.max.timeout.ms", I, 900_000, "Largest transaction timeout a producer may ask for.",
              at_least(1)),
    ConfigDef("transactional.id.expiration.ms", I, 604_800_000, "Idle transactional ids expire after this.",
              at_least(1)),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", I, 10_000,
              "How often timed-out transactions are rolled back.", at_least(1)),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", I, 3_600_000,
              "How often expired transactional ids are removed.", at_least(1)),
    ConfigDef("producer.id.expiration.ms", I, 86_400_000, "Idle producer ids expire after this.", at_least(1),
              dynamic=True),
    ConfigDef("producer.id.expiration.check.interval.ms", I, 600_000, "How often producer ids are expired.",
              at_least(1)),
    # --- log directories and flushing ---
    # Kafka's log.dir default is /tmp/kafka-logs; tidelog keeps data next to where it runs.
    ConfigDef("log.dir", S, "./data", "Data directory, used when log.dirs is not set."),
    ConfigDef("log.dirs", LI, None, "Comma-separated data directories."),
    ConfigDef("log.flush.interval.messages", L, LONG_MAX, "Messages appended before a flush (flush.messages).",
              at_least(1), dynamic=True),
    ConfigDef("log.flush.interval.ms", L, None, "Max ms a message waits before flush (flush.ms).", dynamic=True),
    ConfigDef("log.flush.scheduler.interval.ms", L, LONG_MAX, "How often logs are checked for a due flush."),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", I, 60_000, "Recovery point checkpoint interval.",
              at_least(0)),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", I, 60_000, "Log start offset checkpoint interval.",
              at_least(0)),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", L, 5000, "High watermark checkpoint interval."),
    ConfigDef("num.recovery.threads.per.data.dir", I, 2, "Threads used for log recovery at startup.",
              at_least(1), dynamic=True),
    ConfigDef("log.retention.check.interval.ms", L, 300_000, "How often the retention task runs.", at_least(1)),
    # --- log.* synonyms of topic configs (DynamicLogConfig) ---
    ConfigDef("log.cleanup.policy", LI, ["delete"], "Default cleanup.policy.", list_of("compact", "delete"),
              dynamic=True),
    ConfigDef("log.segment.bytes", I, 1_073_741_824, "Default segment.bytes.", at_least(14), dynamic=True),
    ConfigDef("log.roll.ms", L, None, "Default segment.ms (wins over log.roll.hours).", dynamic=True),
    ConfigDef("log.roll.hours", I, 168, "Default segment.ms in hours.", at_least(1)),
    ConfigDef("log.roll.jitter.ms", L, None, "Default segment.jitter.ms.", dynamic=True),
    ConfigDef("log.roll.jitter.hours", I, 0, "Default segment.jitter.ms in hours.", at_least(0)),
    ConfigDef("log.index.size.max.bytes", I, 10_485_760, "Default segment.index.bytes.", at_least(4), dynamic=True),
    ConfigDef("log.index.interval.bytes", I, 4096, "Default index.interval.bytes.", at_least(0), dynamic=True),
    ConfigDef("log.retention.ms", L, None, "Default retention.ms (wins over minutes/hours; -1 = forever).",
              dynamic=True),
    ConfigDef("log.retention.minutes", I, None, "Default retention.ms in minutes."),
    ConfigDef("log.retention.hours", I, 168, "Default retention.ms in hours."),
    ConfigDef("log.retention.bytes", L, -1, "Default retention.bytes (-1 = no limit).", dynamic=True),
    ConfigDef("log.segment.delete.delay.ms", L, 60_000, "Default file.delete.delay.ms.", at_least(0), dynamic=True),
    ConfigDef("log.message.timestamp.type", S, "CreateTime", "Default message.timestamp.type.",
              one_of(*TIMESTAMP_TYPES), dynamic=True),
    # KAFKA-16368 changes the after-max default to 3600000 in 4.0; 3.9's value is kept here.
    ConfigDef("log.message.timestamp.before.max.ms", L, LONG_MAX, "Default message.timestamp.before.max.ms.",
              at_least(0), dynamic=True),
    ConfigDef("log.message.timestamp.after.max.ms", L, LONG_MAX, "Default message.timestamp.after.max.ms.",
              at_least(0), dynamic=True),
    ConfigDef("log.message.timestamp.difference.max.ms", L, LONG_MAX,
              "Deprecated default of message.timestamp.difference.max.ms.", at_least(0), dynamic=True),
    ConfigDef("log.message.format.version", S, "3.0-IV1", "Ignored (message format v2 only)."),
    ConfigDef("log.message.downconversion.enable", B, True, "Default message.downconversion.enable.",
              dynamic=True),
    ConfigDef("log.preallocate", B, False, "Default preallocate.", dynamic=True),
    ConfigDef("log.local.retention.ms", L, -2, "Default local.retention.ms (tiered storage).", at_least(-2),
              dynamic=True),
    ConfigDef("log.local.retention.bytes", L, -2, "Default local.retention.bytes (tiered storage).", at_least(-2),
              dynamic=True),
    ConfigDef("compression.type", S, "producer", "Default compression.type.", one_of(*COMPRESSION_TYPES),
              dynamic=True),
    ConfigDef("compression.gzip.level", I, -1, "Default compression.gzip.level.", _gzip_level, dynamic=True),
    ConfigDef("compression.lz4.level", I, 9, "Default compression.lz4.level.", between(1, 17), dynamic=True),
    ConfigDef("compression.zstd.level", I, 3, "Default compression.zstd.level.", between(-131_072, 22),
              dynamic=True),
    ConfigDef("min.insync.replicas", I, 1, "Default min.insync.replicas.", at_least(1), dynamic=True),
    ConfigDef("unclean.leader.election.enable", B, False, "Default unclean.leader.election.enable.", dynamic=True),
    # --- log cleaner (Kafka's LogCleaner.reconfigure) ---
    ConfigDef("log.cleaner.enable", B, True, "Run the log cleaner threads at all."),
    ConfigDef("log.cleaner.threads", I, 1, "Log cleaner threads.", at_least(0), dynamic=True),
    ConfigDef("log.cleaner.dedupe.buffer.size", L, 134_217_728, "Offset map memory across all cleaner threads.",
              dynamic=True),
    ConfigDef("log.cleaner.io.buffer.load.factor", D, 0.9, "Fill limit of the cleaner offset map.", dynamic=True),
    ConfigDef("log.cleaner.io.buffer.size", I, 524_288, "Cleaner read/write buffer memory across threads.",
              at_least(0), dynamic=True),
    ConfigDef("log.cleaner.io.max.bytes.per.second", D, DOUBLE_MAX, "Cleaner I/O throttle.", dynamic=True),
    ConfigDef("log.cleaner.backoff.ms", L, 15_000, "Cleaner sleep when nothing is cleanable.", at_least(0),
              dynamic=True),
    ConfigDef("log.cleaner.min.cleanable.ratio", D, 0.5, "Default min.cleanable.dirty.ratio.", between(0, 1),
              dynamic=True),
    ConfigDef("log.cleaner.min.compaction.lag.ms", L, 0, "Default min.compaction.lag.ms.", at_least(0),
              dynamic=True),
    ConfigDef("log.cleaner.max.compaction.lag.ms", L, LONG_MAX, "Default max.compaction.lag.ms.", at_least(1),
              dynamic=True),
    ConfigDef("log.cleaner.delete.retention.ms", L, 86_400_000, "Default delete.retention.ms.", at_least(0),
              dynamic=True),
    # --- tidelog extensions ---
    ConfigDef("log.flush.on.append", B, False, "tidelog: fsync every append before acknowledging it."),
    ConfigDef("metrics.port", I, -1, "tidelog: Prometheus metrics HTTP port (-1 = off, 0 = ephemeral).",
              between(-1, 65_535)),
    ConfigDef("metrics.host", S, "127.0.0.1", "tidelog: address the Prometheus metrics HTTP server binds."),
    ConfigDef("cluster.id", S, None, "tidelog: cluster id written to meta.properties when a log dir is new."),
]

BROKER_CONFIG_DEFS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}

# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: configs that derive one value from several names,
# most specific first.
_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
)


def broker_synonyms(name: str) -> list[str]:
    """All broker names that feed `name`'s value, most specific first (the whole group, as Kafka lists it)."""
    for group in _SYNONYM_GROUPS:
        if name in group:
            return list(group)
    return [name]
