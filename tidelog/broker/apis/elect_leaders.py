"""ElectLeaders (key 43, KIP-460): this node already leads every partition, so each named partition answers
ELECTION_NOT_NEEDED (Kafka's ReplicationControlManager.electLeader); a request for all partitions (null)
answers with no partitions, as Kafka leaves out those that needed no election."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import response_cls
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.security.authorizer import Op, authorize_cluster

API_KEY = 43
NOTES = """this node leads everything: named partitions answer ELECTION_NOT_NEEDED, unknown ones
UNKNOWN_TOPIC_OR_PARTITION, "all partitions" answers none"""

ELECTION_NOT_NEEDED = 84
PREFERRED, UNCLEAN = 0, 1
_NOT_NEEDED_MESSAGE = "Leader election not needed for topic partition."


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    R = cls.ReplicaElectionResult
    P = R.PartitionResult
    election_type = getattr(request, "election_type", PREFERRED) if ctx.api_version >= 1 else PREFERRED
    results = []
    if election_type not in (PREFERRED, UNCLEAN):
        return cls(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, replica_election_results=[])
    if not authorize_cluster(ctx, Op.ALTER):  # KafkaApis.handleElectLeaders: every partition is refused
        return cls(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, replica_election_results=[
            R(topic=t.topic, partition_result=[P(partition_id=p, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                 error_message=None) for p in t.partitions or []])
            for t in request.topic_partitions or []])
    for topic in request.topic_partitions or []:
        info = ctx.broker.topics.get(topic.topic)
        parts = []
        for p in topic.partitions or []:
            if info is None or not 0 <= p < info.partitions:
                # ReplicationControlManager's wording for a missing topic / partition
                message = f"No such topic as {topic.topic}" if info is None else (
                    f"No such partition as {topic.topic}-{p}")
                parts.append(P(partition_id=p, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               error_message=message))
            else:
                parts.append(P(partition_id=p, error_code=ELECTION_NOT_NEEDED, error_message=_NOT_NEEDED_MESSAGE))
        results.append(R(topic=topic.topic, partition_result=parts))
    return cls(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=results)
