"""PROTOBUF schemas: parsed by proto-schema-parser, printed as Confluent prints them, compared as its SchemaDiff does.

- canonical(): Confluent's ProtobufSchemaUtils.toString layout (syntax, package, imports, options, then messages
  before enums; in a message: reserved, options, fields, oneofs, nested messages, nested enums), comments dropped.
- normalized(): the same with imports sorted, fields, oneofs and enum constants in tag order, options sorted,
  and message/enum field types fully qualified (ProtobufSchemaUtils.toNormalizedString).
- compatibility: Confluent's protobuf.diff (SchemaDiff, MessageSchemaDiff, FieldSchemaDiff): package changed,
  message removed, field kind changed (scalar/message/map), scalar kind changed (the wire-compatible groups:
  int32/int64/uint32/uint64/bool/enum, sint32/sint64, string/bytes, fixed32/sfixed32, fixed64/sfixed64, float,
  double), the named type of a message field changed (compared recursively), a numeric field's label changed,
  required fields added or removed, oneof fields removed or moved into an existing oneof. Field names, added or
  removed optional fields, enums, messages added or moved are compatible. Checked against Confluent's own diff
  examples (its protobuf-provider test resources): all 54 give the same differences at the same paths.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from .schemas import InvalidSchema

SCALARS = frozenset(("double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
                     "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes"))
_SCALAR_KIND = {"int32": "GENERAL_NUMBER", "int64": "GENERAL_NUMBER", "uint32": "GENERAL_NUMBER",
                "uint64": "GENERAL_NUMBER", "bool": "GENERAL_NUMBER", "sint32": "SIGNED_NUMBER",
                "sint64": "SIGNED_NUMBER", "string": "STRING_OR_BYTES", "bytes": "STRING_OR_BYTES",
                "fixed32": "FIXED32", "sfixed32": "FIXED32", "fixed64": "FIXED64", "sfixed64": "FIXED64",
                "float": "FLOAT", "double": "DOUBLE"}
_MAX_TAG = 536870911
# Imports a registry schema may name without a reference: the well-known types ship with every protobuf runtime.
_BUILTIN_IMPORT_PREFIXES = ("google/protobuf/", "google/type/", "google/api/", "confluent/")


# --- model ------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class ProtoField:
    name: str
    number: int
    type: str  # a scalar, a (possibly qualified) type name, or "map<K, V>"
    label: str | None  # "optional" | "required" | "repeated" | None
    options: list[ast.Option] = field(default_factory=list)
    oneof: str | None = None

    @property
    def is_map(self) -> bool:
        return self.type.startswith("map<")

    def map_types(self) -> tuple[str, str]:
        key, _, value = self.type[4:-1].partition(",")
        return key.strip(), value.strip()


@dataclass(eq=False)
class ProtoEnum:
    name: str
    full_name: str
    constants: list[ast.EnumValue] = field(default_factory=list)
    options: list[ast.Option] = field(default_factory=list)
    reserved: list[ast.EnumReserved] = field(default_factory=list)


@dataclass(eq=False)
class ProtoMessage:
    name: str
    full_name: str
    fields: list[ProtoField] = field(default_factory=list)  # outside any oneof, in source order
    oneofs: dict[str, list[ProtoField]] = field(default_factory=dict)
    messages: list[ProtoMessage] = field(default_factory=list)
    enums: list[ProtoEnum] = field(default_factory=list)
    options: list[ast.Option] = field(default_factory=list)
    reserved: list[ast.Reserved] = field(default_factory=list)
    extra: list[Any] = field(default_factory=list)  # extensions, extend blocks, groups: printed, not compared

    def by_tag(self) -> dict[int, ProtoField]:
        tags = {f.number: f for f in self.fields}
        for members in self.oneofs.values():
            tags.update({f.number: f for f in members})
        return tags


@dataclass(eq=False)
class ProtoFile:
    syntax: str | None
    package: str | None
    imports: list[ast.Import]
    options: list[ast.Option]
    messages: list[ProtoMessage]
    enums: list[ProtoEnum]
    services: list[ast.Service]
    extra: list[Any]


class _Raise(ErrorListener):  # type: ignore[misc]
    def syntaxError(self, recognizer: Any, offending: Any, line: int, column: int, msg: str, e: Any) -> None:
        raise InvalidSchema(f"Invalid schema: line {line}:{column} {msg}")


def _setup(recognizer: Any) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_Raise())


_PARSER = Parser(setup_lexer=_setup, setup_parser=_setup)
_PARSER_LOCK = threading.Lock()  # ANTLR's runtime fills shared DFA caches as it parses: one parse at a time


def _build_file(tree: ast.File) -> ProtoFile:
    package = next((e.name for e in tree.file_elements if isinstance(e, ast.Package)), None)
    prefix = f"{package}." if package else ""
    messages = [_build_message(e, prefix) for e in tree.file_elements if isinstance(e, ast.Message)]
    enums = [_build_enum(e, prefix) for e in tree.file_elements if isinstance(e, ast.Enum)]
    return ProtoFile(
        syntax=tree.syntax,
        package=package,
        imports=[e for e in tree.file_elements if isinstance(e, ast.Import)],
        options=[e for e in tree.file_elements if isinstance(e, ast.Option)],
        messages=messages,
        enums=enums,
        services=[e for e in tree.file_elements if isinstance(e, ast.Service)],
        extra=[e for e in tree.file_elements if isinstance(e, ast.Extension)],
    )


def _field(element: ast.Field | ast.MapField, oneof: str | None) -> ProtoField:
    if isinstance(element, ast.MapField):
        return ProtoField(element.name, element.number, f"map<{element.key_type}, {element.value_type}>", None,
                          list(element.options), oneof)
    label = element.cardinality.value.lower() if element.cardinality is not None else None
    return ProtoField(element.name, element.number, element.type, label, list(element.options), oneof)


def _build_message(message: ast.Message, prefix: str) -> ProtoMessage:
    out = ProtoMessage(message.name, prefix + message.name)
    inner = out.full_name + "."
    for e in message.elements:
        if isinstance(e, ast.Field | ast.MapField):
            out.fields.append(_field(e, None))
        elif isinstance(e, ast.OneOf):
            out.oneofs[e.name] = [_field(f, e.name) for f in e.elements if isinstance(f, ast.Field | ast.MapField)]
        elif isinstance(e, ast.Message):
            out.messages.append(_build_message(e, inner))
        elif isinstance(e, ast.Enum):
            out.enums.append(_build_enum(e, inner))
        elif isinstance(e, ast.Option):
            out.options.append(e)
        elif isinstance(e, ast.Reserved):
            out.reserved.append(e)
        elif not isinstance(e, ast.Comment):
            out.extra.append(e)
    return out


def _build_enum(enum: ast.Enum, prefix: str) -> ProtoEnum:
    out = ProtoEnum(enum.name, prefix + enum.name)
    for e in enum.elements:
        if isinstance(e, ast.EnumValue):
            out.constants.append(e)
        elif isinstance(e, ast.Option):
            out.options.append(e)
        elif isinstance(e, ast.EnumReserved):
            out.reserved.append(e)
    return out


# --- types and checks -------------------------------------------------------------------------------------


@dataclass
class _TypeInfo:
    kind: str  # "message" | "enum"
    element: ProtoMessage | ProtoEnum
    package: str


def _collect(file: ProtoFile, into: dict[str, _TypeInfo]) -> None:
    package = file.package or ""

    def message(m: ProtoMessage) -> None:
        into[m.full_name] = _TypeInfo("message", m, package)
        for nested in m.messages:
            message(nested)
        for e in m.enums:
            into[e.full_name] = _TypeInfo("enum", e, package)

    for m in file.messages:
        message(m)
    for e in file.enums:
        into[e.full_name] = _TypeInfo("enum", e, package)


def _resolve(types: dict[str, _TypeInfo], name: str, scope: str) -> str | None:
    """Protobuf's name lookup: from the innermost scope outwards; a leading dot is already absolute."""
    if name.startswith("."):
        return name[1:] if name[1:] in types else None
    parts = scope.split(".") if scope else []
    while True:
        candidate = ".".join([*parts, name])
        if candidate in types:
            return candidate
        if not parts:
            return None
        parts.pop()


