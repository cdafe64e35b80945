"""All logs of the broker across its log directories (Kafka's LogManager), docs/STORAGE.md "Directory layout", "Checkpoints", "Recovery".

Owns the per-directory identity (meta.properties, .lock, .kafka_cleanshutdown), the offset checkpoints,
the Clock-driven deletion scheduler and a background flush thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import fcntl
import logging
import os
import resource
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidelog.clock import Clock
from tidelog.config.log_config import LogConfig
from tidelog.storage import TopicPartition
from tidelog.storage.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_OFFSET_CHECKPOINT_FILE,
    LOCK_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    META_PROPERTIES_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    CheckpointError,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    random_kafka_uuid,
    read_properties,
    uuid_to_base64,
    write_clean_shutdown_file,
    write_meta_properties,
)
from tidelog.storage.fault_hooks import NO_FAULTS, FaultHooks
from tidelog.storage.log_file_utils import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    STRAY_DIR_SUFFIX,
    fsync_dir,
    parse_topic_partition_name,
    remove_tree,
)
from tidelog.storage.replica_alter_log_dirs import ReplicaAlterLogDirsManager
from tidelog.storage.retention import RetentionTask
from tidelog.storage.scheduler import Scheduler

if TYPE_CHECKING:  # imported when the first log is opened (_log_class): an empty broker starts without them
    from tidelog.storage.log import Log, LogAppendInfo

log = logging.getLogger(__name__)


def _log_class() -> type[Log]:
    # lazy for start-up time: storage.log loads with the first log (test_startup_imports)
    from tidelog.storage.log import Log

    return Log


APPEND_FLUSH_THREADS = 4
# Where AlterReplicaLogDirs asked each partition to live (Kafka keeps LogManager.preferredLogDirs in memory;
# persisted here so a restart completes the move): `<topic> <partition> 0` lines in the preferred dir.
PREFERRED_LOG_DIR_CHECKPOINT_FILE = "preferred-log-dir-checkpoint"


class LogDirLockedError(Exception):
    """Another process holds the log directory's `.lock`."""


class InconsistentClusterIdError(Exception):
    """meta.properties names another cluster than the one configured."""


