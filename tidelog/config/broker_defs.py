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
    ConfigDef("listeners", S, "PLAINTEXT://localhost:9092", "Listener URIs the broker binds: NAME://host:port,...",
              dynamic=True),
    ConfigDef("advertised.listeners", S, None, "Listener URIs given to clients; defaults to listeners."),
    ConfigDef("listener.security.protocol.map", S,
              "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
              "Maps listener names to security protocols.", dynamic=True),
    ConfigDef("inter.broker.listener.name", S, None, "Listener used between brokers (unused on one node)."),
    ConfigDef("sasl.enabled.mechanisms", LI, ["GSSAPI"], "SASL mechanisms enabled on the broker.", dynamic=True),
    # --- security (Kafka's names; per-listener overrides are `listener.name.<listener>.<name>`) ---
    ConfigDef("ssl.keystore.type", S, "JKS", "Keystore format: PEM or PKCS12 (JKS must be converted)."),
    ConfigDef("ssl.keystore.location", S, None, "Keystore file (PEM: private key and certificate chain)."),
    ConfigDef("ssl.keystore.password", P, None, "Keystore password.", sensitive=True),
    ConfigDef("ssl.keystore.key", P, None, "PEM private key inline (KIP-651).", sensitive=True),
    ConfigDef("ssl.keystore.certificate.chain", P, None, "PEM certificate chain inline (KIP-651).", sensitive=True),
    ConfigDef("ssl.key.password", P, None, "Password of the private key.", sensitive=True),
    ConfigDef("ssl.truststore.type", S, "JKS", "Truststore format: PEM or PKCS12."),
    ConfigDef("ssl.truststore.location", S, None, "Truststore file: CAs trusted for client certificates."),
    ConfigDef("ssl.truststore.password", P, None, "Truststore password.", sensitive=True),
    ConfigDef("ssl.truststore.certificates", P, None, "PEM trusted certificates inline (KIP-651).",
              sensitive=True),
    ConfigDef("ssl.client.auth", S, "none", "Client certificates: none, requested or required.",
              one_of("none", "requested", "required")),
    ConfigDef("ssl.enabled.protocols", LI, ["TLSv1.2", "TLSv1.3"], "TLS versions enabled on TLS listeners."),
    ConfigDef("ssl.protocol", S, "TLSv1.3", "TLS protocol of the SSLContext (informational)."),
    ConfigDef("ssl.cipher.suites", LI, [], "Cipher suites (OpenSSL names for TLS 1.2); empty = defaults."),
    ConfigDef("ssl.principal.mapping.rules", S, "DEFAULT", "Rules mapping a certificate DN to a principal."),
    ConfigDef("ssl.endpoint.identification.algorithm", S, "https", "Client-side only; accepted and ignored."),
    ConfigDef("connections.max.reauth.ms", L, 0, "SASL session lifetime (KIP-368); 0 = no limit.", at_least(0)),
    ConfigDef("connection.failed.authentication.delay.ms", I, 100,
              "Delay before closing a connection that failed authentication.", at_least(0)),
    ConfigDef("authorizer.class.name", S, "", "Authorizer class (StandardAuthorizer or AclAuthorizer); "
              "empty = no authorization."),
    ConfigDef("super.users", S, None, "Principals allowed everything: User:alice;User:bob."),
    ConfigDef("allow.everyone.if.no.acl.found", B, False, "Allow access to resources that have no ACL."),
    # --- sockets and requests ---
    ConfigDef("socket.request.max.bytes", I, 104_857_600, "Largest request the broker accepts.", at_least(1)),
    ConfigDef("socket.send.buffer.bytes", I, 102_400, "SO_SNDBUF of server sockets (-1 = OS default)."),
    # Kafka's default is 102400. On loopback that bound cost 20-30% of produce throughput and ~20% more broker CPU
    # per GB (more, smaller reads) than Linux's autotuning (raw-socket load, 64 KiB and 1 MiB batches), so tidelog
    # leaves it to the kernel unless set.
    ConfigDef("socket.receive.buffer.bytes", I, -1, "SO_RCVBUF of server sockets (-1 = OS default; Kafka: 102400)."),
    ConfigDef("connections.max.idle.ms", L, 600_000, "Idle connections are closed after this many ms."),
    ConfigDef("num.network.threads", I, 3, "Network threads (informational in tidelog).", at_least(1), dynamic=True),
    ConfigDef("num.io.threads", I, 8, "Request handler threads (informational in tidelog).", at_least(1), dynamic=True),
    ConfigDef("queued.max.requests", I, 500, "Queued requests before network threads block.", at_least(1)),
    ConfigDef("fetch.max.bytes", I, 57_671_680, "Largest Fetch response the broker builds.", at_least(1024)),
    ConfigDef("max.incremental.fetch.session.cache.slots", I, 1000, "Incremental fetch sessions kept.", at_least(0)),
    ConfigDef("request.timeout.ms", I, 30_000, "Timeout for inter-broker requests."),
    # --- client quotas (Kafka's QuotaConfig: the windowed rate of ClientQuotaManager) ---
    ConfigDef("quota.window.num", I, 11, "Samples kept for client quota rates.", at_least(1)),
    ConfigDef("quota.window.size.seconds", I, 1, "Length of one client quota sample.", at_least(1)),
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
    # --- KIP-848 consumer groups (Kafka 4.0 defaults) ---
    ConfigDef("group.coordinator.rebalance.protocols", LI, ["classic", "consumer", "streams"],
              "Rebalance protocols the group coordinator accepts.", list_of("classic", "consumer", "streams")),
    ConfigDef("group.consumer.session.timeout.ms", I, 45_000, "Session timeout of consumer-protocol members.",
              at_least(1)),
    ConfigDef("group.consumer.heartbeat.interval.ms", I, 5_000, "Heartbeat interval given to consumer-protocol members.",
              at_least(1)),
    # the bounds a group's own consumer.session.timeout.ms / consumer.heartbeat.interval.ms must keep (GroupConfig)
    ConfigDef("group.consumer.min.session.timeout.ms", I, 45_000,
              "Smallest session timeout a consumer group's own config may set.", at_least(1)),
    ConfigDef("group.consumer.max.session.timeout.ms", I, 60_000,
              "Largest session timeout a consumer group's own config may set.", at_least(1)),
    ConfigDef("group.consumer.min.heartbeat.interval.ms", I, 5_000,
              "Smallest heartbeat interval a consumer group's own config may set.", at_least(1)),
    ConfigDef("group.consumer.max.heartbeat.interval.ms", I, 15_000,
              "Largest heartbeat interval a consumer group's own config may set.", at_least(1)),
    ConfigDef("group.consumer.assignors", LI, ["uniform", "range"],
              "Server-side assignors of consumer groups; the first is the default."),
    ConfigDef("group.consumer.max.size", I, INT_MAX, "Most members in one consumer-protocol group.", at_least(1)),
    # --- KIP-1071 streams groups (Kafka 4.4's GroupCoordinatorConfig defaults) ---
    ConfigDef("group.streams.session.timeout.ms", I, 45_000, "Session timeout of streams-group members.",
              at_least(1)),
    ConfigDef("group.streams.heartbeat.interval.ms", I, 5_000, "Heartbeat interval given to streams-group members.",
              at_least(1)),
    ConfigDef("group.streams.num.standby.replicas", I, 0, "Standby replicas of each task of a streams group.",
              at_least(0)),
    ConfigDef("group.streams.max.size", I, INT_MAX, "Most members in one streams group.", at_least(1)),
    ConfigDef("group.streams.initial.rebalance.delay.ms", I, 3_000,
              "How long a new streams group waits for more members before its first assignment.", at_least(0)),
    ConfigDef("group.streams.rack.aware.assignment.tags", LI, [],
              "Client tag keys every streams-group member must send (else MISSING_CLIENT_TAGS, heartbeat v1+)."),
    # --- KIP-932 share groups (Kafka 4.3's GroupCoordinatorConfig / ShareGroupConfig defaults) ---
    ConfigDef("group.share.session.timeout.ms", I, 45_000, "Session timeout of share-group members.", at_least(1)),
    ConfigDef("group.share.heartbeat.interval.ms", I, 5_000, "Heartbeat interval given to share-group members.",
              at_least(1)),
    ConfigDef("group.share.max.size", I, 200, "Most members in one share group.", between(1, 1000)),
    ConfigDef("group.share.record.lock.duration.ms", I, 30_000,
              "How long a share-group member holds the records it acquired.", between(1000, 3_600_000)),
    ConfigDef("group.share.delivery.count.limit", I, 5,
              "Deliveries of a record to a share group before it is archived.", between(2, 10)),
    ConfigDef("group.share.partition.max.record.locks", I, 2000,
              "Most in-flight records of one share-partition.", between(100, 10_000)),
    ConfigDef("group.share.max.share.sessions", I, 2000, "Most share sessions this broker keeps.", at_least(1)),
    # the bounds a share group's own configs must keep (GroupConfig.validate)
    ConfigDef("group.share.min.session.timeout.ms", I, 45_000,
              "Smallest session timeout a share group's own config may set.", at_least(1)),
    ConfigDef("group.share.max.session.timeout.ms", I, 60_000,
              "Largest session timeout a share group's own config may set.", at_least(1)),
    ConfigDef("group.share.min.heartbeat.interval.ms", I, 5_000,
              "Smallest heartbeat interval a share group's own config may set.", at_least(1)),
    ConfigDef("group.share.max.heartbeat.interval.ms", I, 15_000,
              "Largest heartbeat interval a share group's own config may set.", at_least(1)),
    ConfigDef("group.share.min.record.lock.duration.ms", I, 15_000,
              "Shortest record lock a share group's own config may set.", at_least(1000)),
    ConfigDef("group.share.max.record.lock.duration.ms", I, 60_000,
              "Longest record lock a share group's own config may set.", at_least(1000)),
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
    ConfigDef("log.message.format.version", S, "3.0-IV1", "Ignored (message format v2 only).", dynamic=True),
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
    # --- Kafka 4.3 dynamic broker configs tidelog stores and reports but does not act on (see docs/APIS.md):
    # the rest of DynamicBrokerConfig.AllDynamicConfigs. SSL keystore/truststore settings take a listener prefix
    # (listener.name.<listener>.<config>) when altered; the listener and SASL settings are per broker.
    ConfigDef("ssl.keystore.type", S, "JKS", "Key store file format.", dynamic=True),
    ConfigDef("ssl.keystore.location", S, None, "Key store file location.", dynamic=True),
    ConfigDef("ssl.keystore.password", P, None, "Key store password.", dynamic=True, sensitive=True),
    ConfigDef("ssl.key.password", P, None, "Private key password.", dynamic=True, sensitive=True),
    ConfigDef("ssl.keystore.key", P, None, "Private key in the format of ssl.keystore.type.", dynamic=True,
              sensitive=True),
    ConfigDef("ssl.keystore.certificate.chain", P, None, "Certificate chain in the format of ssl.keystore.type.",
              dynamic=True, sensitive=True),
    ConfigDef("ssl.truststore.type", S, "JKS", "Trust store file format.", dynamic=True),
    ConfigDef("ssl.truststore.location", S, None, "Trust store file location.", dynamic=True),
    ConfigDef("ssl.truststore.password", P, None, "Trust store password.", dynamic=True, sensitive=True),
    ConfigDef("ssl.truststore.certificates", P, None, "Trusted certificates in the format of ssl.truststore.type.",
              dynamic=True, sensitive=True),
    ConfigDef("principal.builder.class", ConfigType.CLASS,
              "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
              "KafkaPrincipalBuilder implementation.", dynamic=True),
    ConfigDef("ssl.protocol", S, "TLSv1.3", "SSL protocol used to generate the SSLContext.", dynamic=True),
    ConfigDef("ssl.provider", S, None, "Security provider used for SSL connections.", dynamic=True),
    ConfigDef("ssl.cipher.suites", LI, [], "Enabled cipher suites (empty = all supported).", dynamic=True),
    ConfigDef("ssl.enabled.protocols", LI, ["TLSv1.2", "TLSv1.3"], "Protocols enabled for SSL connections.",
              dynamic=True),
    ConfigDef("ssl.keymanager.algorithm", S, "SunX509", "Key manager factory algorithm.", dynamic=True),
    ConfigDef("ssl.trustmanager.algorithm", S, "PKIX", "Trust manager factory algorithm.", dynamic=True),
    ConfigDef("ssl.endpoint.identification.algorithm", S, "https", "Server hostname verification algorithm.",
              dynamic=True),
    ConfigDef("ssl.secure.random.implementation", S, None, "SecureRandom PRNG implementation.", dynamic=True),
    ConfigDef("ssl.client.auth", S, "none", "Client authentication: required, requested or none.",
              one_of("required", "requested", "none"), dynamic=True),
    ConfigDef("ssl.engine.factory.class", ConfigType.CLASS, None, "SslEngineFactory implementation.", dynamic=True),
    ConfigDef("sasl.mechanism.inter.broker.protocol", S, "GSSAPI", "SASL mechanism between brokers.", dynamic=True),
    ConfigDef("sasl.jaas.config", P, None, "JAAS login context parameters.", dynamic=True, sensitive=True),
    ConfigDef("sasl.kerberos.service.name", S, None, "Kerberos principal name Kafka runs as.", dynamic=True),
    ConfigDef("sasl.kerberos.kinit.cmd", S, "/usr/bin/kinit", "Kerberos kinit command path.", dynamic=True),
    ConfigDef("sasl.kerberos.ticket.renew.window.factor", D, 0.8, "Ticket renewal point as a share of its life.",
              dynamic=True),
    ConfigDef("sasl.kerberos.ticket.renew.jitter", D, 0.05, "Random jitter added to the renewal time.",
              dynamic=True),
    ConfigDef("sasl.kerberos.min.time.before.relogin", L, 60_000, "Login thread sleep between refresh attempts.",
              dynamic=True),
    ConfigDef("sasl.kerberos.principal.to.local.rules", LI, ["DEFAULT"], "Principal name to short name rules.",
              dynamic=True),
    ConfigDef("sasl.login.refresh.window.factor", D, 0.8, "Login refresh point as a share of the credential life.",
              between(0.5, 1.0), dynamic=True),
    ConfigDef("sasl.login.refresh.window.jitter", D, 0.05, "Random jitter added to the login refresh time.",
              between(0.0, 0.25), dynamic=True),
    ConfigDef("sasl.login.refresh.min.period.seconds", SH, 60, "Least wait before refreshing a credential.",
              between(0, 900), dynamic=True),
    ConfigDef("sasl.login.refresh.buffer.seconds", SH, 300, "Buffer kept before credential expiry on refresh.",
              between(0, 3600), dynamic=True),
    ConfigDef("max.connections", I, INT_MAX, "Most connections the broker accepts.", at_least(0), dynamic=True),
    ConfigDef("max.connection.creation.rate", I, INT_MAX, "Most new connections per second.", at_least(0),
              dynamic=True),
    ConfigDef("max.connections.per.ip", I, INT_MAX, "Most connections from one address.", at_least(0),
              dynamic=True),
    ConfigDef("max.connections.per.ip.overrides", S, "", "Per-address overrides of max.connections.per.ip.",
              dynamic=True),
    ConfigDef("num.replica.fetchers", I, 1, "Replica fetcher threads (no replication on one node).", at_least(1),
              dynamic=True),
    ConfigDef("background.threads", I, 10, "Background task threads.", at_least(1), dynamic=True),
    ConfigDef("metric.reporters", LI, ["org.apache.kafka.common.metrics.JmxReporter"],
              "MetricsReporter classes.", dynamic=True),
    ConfigDef("config.providers", LI, [], "ConfigProvider names for variable configs.", dynamic=True),
    ConfigDef("transaction.partition.verification.enable", B, True,
              "Verify a partition was added to a transaction before writing to it (KIP-890).", dynamic=True),
    ConfigDef("follower.fetch.last.tiered.offset.enable", B, False,
              "New followers start from the last tiered offset (KIP-1023).", dynamic=True),
    ConfigDef("remote.log.index.file.cache.total.size.bytes", L, 1_073_741_824,
              "Remote index file cache size.", at_least(1), dynamic=True),
    ConfigDef("remote.fetch.max.wait.ms", I, 500, "Longest wait of a remote fetch.", at_least(1), dynamic=True),
    ConfigDef("remote.log.manager.copy.max.bytes.per.second", L, LONG_MAX, "Remote copy throttle.", at_least(1),
              dynamic=True),
    ConfigDef("remote.log.manager.fetch.max.bytes.per.second", L, LONG_MAX, "Remote fetch throttle.", at_least(1),
              dynamic=True),
    ConfigDef("remote.list.offsets.request.timeout.ms", L, 30_000, "Remote ListOffsets timeout.", at_least(1),
              dynamic=True),
    ConfigDef("remote.log.manager.copier.thread.pool.size", I, 10, "Remote copier threads.", at_least(1),
              dynamic=True),
    ConfigDef("remote.log.manager.expiration.thread.pool.size", I, 10, "Remote expiration threads.", at_least(1),
              dynamic=True),
    ConfigDef("remote.log.manager.follower.thread.pool.size", I, 2, "Remote follower threads.", at_least(1),
              dynamic=True),
    ConfigDef("remote.log.reader.threads", I, 10, "Remote read threads.", at_least(1), dynamic=True),
    ConfigDef("group.coordinator.cached.buffer.max.bytes", I, 1_048_588,
              "Largest write buffer the group coordinator keeps for reuse.", at_least(512 * 1024), dynamic=True),
    ConfigDef("share.coordinator.cached.buffer.max.bytes", I, 1_048_588,
              "Largest write buffer the share coordinator keeps for reuse.", at_least(512 * 1024), dynamic=True),
    # --- tidelog extensions ---
    ConfigDef("log.flush.on.append", B, False, "tidelog: fsync every append before acknowledging it."),
    ConfigDef("log.cleaner.thread.nice", I, 10,
              "tidelog: niceness the log cleaner threads add to the broker's own (Linux per-thread nice, 0-19; "
              "0 = the broker's priority): the event loop then preempts a cleaning pass. Not a Kafka config.",
              between(0, 19), dynamic=True),
    ConfigDef("metrics.port", I, -1, "tidelog: Prometheus metrics HTTP port (-1 = off, 0 = ephemeral).",
              between(-1, 65_535)),
    ConfigDef("metrics.host", S, "127.0.0.1", "tidelog: address the Prometheus metrics HTTP server binds."),
    ConfigDef("console.enable", B, True, "tidelog: serve the web console and its /api/ on the metrics HTTP port."),
    ConfigDef("console.read.only", B, True,
              "tidelog: refuse the console's write actions (create/delete/alter/produce/reset) with 403."),
    ConfigDef("schema.registry.port", I, -1,
              "tidelog: Confluent Schema Registry REST port, schemas kept on _schemas (-1 = off, 0 = ephemeral).",
              between(-1, 65_535)),
    ConfigDef("schema.registry.host", S, "127.0.0.1", "tidelog: address the Schema Registry's HTTP server binds."),
    ConfigDef("cluster.id", S, None, "tidelog: cluster id written to meta.properties when a log dir is new."),
]