def _check(file: ProtoFile, types: dict[str, _TypeInfo], lenient_names: bool) -> None:
    def message(m: ProtoMessage) -> None:
        seen_tags: dict[int, str] = {}
        seen_names: set[str] = set()
        members = [*m.fields, *(f for fs in m.oneofs.values() for f in fs)]
        for f in members:
            if f.number in seen_tags:
                raise InvalidSchema(f"Invalid schema: field {f.name} in {m.full_name} reuses tag {f.number} "
                                    f"of {seen_tags[f.number]}")
            if f.name in seen_names:
                raise InvalidSchema(f"Invalid schema: duplicate field name {f.name} in {m.full_name}")
            if not 1 <= f.number <= _MAX_TAG or 19000 <= f.number <= 19999:
                raise InvalidSchema(f"Invalid schema: tag {f.number} of field {f.name} is out of range")
            seen_tags[f.number] = f.name
            seen_names.add(f.name)
            for type_name in f.map_types() if f.is_map else (f.type,):
                if type_name not in SCALARS and _resolve(types, type_name, m.full_name) is None and not lenient_names:
                    raise InvalidSchema(f"Invalid schema: type {type_name} of field {m.full_name}.{f.name} not found")
        for nested in m.messages:
            message(nested)

    for m in file.messages:
        message(m)


