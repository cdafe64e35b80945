"""CreateAcls (key 30): add ACL bindings (Kafka's AclControlManager: each creation validated on its own).
Needs ALTER on the cluster; without an authorizer Kafka answers SECURITY_DISABLED."""

from __future__ import annotations

import asyncio
from typing import Any

from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import response_class
from tidelog.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from tidelog.security.acl_store import AclBinding, validate_new_acl
from tidelog.security.authorizer import Op, authorize_cluster

API_KEY = 30
NOTES = """ALTER on the cluster; each creation validated as AclControlManager; stored in `tidelog-acls.json`"""


def _binding(c: Any) -> AclBinding | str:
    try:
        return AclBinding(ResourceType(c.resource_type), c.resource_name or "", PatternType(c.resource_pattern_type),
                          c.principal or "", c.host or "", AclOperation(c.operation),
                          AclPermissionType(c.permission_type))
    except ValueError as exc:
        return f"Invalid ACL creation: {exc}"


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY)
    security = ctx.broker.security
    results: list[Any] = []
    if security.authorizer is None:
        results = [cls.AclCreationResult(error_code=ErrorCode.SECURITY_DISABLED,
                                         error_message="No Authorizer is configured.") for _ in request.creations]
    elif not authorize_cluster(ctx, Op.ALTER):
        results = [cls.AclCreationResult(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                         error_message="Cluster authorization failed.")
                   for _ in request.creations]
    else:
        valid: list[AclBinding] = []
        for creation in request.creations:
            acl = _binding(creation)
            problem = acl if isinstance(acl, str) else validate_new_acl(acl)
            if problem is not None:
                results.append(cls.AclCreationResult(error_code=ErrorCode.INVALID_REQUEST, error_message=problem))
                continue
            assert isinstance(acl, AclBinding)
            valid.append(acl)
            results.append(cls.AclCreationResult(error_code=ErrorCode.NONE, error_message=None))
        if valid:
            await asyncio.to_thread(security.acl_store.create, valid)  # fsync off the loop
    return cls[ctx.api_version](throttle_time_ms=0, results=results)
