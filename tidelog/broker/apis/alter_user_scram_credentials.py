"""AlterUserScramCredentials (key 51, KIP-554): upsert (salt + salted password from the client, kept only as
StoredKey/ServerKey) or delete SCRAM credentials, durably. Needs ALTER on the cluster."""

from __future__ import annotations

import asyncio
from typing import Any

from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import Op, authorize_cluster
from tidelog.security.scram_store import Upsertion

API_KEY = 51
NOTES = """ALTER on the cluster; only StoredKey/ServerKey kept (`tidelog-scram-credentials.json`, mode 0600);
iterations 4096–16384; any non-empty salt, as Kafka (under RFC 7677's 12 bytes too)"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY)
    result_cls = cls.AlterUserScramCredentialsResult
    users = list(dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions]))
    if not authorize_cluster(ctx, Op.ALTER):
        results = [result_cls(user=u, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                              error_message="Cluster authorization failed.")
                   for u in users]
        return cls[ctx.api_version](throttle_time_ms=0, results=results)
    deletions = [(d.name, d.mechanism) for d in request.deletions]
    upsertions = [Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt or b""), bytes(u.salted_password or b""))
                  for u in request.upsertions]
    # fsync of the credentials file: off the event loop
    outcome = await asyncio.to_thread(ctx.broker.security.scram_store.alter, deletions, upsertions)
    results = [result_cls(user=u, error_code=e, error_message=m) for u, e, m in outcome]
    return cls[ctx.api_version](throttle_time_ms=0, results=results)
