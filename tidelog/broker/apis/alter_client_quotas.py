"""AlterClientQuotas (key 49, KIP-546): set or remove quota values per entity, each entity on its own (Kafka's
ClientQuotaControlManager.alterClientQuotas); validate_only checks without storing. Stored durably and applied
to the Produce/Fetch byte-rate enforcement at once (tidelog.broker.quotas)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import response_cls
from tidelog.broker.context import RequestContext
from tidelog.broker.quotas import QuotaError, make_entity
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.errors import ErrorCode

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS
NOTES = """per-entity results, validate_only; stored in `tidelog-quotas.json`; `producer_byte_rate` /
`consumer_byte_rate` enforced (below)"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    E = cls.EntryData
    store = ctx.broker.quotas.store
    entries = []
    for entry in request.entries or []:
        pairs = [(e.entity_type, e.entity_name) for e in entry.entity or []]
        ops = [(op.key, None if op.remove else float(op.value)) for op in entry.ops or []]
        error: int = ErrorCode.NONE
        message: str | None = None
        try:
            store.alter(make_entity(pairs), ops, bool(request.validate_only))
        except QuotaError as e:
            error, message = e.code, e.message
        entries.append(E(error_code=error, error_message=message,
                         entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in pairs]))
    return cls(throttle_time_ms=0, entries=entries)