BROKER_CONFIG_DEFS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}

# DynamicBrokerConfig: SSL key/trust store settings (SslConfigs.RECONFIGURABLE_CONFIGS) may be altered only with
# a listener prefix; the security and listener settings only per broker (not at the cluster-default level),
# except the cluster-level listener settings.
LISTENER_PREFIX_ONLY = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.certificates",
})
_CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate",
                                             "num.network.threads"})
_LISTENER_CONFIGS = frozenset({
    "listeners", "listener.security.protocol.map", "principal.builder.class", "ssl.protocol", "ssl.provider",
    "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation", "ssl.client.auth",
    "ssl.engine.factory.class", "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config",
    "sasl.enabled.mechanisms", "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds", *_CLUSTER_LEVEL_LISTENER_CONFIGS,
})
PER_BROKER_ONLY = (LISTENER_PREFIX_ONLY | _LISTENER_CONFIGS) - _CLUSTER_LEVEL_LISTENER_CONFIGS
# DynamicThreadPool.validateReconfiguration: these move at most by half / double per change.
THREAD_POOL_CONFIGS = ("num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                       "background.threads")
LISTENER_CONFIG_PREFIX = "listener.name."


def listener_base_name(name: str) -> str | None:
    """`listener.name.<listener>.<config>` -> `<config>` (Kafka's ListenerConfigRegex), else None."""
    if not name.startswith(LISTENER_CONFIG_PREFIX):
        return None
    rest = name[len(LISTENER_CONFIG_PREFIX):]
    listener, dot, base = rest.partition(".")
    return base if listener and dot and base else None

# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: configs that derive one value from several names,
# most specific first.
_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
)


