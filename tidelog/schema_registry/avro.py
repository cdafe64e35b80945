"""AVRO schemas: validated by fastavro, written in Confluent's canonical form, compared by Avro's resolution rules.

- canonical(): what Confluent's AvroSchema.canonicalString() stores, i.e. Avro Java's Schema.toString() with the
  referenced schemas' names known: compact JSON, named types written once then by name, namespaces only where
  they change, props in the order given.
- normalized(): Confluent's AvroSchemaUtils.toNormalizedString() (full names, fixed key order, sorted props),
  parsed and written canonically again, as Confluent stores a normalized schema.
- reader_writer_incompatibilities(): Avro's SchemaCompatibility.checkReaderWriterCompatibility, worded as
  Confluent's avro.Difference.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from .schemas import InvalidSchema

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
# Keys that are part of a schema's syntax; any other key is a prop (Avro's Schema.SCHEMA_RESERVED/FIELD_RESERVED).
_SCHEMA_RESERVED = frozenset(("doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type", "aliases"))
_ENUM_RESERVED = _SCHEMA_RESERVED | {"default"}
_FIELD_RESERVED = frozenset(("default", "doc", "name", "order", "type", "aliases"))
_ORDERS = ("ascending", "descending", "ignore")
_NO_DEFAULT = object()


@dataclass(eq=False)
class Node:
    """One Avro schema: `type` is a primitive name, "record", "enum", "fixed", "array", "map" or "union"."""

    type: str
    props: dict[str, Any] = field(default_factory=dict)
    # named types
    name: str = ""  # short name
    space: str | None = None
    doc: str | None = None
    aliases: list[str] = field(default_factory=list)  # full names
    is_error: bool = False
    fields: list[Field] = field(default_factory=list)
    symbols: list[str] = field(default_factory=list)
    enum_default: str | None = None
    size: int = 0
    # array / map / union
    items: Node | None = None
    values: Node | None = None
    branches: list[Node] = field(default_factory=list)

    @property
    def fullname(self) -> str:
        return f"{self.space}.{self.name}" if self.space else self.name

    @property
    def named(self) -> bool:
        return self.type in ("record", "enum", "fixed")

    def branch_name(self) -> str:
        """The name a union uses to tell its branches apart (one branch per name)."""
        return self.fullname if self.named else self.type


@dataclass(eq=False)
class Field:
    name: str
    schema: Node
    position: int
    doc: str | None = None
    default: Any = _NO_DEFAULT
    order: str = "ascending"
    aliases: list[str] = field(default_factory=list)
    props: dict[str, Any] = field(default_factory=dict)

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_DEFAULT


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _valid_name(name: Any) -> str:
    """Avro's Schema.validateName: names, namespace parts and enum symbols are [A-Za-z_][A-Za-z0-9_]*."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidSchema(f"Illegal name: {json.dumps(name)}")
    return name


def _split(name: str, namespace: str | None) -> tuple[str, str | None]:
    """Avro's Schema.Name: a dotted name carries its own namespace; "" means the null namespace."""
    if "." in name:
        space, _, short = name.rpartition(".")
        return short, space or None
    return name, namespace or None


def _checked_split(name: Any, namespace: Any) -> tuple[str, str | None]:
    if not isinstance(name, str) or (namespace is not None and not isinstance(namespace, str)):
        raise InvalidSchema(f"Illegal name: {json.dumps(name)}")
    short, space = _split(name, namespace)
    _valid_name(short)
    for part in (space or "").split(".") if space else ():
        _valid_name(part)
    return short, space


