"""Config definition machinery (Kafka's `ConfigDef`): types, parsing, validators (DescribeConfigs entries are in
`config_entries`).

Both broker configs (`config.broker_config`) and topic configs (`config.topic_config`) are declared with
`ConfigDef`; values arrive as strings (server.properties, env, admin requests) and are parsed the way Kafka's
`ConfigDef.parseType` parses them (trimmed, booleans case-insensitive, ints range-checked).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

INT_MAX = 2_147_483_647
INT_MIN = -2_147_483_648
LONG_MAX = 9_223_372_036_854_775_807
LONG_MIN = -9_223_372_036_854_775_808
SHORT_MAX = 32_767
SHORT_MIN = -32_768
DOUBLE_MAX = 1.7976931348623157e308  # Java's Double.MAX_VALUE


class ConfigError(ValueError):
    """A config value that cannot be parsed or fails validation (Kafka's `ConfigException`)."""


class ConfigType(IntEnum):
    """DescribeConfigs `config_type` ids (KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigs `config_source` ids (KIP-226)."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


Validator = Callable[[str, Any], None]


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One broker config: its Kafka name, type, parsed default, doc and validator (Kafka's ConfigDef.ConfigKey)."""

    name: str
    type: ConfigType
    default: Any  # parsed value, or None (Kafka's "null" default)
    doc: str = ""
    validator: Validator | None = None
    dynamic: bool = False  # broker configs: updatable with AlterConfigs (Kafka's DynamicBrokerConfig)
    sensitive: bool = False

    def parse(self, raw: Any) -> Any:
        value = parse_value(self.name, self.type, raw)
        if self.validator is not None and value is not None:
            self.validator(self.name, value)
        return value


def parse_value(name: str, ctype: ConfigType, raw: Any) -> Any:
    """Parse `raw` (usually a string) into the Python value of `ctype`, as Kafka's ConfigDef.parseType does."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        return _check_native(name, ctype, raw)
    text = raw.strip()
    try:
        if ctype is ConfigType.BOOLEAN:
            lowered = text.lower()
            if lowered == "true":
                return True
            if lowered == "false":
                return False
            raise ConfigError(f"Invalid value {raw} for configuration {name}: Expected value to be either true or false")
        if ctype in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
            return _check_native(name, ctype, int(text, 10))
        if ctype is ConfigType.DOUBLE:
            return float(text)
        if ctype is ConfigType.LIST:
            # Kafka: an empty (trimmed) string is an empty list; elements are trimmed.
            return [] if text == "" else [item.strip() for item in text.split(",")]
        return text  # STRING, CLASS, PASSWORD
    except ValueError as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(
            f"Invalid value {raw} for configuration {name}: Not a number of type {ctype.name}"
        ) from None


def _check_native(name: str, ctype: ConfigType, value: Any) -> Any:
    bounds = {
        ConfigType.INT: (INT_MIN, INT_MAX),
        ConfigType.SHORT: (SHORT_MIN, SHORT_MAX),
        ConfigType.LONG: (LONG_MIN, LONG_MAX),
    }.get(ctype)
    if bounds is not None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"Invalid value {value} for configuration {name}: Expected an integer")
        if not bounds[0] <= value <= bounds[1]:
            raise ConfigError(f"Invalid value {value} for configuration {name}: Not a number of type {ctype.name}")
    if ctype is ConfigType.BOOLEAN and not isinstance(value, bool):
        raise ConfigError(f"Invalid value {value} for configuration {name}: Expected value to be either true or false")
    if ctype is ConfigType.DOUBLE and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if ctype is ConfigType.LIST and isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return value


def to_string(ctype: ConfigType, value: Any) -> str | None:
    """Kafka's ConfigDef.convertToString: how a value is shown in DescribeConfigs."""
    if value is None:
        return None
    if ctype is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if ctype is ConfigType.LIST:
        return ",".join(value)
    if ctype is ConfigType.DOUBLE:
        return _java_double(float(value))
    return str(value)


def _java_double(value: float) -> str:
    # Java's Double.toString: "0.5", "1.0", "1.7976931348623157E308".
    if value == DOUBLE_MAX:
        return "1.7976931348623157E308"
    text = repr(value)
    if "e" in text:
        mantissa, exp = text.split("e")
        if "." not in mantissa:
            mantissa += ".0"
        return f"{mantissa}E{int(exp)}"
    return text


# --- validators (Kafka's ConfigDef.Range / ValidString / ValidList) ---


def at_least(minimum: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value < minimum:
            raise ConfigError(f"Invalid value {value} for configuration {name}: Value must be at least {minimum}")

    return check


def between(low: float, high: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if not low <= value <= high:
            raise ConfigError(
                f"Invalid value {value} for configuration {name}: Value must be no less than {low} "
                f"and no more than {high}"
            )

    return check


def one_of(*allowed: str, case_sensitive: bool = True) -> Validator:
    def check(name: str, value: Any) -> None:
        ok = value in allowed if case_sensitive else value.lower() in {a.lower() for a in allowed}
        if not ok:
            raise ConfigError(
                f"Invalid value {value} for configuration {name}: String must be one of: {', '.join(allowed)}"
            )

    return check


def list_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        for item in value:
            if item not in allowed:
                raise ConfigError(
                    f"Invalid value {item} for configuration {name}: String must be one of: {', '.join(allowed)}"
                )

    return check
