"""Broker configuration (Kafka's `KafkaConfig` + the parts of `DynamicBrokerConfig` a single node needs).

Layers, lowest to highest: definition defaults, static config (server.properties < env TIDELOG_* < overrides),
dynamic cluster-default configs (AlterConfigs on BROKER ""), dynamic per-broker configs (AlterConfigs on
BROKER "<node.id>"). Every defined config is an attribute named with '.' -> '_' holding the effective value.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tidelog.config.broker_defs import (
    BROKER_CONFIG_DEFS,
    LISTENER_PREFIX_ONLY,
    THREAD_POOL_CONFIGS,
    broker_synonyms,
    definition_of,
    listener_base_name,
    per_broker_only,
)
from tidelog.config.definitions import ConfigError, ConfigSource, ConfigType, to_string

if TYPE_CHECKING:
    from tidelog.config.config_entries import ConfigEntry, ConfigSynonym
    from tidelog.config.log_config import LogConfig

log = logging.getLogger(__name__)

ENV_PREFIX = "TIDELOG_"
LISTENER_PREFIX = "listener.name."


class UnknownConfigError(ConfigError):
    """A config name that is not defined (AlterConfigs answers INVALID_CONFIG)."""


class ReadOnlyConfigError(ConfigError):
    """A static broker config named in AlterConfigs (Kafka answers INVALID_REQUEST)."""


def env_name(config_name: str) -> str:
    return ENV_PREFIX + config_name.upper().replace(".", "_")


def read_properties(path: str | Path) -> dict[str, str]:
    """server.properties syntax: `key=value` (or `key: value`), `#`/`!` comments, blank lines ignored."""
    props: dict[str, str] = {}
    text = Path(path).read_text(encoding="utf-8")
    logical: list[str] = []
    for raw_line in text.splitlines():
        line = raw_line.strip() if not logical else raw_line.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        # java.util.Properties: a trailing backslash continues the line.
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical.append(line[:-1])
            continue
        logical.append(line)
        entry = "".join(logical)
        logical = []
        key, value = _split_property(entry)
        if key:
            props[key] = value
    return props


def _split_property(entry: str) -> tuple[str, str]:
    """java.util.Properties: the key ends at the first unescaped '=', ':' or whitespace; whitespace and one
    separator after it are skipped. Backslash escapes (\\=, \\:, \\ , \\t, \\n, \\uXXXX) are honoured."""
    entry = entry.strip()
    i = 0
    while i < len(entry):
        ch = entry[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch.isspace():
            break
        i += 1
    key, rest = entry[:i], entry[i:].lstrip()
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip()
    return _unescape(key), _unescape(rest)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and i + 6 <= len(text):
            try:
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            except ValueError:
                pass
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        i += 2
    return "".join(out)


def parse_listeners(text: str, config_name: str = "listeners") -> list[tuple[str, str, int]]:
    """`NAME://host:port,...` -> [(NAME, host, port)]; an empty host means all interfaces."""
    endpoints: list[tuple[str, str, int]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        # Listener names may hold '_' (SASL_SSL), which URL schemes may not: split the name off first.
        name, sep, rest = item.partition("://")
        parts = urlsplit("listener://" + rest)
        if not sep or not name:
            raise ConfigError(f"Invalid {config_name} entry {item!r}: expected NAME://host:port")
        try:
            port = parts.port
        except ValueError:
            port = None
        if port is None:
            raise ConfigError(f"Invalid {config_name} entry {item!r}: missing or bad port")
        endpoints.append((item.split("://", 1)[0].upper(), parts.hostname or "", port))
    names = [name for name, _, _ in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError(f"Each listener in {config_name} must have a different name, got {text!r}")
    return endpoints


class BrokerConfig:
    # Typed attributes the rest of the broker reads (every other defined config is an attribute too).
    node_id: int
    listeners: str
    advertised_listeners: str
    log_dirs: list[str]
    auto_create_topics_enable: bool
    num_partitions: int
    default_replication_factor: int
    socket_request_max_bytes: int
    message_max_bytes: int
    delete_topic_enable: bool
    offsets_topic_num_partitions: int
    offsets_topic_replication_factor: int
    offsets_topic_segment_bytes: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_max_size: int
    transaction_state_log_num_partitions: int
    transaction_state_log_segment_bytes: int
    transaction_max_timeout_ms: int
    transactional_id_expiration_ms: int
    producer_id_expiration_ms: int
    producer_id_expiration_check_interval_ms: int
    log_cleaner_enable: bool
    log_cleaner_threads: int
    log_cleaner_dedupe_buffer_size: int
    log_cleaner_io_buffer_load_factor: float
    log_cleaner_io_buffer_size: int
    log_cleaner_io_max_bytes_per_second: float
    log_cleaner_backoff_ms: int
    log_cleaner_thread_nice: int
    log_retention_check_interval_ms: int
    log_flush_interval_messages: int
    log_flush_interval_ms: int | None
    log_flush_scheduler_interval_ms: int
    log_flush_offset_checkpoint_interval_ms: int
    log_flush_start_offset_checkpoint_interval_ms: int
    replica_high_watermark_checkpoint_interval_ms: int
    log_flush_on_append: bool
    metrics_port: int
    metrics_host: str
    cluster_id: str | None
    fetch_max_bytes: int
    connections_max_idle_ms: int
    sasl_enabled_mechanisms: list[str]
    authorizer_class_name: str
    connections_max_reauth_ms: int
    connection_failed_authentication_delay_ms: int

    def __init__(
        self,
        static: Mapping[str, str] | None = None,
        *,
        dynamic_default: Mapping[str, str] | None = None,
        dynamic_broker: Mapping[str, str] | None = None,
    ) -> None:
        self._static_raw: dict[str, str] = {}
        self.unknown: dict[str, str] = {}
        # `listener.name.<listener>.<config>`: per-listener overrides (Kafka's ListenerName.configPrefix),
        # read by tidelog.security.listener_config.
        self.listener_overrides: dict[str, str] = {}
        for name, value in (static or {}).items():
            if name in BROKER_CONFIG_DEFS:
                self._static_raw[name] = value
            elif name.startswith(LISTENER_PREFIX):
                self.listener_overrides[name] = value
            else:
                self.unknown[name] = value
        if self.unknown:
            # Kafka logs unused configs ("supplied but isn't a known config") and starts anyway.
            log.warning("These configurations were supplied but are not known: %s", sorted(self.unknown))
        self._static = self._parse_layer(self._static_raw)
        self._dynamic_default_raw: dict[str, str] = {}
        self._dynamic_broker_raw: dict[str, str] = {}
        self._dynamic_default: dict[str, Any] = {}
        self._dynamic_broker: dict[str, Any] = {}
        self._resolve()
        if dynamic_default:
            self.set_dynamic(False, dynamic_default)
        if dynamic_broker:
            self.set_dynamic(True, dynamic_broker)

    # --- loading ---

    @classmethod
    def load(
        cls,
        properties_file: str | None = None,
        env: Mapping[str, str] | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        """Defaults < properties file < environment (TIDELOG_<NAME>) < overrides. Bad values raise ConfigError."""
        merged: dict[str, str] = {}
        if properties_file is not None:
            try:
                merged.update(read_properties(properties_file))
            except OSError as exc:
                raise ConfigError(f"Cannot read properties file {properties_file}: {exc}") from exc
        if env:
            by_env = {env_name(name): name for name in BROKER_CONFIG_DEFS}
            for key, value in env.items():
                if key in by_env:
                    merged[by_env[key]] = value
        if overrides:
            merged.update({str(k): str(v) if not isinstance(v, str) else v for k, v in overrides.items()})
        return cls(merged)

    @staticmethod
    def _parse_layer(raw: Mapping[str, str]) -> dict[str, Any]:
        parsed: dict[str, Any] = {}
        for name, value in raw.items():
            definition = definition_of(name)
            assert definition is not None
            parsed[name] = definition.parse(value)
        return parsed

    def _resolve(self) -> None:
        for name, definition in BROKER_CONFIG_DEFS.items():
            setattr(self, name.replace(".", "_"), self._effective(name, definition.default))
        # Derived values (Kafka resolves these in KafkaConfig).
        broker_id = self._effective("broker.id", -1)
        if not self._is_set("node.id") and broker_id >= 0:
            self.node_id = broker_id
        elif self._is_set("broker.id") and broker_id != self.node_id:
            raise ConfigError(f"broker.id ({broker_id}) must match node.id ({self.node_id})")
        if self.advertised_listeners is None:
            self.advertised_listeners = self.listeners
        dirs = self._effective("log.dirs", None)
        self.log_dirs = list(dirs) if dirs else [self._effective("log.dir", "./data")]
        if not self.log_dirs or any(not d for d in self.log_dirs):
            raise ConfigError("log.dirs must name at least one directory")
        parse_listeners(self.listeners)
        for _, host, _ in parse_listeners(self.advertised_listeners, "advertised.listeners"):
            if host in ("0.0.0.0", "::"):
                raise ConfigError(f"advertised.listeners cannot use the nonroutable meta-address {host}")
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ConfigError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")
        self._check_console_exposure()

    def _check_console_exposure(self) -> None:
        """The web console with writes on, on a non-loopback address, without SASL (no login) would let anyone
        who reaches the port create, delete and produce: refused at start-up (issue 31)."""
        if int(self._effective("metrics.port", -1)) < 0 or not self._effective("console.enable", True) \
                or self._effective("console.read.only", True):
            return
        host = str(self._effective("metrics.host", "127.0.0.1"))
        if host in ("127.0.0.1", "::1", "localhost") or host.startswith("127."):
            return
        mapping = dict(entry.split(":", 1) for entry in str(self._effective("listener.security.protocol.map", "")).split(",")
                       if ":" in entry)
        if any(mapping.get(name, name).upper().startswith("SASL_") for name, _, _ in parse_listeners(str(self.listeners))):
            return
        raise ConfigError(f"console.read.only=false with metrics.host={host} (not loopback) and no SASL listener "
                          "would let anyone reaching the port write: bind metrics.host to 127.0.0.1, add a "
                          "SASL listener (the console then asks for its users' passwords) or keep "
                          "console.read.only=true")

    def _effective(self, name: str, default: Any) -> Any:
        for layer in (self._dynamic_broker, self._dynamic_default, self._static):
            if name in layer and layer[name] is not None:
                return layer[name]
        return default

    def _is_set(self, name: str) -> bool:
        return any(name in layer for layer in (self._dynamic_broker, self._dynamic_default, self._static))

    # --- lookups ---

    def get(self, name: str) -> Any:
        """The effective value of a defined broker config (KeyError for an unknown name)."""
        if name not in BROKER_CONFIG_DEFS:
            raise KeyError(name)
        return getattr(self, name.replace(".", "_"))

    def static_value(self, name: str) -> Any:
        """The value of `name` from the static layers alone (server.properties, environment, overrides), else its
        definition default: what Kafka's controller reads from its own node config (staticConfig)."""
        value = self._static.get(name)
        return BROKER_CONFIG_DEFS[name].default if value is None else value

    def raw_value(self, name: str) -> Any:
        """The value set for `name` in the highest layer, else its definition default (None allowed)."""
        return self._effective(name, BROKER_CONFIG_DEFS[name].default)

    def source(self, name: str) -> ConfigSource:
        if name in self._dynamic_broker:
            return ConfigSource.DYNAMIC_BROKER_CONFIG
        if name in self._dynamic_default:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if name in self._static:
            return ConfigSource.STATIC_BROKER_CONFIG
        return ConfigSource.DEFAULT_CONFIG

    def layers(self) -> list[tuple[ConfigSource, Mapping[str, str | None]]]:
        """Values as given (strings), highest precedence first, as Kafka's DynamicBrokerConfig.configSynonyms
        walks them: configured layers keep their raw text, defaults are converted to strings."""
        defaults = {
            n: to_string(d.type, d.default) for n, d in BROKER_CONFIG_DEFS.items() if d.default is not None
        }
        return [
            (ConfigSource.DYNAMIC_BROKER_CONFIG, self._dynamic_broker_raw),
            (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, self._dynamic_default_raw),
            (ConfigSource.STATIC_BROKER_CONFIG, self._static_raw),
            (ConfigSource.DEFAULT_CONFIG, defaults),
        ]

    def synonyms(self, name: str, names: Iterable[str] | None = None) -> list[ConfigSynonym]:
        """Kafka's configSynonyms(name, synonyms): every layer's value of each synonym, then drop the entries
        before the first one named `name` (so a hours-only default does not show under the ms name)."""
        # lazy for start-up time: imported when DescribeConfigs is first served
        from tidelog.config.config_entries import ConfigSynonym

        names = list(names) if names is not None else broker_synonyms(name)
        found: list[ConfigSynonym] = []
        for source, layer in self.layers():
            for synonym in names:
                if synonym in layer:
                    definition = definition_of(synonym)
                    value = None if definition is None or definition.sensitive else layer[synonym]
                    found.append(ConfigSynonym(synonym, value, source))
        for i, entry in enumerate(found):
            if entry.name == name:
                return found[i:]
        return []

    def default_log_config(self) -> LogConfig:
        """The LogConfig a topic without overrides gets (broker log.* settings resolved)."""
        # lazy for start-up time: `tidelog serve` imports this module before its socket is bound
        from tidelog.config.topic_config import log_config

        return log_config({}, self)

    # --- dynamic configs (AlterConfigs / IncrementalAlterConfigs on BROKER resources) ---

    def dynamic_configs(self, per_broker: bool) -> dict[str, str]:
        return dict(self._dynamic_broker_raw if per_broker else self._dynamic_default_raw)

    def validate_dynamic(self, values: Mapping[str, str], per_broker: bool = True) -> dict[str, Any]:
        """Parse a candidate dynamic layer; raise Unknown/ReadOnly/ConfigError like Kafka's validation
        (DynamicBrokerConfig.validateConfigs; listener-prefixed names are checked against their base config)."""
        unknown = sorted(n for n in values if definition_of(n) is None)
        if unknown:
            raise UnknownConfigError(f"Unknown broker configs: {', '.join(unknown)}")
        static = sorted(n for n in values if listener_base_name(n) is None and not BROKER_CONFIG_DEFS[n].dynamic)
        if static:
            raise ReadOnlyConfigError(f"Cannot update these configs dynamically: {', '.join(static)}")
        bare = sorted(n for n in values if n in LISTENER_PREFIX_ONLY)
        if bare:
            raise ConfigError("These security configs can be dynamically updated only per-listener using the "
                              f"listener prefix: {', '.join(bare)}")
        if not per_broker:
            broker_only = sorted(n for n in values if per_broker_only(n))
            if broker_only:
                raise ConfigError("Cannot update these configs at default cluster level, broker id must be "
                                  f"specified: {', '.join(broker_only)}")
        parsed = self._parse_layer(values)
        threads = parsed.get("log.cleaner.threads")
        if threads is not None:
            # Kafka's LogCleaner.reconfigure: a runtime change stays within [current/2, current*2] and >= 1.
            current = self.log_cleaner_threads
            if threads < 1 or threads < current // 2 or threads > current * 2:
                raise ConfigError(
                    f"Invalid value {threads} for configuration log.cleaner.threads: must be between "
                    f"{max(1, current // 2)} and {current * 2}"
                )
        listeners = parsed.get("listeners")
        if listeners is not None:
            # DynamicListenerConfig.validateReconfiguration
            new_names = {n.upper() for n, _, _ in parse_listeners(listeners)}
            advertised = {n.upper() for n, _, _ in parse_listeners(self.advertised_listeners, "advertised.listeners")}
            if not advertised <= new_names:
                raise ConfigError(f"Advertised listeners '{sorted(advertised)}' must be a subset of listeners "
                                  f"'{sorted(new_names)}'")
        for name in THREAD_POOL_CONFIGS:
            new = parsed.get(name)
            old = self.get(name)
            if new is None or new == old:
                continue
            prefix = f"Dynamic thread count update validation failed for {name}={new}"
            if new <= 0:
                raise ConfigError(f"{prefix}, value should be at least 1")
            if new < old // 2:
                raise ConfigError(f"{prefix}, value should be at least half the current value {old}")
            if new > old * 2:
                raise ConfigError(f"{prefix}, value should not be greater than double the current value {old}")
        return parsed

    def set_dynamic(self, per_broker: bool, values: Mapping[str, str]) -> None:
        """Replace the dynamic per-broker or cluster-default layer (validated first; atomic on failure)."""
        parsed = self.validate_dynamic(values, per_broker)
        old = (self._dynamic_broker, self._dynamic_default, self._dynamic_broker_raw, self._dynamic_default_raw)
        if per_broker:
            self._dynamic_broker, self._dynamic_broker_raw = parsed, dict(values)
        else:
            self._dynamic_default, self._dynamic_default_raw = parsed, dict(values)
        try:
            self._resolve()
        except ConfigError:
            self._dynamic_broker, self._dynamic_default, self._dynamic_broker_raw, self._dynamic_default_raw = old
            self._resolve()
            raise

    # --- DescribeConfigs BROKER ---

    def describe(
        self,
        per_broker: bool = True,
        names: Iterable[str] | None = None,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> list[ConfigEntry]:
        """Entries for DescribeConfigs: all configs for the broker's own id; for the cluster-default resource
        ("") only the dynamic default configs, as Kafka's ConfigHelper does."""
        # lazy for start-up time: imported when DescribeConfigs is first served
        from tidelog.config.config_entries import ConfigEntry

        prefixed = {n for layer in (self._dynamic_broker, self._dynamic_default) for n in layer
                    if listener_base_name(n) is not None}
        if per_broker:
            candidates = sorted(set(BROKER_CONFIG_DEFS) | prefixed)
        else:
            candidates = sorted(self._dynamic_default)
        wanted = set(names) if names else None
        entries: list[ConfigEntry] = []
        for name in candidates:
            if wanted is not None and name not in wanted:
                continue
            definition = definition_of(name)
            assert definition is not None
            all_synonyms = self.synonyms(name)
            if not per_broker:
                all_synonyms = [s for s in all_synonyms if s.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
                value = self._dynamic_default.get(name)
            elif name in BROKER_CONFIG_DEFS:
                value = self.get(name)
            else:
                value = self._effective(name, None)
            entries.append(
                ConfigEntry(
                    name=name,
                    value=None if definition.sensitive else to_string(definition.type, value),
                    source=all_synonyms[0].source if all_synonyms else ConfigSource.DEFAULT_CONFIG,
                    synonyms=tuple(all_synonyms) if include_synonyms else (),
                    type=definition.type if definition.type is not ConfigType.UNKNOWN else ConfigType.STRING,
                    # ConfigHelper: read-only unless in AllDynamicConfigs (so a listener-prefixed entry is too)
                    read_only=not (definition.dynamic and name in BROKER_CONFIG_DEFS),
                    sensitive=definition.sensitive,
                    documentation=definition.doc if include_documentation else None,
                )
            )
        return entries
