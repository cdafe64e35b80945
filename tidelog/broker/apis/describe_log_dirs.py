"""DescribeLogDirs (key 35): each log dir with the size of every partition it holds (Kafka's
ReplicaManager.describeLogDirs). A partition being moved by AlterReplicaLogDirs also shows its future replica
in the target dir (is_future_key, offset lag = LEO - copied offset); v4+ reports the dir's file-system total and usable bytes; v5 (KIP-1066) never a cordoned dir."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tidelog.broker.apis._shared import response_cls
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.security.authorizer import Op, authorize_cluster
from tidelog.storage import TopicPartition

API_KEY = 35
NOTES = """every log dir with its partitions' sizes (offset lag 0); a partition being moved also appears in
its target dir with `is_future_key` (size copied so far, lag = LEO − copied offset); v4 total/usable bytes
from the file system; v5 (KIP-1066) no dir is cordoned"""


def _wanted(request: Any) -> set[TopicPartition] | None:
    if request.topics is None:  # null: every partition
        return None
    return {TopicPartition(t.topic, p) for t in request.topics for p in t.partitions or []}


def _disk_space(path: Path) -> tuple[int, int]:
    try:
        st = os.statvfs(path)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    R = cls.DescribeLogDirsResult
    T = R.DescribeLogDirsTopic
    P = T.DescribeLogDirsPartition
    if not authorize_cluster(ctx, Op.DESCRIBE):  # KafkaApis.handleDescribeLogDirsRequest
        return cls(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[])
    manager = ctx.broker.log_manager
    wanted = _wanted(request)
    by_dir: dict[Path, dict[str, list[Any]]] = {Path(d): {} for d in manager.log_dirs}
    for tp, lg in sorted(manager.all_logs().items()):
        if wanted is not None and tp not in wanted:
            continue
        log_dir = manager.log_dir_of(tp)
        if log_dir is None:
            continue
        by_dir.setdefault(log_dir, {}).setdefault(tp.topic, []).append(
            P(partition_index=tp.partition, partition_size=lg.size_in_bytes(), offset_lag=0, is_future_key=False))
    for tp, future in sorted(manager.alter_log_dirs.future_logs().items()):
        source = manager.get_log(tp)
        if source is None or (wanted is not None and tp not in wanted):
            continue
        by_dir.setdefault(future.target_dir, {}).setdefault(tp.topic, []).append(
            P(partition_index=tp.partition, partition_size=future.size_in_bytes(),
              offset_lag=max(0, source.log_end_offset - future.copied_offset), is_future_key=True))
    results = []
    for log_dir, topics in by_dir.items():
        total, usable = _disk_space(log_dir)
        results.append(R(error_code=ErrorCode.NONE, log_dir=str(log_dir),
                         topics=[T(name=name, partitions=parts) for name, parts in topics.items()],
                         total_bytes=total, usable_bytes=usable, is_cordoned=False))  # v5: no dir is cordoned
    return cls(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)