class _Parser:
    """Builds Nodes from the schema's JSON; fastavro has already rejected what is not valid Avro."""

    def __init__(self, named: dict[str, Node]) -> None:
        self.named = named

    def parse(self, raw: Any, namespace: str | None) -> Node:
        if isinstance(raw, str):
            return self._by_name(raw, namespace)
        if isinstance(raw, list):
            branches = [self.parse(b, namespace) for b in raw]
            seen: set[str] = set()
            for b in branches:
                if b.type == "union":
                    raise InvalidSchema("Nested union: " + json.dumps(raw))
                if b.branch_name() in seen:
                    raise InvalidSchema("Duplicate in union:" + b.branch_name())
                seen.add(b.branch_name())
            return Node("union", branches=branches)
        if not isinstance(raw, dict) or "type" not in raw:
            raise InvalidSchema(f"No type: {json.dumps(raw)}")
        kind = raw["type"]
        if not isinstance(kind, str):
            # {"type": {...}} or {"type": [...]}: Avro Java accepts the nested schema as the type itself
            return self.parse(kind, namespace)
        if kind in ("record", "error"):
            return self._record(raw, namespace, kind == "error")
        if kind == "enum":
            node = self._named(raw, "enum", namespace, _ENUM_RESERVED)
            node.symbols = [_valid_name(symbol) for symbol in raw.get("symbols", [])]
            node.enum_default = raw.get("default")
            if node.enum_default is not None and node.enum_default not in node.symbols:
                raise InvalidSchema(f"The Enum Default: {node.enum_default} is not in the enum symbol set: {node.symbols}")
            return node
        if kind == "fixed":
            node = self._named(raw, "fixed", namespace, _SCHEMA_RESERVED)
            size = raw.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise InvalidSchema(f"Invalid or no size: {json.dumps(raw)}")
            node.size = size
            return node
        props = {k: v for k, v in raw.items() if k not in _SCHEMA_RESERVED}
        if kind == "array":
            return Node("array", props, items=self.parse(raw["items"], namespace))
        if kind == "map":
            return Node("map", props, values=self.parse(raw["values"], namespace))
        if kind in PRIMITIVES:
            return Node(kind, props)
        node = self._by_name(kind, namespace)  # {"type": "SomeNamedType"}
        return node

    def _by_name(self, name: str, namespace: str | None) -> Node:
        if name in PRIMITIVES:
            return Node(name)
        candidates = [name] if "." in name else ([f"{namespace}.{name}"] if namespace else []) + [name]
        for full in candidates:
            if full in self.named:
                return self.named[full]
        raise InvalidSchema(f"Undefined name: {json.dumps(name)}")

    def _named(self, raw: dict[str, Any], kind: str, namespace: str | None, reserved: frozenset[str]) -> Node:
        space = raw["namespace"] if "namespace" in raw else namespace
        name, space = _checked_split(raw["name"], space)
        if _full(name, space) in PRIMITIVES:
            raise InvalidSchema(f"Schemas may not be named after primitives: {name}")
        node = Node(kind, {k: v for k, v in raw.items() if k not in reserved}, name=name, space=space)
        node.doc = raw.get("doc")
        node.aliases = [_full(*_split(a, space)) for a in raw.get("aliases", [])]
        if node.fullname in self.named:
            raise InvalidSchema(f"Can't redefine: {node.fullname}")
        self.named[node.fullname] = node
        return node

    def _record(self, raw: dict[str, Any], namespace: str | None, is_error: bool) -> Node:
        if not isinstance(raw.get("fields"), list):
            raise InvalidSchema(f"Record has no fields: {json.dumps(raw)}")
        node = self._named(raw, "record", namespace, _SCHEMA_RESERVED)
        node.is_error = is_error
        names: set[str] = set()
        for position, f in enumerate(raw.get("fields", [])):
            schema = self.parse(f["type"], node.space)
            entry = Field(_valid_name(f["name"]), schema, position, doc=f.get("doc"), order=f.get("order", "ascending"))
            if entry.name in names:
                raise InvalidSchema(f"Duplicate field {entry.name} in record {node.fullname}")
            names.add(entry.name)
            if entry.order not in _ORDERS:
                raise InvalidSchema(f"Invalid order {entry.order!r} of field {entry.name}")
            entry.aliases = list(f.get("aliases", []))
            entry.props = {k: v for k, v in f.items() if k not in _FIELD_RESERVED}
            if "default" in f:
                entry.default = f["default"]
                if not _valid_default(schema, entry.default):
                    raise InvalidSchema(
                        f"Invalid default for field {entry.name}: {json.dumps(entry.default)} not a {_short(schema)}"
                    )
            node.fields.append(entry)
        return node


def _full(name: str, space: str | None) -> str:
    return f"{space}.{name}" if space else name


def _short(node: Node) -> str:
    return node.fullname if node.named else node.type


