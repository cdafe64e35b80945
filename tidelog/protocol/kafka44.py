"""Codecs of messages Kafka 4.4 bumped past what kafka-python 3.0.12 knows: DeleteGroups v3 (a per-group
ErrorMessage in the response; the request is unchanged). The schemas in `tidelog/protocol/schemas/` follow Kafka's
message JSON; kafka-python's schema-driven ApiMessage builds the codec from them (as `tidelog.protocol.kip848`)."""

from __future__ import annotations

from tidelog.protocol.messages import quiet_schema_loader

quiet_schema_loader()  # also installs the lazy `kafka` package

from kafka.protocol.api_message import ApiMessage  # noqa: E402

_SCHEMAS = "tidelog.protocol.schemas"


class DeleteGroupsRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class DeleteGroupsResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass
