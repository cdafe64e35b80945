"""DescribeUserScramCredentials (key 50, KIP-554): mechanisms and iterations per user, never salts or keys.
Needs DESCRIBE on the cluster."""

from __future__ import annotations

from typing import Any

from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import Op, authorize_cluster

API_KEY = 50
NOTES = """DESCRIBE on the cluster; mechanisms and iterations only"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY)
    result_cls = cls.DescribeUserScramCredentialsResult
    if not authorize_cluster(ctx, Op.DESCRIBE):
        return cls[ctx.api_version](throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    error_message="Cluster authorization failed.", results=[])
    # null or empty: every user (Kafka's ControllerApis)
    users = [u.name for u in request.users] if request.users else None
    results = [result_cls(user=user, error_code=error, error_message=message, credential_infos=[
        result_cls.CredentialInfo(mechanism=mech, iterations=iterations) for mech, iterations in infos])
        for user, error, message, infos in ctx.broker.security.scram_store.describe(users)]
    return cls[ctx.api_version](throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)