# --- printing ---------------------------------------------------------------------------------------------


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, ast.Identifier):
        return value.name
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, ast.MessageLiteral):
        items = [f"{e.name}: {_value(e.value)}" for e in value.elements if isinstance(e, ast.MessageLiteralField)]
        return "{\n" + "".join(_indent(item + ("," if i < len(items) - 1 else "") + "\n")
                               for i, item in enumerate(items)) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return str(value)


def _option(option: ast.Option) -> str:
    return f"{option.name} = {_value(option.value)}"


def _indent(text: str) -> str:
    return "".join(("  " + line if line.strip() else line) for line in text.splitlines(keepends=True))


@dataclass
class _Printer:
    normalize: bool
    types: dict[str, _TypeInfo]

    def options(self, options: list[ast.Option]) -> list[ast.Option]:
        return sorted(options, key=lambda o: o.name) if self.normalize else options

    def file(self, f: ProtoFile) -> str:
        out = ""
        if f.syntax is not None and (not self.normalize or f.syntax == "proto3"):
            out += f'syntax = "{f.syntax}";\n'
        if f.package:
            out += f"package {f.package};\n"
        if f.imports:
            names = [i.name for i in f.imports if not i.public]
            public = [i.name for i in f.imports if i.public]
            if self.normalize:
                names, public = sorted(set(names)), sorted(set(public))
            out += "\n" + "".join(f'import "{n}";\n' for n in names) + "".join(f'import public "{n}";\n' for n in public)
        if f.options:
            out += "\n" + "".join(f"option {_option(o)};\n" for o in self.options(f.options))
        if f.messages or f.enums:
            out += "\n" + "".join(self.message(m) for m in f.messages) + "".join(self.enum(e) for e in f.enums)
        if f.extra:
            out += "\n" + "".join(self.extend(e, f.package or "") for e in f.extra)
        if f.services:
            out += "\n" + "".join(self.service(s) for s in f.services)
        return out

    def message(self, m: ProtoMessage) -> str:
        out = f"message {m.name} {{"
        if m.reserved:
            out += "\n" + "".join(_indent(self.reserved(r.ranges, r.names)) for r in m.reserved)
        if m.options:
            out += "\n" + "".join(_indent(f"option {_option(o)};\n") for o in self.options(m.options))
        fields = sorted(m.fields, key=lambda f: f.number) if self.normalize else m.fields
        if fields:
            out += "\n" + "".join(_indent(self.field(f, m.full_name)) for f in fields)
        oneofs = [(name, members) for name, members in m.oneofs.items() if members or not self.normalize]
        if self.normalize:
            oneofs = sorted(((n, sorted(ms, key=lambda f: f.number)) for n, ms in oneofs), key=lambda o: o[1][0].number)
        if oneofs:
            out += "\n" + "".join(_indent(self.oneof(name, members, m.full_name)) for name, members in oneofs)
        if m.extra:
            out += "\n" + "".join(_indent(self.extend(e, m.full_name)) for e in m.extra if isinstance(e, ast.Extension))
        if m.messages or m.enums:
            out += "\n" + "".join(_indent(self.message(n)) for n in m.messages)
            out += "".join(_indent(self.enum(e)) for e in m.enums)
        return out + "}\n"

    def oneof(self, name: str, members: list[ProtoField], scope: str) -> str:
        out = f"oneof {name} {{"
        if members:
            out += "\n" + "".join(_indent(self.field(f, scope)) for f in members)
        return out + "}\n"

    def enum(self, e: ProtoEnum) -> str:
        out = f"enum {e.name} {{"
        if e.reserved:
            out += "\n" + "".join(_indent(self.reserved(r.ranges, r.names)) for r in e.reserved)
        elif e.options or e.constants:
            out += "\n"
        out += "".join(_indent(f"option {_option(o)};\n") for o in self.options(e.options))
        constants = sorted(e.constants, key=lambda c: (c.number, c.name)) if self.normalize else e.constants
        for c in constants:
            out += _indent(f"{c.name} = {c.number}{self.compact(list(c.options))};\n")
        return out + "}\n"

    def reserved(self, ranges: list[str], names: list[str]) -> str:
        values = [r.replace(" ", "").replace("to", " to ") for r in ranges] + [_quote(n) for n in names]
        return "reserved " + ", ".join(values) + ";\n"

    def field(self, f: ProtoField, scope: str) -> str:
        kind = f.type
        label = f.label
        if self.normalize:
            if f.is_map:
                key, value = f.map_types()
                kind = f"map<{key}, {self.qualified(value, scope)}>"
                label = None
            else:
                kind = self.qualified(kind, scope)
        prefix = f"{label} " if label else ""
        return f"{prefix}{kind} {f.name} = {f.number}{self.compact(f.options)};\n"

    def qualified(self, name: str, scope: str) -> str:
        if name in SCALARS:
            return name
        full = _resolve(self.types, name, scope)
        if full is None and name.lstrip(".").startswith(("google.", "confluent.")):
            full = name.lstrip(".")  # a well-known type: written in full by convention
        return "." + full if full else name

    def compact(self, options: list[ast.Option]) -> str:
        options = self.options(options)
        if not options:
            return ""
        if len(options) == 1:
            return f" [{_option(options[0])}]"
        return " [\n" + "".join(_indent(_option(o) + ("," if i < len(options) - 1 else "") + "\n")
                                for i, o in enumerate(options)) + "]"

    def extend(self, e: Any, scope: str) -> str:
        fields = [_field(f, None) for f in getattr(e, "elements", []) if isinstance(f, ast.Field)]
        return f"extend {e.typeName} {{" + ("\n" if fields else "") + "".join(
            _indent(self.field(f, scope)) for f in fields) + "}\n"

    def service(self, s: ast.Service) -> str:
        out = f"service {s.name} {{"
        options = [e for e in s.elements if isinstance(e, ast.Option)]
        methods = [e for e in s.elements if isinstance(e, ast.Method)]
        if options:
            out += "\n" + "".join(_indent(f"option {_option(o)};\n") for o in self.options(options))
        if methods:
            out += "\n"
            for m in methods:
                request = ("stream " if m.input_type.stream else "") + m.input_type.type
                response = ("stream " if m.output_type.stream else "") + m.output_type.type
                method_options = [e for e in m.elements if isinstance(e, ast.Option)]
                body = (" {\n" + "".join(_indent(f"option {_option(o)};\n") for o in method_options) + "}"
                        if method_options else "")
                out += _indent(f"rpc {m.name} ({request}) returns ({response}){body};\n")
        return out + "}\n"