def _valid_default(node: Node, value: Any) -> bool:
    """Avro's Schema.isValidDefault (a union's default may match any branch, as Avro 1.12 accepts)."""
    t = node.type
    if t == "union":
        return any(_valid_default(b, value) for b in node.branches)
    if t in ("string", "bytes", "enum", "fixed"):
        return isinstance(value, str)
    if t in ("int", "long"):
        if not isinstance(value, int) or isinstance(value, bool):
            return False
        bits = 31 if t == "int" else 63
        return -(1 << bits) <= value < (1 << bits)
    if t in ("float", "double"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "null":
        return value is None
    if t == "array":
        assert node.items is not None
        return isinstance(value, list) and all(_valid_default(node.items, v) for v in value)
    if t == "map":
        assert node.values is not None
        return isinstance(value, dict) and all(_valid_default(node.values, v) for v in value.values())
    if t == "record":
        if not isinstance(value, dict):
            return False
        for f in node.fields:
            v = value.get(f.name, f.default)
            if v is _NO_DEFAULT or not _valid_default(f.schema, v):
                return False
        return True
    return False


# --- writing ---------------------------------------------------------------------------------------------


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _qualified(node: Node, namespace: str | None) -> str:
    """Avro's Name.getQualified: the short name when in the current namespace (unless it reads as a type)."""
    if node.space is not None and node.space == namespace and node.name not in _TYPE_NAMES:
        return node.name
    return node.fullname


_TYPE_NAMES = frozenset((*PRIMITIVES, "record", "enum", "array", "map", "union", "fixed"))


def _to_json(node: Node, known: set[str], namespace: str | None) -> Any:
    """Avro Java's Schema.toJson, as a JSON value (dict insertion order is the key order written)."""
    t = node.type
    if t == "union":
        return [_to_json(b, known, namespace) for b in node.branches]
    if t == "array":
        assert node.items is not None
        return {"type": "array", "items": _to_json(node.items, known, namespace), **node.props}
    if t == "map":
        assert node.values is not None
        return {"type": "map", "values": _to_json(node.values, known, namespace), **node.props}
    if not node.named:
        return {"type": t, **node.props} if node.props else t
    if node.fullname in known:
        return _qualified(node, namespace)
    known.add(node.fullname)
    out: dict[str, Any] = {"type": "error" if node.is_error else t, "name": node.name}
    if node.space is not None:
        if node.space != namespace:
            out["namespace"] = node.space
    elif namespace is not None:
        out["namespace"] = ""
    if node.doc is not None:
        out["doc"] = node.doc
    if t == "record":
        out["fields"] = [_field_json(f, known, node.space) for f in node.fields]
    elif t == "enum":
        out["symbols"] = list(node.symbols)
        if node.enum_default is not None:
            out["default"] = node.enum_default
    else:
        out["size"] = node.size
    out.update(node.props)
    if node.aliases:
        out["aliases"] = [_qualified(Node(t, name=_split(a, None)[0], space=_split(a, None)[1]), node.space) for a in node.aliases]
    return out


def _field_json(f: Field, known: set[str], namespace: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name, "type": _to_json(f.schema, known, namespace)}
    if f.doc is not None:
        out["doc"] = f.doc
    if f.has_default:
        out["default"] = f.default
    if f.order != "ascending":
        out["order"] = f.order
    if f.aliases:
        out["aliases"] = list(f.aliases)
    out.update(f.props)
    return out


_DECIMAL_KEYS = ("precision", "scale")


def _sorted_props(props: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    return "".join(f",{_dump(k)}:{_dump(props[k])}" for k in sorted(props) if k not in skip)


_LOGICAL_BASES = {
    "decimal": ("bytes", "fixed"), "big-decimal": ("bytes",), "uuid": ("string", "fixed"), "date": ("int",),
    "time-millis": ("int",), "time-micros": ("long",), "timestamp-millis": ("long",), "timestamp-micros": ("long",),
    "timestamp-nanos": ("long",), "local-timestamp-millis": ("long",), "local-timestamp-micros": ("long",),
    "local-timestamp-nanos": ("long",), "duration": ("fixed",),
}


def _valid_logical(node: Node) -> bool:
    """Avro Java's LogicalTypes.fromSchemaIgnoreInvalid: a logical type it knows, on a type it fits."""
    lt = node.props.get("logicalType")
    if node.type not in _LOGICAL_BASES.get(lt, ()):  # type: ignore[arg-type]
        return False
    if lt == "decimal":
        precision, scale = node.props.get("precision"), node.props.get("scale", 0)
        if not isinstance(precision, int) or not isinstance(scale, int) or precision <= 0 or not 0 <= scale <= precision:
            return False
        return node.type != "fixed" or precision <= int((8 * node.size - 1) * 0.30102999566398120)  # log10(2): digits in a signed fixed
    if node.type == "fixed":
        return node.size == (16 if lt == "uuid" else 12)
    return True


def _logical(node: Node) -> tuple[str, tuple[str, ...]]:
    """The logicalType part of the normalized form, and the props it has already written."""
    props = node.props
    lt = props.get("logicalType")
    if not isinstance(lt, str) or not _valid_logical(node):
        return "", ()
    out = f',"logicalType":{_dump(lt)}'
    if lt == "decimal":
        out += f',"precision":{_dump(props.get("precision", 0))}'
        if props.get("scale", 0):
            out += f',"scale":{_dump(props["scale"])}'
        return out, ("logicalType", *_DECIMAL_KEYS)
    return out, ("logicalType",)


def _normalized(node: Node, env: set[str]) -> str:
    """Confluent's AvroSchemaUtils.toNormalizedString (adapted from Avro's SchemaNormalization)."""
    t = node.type
    if t == "union":
        return "[" + ",".join(_normalized(b, env) for b in node.branches) + "]"
    logical, written = _logical(node)
    if t in ("array", "map"):
        child = node.items if t == "array" else node.values
        assert child is not None
        key = "items" if t == "array" else "values"
        return f'{{"type":"{t}","{key}":{_normalized(child, env)}{logical}{_sorted_props(node.props, written)}}}'
    if not node.named:
        if not node.props:
            return f'"{t}"'
        return f'{{"type":"{t}"{logical}{_sorted_props(node.props, written)}}}'
    if node.fullname in env:
        return _dump(node.fullname)
    env.add(node.fullname)
    out = f'{{"name":{_dump(node.fullname)},"type":"{t}"'
    if t == "enum":
        out += ',"symbols":' + _dump(node.symbols)
    elif t == "fixed":
        out += f',"size":{node.size}'
    else:
        out += ',"fields":[' + ",".join(_normalized_field(f, env) for f in node.fields) + "]"
    out += logical
    if node.doc:
        out += ',"doc":' + _dump(node.doc)
    if node.aliases:
        out += ',"aliases":' + _dump(sorted(set(node.aliases)))
    if t == "enum" and node.enum_default is not None:
        out += ',"default":' + _dump(node.enum_default)
    return out + _sorted_props(node.props, written) + "}"


def _normalized_field(f: Field, env: set[str]) -> str:
    out = f'{{"name":{_dump(f.name)},"type":{_normalized(f.schema, env)},"order":"{f.order}"'
    if f.doc is not None:
        out += ',"doc":' + _dump(f.doc)
    if f.aliases:
        out += ',"aliases":' + _dump(sorted(set(f.aliases)))
    if f.has_default:
        out += ',"default":' + _dump(f.default)
    return out + _sorted_props(f.props) + "}"


# --- the parsed schema -----------------------------------------------------------------------------------


class AvroSchema:
    schema_type = "AVRO"

    def __init__(self, root: Node, referenced: list[str], references: dict[str, str]) -> None:
        self.root = root
        self._referenced = referenced  # full names of the named types that the references define
        self._references = references
        self._canonical: str | None = None
        self._normalized: str | None = None

    def canonical(self) -> str:
        if self._canonical is None:
            self._canonical = _dump(_to_json(self.root, set(self._referenced), None))
        return self._canonical

    def normalized_form(self) -> str:
        """AvroSchemaUtils.toNormalizedString."""
        return _normalized(self.root, set(self._referenced))

    def normalized(self) -> str:
        """What Confluent stores for `normalize=true`: normalize().canonicalString(), the normalized form parsed
        and written back in the canonical layout."""
        if self._normalized is None:
            self._normalized = parse(self.normalized_form(), self._references).canonical()
        return self._normalized

    @property
    def name(self) -> str | None:
        """The record's full name (Confluent's AvroSchema.name()), used by subject name strategies."""
        return self.root.fullname if self.root.type == "record" else None

    def __repr__(self) -> str:
        return f"AvroSchema({self.canonical()})"


def _load(text: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError) as e:
        raise InvalidSchema(f"Invalid schema: not JSON: {e}") from None


def _without_logical_types(raw: Any, text: str) -> Any:
    """The schema for fastavro's checks without logicalType keys: Avro Java ignores an invalid logical type
    (LogicalTypes.fromSchemaIgnoreInvalid) and keeps it as a prop, where fastavro would refuse the schema."""
    if "logicalType" not in text:
        return raw
    if isinstance(raw, dict):
        return {k: _without_logical_types(v, text) for k, v in raw.items() if k != "logicalType"}
    if isinstance(raw, list):
        return [_without_logical_types(v, text) for v in raw]
    return raw


def parse(text: str, references: dict[str, str]) -> AvroSchema:
    raw = _load(text)
    fastavro_named: dict[str, Any] = {}
    named: dict[str, Node] = {}
    parser = _Parser(named)
    try:
        for ref_text in references.values():
            ref_raw = _load(ref_text)
            parser.parse(ref_raw, None)
            fastavro.parse_schema(_without_logical_types(ref_raw, ref_text), named_schemas=fastavro_named,
                                  _write_hint=False)
        referenced = list(named)
        root = parser.parse(raw, None)
        fastavro.parse_schema(_without_logical_types(raw, text), named_schemas=fastavro_named, _write_hint=False)
    except InvalidSchema:
        raise
    except UnknownType as e:
        raise InvalidSchema(f"Invalid schema: undefined name or unknown type: {e}") from None
    except SchemaParseException as e:
        raise InvalidSchema(f"Invalid schema: {e}") from None
    except KeyError as e:
        raise InvalidSchema(f"Invalid schema: missing {e}") from None
    except (TypeError, ValueError, AttributeError):
        raise InvalidSchema(f"Invalid schema: not an Avro schema: {text[:200]}") from None
    return AvroSchema(root, referenced, references)


# --- compatibility ---------------------------------------------------------------------------------------

_PROMOTIONS = {
    "long": ("int",),
    "float": ("int", "long"),
    "double": ("int", "long", "float"),
    "bytes": ("string",),
    "string": ("bytes",),
}


@dataclass
class _Incompatibility:
    kind: str
    message: str
    location: tuple[str, ...]

    def describe(self, reader_label: str, writer_label: str) -> str:
        """Confluent's avro.Difference.error()."""
        path = "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in self.location)
        templates = {
            "FIXED_SIZE_MISMATCH": f"The size of FIXED type field at path '{path}' in the {reader_label} schema "
            f"does not match with the {writer_label} schema",
            "TYPE_MISMATCH": f"The type (path '{path}') of a field in the {reader_label} schema does not match "
            f"with the {writer_label} schema",
            "NAME_MISMATCH": f"The name of the schema has changed (path '{path}')",
            "MISSING_ENUM_SYMBOLS": f"The {reader_label} schema is missing enum symbols '{self.message}' at path "
            f"'{path}' in the {writer_label} schema",
            "MISSING_UNION_BRANCH": f"The {reader_label} schema is missing a type inside a union field at path "
            f"'{path}' in the {writer_label} schema",
            "READER_FIELD_MISSING_DEFAULT_VALUE": f"The field '{self.message}' at path '{path}' in the "
            f"{reader_label} schema has no default value and is missing in the {writer_label} schema",
        }
        return (
            f"{{errorType:'{self.kind}', description:'{templates[self.kind]}', additionalInfo:'{self.message}'}}"
        )


class _Checker:
    """Avro's SchemaCompatibility.ReaderWriterCompatibilityChecker: memoised per (reader, writer) pair, a pair
    already in progress counts as compatible (recursive types)."""

    def __init__(self) -> None:
        self.memo: dict[tuple[int, int], list[_Incompatibility] | None] = {}

    def check(self, token: str | None, reader: Node, writer: Node, location: list[str]) -> list[_Incompatibility]:
        if token is not None:
            location.append(token)
        key = (id(reader), id(writer))
        if key in self.memo:
            found = self.memo[key]
            result = [] if found is None else found
        else:
            self.memo[key] = None
            result = self._calculate(reader, writer, location)
            self.memo[key] = result
        if token is not None:
            location.pop()
        return result

    def _fresh(self, reader: Node, writer: Node) -> list[_Incompatibility]:
        """Avro's two-argument getCompatibility: a check with a new location (used for union branches)."""
        return self.check(None, reader, writer, [])

    def _calculate(self, reader: Node, writer: Node, location: list[str]) -> list[_Incompatibility]:
        rt, wt = reader.type, writer.type
        if rt == wt:
            if rt in PRIMITIVES:
                return []
            if rt == "array":
                assert reader.items is not None and writer.items is not None
                return self.check("items", reader.items, writer.items, location)
            if rt == "map":
                assert reader.values is not None and writer.values is not None
                return self.check("values", reader.values, writer.values, location)
            if rt == "fixed":
                out = self._names(reader, writer, location)
                if reader.size != writer.size:
                    msg = f"expected: {writer.size}, found: {reader.size}"
                    out.append(_Incompatibility("FIXED_SIZE_MISMATCH", msg, (*location, "size")))
                return out
            if rt == "enum":
                out = self._names(reader, writer, location)
                missing = sorted(set(writer.symbols) - set(reader.symbols))
                if missing and not (reader.enum_default is not None and reader.enum_default in reader.symbols):
                    msg = "[" + ", ".join(missing) + "]"
                    out.append(_Incompatibility("MISSING_ENUM_SYMBOLS", msg, (*location, "symbols")))
                return out
            if rt == "record":
                return self._names(reader, writer, location) + self._fields(reader, writer, location)
            # both unions: every writer branch must be readable
            out = []
            for i, branch in enumerate(writer.branches):
                location.append(str(i))
                if self._fresh(reader, branch):
                    msg = f"reader union lacking writer type: {_type_name(branch)}"
                    out.append(_Incompatibility("MISSING_UNION_BRANCH", msg, tuple(location)))
                location.pop()
            return out
        if wt == "union":
            out = []
            for i, branch in enumerate(writer.branches):
                out += self.check(str(i), reader, branch, location)
            return out
        if rt == "union":
            if any(not self._fresh(branch, writer) for branch in reader.branches):
                return []
            msg = f"reader union lacking writer type: {_type_name(writer)}"
            return [_Incompatibility("MISSING_UNION_BRANCH", msg, tuple(location))]
        if wt in _PROMOTIONS.get(rt, ()):
            return []
        msg = f"reader type: {_type_name(reader)} not compatible with writer type: {_type_name(writer)}"
        return [_Incompatibility("TYPE_MISMATCH", msg, tuple(location))]

    def _names(self, reader: Node, writer: Node, location: list[str]) -> list[_Incompatibility]:
        # Avro's schemaNameEquals: the short names match, or a reader alias is the writer's full name
        if reader.name == writer.name or writer.fullname in reader.aliases:
            return []
        return [_Incompatibility("NAME_MISMATCH", f"expected: {writer.fullname}", (*location, "name"))]

    def _fields(self, reader: Node, writer: Node, location: list[str]) -> list[_Incompatibility]:
        out: list[_Incompatibility] = []
        location.append("fields")
        by_name = {f.name: f for f in writer.fields}
        for rf in reader.fields:
            location.append(str(rf.position))
            matches = [by_name[n] for n in (rf.name, *rf.aliases) if n in by_name]
            if not matches:
                if not rf.has_default:
                    if rf.schema.type == "enum" and rf.schema.enum_default is not None:
                        out += self.check("type", rf.schema, writer, location)
                    else:
                        out.append(_Incompatibility("READER_FIELD_MISSING_DEFAULT_VALUE", rf.name, tuple(location)))
            else:
                out += self.check("type", rf.schema, matches[0].schema, location)
            location.pop()
        location.pop()
        return out


def _type_name(node: Node) -> str:
    """Avro Java's Schema.Type name as printed in messages (upper case)."""
    return node.type.upper()


def reader_writer_incompatibilities(reader: Any, writer: Any, reader_label: str, writer_label: str) -> list[str]:
    assert isinstance(reader, AvroSchema) and isinstance(writer, AvroSchema)
    found = _Checker().check(None, reader.root, writer.root, [])
    return [i.describe(reader_label, writer_label) for i in found]
