"""Protobuf schemas as serialized FileDescriptorProtos, base64-encoded: the form confluent-kafka's
ProtobufSerializer registers (confluent_kafka.schema_registry.common.protobuf._schema_to_str) and its serdes ask for
with `?format=serialized`. Confluent's ProtobufSchema reads and writes both forms; here a registered descriptor is
printed as the .proto text the schema library parses, and stored text is built back into a descriptor.

The descriptor is (de)coded by the protobuf package itself (descriptor_pb2) and the text parsed by
proto-schema-parser; only the mapping between the two is ours.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

_BASE64 = re.compile(r"^[A-Za-z0-9+/\s]+={0,2}\s*$")

# FieldDescriptorProto.Type -> the .proto keyword (messages and enums print their type name instead)
_SCALARS = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32", 8: "bool",
            9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64"}
_LABELS = {1: "optional", 2: "required", 3: "repeated"}
_GROUP, _MESSAGE, _ENUM = 10, 11, 14


def descriptor_to_text(text: str) -> str | None:
    """The .proto text of a base64-encoded FileDescriptorProto; None when `text` is not one (it is then
    parsed as .proto text)."""
    if "{" in text or ";" in text or not _BASE64.match(text):
        return None
    try:
        raw = base64.b64decode(text, validate=False)
        file = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        return None
    if not (file.message_type or file.enum_type or file.service):
        return None
    return _File(file).text()


class _File:
    def __init__(self, file: descriptor_pb2.FileDescriptorProto) -> None:
        self.file = file
        self.proto3 = file.syntax == "proto3"
        self.lines: list[str] = []
        self.scope = [file.package] if file.package else []  # the enclosing package and messages
        self.known: set[str] = set()  # every type this file declares, fully qualified
        prefix = f"{file.package}." if file.package else ""
        for m in file.message_type:
            self._declare(prefix, m)
        self.known.update(prefix + e.name for e in file.enum_type)

    def _declare(self, prefix: str, m: descriptor_pb2.DescriptorProto) -> None:
        self.known.add(prefix + m.name)
        self.known.update(f"{prefix}{m.name}.{e.name}" for e in m.enum_type)
        for nested in m.nested_type:
            self._declare(f"{prefix}{m.name}.", nested)

    def type_name(self, full: str) -> str:
        """The shortest name that resolves to `full` (".pkg.Msg.Inner") from the current scope, as a person
        writes it in .proto text: protobuf looks a name up from the innermost scope outwards, so a shorter
        name is used only when no nearer scope declares its first component."""
        full = full.lstrip(".")
        scopes = [".".join(self.scope[:i]) for i in range(len(self.scope), -1, -1)]  # innermost first
        for depth, outer in enumerate(scopes):
            if outer and not full.startswith(outer + "."):
                continue
            rest = full[len(outer) + 1:] if outer else full
            first = rest.split(".", 1)[0]
            if not any(f"{inner}.{first}" in self.known for inner in scopes[:depth] if inner):
                return rest
        return "." + full

    def text(self) -> str:
        f = self.file
        self.lines.append(f'syntax = "{f.syntax or "proto2"}";')
        if f.package:
            self.lines.append(f"package {f.package};")
        public = set(f.public_dependency)
        for i, dep in enumerate(f.dependency):
            self.lines.append(f'import {"public " if i in public else ""}"{dep}";')
        for name, value in _file_options(f.options):
            self.lines.append(f"option {name} = {value};")
        for message in f.message_type:
            self._message(message, 0)
        for enum in f.enum_type:
            self._enum(enum, 0)
        for service in f.service:
            self._service(service)
        return "\n".join(self.lines) + "\n"

    def _add(self, depth: int, line: str) -> None:
        self.lines.append("  " * depth + line)

    def _message(self, m: descriptor_pb2.DescriptorProto, depth: int) -> None:
        self._add(depth, f"message {m.name} {{")
        self.scope.append(m.name)
        entries = {n.name: n for n in m.nested_type if n.options.map_entry}
        synthetic = {f.oneof_index for f in m.field if f.proto3_optional and f.HasField("oneof_index")}
        for f in m.field:
            if not f.HasField("oneof_index") or f.oneof_index in synthetic:
                self._field(f, depth + 1, entries)
        for index, oneof in enumerate(m.oneof_decl):
            if index in synthetic:
                continue
            self._add(depth + 1, f"oneof {oneof.name} {{")
            for f in m.field:
                if f.HasField("oneof_index") and f.oneof_index == index:
                    self._field(f, depth + 2, entries, in_oneof=True)
            self._add(depth + 1, "}")
        for nested in m.nested_type:
            if not nested.options.map_entry:
                self._message(nested, depth + 1)
        for enum in m.enum_type:
            self._enum(enum, depth + 1)
        for r in m.reserved_range:  # DescriptorProto.ReservedRange: end is exclusive
            self._add(depth + 1, f"reserved {r.start}{'' if r.end - 1 == r.start else f' to {r.end - 1}'};")
        if m.reserved_name:
            self._add(depth + 1, "reserved " + ", ".join(f'"{n}"' for n in m.reserved_name) + ";")
        self.scope.pop()
        self._add(depth, "}")

    def _field(self, f: descriptor_pb2.FieldDescriptorProto, depth: int,
               entries: dict[str, descriptor_pb2.DescriptorProto], in_oneof: bool = False) -> None:
        entry = entries.get(f.type_name.rsplit(".", 1)[-1]) if f.type == _MESSAGE and f.label == 3 else None
        if entry is not None:
            key, value = entry.field[0], entry.field[1]
            kind = f"map<{self._type(key)}, {self._type(value)}>"
        else:
            label = ""
            if not in_oneof:
                if f.label == 3 or (f.label == 2) or (not self.proto3 and f.label == 1):
                    label = _LABELS[f.label] + " "
                elif f.proto3_optional:
                    label = "optional "
            kind = label + self._type(f)
        options = []
        if f.HasField("default_value"):
            options.append(f"default = {_default(f)}")
        if f.options.HasField("packed"):
            options.append(f"packed = {'true' if f.options.packed else 'false'}")
        if f.options.deprecated:
            options.append("deprecated = true")
        suffix = f" [{', '.join(options)}]" if options else ""
        self._add(depth, f"{kind} {f.name} = {f.number}{suffix};")

    def _type(self, f: descriptor_pb2.FieldDescriptorProto) -> str:
        if f.type in (_MESSAGE, _ENUM, _GROUP):
            return self.type_name(f.type_name)
        return _SCALARS[f.type]

    def _enum(self, e: descriptor_pb2.EnumDescriptorProto, depth: int) -> None:
        self._add(depth, f"enum {e.name} {{")
        if e.options.allow_alias:
            self._add(depth + 1, "option allow_alias = true;")
        for v in e.value:
            self._add(depth + 1, f"{v.name} = {v.number};")
        self._add(depth, "}")

    def _service(self, s: descriptor_pb2.ServiceDescriptorProto) -> None:
        self._add(0, f"service {s.name} {{")
        for m in s.method:
            stream_in = "stream " if m.client_streaming else ""
            stream_out = "stream " if m.server_streaming else ""
            self._add(1, f"rpc {m.name} ({stream_in}{m.input_type}) returns ({stream_out}{m.output_type});")
        self._add(0, "}")


def _default(f: descriptor_pb2.FieldDescriptorProto) -> str:
    value = str(f.default_value)
    if f.type == 9:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if f.type == 12:
        return '"' + value + '"'  # already C-escaped in the descriptor
    return value


def _file_options(options: descriptor_pb2.FileOptions) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for descriptor, value in options.ListFields():
        if descriptor.type == descriptor.TYPE_STRING:
            out.append((descriptor.name, '"' + str(value).replace('"', '\\"') + '"'))
        elif descriptor.type == descriptor.TYPE_BOOL:
            out.append((descriptor.name, "true" if value else "false"))
        elif descriptor.type == descriptor.TYPE_ENUM:
            out.append((descriptor.name, descriptor.enum_type.values_by_number[value].name))
    return out


# --- .proto text -> FileDescriptorProto (GET ...?format=serialized, what confluent-kafka's Protobuf serde reads) ----

_SCALAR_TYPES = {name: number for number, name in _SCALARS.items()}
_CARDINALITY = {"REPEATED": 3, "REQUIRED": 2, "OPTIONAL": 1}
_MAX_FIELD = 536_870_911  # "max" in a reserved range


def text_to_descriptor(text: str, references: dict[str, str]) -> str:
    """The base64 FileDescriptorProto of .proto `text` whose imports are `references` (name -> .proto text);
    type names are resolved to their full names, as protoc does. Raises ValueError when `text` does not parse."""
    parser = Parser()
    tree = parser.parse(text)
    kinds: dict[str, str] = {}  # full name -> "message" | "enum", over this file and its references
    for ref in references.values():
        _declare_tree(parser.parse(ref), kinds)
    _declare_tree(tree, kinds)
    return base64.standard_b64encode(_Builder(kinds).file(tree).SerializeToString()).decode("ascii")


def _package(tree: Any) -> str:
    return next((e.name for e in tree.file_elements if isinstance(e, ast.Package)), "")


def _declare_tree(tree: Any, kinds: dict[str, str]) -> None:
    package = _package(tree)
    for element in tree.file_elements:
        _declare_element(element, package, kinds)


def _declare_element(element: Any, prefix: str, kinds: dict[str, str]) -> None:
    if isinstance(element, ast.Message):
        full = f"{prefix}.{element.name}" if prefix else element.name
        kinds[full] = "message"
        for nested in element.elements:
            _declare_element(nested, full, kinds)
    elif isinstance(element, ast.Enum):
        kinds[f"{prefix}.{element.name}" if prefix else element.name] = "enum"


class _Builder:
    def __init__(self, kinds: dict[str, str]) -> None:
        self.kinds = kinds
        self.proto3 = False

    def file(self, tree: Any) -> descriptor_pb2.FileDescriptorProto:
        out = descriptor_pb2.FileDescriptorProto(name="default", syntax=tree.syntax or "proto2")
        self.proto3 = out.syntax == "proto3"
        package = _package(tree)
        if package:
            out.package = package
        scope = package.split(".") if package else []
        for element in tree.file_elements:
            if isinstance(element, ast.Import):
                if element.public:
                    out.public_dependency.append(len(out.dependency))
                out.dependency.append(element.name)
            elif isinstance(element, ast.Option):
                _set_option(out.options, element)
            elif isinstance(element, ast.Message):
                self._message(out.message_type.add(), element, scope)
            elif isinstance(element, ast.Enum):
                self._enum(out.enum_type.add(), element)
            elif isinstance(element, ast.Service):
                self._service(out.service.add(), element, scope)
        return out

    def resolve(self, name: str, scope: list[str]) -> str:
        """protoc's lookup: the innermost scope first, outwards; a leading dot means already qualified."""
        if name.startswith("."):
            return name
        for depth in range(len(scope), -1, -1):
            candidate = ".".join([*scope[:depth], name])
            if candidate in self.kinds:
                return "." + candidate
        return "." + name

    def _message(self, out: descriptor_pb2.DescriptorProto, message: Any, outer: list[str]) -> None:
        out.name = message.name
        scope = [*outer, message.name]
        synthetic: list[str] = []
        for element in message.elements:
            if isinstance(element, ast.Field):
                field = self._field(out.field.add(), element, scope)
                if self.proto3 and element.cardinality is not None and element.cardinality.value == "OPTIONAL":
                    field.proto3_optional = True
                    synthetic.append(field.name)
            elif isinstance(element, ast.MapField):
                self._map(out, element, scope)
            elif isinstance(element, ast.OneOf):
                index = len(out.oneof_decl)
                out.oneof_decl.add(name=element.name)
                for member in element.elements:
                    if isinstance(member, ast.Field):
                        self._field(out.field.add(), member, scope).oneof_index = index
            elif isinstance(element, ast.Message):
                self._message(out.nested_type.add(), element, scope)
            elif isinstance(element, ast.Enum):
                self._enum(out.enum_type.add(), element)
            elif isinstance(element, ast.Reserved):
                for text in element.ranges:
                    start, _, end = (part.strip() for part in str(text).partition("to"))
                    last = _MAX_FIELD if end == "max" else int(end or start)
                    out.reserved_range.add(start=int(start), end=last + 1)
                out.reserved_name.extend(element.names)
        for name in synthetic:  # protoc puts proto3 optionals in synthetic oneofs, after the real ones
            field = next(f for f in out.field if f.name == name)
            field.oneof_index = len(out.oneof_decl)
            out.oneof_decl.add(name=f"_{name}")

    def _field(self, out: descriptor_pb2.FieldDescriptorProto, field: Any,
               scope: list[str]) -> descriptor_pb2.FieldDescriptorProto:
        out.name, out.number = field.name, field.number
        cardinality = field.cardinality.value if field.cardinality is not None else "OPTIONAL"
        out.label = _CARDINALITY.get(cardinality, 1)
        self._set_type(out, field.type, scope)
        for option in field.options:
            if option.name == "default":
                out.default_value = str(option.value).lower() if isinstance(option.value, bool) else str(option.value)
            elif option.name in ("packed", "deprecated") and isinstance(option.value, bool):
                setattr(out.options, option.name, option.value)
        return out

    def _set_type(self, out: descriptor_pb2.FieldDescriptorProto, name: str, scope: list[str]) -> None:
        if name in _SCALAR_TYPES:
            out.type = _SCALAR_TYPES[name]
            return
        out.type_name = self.resolve(name, scope)
        out.type = _ENUM if self.kinds.get(out.type_name[1:]) == "enum" else _MESSAGE

    def _map(self, out: descriptor_pb2.DescriptorProto, field: Any, scope: list[str]) -> None:
        entry_name = "".join(part[:1].upper() + part[1:] for part in field.name.split("_")) + "Entry"
        entry = out.nested_type.add(name=entry_name)
        entry.options.map_entry = True
        key = entry.field.add(name="key", number=1, label=1)
        self._set_type(key, field.key_type, scope)
        value = entry.field.add(name="value", number=2, label=1)
        self._set_type(value, field.value_type, scope)
        out.field.add(name=field.name, number=field.number, label=3, type=_MESSAGE,
                      type_name="." + ".".join([*scope, entry_name]))

    def _enum(self, out: descriptor_pb2.EnumDescriptorProto, enum: Any) -> None:
        out.name = enum.name
        for element in enum.elements:
            if isinstance(element, ast.EnumValue):
                out.value.add(name=element.name, number=element.number)
            elif isinstance(element, ast.Option) and element.name == "allow_alias":
                out.options.allow_alias = bool(element.value)

    def _service(self, out: descriptor_pb2.ServiceDescriptorProto, service: Any, scope: list[str]) -> None:
        out.name = service.name
        for method in service.elements:
            if isinstance(method, ast.Method):
                out.method.add(name=method.name, input_type=self.resolve(method.input_type.type, scope),
                               output_type=self.resolve(method.output_type.type, scope),
                               client_streaming=method.input_type.stream, server_streaming=method.output_type.stream)


def _set_option(options: descriptor_pb2.FileOptions, option: Any) -> None:
    """A standard file option (java_package, go_package, ...); custom ones have no field here and are left out."""
    field = options.DESCRIPTOR.fields_by_name.get(str(option.name))
    if field is None:
        return
    try:
        if field.type == field.TYPE_ENUM:
            setattr(options, field.name, field.enum_type.values_by_name[str(option.value)].number)
        else:
            setattr(options, field.name, option.value)
    except (KeyError, TypeError, ValueError):
        pass
