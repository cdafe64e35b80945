"""StreamsGroupDescribe (key 89, KIP-1071): each streams group with its topology (the configured partition counts
once it can run), members, current and target assignments (Kafka's StreamsGroup.asDescribedGroup)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import GROUP_OPERATIONS, coordinator, response_cls, streams_groups
from tidelog.broker.context import RequestContext
from tidelog.coordinator.group.streams import topology as tp
from tidelog.coordinator.group.streams.coordinator import STICKY_ASSIGNOR_NAME
from tidelog.coordinator.group.streams.group import StreamsGroup
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import GROUP, Op, authorize, authorized_operations

API_KEY = 89
NOTES = """members with their process, endpoint, client tags, task offsets, current and target tasks; the
topology with the decided partition counts of internal topics; v1 (Kafka 4.4, KIP-1331/KIP-1357): `AssignorName`
`sticky` and `TopologyDescriptionStatus` NOT_STORED when asked for (no topology description plugin, as Kafka
without one); GROUP_ID_NOT_FOUND for an unknown group or one of another type; UNSUPPORTED_VERSION for every
group while `streams.version` is 0"""

NOT_REQUESTED, NOT_STORED = 0, 1  # StreamsGroupDescribeResponse.TOPOLOGY_DESCRIPTION_STATUS_*


def _task_ids(D: Any, tasks: dict[str, set[int]]) -> list[Any]:
    return [D.Member.Assignment.TaskIds(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(tasks.items()) if ps]


def _described(D: Any, group: StreamsGroup, partitions_of: Any, version: int, want_description: bool) -> Any:
    topology = None
    if group.topology is not None:
        configured = tp.configure(group.topology, partitions_of)
        T = D.Topology

        def info(t: tp.TopicInfo) -> Any:
            n = configured.partitions.get(t.name, t.partitions) if configured.ready else t.partitions
            info_cls = T.Subtopology.TopicInfo
            return info_cls(name=t.name, partitions=n, replication_factor=t.replication_factor,
                            topic_configs=[info_cls.KeyValue(key=k, value=v) for k, v in sorted(t.configs.items())])
        topology = T(epoch=group.topology.epoch, subtopologies=[
            T.Subtopology(subtopology_id=s.subtopology_id, source_topics=sorted(s.source_topics),
                          repartition_sink_topics=sorted(s.repartition_sink_topics),
                          state_changelog_topics=[info(t) for t in sorted(s.changelog_topics, key=lambda t: t.name)],
                          repartition_source_topics=[info(t) for t in sorted(s.repartition_source_topics,
                                                                             key=lambda t: t.name)])
            for _, s in sorted(group.topology.subtopologies.items())])
    M = D.Member
    members = []
    for m in sorted(group.members.values(), key=lambda m: m.member_id):
        target = group.target.get(m.member_id)
        members.append(M(
            member_id=m.member_id, member_epoch=m.member_epoch, instance_id=m.instance_id, rack_id=m.rack_id,
            client_id=m.client_id, client_host=m.client_host, topology_epoch=m.topology_epoch,
            process_id=m.process_id,
            user_endpoint=M.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1]) if m.user_endpoint else None,
            client_tags=[M.KeyValue(key=k, value=v) for k, v in sorted(m.client_tags.items())],
            task_offsets=[M.TaskOffset(subtopology_id=s, partition=p, offset=o)
                          for (s, p), o in sorted(m.task_offsets.items())],
            task_end_offsets=[D.TaskOffset(subtopology_id=s, partition=p, offset=o)
                              for (s, p), o in sorted(m.task_end_offsets.items())],
            assignment=M.Assignment(active_tasks=_task_ids(D, m.assigned.active),
                                    standby_tasks=_task_ids(D, m.assigned.standby),
                                    warmup_tasks=_task_ids(D, m.assigned.warmup)),
            target_assignment=M.Assignment(active_tasks=_task_ids(D, target.active) if target else [],
                                           standby_tasks=_task_ids(D, target.standby) if target else [],
                                           warmup_tasks=_task_ids(D, target.warmup) if target else []),
            is_classic=False))
    extra = {"topology_description": None, "assignor_name": STICKY_ASSIGNOR_NAME,
             "topology_description_status": NOT_STORED if want_description else NOT_REQUESTED} if version >= 1 else {}
    return D(error_code=ErrorCode.NONE, error_message=None, group_id=group.group_id, group_state=group.state.value,
             group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch, topology=topology,
             members=members, **extra)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    D = cls.DescribedGroup
    version = ctx.api_version
    want_ops = bool(request.include_authorized_operations)
    want_description = version >= 1 and bool(request.include_topology_description)
    described = []
    try:
        groups = streams_groups(ctx)
    except KafkaError as e:
        return cls(throttle_time_ms=0, groups=[D(error_code=e.code, error_message=e.message, group_id=g,
                                                 group_state="", group_epoch=0, assignment_epoch=0, topology=None,
                                                 members=[]) for g in request.group_ids or []])
    topics = ctx.broker.topics

    def partitions_of(name: str) -> int | None:
        info = topics.get(name)
        return None if info is None else int(info.partitions)

    for group_id in request.group_ids or []:
        if not authorize(ctx, Op.DESCRIBE, GROUP, group_id):
            described.append(D(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None,
                               group_id=group_id, group_state="", group_epoch=0, assignment_epoch=0, topology=None,
                               members=[]))
            continue
        group = groups.describe(group_id)
        if group is None:
            other = coordinator(ctx).manager.get_group(group_id) is not None or \
                coordinator(ctx).consumer_groups.is_consumer_group(group_id)
            message = f"Group {group_id} is not a streams group." if other else \
                f"Group {group_id} not found."
            described.append(D(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message, group_id=group_id,
                               group_state="Dead", group_epoch=0, assignment_epoch=0, topology=None, members=[]))
            continue
        row = _described(D, group, partitions_of, version, want_description)
        if want_ops:
            allowed = authorized_operations(ctx, GROUP, group_id, GROUP_OPERATIONS)
            row.authorized_operations = sum(1 << op for op in allowed)  # the bitfield of AclOperation codes
        described.append(row)
    return cls(throttle_time_ms=0, groups=described)
