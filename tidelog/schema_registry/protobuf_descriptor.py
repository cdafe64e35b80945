"""Protobuf schemas as FileDescriptorProtos, the form confluent-kafka's Python client speaks.

Its ProtobufSerializer registers a schema as a base64-encoded serialized FileDescriptorProto, and its serializer
and deserializer fetch schemas with `format=serialized`. Confluent's registry accepts that form beside .proto text
(ProtobufSchema's constructor) and stores the .proto text; `to_file` reads a descriptor into the model that prints
it, `to_descriptor` builds one from a parsed schema (google.protobuf's descriptor_pb2 messages, base64 on the wire).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import TYPE_CHECKING, Any

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError
from proto_schema_parser import ast

from .schemas import InvalidSchema

if TYPE_CHECKING:
    from .protobuf import ProtobufSchema, ProtoFile

FDP = descriptor_pb2.FieldDescriptorProto
_MAX_TAG = 536870911
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_SCALAR_TYPES = {name: getattr(FDP, "TYPE_" + name.upper()) for name in (
    "double", "float", "int64", "uint64", "int32", "fixed64", "fixed32", "bool", "string", "bytes", "uint32",
    "sfixed32", "sfixed64", "sint32", "sint64")}
_TYPE_NAMES = {number: name for name, number in _SCALAR_TYPES.items()}
_WELL_KNOWN_ENUMS = frozenset({"google.protobuf.NullValue", "google.protobuf.Syntax", "google.protobuf.Field.Kind",
                               "google.protobuf.Field.Cardinality"})


def decode(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The descriptor a base64 schema string carries; None when `text` is not one (then it is .proto text)."""
    text = text.strip()
    if not _BASE64.fullmatch(text):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
        fdp = descriptor_pb2.FileDescriptorProto()
        fdp.ParseFromString(raw)
    except (binascii.Error, DecodeError, ValueError):
        return None
    return fdp if fdp.message_type or fdp.enum_type or fdp.package or fdp.syntax or fdp.service else None


# --- descriptor -> model ---------------------------------------------------------------------------------


def _option_value(field: Any, value: Any) -> Any:
    if field.type == field.TYPE_ENUM:
        return ast.Identifier(field.enum_type.values_by_number[value].name)
    return value


def _options(options: Any) -> list[ast.Option]:
    return [ast.Option(name=field.name, value=_option_value(field, value))
            for field, value in options.ListFields() if not field.is_repeated
            and field.type != field.TYPE_MESSAGE]


def to_file(fdp: descriptor_pb2.FileDescriptorProto) -> ProtoFile:
    from .protobuf import ProtoFile

    if fdp.syntax not in ("", "proto2", "proto3"):
        raise InvalidSchema(f"Invalid schema: syntax {fdp.syntax!r} is not supported")
    syntax = fdp.syntax or None
    prefix = f"{fdp.package}." if fdp.package else ""
    public = set(fdp.public_dependency)
    return ProtoFile(
        syntax=syntax,
        package=fdp.package or None,
        imports=[ast.Import(name=d, public=i in public) for i, d in enumerate(fdp.dependency)],
        options=_options(fdp.options),
        messages=[_message(m, prefix, syntax) for m in fdp.message_type],
        enums=[_enum(e, prefix) for e in fdp.enum_type],
        services=[_service(s) for s in fdp.service],
        extra=[],
    )


def _enum(e: descriptor_pb2.EnumDescriptorProto, prefix: str) -> Any:
    from .protobuf import ProtoEnum

    out = ProtoEnum(e.name, prefix + e.name, options=_options(e.options))
    out.constants = [ast.EnumValue(name=v.name, number=v.number, options=_options(v.options)) for v in e.value]
    return out


