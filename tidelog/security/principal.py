"""Principals: Kafka's KafkaPrincipal, the TLS distinguished name (X500Principal.getName(), RFC 2253) and
SslPrincipalMapper (`ssl.principal.mapping.rules`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
WILDCARD_PRINCIPAL = "User:*"


def parse_principal(text: str) -> KafkaPrincipal:
    """`Type:name` (Kafka's SecurityUtils.parseKafkaPrincipal); ValueError when there is no ':'."""
    kind, sep, name = text.partition(":")
    if not sep or not kind:
        raise ValueError(f"expected a principal of the form Type:name, got {text!r}")
    return KafkaPrincipal(kind, name)


# --- RFC 2253 distinguished names ---

# Attribute keywords Java's X500Principal.getName(RFC2253) prints by name; others print as OID=#<DER hex>.
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
    "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}


def _escape_rfc2253(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def distinguished_name(cert_der: bytes) -> str:
    """The subject of a DER certificate as Java's X500Principal.getName() prints it (RFC 2253: most specific
    RDN first, keywords for the standard attributes, `OID=#hex` of the DER value for the rest)."""
    # lazy for start-up time: cryptography only for TLS client certificates
    from cryptography import x509

    cert = x509.load_der_x509_certificate(cert_der)
    rdns = []
    for rdn in reversed(list(cert.subject.rdns)):
        parts = []
        for attr in rdn:
            oid = attr.oid.dotted_string
            value = attr.value if isinstance(attr.value, str) else attr.value.decode("latin-1")
            keyword = _RFC2253_KEYWORDS.get(oid)
            if keyword is not None:
                parts.append(f"{keyword}={_escape_rfc2253(value)}")
            else:
                raw = value.encode("utf-8")
                tag = int(attr._type.value)
                parts.append(f"{oid}=#{(bytes([tag]) + _der_length(len(raw)) + raw).hex()}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


# --- ssl.principal.mapping.rules (KIP-371) ---

_RULE = re.compile(r"((DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?)(?=\s*(?:,|$))|(\S[^,]*))\s*(?:,\s*|$)")


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str
    case: str

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        m = self.pattern.fullmatch(dn)
        if m is None:
            return None
        name = m.expand(self.replacement)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


def _java_replacement(text: str) -> str:
    # Java's Matcher.replaceAll: $1 names a group; \/ is an escaped slash in the rule syntax.
    text = text.replace("\\/", "/")
    return re.sub(r"\$(\d+)", r"\\g<\1>", text)


class SslPrincipalMapper:
    """Kafka's SslPrincipalMapper: the first rule whose pattern matches the whole DN gives the name."""

    def __init__(self, rules: list[_Rule]) -> None:
        self.rules = rules

    @classmethod
    def from_rules(cls, text: str | None) -> SslPrincipalMapper:
        text = (text or "DEFAULT").strip()
        rules: list[_Rule] = []
        pos = 0
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ValueError(f"Invalid ssl.principal.mapping.rules at {text[pos:]!r}")
            if m.group(6):
                raise ValueError(f"Invalid rule: {m.group(6)}")
            if m.group(2):
                rules.append(_Rule(None, "", ""))
            else:
                pattern = (m.group(3) or "").replace("\\/", "/")
                rules.append(_Rule(re.compile(pattern), _java_replacement(m.group(4) or ""), m.group(5) or ""))
            pos = m.end()
        return cls(rules)

    def get_name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise ValueError(f"No rules apply to {dn}, rules {self.rules}")