# --- the parsed schema -------------------------------------------------------------------------------------


class ProtobufSchema:
    schema_type = "PROTOBUF"

    def __init__(self, file: ProtoFile, types: dict[str, _TypeInfo], references: dict[str, str]) -> None:
        self.file = file
        self.types = types  # this file's and its references' named types, by full name
        self._references = references
        self._canonical: str | None = None
        self._normalized: str | None = None

    def canonical(self) -> str:
        if self._canonical is None:
            self._canonical = _Printer(False, self.types).file(self.file)
        return self._canonical

    def normalized_form(self) -> str:
        """ProtobufSchemaUtils.toNormalizedString."""
        return _Printer(True, self.types).file(self.file)

    def normalized(self) -> str:
        """What Confluent stores for `normalize=true`: normalize().canonicalString()."""
        if self._normalized is None:
            self._normalized = parse(self.normalized_form(), self._references).canonical()
        return self._normalized

    @property
    def name(self) -> str | None:
        """The first message's full name (Confluent's ProtobufSchema.name())."""
        return self.file.messages[0].full_name if self.file.messages else None

    def __repr__(self) -> str:
        return f"ProtobufSchema({self.canonical()!r})"


def _parse_text(text: str) -> ProtoFile:
    if not isinstance(text, str) or not text.strip():
        raise InvalidSchema("Invalid schema: empty")
    try:
        with _PARSER_LOCK:
            tree = _PARSER.parse(text)
    except InvalidSchema:
        raise
    except (ValueError, TypeError, AttributeError, IndexError) as e:
        raise InvalidSchema(f"Invalid schema: {type(e).__name__}: {e}") from None
    if tree.syntax not in (None, "proto2", "proto3"):
        raise InvalidSchema(f"Invalid schema: unknown syntax {tree.syntax!r}")
    if tree.edition is not None:  # printed without it, the file would change meaning (field presence)
        raise InvalidSchema("Invalid schema: protobuf editions are not supported")
    return _build_file(tree)