class LogManager:
    def __init__(
        self,
        log_dirs: list[str],
        default_config: LogConfig,
        clock: Clock,
        flush_on_append: bool = False,
        node_id: int = 1,
        cluster_id: str | None = None,
        producer_id_expiration_ms: int = 86_400_000,
        producer_id_expiration_check_interval_ms: int = 600_000,
        config_provider: Callable[[TopicPartition], LogConfig] | None = None,
        background_tasks: bool = False,
        background_interval_ms: int = 1000,
        checkpoint_interval_ms: int = 60_000,
        fault_hooks: FaultHooks = NO_FAULTS,
        retention_check_interval_ms: int | None = None,
    ) -> None:
        """`config_provider(tp)` (optional) gives the effective LogConfig of a partition found on disk at
        startup (topic overrides); without it `default_config` is used until `Log.update_config()`.

        `background_tasks`: run `run_periodic_tasks()` on a daemon thread every `background_interval_ms`
        of real time (checkpoints every `checkpoint_interval_ms`, flush.ms, delayed deletions, producer
        expiry). Off by default: tests on a ManualClock drive `run_periodic_tasks()` /
        `run_scheduled_deletions()` themselves; the broker turns it on when it runs on the system clock.

        `retention` (a RetentionTask, Kafka's LogManager.cleanupLogs) always exists for one-off passes;
        with `retention_check_interval_ms` its thread runs from startup() to shutdown()."""
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [Path(d).absolute() for d in log_dirs]
        self.default_config = default_config
        self.clock = clock
        self.flush_on_append = flush_on_append
        self.node_id = node_id
        self._cluster_id = cluster_id
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.config_provider = config_provider
        self.fault_hooks = fault_hooks
        self.scheduler = Scheduler(clock)
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        self._lock = threading.RLock()
        self._lock_fds: dict[Path, int] = {}
        self._meta: dict[Path, dict[str, str]] = {}
        self._flush_executor: concurrent.futures.ThreadPoolExecutor | None = None
        # fsyncs of deferred appends (Produce with log.flush.on.append / flush.messages): several workers,
        # so a slow disk under one partition does not hold up another partition's acknowledgements.
        self._append_flush_executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._started = False
        self._last_checkpoint_ms = 0
        self._last_expiry_check_ms = clock.milliseconds()
        self.producer_id_expiration_check_interval_ms = producer_id_expiration_check_interval_ms
        self.background_tasks = background_tasks
        self.retention_check_interval_ms = retention_check_interval_ms
        self.retention = RetentionTask(self.all_logs, clock, retention_check_interval_ms or 300_000)
        self.background_interval_ms = background_interval_ms
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self._stop = threading.Event()
        self._background: threading.Thread | None = None
        self._preferred_dirs: dict[TopicPartition, Path] = {}
        self.alter_log_dirs = ReplicaAlterLogDirsManager(self)

    # --- deferred append flushes ------------------------------------------------------------------------

    async def flush_appended(self, lg: Log, info: LogAppendInfo) -> None:
        """On the event loop, after `lg.append_as_leader(..., defer_flush=True)` returned `info` with
        `flush_required`: fsync on a worker thread (the loop keeps serving other requests), then make the
        records visible. Raises OSError when the fsync failed (the caller answers KAFKA_STORAGE_ERROR)."""
        executor = self._append_flush_executor
        if executor is None:
            lg.flush_appended(info)
        else:
            await asyncio.get_running_loop().run_in_executor(executor, lg.flush_appended, info)
        lg.expose_flushed(info)

    # --- startup / shutdown ----------------------------------------------------------------------------

    def startup(self) -> None:
        """Lock and identify every log dir, then load each partition (recovering after an unclean shutdown)."""
        self._flush_executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="log-flush")
        self._append_flush_executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=APPEND_FLUSH_THREADS, thread_name_prefix="log-append-flush"
        )
        _raise_open_file_limit()
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            self._lock_dir(log_dir)
            self._load_meta_properties(log_dir)
        self._load_preferred_dirs()
        self._resolve_interrupted_moves()
        for log_dir in self.log_dirs:
            self._load_dir(log_dir)
        self._started = True
        self._last_checkpoint_ms = self.clock.milliseconds()
        if self.retention_check_interval_ms is not None:
            self.retention.start()
        if self.background_tasks:
            self._stop.clear()
            self._background = threading.Thread(target=self._background_loop, name="log-manager", daemon=True)
            self._background.start()

    def _background_loop(self) -> None:
        while not self._stop.wait(self.background_interval_ms / 1000):
            try:
                self.run_periodic_tasks(self.checkpoint_interval_ms)
            except Exception:  # keep housekeeping alive; one log line per failure
                log.exception("log manager periodic task failed")

    def _lock_dir(self, log_dir: Path) -> None:
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            os.close(fd)
            raise LogDirLockedError(f"{log_dir} is locked by another process") from e
        self._lock_fds[log_dir] = fd

    def _load_meta_properties(self, log_dir: Path) -> None:
        path = log_dir / META_PROPERTIES_FILE
        props: dict[str, str] = {}
        if path.exists():
            props = read_properties(path)
            if props.get("version", "1") == "0" and "node.id" not in props and "broker.id" in props:
                props["node.id"] = props["broker.id"]
        changed = False
        earlier = next(((d, m["cluster.id"]) for d, m in self._meta.items() if "cluster.id" in m), None)
        existing = props.get("cluster.id")
        if existing is not None:
            if earlier is not None and existing != earlier[1]:
                # Kafka's InconsistentClusterIdException: log dirs of two clusters; refuse to start.
                raise InconsistentClusterIdError(
                    f"{path} has cluster.id {existing}, but {earlier[0]} has {earlier[1]}")
            if self._cluster_id is not None and existing != self._cluster_id:
                log.warning("%s has cluster.id %s; the cluster.id setting (%s) only names a new log dir",
                            path, existing, self._cluster_id)
            cluster_id = existing
        else:  # a new log dir: the other dirs' id, else the cluster.id setting, else a new one
            cluster_id = earlier[1] if earlier is not None else self._cluster_id or uuid_to_base64(random_kafka_uuid())
            props["cluster.id"] = cluster_id
            changed = True
        if props.get("node.id") != str(self.node_id):
            if "node.id" in props:
                log.warning("%s has node.id %s; using it", path, props["node.id"])
                self.node_id = int(props["node.id"])
            else:
                props["node.id"] = str(self.node_id)
                changed = True
        if "directory.id" not in props:
            props["directory.id"] = uuid_to_base64(random_kafka_uuid())
            changed = True
        if props.get("version") != "1":
            props["version"] = "1"
            props.pop("broker.id", None)
            changed = True
        if changed:
            ordered = {k: props[k] for k in ("node.id", "directory.id", "version", "cluster.id")}
            ordered.update({k: v for k, v in props.items() if k not in ordered})
            write_meta_properties(path, ordered, self.clock.milliseconds())
            props = ordered
        self._meta[log_dir] = props

    # --- preferred log dirs and interrupted moves (docs/STORAGE.md "Moving a partition between log dirs") --

    def _load_preferred_dirs(self) -> None:
        for log_dir in self.log_dirs:
            for tp in OffsetCheckpointFile(log_dir / PREFERRED_LOG_DIR_CHECKPOINT_FILE).read_or_empty():
                self._preferred_dirs[tp] = log_dir

    def _write_preferred_dirs(self) -> None:
        for log_dir in self.log_dirs:
            entries = {tp: 0 for tp, d in self._preferred_dirs.items() if d == log_dir}
            path = log_dir / PREFERRED_LOG_DIR_CHECKPOINT_FILE
            if entries or path.exists():
                OffsetCheckpointFile(path).write(entries)

    def preferred_log_dirs(self) -> dict[TopicPartition, Path]:
        return dict(self._preferred_dirs)

    def maybe_update_preferred_log_dir(self, tp: TopicPartition, log_dir: Path) -> None:
        """Kafka's LogManager.maybeUpdatePreferredLogDir, persisted before any file of the move exists."""
        with self._lock:
            if self._preferred_dirs.get(tp) != log_dir:
                self._preferred_dirs[tp] = log_dir
                self._write_preferred_dirs()

    def _resolve_interrupted_moves(self) -> None:
        """Before loading: a `-future` dir of an unfinished move is discarded (the move restarts from the
        preferred dir); of two normal-named copies (crash between the swap's renames) the one in the
        preferred dir is complete and stays, the other is removed."""
        found: dict[TopicPartition, list[Path]] = {}
        for log_dir in self.log_dirs:
            for name in sorted(os.listdir(log_dir)):
                path = log_dir / name
                if not path.is_dir():
                    continue
                if name.endswith(FUTURE_DIR_SUFFIX):
                    log.warning("discarding %s of an unfinished log dir move", path)
                    remove_tree(path)
                    continue
                parsed = parse_topic_partition_name(name)
                if parsed is not None and not name.endswith((DELETE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
                    found.setdefault(TopicPartition(*parsed), []).append(log_dir)
        for tp, dirs in found.items():
            preferred = self._preferred_dirs.get(tp)
            if len(dirs) < 2 or preferred not in dirs:
                continue
            for log_dir in dirs:
                if log_dir != preferred:
                    log.warning("removing %s: the move of %s to %s had completed", log_dir / tp.dir_name(), tp,
                                preferred)
                    remove_tree(log_dir / tp.dir_name())
                    fsync_dir(log_dir)

    def replace_current_with_future_log(self, tp: TopicPartition, source: Log, new_log: Log, new_dir: Path,
                                        old_dir: Path | None) -> None:
        """Kafka's LogManager.replaceCurrentWithFutureLog, in memory: `new_log` (in `new_dir`) serves `tp`
        from now on; readers waiting on the old log's appends now wait on the new one."""
        with self._lock:
            for listener in list(source._listeners):
                new_log.add_append_listener(listener)
            source.close_handlers()
            self._register(tp, new_log, new_dir)
            for log_dir in {new_dir, old_dir}:
                if log_dir is not None:
                    self._write_checkpoints(log_dir)
            cleaner = self.cleaner_checkpoints().get(tp)
            if cleaner is not None:
                self.update_cleaner_checkpoint(tp, cleaner)

    def checkpoint_moved_log_start(self, log_dir: Path, tp: TopicPartition, log_start: int, first_base: int) -> None:
        """Before a moved copy gets its normal name in `log_dir`: its log start goes into that dir's checkpoint
        too, so a crash before the swap completes does not bring back records DeleteRecords removed."""
        with self._lock:
            path = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT_FILE)
            entries = path.read_or_empty()
            if log_start > first_base:
                entries[tp] = log_start
            else:
                entries.pop(tp, None)
            path.write(entries)

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def is_log_dir_online(self, log_dir: Path) -> bool:
        return log_dir in self._lock_fds

    def log_kwargs(self) -> dict[str, Any]:
        return self._log_kwargs()

    def _load_dir(self, log_dir: Path) -> None:
        clean_file = log_dir / CLEAN_SHUTDOWN_FILE
        had_clean_shutdown = clean_file.exists()
        if had_clean_shutdown:
            # Deleted before loading, so a crash while loading counts as unclean (Kafka does the same).
            clean_file.unlink()
            fsync_dir(log_dir)
        recovery_points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT_FILE).read_or_empty()
        log_starts = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT_FILE).read_or_empty()
        high_watermarks = OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT_FILE).read_or_empty()
        partitions = 0
        for name in sorted(os.listdir(log_dir)):
            path = log_dir / name
            if not path.is_dir():
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                delay = self.default_config.file_delete_delay_ms
                self.scheduler.schedule_once(f"delete-dir {path}", _rmtree(path), delay)
                continue
            if name.endswith((FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
                log.warning("ignoring %s", path)
                continue
            parsed = parse_topic_partition_name(name)
            if parsed is None:
                continue
            tp = TopicPartition(*parsed)
            partitions += 1
            if tp in self._logs:
                log.error("duplicate log directories for %s: %s and %s", tp, self._log_dir_of[tp], log_dir)
                continue
            metadata = PartitionMetadataFile(path)
            try:
                topic_id = metadata.read() if metadata.exists() else bytes(16)
            except (CheckpointError, ValueError, OSError) as e:
                log.error("unreadable %s: %s", metadata.path, e)
                topic_id = bytes(16)
            try:
                config = self.config_provider(tp) if self.config_provider else self.default_config
                lg = _log_class().load(
                    path,
                    tp,
                    config,
                    self.clock,
                    topic_id,
                    had_clean_shutdown=had_clean_shutdown,
                    recovery_point=recovery_points.get(tp, 0),
                    log_start_offset=log_starts.get(tp, 0),
                    high_watermark=high_watermarks.get(tp),
                    **self._log_kwargs(),
                )
            except Exception:
                # One unreadable partition must not keep the broker down; its files are left as they are.
                log.exception("could not load %s; skipping it", path)
                continue
            self._register(tp, lg, log_dir)
        if partitions or had_clean_shutdown:
            log.info("loaded %s (%s shutdown)", log_dir, "clean" if had_clean_shutdown else "unclean")
        else:
            log.info("loaded %s (new directory, no partitions)", log_dir)

    def _log_kwargs(self) -> dict[str, Any]:
        return {
            "scheduler": self.scheduler,
            "producer_id_expiration_ms": self.producer_id_expiration_ms,
            "flush_on_append": self.flush_on_append,
            "flush_executor": self._flush_executor,
            "fault_hooks": self.fault_hooks,
        }

    def _register(self, tp: TopicPartition, lg: Log, log_dir: Path) -> None:
        lg.on_log_start_offset_changed = lambda _log: self._checkpoint_log_start_offsets(log_dir)
        self._logs[tp] = lg
        self._log_dir_of[tp] = log_dir

    def shutdown(self) -> None:
        """Flush and close every log, write all checkpoints, then `.kafka_cleanshutdown` per dir."""
        self.retention.shutdown()
        self.alter_log_dirs.shutdown()
        self._stop.set()
        if self._background is not None:
            self._background.join()
            self._background = None
        with self._lock:
            if self._flush_executor is not None:
                self._flush_executor.shutdown(wait=True)
                self._flush_executor = None
            if self._append_flush_executor is not None:
                self._append_flush_executor.shutdown(wait=True)
                self._append_flush_executor = None
            failed_dirs: set[Path] = set()
            for tp, lg in self._logs.items():
                try:
                    lg.flush()
                    lg.close()
                except OSError as e:
                    log.error("could not close %s cleanly: %s", tp, e)
                    failed_dirs.add(self._log_dir_of[tp])
            self.scheduler.run_all()  # segments replaced or deleted still hold open files
            for log_dir in self.log_dirs:
                if log_dir in failed_dirs or log_dir not in self._lock_fds:
                    continue
                try:
                    self._write_checkpoints(log_dir)
                    write_clean_shutdown_file(log_dir)
                except OSError as e:
                    log.error("could not write checkpoints of %s: %s", log_dir, e)
            for fd in self._lock_fds.values():
                try:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                finally:
                    os.close(fd)
            self._lock_fds.clear()
            self._logs.clear()
            self._log_dir_of.clear()
            self._started = False

    # --- logs ------------------------------------------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def all_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def log_dir_of(self, tp: TopicPartition) -> Path | None:
        return self._log_dir_of.get(tp)

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig, topic_id: bytes) -> Log:
        """The partition's log; a new one goes to the log dir with the fewest partitions and gets its
        partition.metadata before anything is appended."""
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                if config != existing.config:
                    existing.update_config(config)
                return existing
            counts = {d: 0 for d in self.log_dirs if d in self._lock_fds or not self._lock_fds}
            for d in self._log_dir_of.values():
                if d in counts:
                    counts[d] += 1
            log_dir = min(counts, key=lambda d: (counts[d], self.log_dirs.index(d)))
            if self._preferred_dirs.get(tp) in counts:  # AlterReplicaLogDirs before the partition existed
                log_dir = self._preferred_dirs[tp]
            path = log_dir / tp.dir_name()
            path.mkdir(parents=True, exist_ok=True)
            PartitionMetadataFile(path).write(topic_id)
            lg = _log_class().load(path, tp, config, self.clock, topic_id, had_clean_shutdown=True,
                                   **self._log_kwargs())
            self._register(tp, lg, log_dir)
            fsync_dir(log_dir)
            return lg

    def delete_log(self, tp: TopicPartition) -> None:
        """Rename the partition dir to `<topic>-<partition>.<uuid>-delete`, then remove it."""
        with self._lock:
            future = self.alter_log_dirs.futures.get(tp)
            if future is not None:
                self.alter_log_dirs._abandon(future)
            if self._preferred_dirs.pop(tp, None) is not None:
                self._write_preferred_dirs()
            lg = self._logs.pop(tp, None)
            log_dir = self._log_dir_of.pop(tp, None)
            if lg is None or log_dir is None:
                return
            lg.close_handlers()
            suffix = f".{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
            topic = tp.topic[: max(1, 255 - len(suffix) - len(f"-{tp.partition}"))]
            target = log_dir / f"{topic}-{tp.partition}{suffix}"
            try:
                os.replace(lg.dir, target)
                fsync_dir(log_dir)
            except FileNotFoundError:
                return
            remove_tree(target)
            self._write_checkpoints(log_dir)
            cleaner = self._cleaner_checkpoint_file(log_dir)
            entries = cleaner.read_or_empty()
            if tp in entries:
                del entries[tp]
                cleaner.write(entries)

    # --- checkpoints -----------------------------------------------------------------------------------

    def _logs_in(self, log_dir: Path) -> dict[TopicPartition, Log]:
        return {tp: lg for tp, lg in self._logs.items() if self._log_dir_of.get(tp) == log_dir}

    def _write_checkpoints(self, log_dir: Path) -> None:
        logs = self._logs_in(log_dir)
        OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT_FILE).write(
            {tp: lg.recovery_point for tp, lg in logs.items()}
        )
        self._checkpoint_log_start_offsets(log_dir)
        OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT_FILE).write(
            {tp: lg.high_watermark for tp, lg in logs.items()}
        )

    def _checkpoint_log_start_offsets(self, log_dir: Path) -> None:
        """Only partitions whose log start is above their first segment's base are listed (Kafka)."""
        entries = {}
        for tp, lg in self._logs_in(log_dir).items():
            first = lg.segments.first_segment
            if first is not None and lg.log_start_offset > first.base_offset:
                entries[tp] = lg.log_start_offset
        OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT_FILE).write(entries)

    def checkpoint(self) -> None:
        """Write recovery-point, log-start and replication (HW) checkpoints of every log dir."""
        with self._lock:
            for log_dir in self.log_dirs:
                if log_dir in self._lock_fds:
                    self._write_checkpoints(log_dir)
            self._last_checkpoint_ms = self.clock.milliseconds()

    def meta_properties(self) -> dict[str, str]:
        """cluster.id, node.id and directory.id (of the first log dir)."""
        return dict(self._meta.get(self.log_dirs[0], {}))

    @property
    def cluster_id(self) -> str | None:
        """The log dirs' cluster.id once loaded; before that, the cluster.id setting."""
        return next((m["cluster.id"] for m in self._meta.values()), self._cluster_id)

    # --- cleaner checkpoints (docs/STORAGE.md "Cleaner checkpoint") ---------------------------------------------------------

    def _cleaner_checkpoint_file(self, log_dir: Path) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT_FILE)

    def cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        """First dirty offsets from every dir's cleaner-offset-checkpoint (unreadable files read as empty)."""
        result: dict[TopicPartition, int] = {}
        for log_dir in self.log_dirs:
            result.update(self._cleaner_checkpoint_file(log_dir).read_or_empty())
        return result

    def write_cleaner_checkpoints(self, entries: dict[TopicPartition, int]) -> None:
        """Rewrite every dir's file in full with the entries of the partitions it hosts (others dropped)."""
        with self._lock:
            for log_dir in self.log_dirs:
                hosted = {tp: off for tp, off in entries.items() if self._log_dir_of.get(tp) == log_dir}
                self._cleaner_checkpoint_file(log_dir).write(hosted)

    def update_cleaner_checkpoint(self, tp: TopicPartition, offset: int | None) -> None:
        """Set (or with None remove) one partition's first dirty offset, keeping the other entries."""
        with self._lock:
            entries = self.cleaner_checkpoints()
            if offset is None:
                entries.pop(tp, None)
            else:
                entries[tp] = offset
            self.write_cleaner_checkpoints(entries)

    # --- periodic work ---------------------------------------------------------------------------------

    def run_scheduled_deletions(self) -> int:
        """Unlink `.deleted` files / `-delete` dirs whose file.delete.delay.ms has passed (Clock-driven)."""
        return self.scheduler.run_due()

    def flush_dirty_logs(self) -> None:
        """flush.ms per log (Kafka's kafka-log-flusher task)."""
        for lg in list(self._logs.values()):
            try:
                lg.flush_if_due()
            except OSError as e:
                log.error("flush of %s failed: %s", lg.topic_partition, e)

    def remove_expired_producers(self) -> int:
        return sum(lg.remove_expired_producers() for lg in list(self._logs.values()))

    def run_periodic_tasks(self, checkpoint_interval_ms: int = 60_000) -> None:
        """One tick of the broker's housekeeping: deletions, flush.ms, checkpoints, and producer expiry every
        producer.id.expiration.check.interval.ms (600000, Kafka's default)."""
        self.run_scheduled_deletions()
        self.flush_dirty_logs()
        now = self.clock.milliseconds()
        if now - self._last_expiry_check_ms >= self.producer_id_expiration_check_interval_ms:
            self._last_expiry_check_ms = now
            self.remove_expired_producers()
        if now - self._last_checkpoint_ms >= checkpoint_interval_ms:
            self.checkpoint()


def _raise_open_file_limit() -> None:
    """Every segment keeps its `.log`, `.index` and `.timeindex` open (as Kafka does), so many partitions
    need many descriptors: lift the soft limit to the hard one (Kafka's docs ask operators for the same)."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY:
            hard = 1 << 20
        if soft != resource.RLIM_INFINITY and soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as e:
        log.warning("could not raise the open file limit: %s", e)


def _rmtree(path: Path) -> Callable[[], None]:
    def remove() -> None:
        remove_tree(path)

    return remove
