"""DeleteAcls (key 31): remove the ACL bindings matching each filter, listing what each removed.
Needs ALTER on the cluster; without an authorizer Kafka answers SECURITY_DISABLED."""

from __future__ import annotations

import asyncio
from typing import Any

from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import response_class
from tidelog.security.acl_store import AclBindingFilter
from tidelog.security.authorizer import Op, authorize_cluster

API_KEY = 31
NOTES = """ALTER on the cluster; MATCH/ANY filters; lists the removed bindings per filter"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY)
    security = ctx.broker.security
    result_cls = cls.DeleteAclsFilterResult

    def failed(error: ErrorCode, message: str | None) -> Any:
        return result_cls(error_code=error, error_message=message, matching_acls=[])

    if security.authorizer is None:
        results = [failed(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.") for _ in request.filters]
    elif not authorize_cluster(ctx, Op.ALTER):
        results = [failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.") for _ in request.filters]
    else:
        filters: list[AclBindingFilter | None] = []
        for f in request.filters:
            flt = AclBindingFilter.from_codes(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                                              f.principal_filter, f.host_filter, f.operation, f.permission_type)
            filters.append(None if flt.find_indefinite_field() else flt)
        usable = [f for f in filters if f is not None]
        removed = iter(await asyncio.to_thread(security.acl_store.delete, usable)) if usable else iter(())
        results = []
        for maybe in filters:
            if maybe is None:
                results.append(failed(ErrorCode.INVALID_REQUEST, "Invalid filter: a field is UNKNOWN"))
                continue
            matching = [result_cls.DeleteAclsMatchingAcl(
                error_code=ErrorCode.NONE, error_message=None, resource_type=a.resource_type,
                resource_name=a.resource_name, pattern_type=a.pattern_type, principal=a.principal, host=a.host,
                operation=a.operation, permission_type=a.permission_type) for a in next(removed)]
            results.append(result_cls(error_code=ErrorCode.NONE, error_message=None, matching_acls=matching))
    return cls[ctx.api_version](throttle_time_ms=0, filter_results=results)
