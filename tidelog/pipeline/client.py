"""kafka-python clients built from the connector's `kafka.*` options (Java config names).

kafka-python is imported inside the functions: Spark pickles the data source, readers and writers to ship them
to executors, and the live client objects are created there, never pickled.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from kafka import KafkaConsumer, KafkaProducer

log = logging.getLogger(__name__)

# Java names whose kafka-python spelling is not just dots-to-underscores.
_RENAMED = {
    "max.poll.records": "max_poll_records",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
}
# Java configs that carry no meaning for kafka-python or that the data source sets itself.
_IGNORED = {"group.id", "key.serializer", "value.serializer", "key.deserializer", "value.deserializer"}
_JAAS_FIELD = re.compile(r'(username|password)\s*=\s*"([^"]*)"')


def _convert(value: str, default: Any) -> Any:
    if isinstance(default, bool):
        return value.strip().lower() == "true"
    if isinstance(default, int | float) and default is not None:
        try:
            return int(value)
        except ValueError:
            return float(value)
    stripped = value.strip()
    if default is None and re.fullmatch(r"-?\d+", stripped):
        return int(stripped)
    return stripped


def translate(params: Mapping[str, str], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Map Java client configs onto a kafka-python client's keyword arguments; drop (and log) the rest, as
    the Java client logs configs it does not know."""
    result: dict[str, Any] = {}
    for name, value in params.items():
        if name in _IGNORED:
            continue
        if name == "sasl.jaas.config":
            # PLAIN/SCRAM login modules carry username="..." password="..."; kafka-python takes them directly.
            for key, found in _JAAS_FIELD.findall(value):
                result[f"sasl_plain_{key}"] = found
            continue
        if name == "bootstrap.servers":
            result["bootstrap_servers"] = [s.strip() for s in value.split(",") if s.strip()]
            continue
        key = _RENAMED.get(name, name.replace(".", "_").replace("-", "_"))
        if key not in defaults:
            log.warning("Kafka option 'kafka.%s' is not supported by the kafka-python client; ignored", name)
            continue
        if key == "acks":
            result[key] = value.strip() if value.strip() == "all" else int(value)
            continue
        result[key] = _convert(value, defaults[key])
    return result


def consumer_config(params: Mapping[str, str]) -> dict[str, Any]:
    config = translate(params, KafkaConsumer.DEFAULT_CONFIG)
    # The source tracks offsets itself (Spark checkpoints), so no group and no commits; an offset that is out
    # of range must surface (auto_offset_reset "none") so failOnDataLoss can decide.
    config.update(group_id=None, enable_auto_commit=False, auto_offset_reset="none")
    config.setdefault("max_partition_fetch_bytes", 4 * 1024 * 1024)
    config.setdefault("fetch_max_bytes", 16 * 1024 * 1024)
    config.setdefault("max_poll_records", 5000)
    return config


def producer_config(params: Mapping[str, str]) -> dict[str, Any]:
    return translate(params, KafkaProducer.DEFAULT_CONFIG)


def new_consumer(params: Mapping[str, str]) -> Any:
    return KafkaConsumer(**consumer_config(params))


def new_producer(params: Mapping[str, str]) -> Any:
    return KafkaProducer(**producer_config(params))