def parse(text: str, references: dict[str, str]) -> ProtobufSchema:
    dependencies = {name: _parse_text(ref) for name, ref in references.items()}
    file = _parse_text(text)
    types: dict[str, _TypeInfo] = {}
    for dep in dependencies.values():
        _collect(dep, types)
    _collect(file, types)
    missing = [i.name for i in file.imports if i.name not in references and not i.name.startswith(_BUILTIN_IMPORT_PREFIXES)]
    if missing:
        raise InvalidSchema(f"Invalid schema: import {missing[0]!r} is not among the schema's references")
    # Types from well-known imports are not modelled: with one imported, unresolved names are let through.
    lenient = any(i.name.startswith(_BUILTIN_IMPORT_PREFIXES) for i in file.imports)
    _check(file, types, lenient)
    return ProtobufSchema(file, types, references)


# --- compatibility -----------------------------------------------------------------------------------------

COMPATIBLE_CHANGES = frozenset({
    "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED", "ENUM_CONST_CHANGED",
    "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED", "FIELD_NAME_CHANGED", "FIELD_STRING_OR_BYTES_LABEL_CHANGED",
    "ONEOF_ADDED", "ONEOF_REMOVED", "ONEOF_FIELD_ADDED", "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
})  # Confluent's protobuf SchemaDiff.COMPATIBLE_CHANGES


@dataclass
class _Ctx:
    original: ProtobufSchema
    update: ProtobufSchema
    path: list[str] = field(default_factory=list)
    diffs: list[tuple[str, str]] = field(default_factory=list)
    visiting: set[int] = field(default_factory=set)

    def add(self, kind: str) -> None:
        self.diffs.append((kind, "#/" + "/".join(self.path)))

    def sub(self) -> _Ctx:
        return _Ctx(self.original, self.update, list(self.path), [], self.visiting)

    def compatible(self) -> bool:
        return all(kind in COMPATIBLE_CHANGES for kind, _ in self.diffs)


