"""DescribeClientQuotas (key 48, KIP-546): the configured quotas whose entities match the filter (Kafka's
ClientQuotasImage.describe; matching rules in tidelog.broker.quotas). A bad filter answers the error with null
entries."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import response_cls
from tidelog.broker.context import RequestContext
from tidelog.broker.quotas import QuotaError
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.errors import ErrorCode

API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS
NOTES = """user / client-id / ip entities, exact / default / any filters, strict (KIP-546)"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    E = cls.EntryData
    components = [(c.entity_type, c.match_type, c.match) for c in request.components or []]
    try:
        found = ctx.broker.quotas.store.describe(components, bool(request.strict))
    except QuotaError as e:
        return cls(throttle_time_ms=0, error_code=e.code, error_message=e.message, entries=None)
    entries = [E(entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                 values=[E.ValueData(key=k, value=v) for k, v in sorted(values.items())])
               for entity, values in found.items()]
    return cls(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=entries)
