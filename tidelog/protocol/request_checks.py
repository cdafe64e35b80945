"""Checks on a decoded request that kafka-python's decoder does not make but Kafka's generated readers do.

Kafka's `*RequestData.read` throws "non-nullable field X was serialized as null" when an array, string, bytes or
struct arrives as null (length -1) in a version whose schema does not allow null; RequestContext.parseRequest turns
that into an InvalidRequestException and the SocketServer closes the connection. kafka-python decodes such a null
as None, which would reach a handler as `for t in None`. `check_nulls` raises `NullFieldError` instead, so the
connection closes as Kafka's does.
"""

from __future__ import annotations

from typing import Any

_NULLABLE_TYPES = frozenset({"string", "bytes", "records"})


class NullFieldError(ValueError):
    """A non-nullable field was serialized as null."""


def _check(obj: Any, struct: Any, version: int, path: str) -> None:
    for field in struct.untagged_fields(version):
        value = getattr(obj, field.name, None)
        where = f"{path}.{field.name}" if path else field.name
        if value is None:
            # kafka-python also decodes a zero uuid and an all-ones bitfield as None: only length-prefixed
            # types can be serialized as null
            if (field.is_array() or field.is_struct() or field.type_str in _NULLABLE_TYPES) \
                    and not field.nullable_for_version_q(version):
                raise NullFieldError(f"non-nullable field {where} was serialized as null")
        elif field.is_struct_array():
            for i, item in enumerate(value):
                _check(item, field, version, f"{where}[{i}]")
        elif field.is_struct():
            _check(value, field, version, where)
        elif field.is_array() and field.array_of.type_str in _NULLABLE_TYPES and None in value:
            raise NullFieldError(f"non-nullable element of {where} was serialized as null")


def check_nulls(request: Any, version: int) -> None:
    """Raise NullFieldError if `request` (a decoded kafka-python request) holds a null where version `version`
    of its schema does not allow one."""
    struct = getattr(type(request), "_struct", None)
    if struct is not None:
        _check(request, struct, version, "")