def _compare_types(ctx: _Ctx, olds: list[ProtoMessage], news: list[ProtoMessage],
                   old_enums: list[ProtoEnum], new_enums: list[ProtoEnum]) -> None:
    """SchemaDiff.compareTypeElements: messages by name (and position), then enums by name."""
    old_by = {m.name: (i, m) for i, m in enumerate(olds)}
    new_by = {m.name: (i, m) for i, m in enumerate(news)}
    for name in [*old_by, *(n for n in new_by if n not in old_by)]:
        ctx.path.append(name)
        if name not in new_by:
            ctx.add("MESSAGE_REMOVED")
        elif name not in old_by:
            ctx.add("MESSAGE_ADDED")
        else:
            _compare_message(ctx, old_by[name][1], new_by[name][1])
            if old_by[name][0] != new_by[name][0]:
                ctx.add("MESSAGE_MOVED")
        ctx.path.pop()
    old_enum_by = {e.name: e for e in old_enums}
    new_enum_by = {e.name: e for e in new_enums}
    for name in [*old_enum_by, *(n for n in new_enum_by if n not in old_enum_by)]:
        ctx.path.append(name)
        if name not in new_enum_by:
            ctx.add("ENUM_REMOVED")
        elif name not in old_enum_by:
            ctx.add("ENUM_ADDED")
        else:
            _compare_enum(ctx, old_enum_by[name], new_enum_by[name])
        ctx.path.pop()


def _compare_enum(ctx: _Ctx, old: ProtoEnum, new: ProtoEnum) -> None:
    olds = {c.number: c.name for c in old.constants}
    news = {c.number: c.name for c in new.constants}
    for tag in sorted(olds.keys() | news.keys()):
        ctx.path.append(str(tag))
        if tag not in news:
            ctx.add("ENUM_CONST_REMOVED")
        elif tag not in olds:
            ctx.add("ENUM_CONST_ADDED")
        elif olds[tag] != news[tag]:
            ctx.add("ENUM_CONST_CHANGED")
        ctx.path.pop()


def _compare_message(ctx: _Ctx, old: ProtoMessage, new: ProtoMessage) -> None:
    """MessageSchemaDiff.compare (a message already being compared higher up is not compared again)."""
    if id(old) not in ctx.visiting:
        ctx.visiting.add(id(old))
        try:
            _compare_fields(ctx, old, new)
        finally:
            ctx.visiting.discard(id(old))
    _compare_types(ctx, old.messages, new.messages, old.enums, new.enums)