def _message(m: descriptor_pb2.DescriptorProto, prefix: str, syntax: str | None) -> Any:
    from .protobuf import ProtoField, ProtoMessage

    out = ProtoMessage(m.name, prefix + m.name, options=_options(m.options))
    inner = out.full_name + "."
    entries = {n.name: n for n in m.nested_type if n.options.map_entry}
    real_oneofs = [o.name for i, o in enumerate(m.oneof_decl)
                   if not any(f.proto3_optional and f.oneof_index == i for f in m.field)]
    for name in real_oneofs:
        out.oneofs[name] = []
    for f in m.field:
        entry = entries.get(f.type_name.rsplit(".", 1)[-1]) if f.type == FDP.TYPE_MESSAGE else None
        if entry is not None and f.label == FDP.LABEL_REPEATED:
            key, value = (_type_of(x) for x in sorted(entry.field, key=lambda x: x.number))
            kind, label = f"map<{key}, {value}>", None
        else:
            kind = _type_of(f)
            label = {FDP.LABEL_REPEATED: "repeated", FDP.LABEL_REQUIRED: "required"}.get(f.label)
            if f.label == FDP.LABEL_OPTIONAL and (syntax != "proto3" or f.proto3_optional):
                label = "optional"
        options = _options(f.options)
        if f.HasField("default_value"):
            options.append(ast.Option(name="default", value=_default(f)))
        if f.HasField("oneof_index") and not f.proto3_optional:
            oneof = m.oneof_decl[f.oneof_index].name
            out.oneofs[oneof].append(ProtoField(f.name, f.number, kind, None, options, oneof))
        else:
            out.fields.append(ProtoField(f.name, f.number, kind, label, options))
    out.messages = [_message(n, inner, syntax) for n in m.nested_type if not n.options.map_entry]
    out.enums = [_enum(e, inner) for e in m.enum_type]
    ranges = [str(r.start) if r.end - 1 == r.start else f"{r.start} to {'max' if r.end > _MAX_TAG else r.end - 1}"
              for r in m.reserved_range]
    # numbers and names are separate statements in .proto text
    out.reserved = ([ast.Reserved(ranges=ranges)] if ranges else []) + (
        [ast.Reserved(names=list(m.reserved_name))] if m.reserved_name else [])
    return out


def _default(f: descriptor_pb2.FieldDescriptorProto) -> Any:
    value = f.default_value
    if f.type in (FDP.TYPE_STRING, FDP.TYPE_BYTES):
        return value
    if f.type == FDP.TYPE_BOOL:
        return value == "true"
    if f.type == FDP.TYPE_ENUM:
        return ast.Identifier(value)
    try:
        return int(value)
    except ValueError:
        return ast.Identifier(value) if value in ("inf", "-inf", "nan") else float(value)


def _type_of(f: descriptor_pb2.FieldDescriptorProto) -> str:
    return _TYPE_NAMES.get(f.type) or f.type_name


def _service(s: descriptor_pb2.ServiceDescriptorProto) -> ast.Service:
    methods: list[Any] = [
        ast.Method(name=m.name, input_type=ast.MessageType(type=m.input_type, stream=m.client_streaming),
                   output_type=ast.MessageType(type=m.output_type, stream=m.server_streaming),
                   elements=list(_options(m.options)))
        for m in s.method
    ]
    return ast.Service(name=s.name, elements=[*_options(s.options), *methods])


# --- model -> descriptor ---------------------------------------------------------------------------------


def to_descriptor(schema: ProtobufSchema, name: str = "default") -> descriptor_pb2.FileDescriptorProto:
    f = schema.file
    fdp = descriptor_pb2.FileDescriptorProto(name=name)
    if f.package:
        fdp.package = f.package
    if f.syntax:
        fdp.syntax = f.syntax
    for i, imported in enumerate(f.imports):
        fdp.dependency.append(imported.name)
        if imported.public:
            fdp.public_dependency.append(i)
    _set_options(fdp.options, f.options)
    for m in f.messages:
        _add_message(fdp.message_type.add(), m, schema, f.syntax)
    for e in f.enums:
        _add_enum(fdp.enum_type.add(), e)
    for s in f.services:
        _add_service(fdp.service.add(), s, schema, f.package or "")
    return fdp


def serialized(schema: ProtobufSchema, name: str = "default") -> str:
    """The schema as `format=serialized` answers it: a base64 serialized FileDescriptorProto."""
    return base64.b64encode(to_descriptor(schema, name).SerializeToString()).decode("ascii")


def _set_options(target: Any, options: list[ast.Option]) -> None:
    """The standard options this descriptor knows (custom ones, in parentheses, are not carried)."""
    fields = target.DESCRIPTOR.fields_by_name
    for option in options:
        field = fields.get(option.name)
        if field is None or field.is_repeated or field.type == field.TYPE_MESSAGE:
            continue
        value = option.value
        try:
            if field.type == field.TYPE_ENUM:
                value = field.enum_type.values_by_name[value.name if isinstance(value, ast.Identifier) else value].number
            setattr(target, option.name, value)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue


