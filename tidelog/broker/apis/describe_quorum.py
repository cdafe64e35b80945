"""DescribeQuorum (key 55, KIP-595): this node is the only voter and the leader of `__cluster_metadata`, as a
Kafka 4.3 node started with `kafka-storage format --standalone` (broker and controller in one process, no
observers). v1 adds fetch / caught-up timestamps (KIP-836); v2 the voter's directory id, the voters' endpoints
and error messages (KIP-853). Kafka's KafkaRaftClient.handleDescribeQuorumRequest answers any other partition
with UNKNOWN_TOPIC_OR_PARTITION on that partition.

tidelog keeps no metadata log: its high watermark and log end offset are the finalized-features epoch (the
offset of the last feature record in Kafka's log), and the leader epoch is 1.
"""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.broker.context import RequestContext
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import response_class
from tidelog.storage.checkpoints import uuid_from_base64

API_KEY = ApiKey.DESCRIBE_QUORUM
NOTES = """this node is the single voter and leader of `__cluster_metadata` (leader epoch 1, high watermark =
finalized-features epoch), no observers; v2 `nodes` lists the listener the request came on (tidelog has no
controller listener)"""

METADATA_TOPIC = "__cluster_metadata"
LEADER_EPOCH = 1
UNKNOWN_MESSAGE = "This server does not host this topic-partition."


def _directory_id(ctx: RequestContext) -> uuid.UUID:
    raw = ctx.broker.log_manager.meta_properties().get("directory.id")
    return uuid.UUID(bytes=uuid_from_base64(raw)) if raw else uuid.UUID(int=0)


async def handle(ctx: RequestContext, request: Any) -> Any:
    v = ctx.api_version
    cls = response_class(API_KEY)[v]
    T = cls.TopicData
    P = T.PartitionData
    broker = ctx.broker
    now = broker.clock.milliseconds()
    _, end_offset = broker.features.finalized_levels()
    topics = []
    for t in request.topics or []:
        partitions = []
        for p in t.partitions or []:
            if t.topic_name != METADATA_TOPIC or p.partition_index != 0:
                partitions.append(P(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                    error_message=UNKNOWN_MESSAGE, leader_id=-1, leader_epoch=-1, high_watermark=-1,
                                    current_voters=[], observers=[]))
                continue
            # The leader's own state: fetched and caught up "now" (Kafka's LeaderState.describeQuorum).
            voter = P.ReplicaState(replica_id=broker.node_id, replica_directory_id=_directory_id(ctx),
                                   log_end_offset=end_offset, last_fetch_timestamp=now, last_caught_up_timestamp=now)
            partitions.append(P(partition_index=0, error_code=ErrorCode.NONE, error_message=None,
                                leader_id=broker.node_id, leader_epoch=LEADER_EPOCH, high_watermark=end_offset,
                                current_voters=[voter], observers=[]))
        topics.append(T(topic_name=t.topic_name, partitions=partitions))
    fields: dict[str, Any] = {"error_code": ErrorCode.NONE, "error_message": None, "topics": topics}
    if v >= 2:
        host, port = broker.advertised_endpoint(ctx.listener)
        fields["nodes"] = [cls.Node(node_id=broker.node_id, listeners=[
            cls.Node.Listener(name=ctx.listener, host=host, port=port)])]
    return cls(**fields)