def _compare_fields(ctx: _Ctx, old: ProtoMessage, new: ProtoMessage) -> None:
    old_tags, new_tags = old.by_tag(), new.by_tag()
    deleted_oneofs = {name for name, members in old.oneofs.items()
                      if name not in new.oneofs and not any(f.number in new_tags for f in members)}
    for name, members in new.oneofs.items():
        origins: set[str] = set()
        moved_in = 0
        for f in members:
            previous = old_tags.get(f.number)
            if previous is not None and previous.oneof is not None:
                origins.add("oneof:" + previous.oneof)
            elif previous is not None:
                origins.add(f"field:{f.number}")
                moved_in += 1
        if len(origins) > 1:
            ctx.path.append(name)
            ctx.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved_in > 1 else "FIELD_MOVED_TO_EXISTING_ONEOF")
            ctx.path.pop()
    for name in sorted(old.oneofs.keys() | new.oneofs.keys()):
        ctx.path.append(name)
        if name not in new.oneofs:
            ctx.add("ONEOF_REMOVED")
        elif name not in old.oneofs:
            ctx.add("ONEOF_ADDED")
        ctx.path.pop()
    for tag in sorted(old_tags.keys() | new_tags.keys()):
        o, n = old_tags.get(tag), new_tags.get(tag)
        if n is None:
            assert o is not None
            if o.oneof is not None:
                if o.oneof not in deleted_oneofs:
                    ctx.path += [o.oneof, str(tag)]
                    ctx.add("ONEOF_FIELD_REMOVED")
                    del ctx.path[-2:]
            else:
                ctx.path.append(str(tag))
                ctx.add("REQUIRED_FIELD_REMOVED" if o.label == "required" else "FIELD_REMOVED")
                ctx.path.pop()
        elif o is None:
            if n.oneof is not None:
                ctx.path += [n.oneof, str(tag)]
                ctx.add("ONEOF_FIELD_ADDED")
                del ctx.path[-2:]
            else:
                ctx.path.append(str(tag))
                ctx.add("REQUIRED_FIELD_ADDED" if n.label == "required" else "FIELD_ADDED")
                ctx.path.pop()
        else:
            if o.oneof is not None and n.oneof is None:
                ctx.path.append(str(tag))
                ctx.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL")
                ctx.path.pop()
            scope = [n.oneof, str(tag)] if n.oneof is not None else [str(tag)]
            ctx.path += scope
            _compare_field(ctx, o, n, old.full_name, new.full_name)
            del ctx.path[-len(scope):]


def _compare_field(ctx: _Ctx, o: ProtoField, n: ProtoField, old_scope: str, new_scope: str) -> None:
    """FieldSchemaDiff.compare."""
    if o.name != n.name:
        ctx.add("FIELD_NAME_CHANGED")
    _compare_labels_and_types(ctx, o.label, n.label, o.type, n.type, old_scope, new_scope)


def _kind(schema: ProtobufSchema, type_name: str, scope: str) -> str:
    if type_name in SCALARS:
        return "SCALAR"
    if type_name.startswith("map<"):
        return "MAP"
    full = _resolve(schema.types, type_name, scope)
    if full is not None and schema.types[full].kind == "enum":
        return "SCALAR"
    return "MESSAGE"


def _scalar_kind(schema: ProtobufSchema, type_name: str, scope: str) -> str:
    if type_name in _SCALAR_KIND:
        return _SCALAR_KIND[type_name]
    return "GENERAL_NUMBER"  # an enum


def _split_map(type_name: str) -> tuple[str, str]:
    key, _, value = type_name[4:-1].partition(",")
    return key.strip(), value.strip()


def _compare_labels_and_types(ctx: _Ctx, old_label: str | None, new_label: str | None, old_type: str,
                              new_type: str, old_scope: str, new_scope: str) -> None:
    old_kind = _kind(ctx.original, old_type, old_scope)
    new_kind = _kind(ctx.update, new_type, new_scope)
    if old_kind != new_kind:
        ctx.add("FIELD_KIND_CHANGED")
    elif old_kind == "SCALAR":
        ok, nk = _scalar_kind(ctx.original, old_type, old_scope), _scalar_kind(ctx.update, new_type, new_scope)
        if ok != nk:
            ctx.add("FIELD_SCALAR_KIND_CHANGED")
        elif old_label is not None and new_label is not None and old_label != new_label:
            ctx.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED" if ok == "STRING_OR_BYTES" else "FIELD_NUMERIC_LABEL_CHANGED")
    elif old_kind == "MAP":
        (ok_, ov), (nk_, nv) = _split_map(old_type), _split_map(new_type)
        _compare_labels_and_types(ctx, None, None, ok_, nk_, old_scope, new_scope)
        _compare_labels_and_types(ctx, None, None, ov, nv, old_scope, new_scope)
    else:
        _compare_message_types(ctx, old_type, new_type, old_scope, new_scope)


