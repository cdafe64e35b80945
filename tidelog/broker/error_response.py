"""An API's own error response for a request (Kafka's AbstractRequest.getErrorResponse).

Built from the response schema: every `error_code` field carries the error, at the top level and in each
topic, partition, group or resource entry that mirrors an entry of the request (names, ids and indexes copied,
every other field left at its default). Arrays of the response whose entries carry no error (Metadata's
brokers, JoinGroup's members) stay empty. Used by the dispatch for a handler that raised (KafkaApis'
requestHelper.handleError) and by the fault injector for injected errors.
"""

from __future__ import annotations

from typing import Any

from tidelog.protocol.messages import request_class, response_class

PRODUCE = 0
_ERROR_FIELDS = frozenset({"error_code", "partition_error_code"})  # AddPartitionsToTxn's per-partition name
_FETCH = 1
_FETCH_SESSION_MIN_VERSION = 7

# Response array -> the request array it answers, where Kafka's schemas name them differently (checked in this
# order; else a request array of the same name, else the only request array left).
_ARRAY_SOURCES: dict[str, tuple[str, ...]] = {
    "responses": ("topic_data", "topics", "resources", "topic_names"),
    "partition_responses": ("partition_data",),
    "results": ("resources", "topics", "creations", "groups_names", "users", "deletions", "topic_partitions"),
    "filter_results": ("filters",),
    "replica_election_results": ("topic_partitions",),
    "partitions": ("partition_data", "partitions", "partition_indexes"),
}
# Response key field -> the request field it echoes, where the names differ.
_KEY_SOURCES: dict[str, tuple[str, ...]] = {
    "partition_index": ("partition", "index", "partition_id"),
    "partition": ("partition_index", "index"),
    "name": ("topic", "topic_name"),
    "topic": ("name",),
    "topic_name": ("name", "topic"),
    "resource_name": ("name",),
    "resource_type": ("type",),
}


def error_response(api_key: int, version: int, request: Any, code: int) -> Any:
    """The `api_key` v`version` response answering `request` with `code` everywhere an error can go; None
    when its schema has no error field at this version (the caller closes the connection, as Kafka does for
    an acks=0 Produce). `request` may be a kafka-python object or a hand-decoded one with the same names."""
    if api_key == PRODUCE and getattr(request, "acks", 1) == 0:
        return None  # no response to carry it: Kafka closes the connection
    cls = response_class(api_key)[version]
    if not _carries_errors(cls, version):
        return None
    response = _mirror(cls, request_class(api_key)[version], request, version, code)
    if api_key == _FETCH and version >= _FETCH_SESSION_MIN_VERSION:
        response.session_id = 0  # no session was created or advanced (FetchSession INVALID_SESSION_ID)
    return response


def error_entries(api_key: int, version: int, array: str, entries: list[Any], code: int) -> list[Any]:
    """The entries of the response's top-level array `array` answering request topics `entries` with `code`
    (the fault injector's per-topic errors)."""
    cls = response_class(api_key)[version]
    request_cls = request_class(api_key)[version]
    entry_cls = getattr(cls, cls.fields[array].type_str)
    source = _source_field(array, _request_arrays(request_cls, version))
    source_cls = None if source is None or not source.is_struct_array() else getattr(request_cls, source.type_str)
    return [_mirror(entry_cls, source_cls, entry, version, code) for entry in entries]


def _mirror(cls: Any, source_cls: Any, source: Any, version: int, code: int) -> Any:
    """An instance of response struct `cls` answering `source` (of request struct `source_cls`, or a bare name
    or index when `source_cls` is None) with `code`."""
    values: dict[str, Any] = {}
    arrays = _request_arrays(source_cls, version)
    for field in _fields(cls, version):
        name = field.name
        if name in _ERROR_FIELDS:
            values[name] = code
        elif field.is_struct():  # e.g. ShareFetch's CurrentLeader: its defaults, no error of its own
            values[name] = _mirror(getattr(cls, field.type_str), None, None, version, code)
        elif field.is_struct_array():
            entry_cls = getattr(cls, field.type_str)
            if not _carries_errors(entry_cls, version):
                continue
            array = _source_field(name, arrays)
            if array is None or source is None:
                values[name] = []
                continue
            entry_source_cls = getattr(source_cls, array.type_str) if array.is_struct_array() else None
            entries = getattr(source, array.name, None) or []
            values[name] = [_mirror(entry_cls, entry_source_cls, entry, version, code) for entry in entries]
        elif not field.is_array():
            value = _key_value(field, source_cls, source)
            if value is not None:
                values[name] = value
    return cls(**values)


def _fields(cls: Any, version: int) -> list[Any]:
    return [f for f in cls.fields.values() if f.for_version_q(version)]


def _carries_errors(cls: Any, version: int) -> bool:
    for field in _fields(cls, version):
        if field.name in _ERROR_FIELDS:
            return True
        if field.is_struct_array() and _carries_errors(getattr(cls, field.type_str), version):
            return True
    return False


def _request_arrays(source_cls: Any, version: int) -> dict[str, Any]:
    """The request struct's array fields at this version, by name."""
    if source_cls is None:
        return {}
    return {f.name: f for f in _fields(source_cls, version) if f.is_array()}


def _source_field(name: str, arrays: dict[str, Any]) -> Any:
    """The request array a response array answers: a known other name, the same name, or the only one."""
    for candidate in (*_ARRAY_SOURCES.get(name, ()), name):
        if candidate in arrays:
            return arrays[candidate]
    return next(iter(arrays.values())) if len(arrays) == 1 else None


def _key_value(field: Any, source_cls: Any, source: Any) -> Any:
    """What the request entry says for this response field: a field of the same name (or a known alias), or
    the entry itself when the request lists bare names or indexes (DescribeGroups, OffsetFetch)."""
    if source is None:
        return None
    if source_cls is None:  # a bare group id, topic name or partition index
        return source if field.name in _SCALAR_KEYS and _same_kind(field, source) else None
    fields = source_cls.fields
    for candidate in (field.name, *_KEY_SOURCES.get(field.name, ())):
        if candidate in fields and candidate not in _ERROR_FIELDS and candidate != "throttle_time_ms":
            request_field = fields[candidate]
            if request_field.is_array() or request_field.is_struct():
                continue
            value = getattr(source, candidate, None)
            return value if value is not None and _same_kind(field, value) else None
    return None


# The fields a bare request value (a group id, a topic name, a partition index) answers in a response entry.
_SCALAR_KEYS = frozenset({"group_id", "name", "key", "partition_index", "partition", "topic_name", "user",
                          "resource_name", "transactional_id", "group"})


def _same_kind(field: Any, value: Any) -> bool:
    t: str = field.type_str
    if t == "string":
        return isinstance(value, str)
    if t.startswith("int") or t == "uint16":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "bool":
        return isinstance(value, bool)
    return t == "uuid"
