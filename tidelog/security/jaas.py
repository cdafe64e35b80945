"""`sasl.jaas.config` values as Kafka's JaasConfig parses them: one login module, its control flag and options.
Imported by `listener_config` for SASL listeners only."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tidelog.config.definitions import ConfigError

_JAAS_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;"]+)')


@dataclass(frozen=True)
class JaasEntry:
    """One `sasl.jaas.config` login module: its class, control flag and options (Kafka's JaasConfig)."""

    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def parse_jaas(text: str) -> JaasEntry:
    """`<LoginModule> <flag> key="value" ...;` as Kafka's JaasConfig parses it (one module)."""
    head = re.match(r"\s*([A-Za-z0-9_.$]+)\s+(required|requisite|sufficient|optional)\b", text)
    if head is None:
        raise ConfigError("sasl.jaas.config must start with '<LoginModule class> <required|requisite|...>'")
    options: dict[str, str] = {}
    pos = head.end()
    while True:
        m = _JAAS_OPTION.match(text, pos)
        if m is None:
            break
        value = m.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options[m.group(1)] = value
        pos = m.end()
    if not text[pos:].strip().startswith(";"):
        raise ConfigError("sasl.jaas.config must end with ';' after the options")
    return JaasEntry(head.group(1), head.group(2), options)