def _compare_message_types(ctx: _Ctx, old_type: str, new_type: str, old_scope: str, new_scope: str) -> None:
    old_full = _resolve(ctx.original.types, old_type, old_scope)
    new_full = _resolve(ctx.update.types, new_type, new_scope)
    if old_full is None or new_full is None:  # unresolvable (a well-known type): compare the names as written
        if old_type.lstrip(".") != new_type.lstrip("."):
            ctx.add("FIELD_NAMED_TYPE_CHANGED")
        return
    old_info, new_info = ctx.original.types[old_full], ctx.update.types[new_full]
    old_local = old_full[len(old_info.package) + 1:] if old_info.package else old_full
    new_local = new_full[len(new_info.package) + 1:] if new_info.package else new_full
    if old_local != new_local:
        ctx.add("FIELD_NAMED_TYPE_CHANGED")
        return
    old_message, new_message = old_info.element, new_info.element
    assert isinstance(old_message, ProtoMessage) and isinstance(new_message, ProtoMessage)
    sub = ctx.sub()
    sub.path = old_local.split(".")  # the referenced message's differences are reported at its own path
    if id(old_message) not in sub.visiting:
        sub.visiting.add(id(old_message))
        try:
            _compare_fields(sub, old_message, new_message)
        finally:
            sub.visiting.discard(id(old_message))
    ctx.diffs += sub.diffs
    if not sub.compatible():
        ctx.add("FIELD_NAMED_TYPE_CHANGED")


def differences(original: ProtobufSchema, update: ProtobufSchema) -> list[tuple[str, str]]:
    ctx = _Ctx(original, update)
    if (original.file.package or None) != (update.file.package or None):
        ctx.add("PACKAGE_CHANGED")
    _compare_types(ctx, original.file.messages, update.file.messages, original.file.enums, update.file.enums)
    return ctx.diffs


_DESCRIPTIONS = {
    "PACKAGE_CHANGED": "The package at '{path}' in the {reader} schema does not match the package in the {writer} schema",
    "MESSAGE_REMOVED": "The {reader} schema is missing a MESSAGE type at path '{path}' in the {writer} schema",
    "FIELD_KIND_CHANGED": "The type of a field at path '{path}' in the {reader} schema does not match the {writer} schema",
    "FIELD_SCALAR_KIND_CHANGED": "The kind of a SCALAR field at path '{path}' in the {reader} schema does not match "
    "its kind in the {writer} schema",
    "FIELD_NAMED_TYPE_CHANGED": "The type of a MESSAGE field at path '{path}' in the {reader} schema does not match "
    "its type in the {writer} schema",
    "FIELD_NUMERIC_LABEL_CHANGED": "The label for a NUMERIC field at path '{path}' in the {reader} schema does not "
    "match its label in the {writer} schema",
    "REQUIRED_FIELD_ADDED": "A required field  at path '{path}' in the {reader} schema is missing in the {writer} schema",
    "REQUIRED_FIELD_REMOVED": "The {reader} schema is missing a required field at path: '{path}' in the {writer} schema",
    "ONEOF_FIELD_REMOVED": "The {reader} schema is missing a oneof field at path '{path}' in the {writer} schema",
    "ONEOF_FIELD_MOVED_TO_TOP_LEVEL": "The oneof field at path '{path}' in the {reader} schema was moved out of its "
    "oneof to a top-level field in the {writer} schema",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "Multiple fields in the oneof at path '{path}' in the {reader} schema are "
    "outside a oneof in the {writer} schema",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "A field in the oneof at path '{path}' in the {reader} schema is outside an "
    "existing oneof in the {writer} schema",
}  # Confluent's protobuf.diff.Difference.error() (the double space is theirs)


def reader_writer_incompatibilities(reader: Any, writer: Any, reader_label: str, writer_label: str) -> list[str]:
    """ProtobufSchema.isBackwardCompatible: the reader is the update, the writer the original."""
    assert isinstance(reader, ProtobufSchema) and isinstance(writer, ProtobufSchema)
    out = []
    for kind, path in differences(writer, reader):
        if kind in COMPATIBLE_CHANGES:
            continue
        text = _DESCRIPTIONS.get(kind, "").format(path=path, reader=reader_label, writer=writer_label)
        out.append(f'{{errorType:"{kind}", description:"{text}"}}')
    return out