# ListenerMechanismConfigs: listener.name.<l>.<mechanism>.<config> is a synonym of <config>.
_MECHANISM_CONFIGS = ("sasl.jaas.config", "sasl.login.callback.handler.class", "sasl.login.class",
                      "sasl.server.callback.handler.class", "connections.max.reauth.ms")


def definition_of(name: str) -> ConfigDef | None:
    """The definition of a broker config, or of the base config of a listener-prefixed name."""
    if name in BROKER_CONFIG_DEFS:
        return BROKER_CONFIG_DEFS[name]
    base = listener_base_name(name)
    if base is None:
        return None
    if base in BROKER_CONFIG_DEFS:
        return BROKER_CONFIG_DEFS[base]
    mechanism = next((m for m in _MECHANISM_CONFIGS if base.endswith("." + m)), None)
    return BROKER_CONFIG_DEFS.get(mechanism) if mechanism else None


def per_broker_only(name: str) -> bool:
    """DynamicBrokerConfig.perBrokerConfigs: refused at the cluster-default level."""
    base = listener_base_name(name)
    if base is not None:
        return base not in _CLUSTER_LEVEL_LISTENER_CONFIGS
    return name in PER_BROKER_ONLY


def broker_synonyms(name: str) -> list[str]:
    """All broker names that feed `name`'s value, most specific first (the whole group, as Kafka lists it);
    a listener-prefixed name has its base config as synonym (DynamicBrokerConfig.brokerConfigSynonyms)."""
    base = listener_base_name(name)
    if base is not None:
        mechanism = next((m for m in _MECHANISM_CONFIGS if base.endswith("." + m)), None)
        return [name, mechanism or base]
    for group in _SYNONYM_GROUPS:
        if name in group:
            return list(group)
    return [name]
