"""DescribeAcls (key 29): ACL bindings matching a filter (Kafka's AclApis.handleDescribeAcls).
Needs DESCRIBE on the cluster; without an authorizer Kafka answers SECURITY_DISABLED."""

from __future__ import annotations

from typing import Any

from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import response_class
from tidelog.security.acl_store import AclBindingFilter
from tidelog.security.authorizer import Op, authorize_cluster

API_KEY = 29
NOTES = """DESCRIBE on the cluster; SECURITY_DISABLED without `authorizer.class.name`; v0 removed as in Kafka
4 (KIP-896)"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY)
    v = ctx.api_version

    def answer(error: ErrorCode, message: str | None, resources: list[Any]) -> Any:
        return cls[v](throttle_time_ms=0, error_code=error, error_message=message, resources=resources)

    security = ctx.broker.security
    if security.authorizer is None:
        return answer(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.", [])
    if not authorize_cluster(ctx, Op.DESCRIBE):
        return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", [])
    flt = AclBindingFilter.from_codes(request.resource_type_filter, request.resource_name_filter,
                                      request.pattern_type_filter, request.principal_filter, request.host_filter,
                                      request.operation, request.permission_type)
    indefinite = flt.find_indefinite_field()
    if indefinite is not None:
        return answer(ErrorCode.INVALID_REQUEST, indefinite, [])
    grouped: dict[tuple[int, str, int], list[Any]] = {}
    for acl in security.acl_store.describe(flt):
        grouped.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
            cls.DescribeAclsResource.AclDescription(principal=acl.principal, host=acl.host, operation=acl.operation,
                                                    permission_type=acl.permission_type))
    resources = [cls.DescribeAclsResource(resource_type=rt, resource_name=name, pattern_type=pt, acls=acls)
                 for (rt, name, pt), acls in grouped.items()]
    return answer(ErrorCode.NONE, None, resources)