def _add_enum(target: descriptor_pb2.EnumDescriptorProto, e: Any) -> None:
    target.name = e.name
    _set_options(target.options, e.options)
    for c in e.constants:
        value = target.value.add(name=c.name, number=c.number)
        _set_options(value.options, list(c.options))


def _camel(name: str) -> str:
    """protoc's map entry name: the field's name in CamelCase."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _add_message(target: descriptor_pb2.DescriptorProto, m: Any, schema: ProtobufSchema, syntax: str | None) -> None:
    target.name = m.name
    _set_options(target.options, m.options)
    for r in m.reserved:
        for rng in r.ranges:
            start, _, end = rng.replace(" ", "").partition("to")
            last = _MAX_TAG if end == "max" else int(end or start)
            target.reserved_range.add(start=int(start), end=last + 1)
        target.reserved_name.extend(r.names)
    oneof_names = list(m.oneofs)
    for name in oneof_names:
        target.oneof_decl.add(name=name)
    synthetic: list[Any] = []
    members = [*m.fields, *(f for fs in m.oneofs.values() for f in fs)]
    for f in members:
        field = target.field.add(name=f.name, number=f.number)
        _set_options(field.options, [o for o in f.options if o.name not in ("default", "json_name")])
        for o in f.options:
            if o.name == "json_name" and isinstance(o.value, str):
                field.json_name = o.value
            elif o.name == "default":
                value = o.value
                field.default_value = (value.name if isinstance(value, ast.Identifier) else
                                       ("true" if value else "false") if isinstance(value, bool) else str(value))
        if f.is_map:
            key, value = f.map_types()
            entry = target.nested_type.add(name=_camel(f.name) + "Entry")
            entry.options.map_entry = True
            _set_field_type(entry.field.add(name="key", number=1, label=FDP.LABEL_OPTIONAL), key, schema, m.full_name)
            _set_field_type(entry.field.add(name="value", number=2, label=FDP.LABEL_OPTIONAL), value, schema,
                            m.full_name)
            field.label = FDP.LABEL_REPEATED
            field.type = FDP.TYPE_MESSAGE
            field.type_name = f".{m.full_name}.{entry.name}"
            continue
        field.label = {"repeated": FDP.LABEL_REPEATED, "required": FDP.LABEL_REQUIRED}.get(f.label or "",
                                                                                           FDP.LABEL_OPTIONAL)
        _set_field_type(field, f.type, schema, m.full_name)
        if f.oneof is not None:
            field.oneof_index = oneof_names.index(f.oneof)
        elif f.label == "optional" and syntax == "proto3":
            field.proto3_optional = True
            synthetic.append(field)
    for field in synthetic:  # proto3 optional: a synthetic oneof each, after the real ones
        field.oneof_index = len(target.oneof_decl)
        target.oneof_decl.add(name="_" + field.name)
    for nested in m.messages:
        _add_message(target.nested_type.add(), nested, schema, syntax)
    for e in m.enums:
        _add_enum(target.enum_type.add(), e)


def _set_field_type(field: descriptor_pb2.FieldDescriptorProto, type_name: str, schema: ProtobufSchema,
                    scope: str) -> None:
    from .protobuf import _resolve

    if type_name in _SCALAR_TYPES:
        field.type = _SCALAR_TYPES[type_name]
        return
    full = _resolve(schema.types, type_name, scope)
    if full is None:  # a well-known type from an import the registry does not model
        full = type_name.lstrip(".")
        field.type = FDP.TYPE_ENUM if full in _WELL_KNOWN_ENUMS else FDP.TYPE_MESSAGE
    else:
        field.type = FDP.TYPE_ENUM if schema.types[full].kind == "enum" else FDP.TYPE_MESSAGE
    field.type_name = "." + full


def _add_service(target: descriptor_pb2.ServiceDescriptorProto, s: ast.Service, schema: ProtobufSchema,
                 package: str) -> None:
    from .protobuf import _resolve

    target.name = s.name
    _set_options(target.options, [e for e in s.elements if isinstance(e, ast.Option)])
    for m in s.elements:
        if isinstance(m, ast.Method):
            request = _resolve(schema.types, m.input_type.type, package) or m.input_type.type.lstrip(".")
            response = _resolve(schema.types, m.output_type.type, package) or m.output_type.type.lstrip(".")
            method = target.method.add(name=m.name, input_type="." + request, output_type="." + response)
            if m.input_type.stream:
                method.client_streaming = True
            if m.output_type.stream:
                method.server_streaming = True
