"""A Protobuf schema sent as a serialized FileDescriptorProto, base64-encoded, as confluent-kafka's
ProtobufSerializer registers it (confluent_kafka.schema_registry.common.protobuf._schema_to_str), turned into the
.proto text the schema library parses. Confluent's ProtobufSchema accepts both forms the same way.

The descriptor is decoded by the protobuf package itself (descriptor_pb2); only the printing is ours.
"""

from __future__ import annotations

import base64
import binascii
import re

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

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
