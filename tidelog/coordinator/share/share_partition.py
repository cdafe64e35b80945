"""One topic partition as one share group consumes it (KIP-932; Kafka's SharePartition).

Offsets below the share-partition start offset (SPSO) are done. From it up to `end_offset` (the first offset
never handed out) each offset is either in flight — in `records`, AVAILABLE to be acquired again or ACQUIRED by
a member under a time lock — or done (acknowledged, archived, a transaction marker, an aborted record, or an
offset no record has, e.g. after compaction), and then absent. Acquiring walks the log's batches from the first
available offset: available in-flight offsets are taken again, offsets at `end_offset` and beyond are taken for
the first time. Each acquisition counts a delivery; a record released or timed out after
`share.delivery.count.limit` deliveries is archived (never delivered again). The SPSO moves up to the first
offset still in flight.

The clock is the broker's injectable one: lock expiry is evaluated whenever the partition is used.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.record_batch import HEADER_SIZE, RecordBatchHeader, read_header

# RecordState (Kafka's share RecordState ids, also what the share-state file stores)
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
# AcknowledgeType (ShareFetch / ShareAcknowledge AcknowledgeTypes); RENEW is v2 (KIP-1222)
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
# ShareAcquireMode (ShareFetch v2, KIP-1206): whole batches past MaxRecords, or exactly MaxRecords
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1


@dataclass
class InFlight:
    """An offset handed out at least once and not done yet."""

    state: int  # AVAILABLE or ACQUIRED
    delivery_count: int
    member_id: str | None = None  # the holder while ACQUIRED
    lock_deadline_ms: int = 0  # while ACQUIRED: when the acquisition lock times out


@dataclass(frozen=True)
class AcquiredRange:
    """ShareFetchResponse AcquiredRecords: consecutive offsets acquired with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class AcknowledgementBatch:
    """ShareFetch / ShareAcknowledge AcknowledgementBatches: one type for the range, or one per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


@dataclass
class AcquireLimits:
    """What one acquisition may take (ShareFetch MaxRecords, the group's configs)."""

    max_records: int
    max_in_flight: int  # group.share.partition.max.record.locks
    lock_duration_ms: int  # share.record.lock.duration.ms
    delivery_count_limit: int  # share.delivery.count.limit
    mode: int = BATCH_OPTIMIZED


@dataclass
class SharePartition:
    group_id: str
    topic_id: bytes
    partition: int
    start_offset: int  # SPSO: every offset below is done
    end_offset: int  # the first offset never acquired
    records: dict[int, InFlight] = field(default_factory=dict)  # in flight: AVAILABLE or ACQUIRED
    state_epoch: int = 0
    persisted_start: int = -1  # the SPSO last written (DescribeShareGroupOffsets: -1 until the first write)
    persisted_done: int = 0  # the DeliveryCompleteCount last written, with persisted_start (Kafka's state summary)

    # --- what the state machine does ----------------------------------------------------------------------

    def expire_locks(self, now_ms: int, delivery_count_limit: int) -> bool:
        """Acquisition locks that timed out: the records are available again, or archived at the limit (the
        delivery was counted when they were acquired; Kafka's releaseAcquisitionLockOnTimeout)."""
        changed = False
        for offset, rec in list(self.records.items()):
            if rec.state == ACQUIRED and rec.lock_deadline_ms <= now_ms:
                self._make_available(offset, rec, delivery_count_limit)
                changed = True
        if changed:
            self._advance()
        return changed

    def delivery_complete_count(self) -> int:
        """Offsets between the start offset and the end of the in-flight window that are done (acknowledged or
        archived), i.e. not in flight: Kafka's DeliveryCompleteCount."""
        return max(0, self.end_offset - self.start_offset - len(self.records))

    def mark_persisted(self) -> None:
        """The state was written: DescribeShareGroupOffsets reports this start offset and count, together, until
        the next write (Kafka answers it from the share coordinator's persisted summary, never from memory)."""
        self.persisted_start, self.persisted_done = self.start_offset, self.delivery_complete_count()

    def next_lock_deadline(self) -> int | None:
        """When the first acquisition lock held now times out (None: nothing is acquired)."""
        deadlines = [rec.lock_deadline_ms for rec in self.records.values() if rec.state == ACQUIRED]
        return min(deadlines) if deadlines else None

    def first_fetch_offset(self) -> int:
        """Where an acquisition reads the log from: the first available in-flight offset, else end_offset."""
        available = [o for o, r in self.records.items() if r.state == AVAILABLE]
        return min(available) if available else self.end_offset

    def can_acquire(self, max_in_flight: int) -> bool:
        """canAcquireRecords: an available record, or room below group.share.partition.max.record.locks
        (counted from the SPSO to the end offset, done offsets in between included)."""
        return (any(r.state == AVAILABLE for r in self.records.values())
                or self.end_offset - self.start_offset < max_in_flight)

    def acquire(self, member_id: str, batches: Iterable[RecordBatchHeader], upper_bound: int, now_ms: int,
                limits: AcquireLimits, aborted: AbortedRanges | None = None,
                batch_size: int = 0) -> list[AcquiredRange]:
        """Acquire for `member_id` from the log batches read at `first_fetch_offset()`, below `upper_bound` (the
        high watermark, or the LSO for read_committed). BATCH_OPTIMIZED takes whole log batches until
        limits.max_records is reached (a soft limit); RECORD_LIMIT stops at exactly max_records. New offsets
        stop at group.share.partition.max.record.locks, even inside a batch. Transaction markers are acquired like records (the client
        acknowledges them as GAP); records of aborted transactions (`aborted`, read_committed) are archived at
        once and left out of the answer. AcquiredRecords entries are cut at log batches once `batch_size` long."""
        acquired: list[tuple[int, int]] = []  # (offset, delivery count) in order
        cuts: set[int] = set()  # offsets that start a log batch
        for offset in [o for o, r in self.records.items()
                       if r.state == AVAILABLE and r.delivery_count >= limits.delivery_count_limit]:
            del self.records[offset]  # at the group's (possibly lowered) delivery limit: archived
        walked_from, walked_to = self.first_fetch_offset(), -1
        covered: list[tuple[int, int]] = []
        for header in batches:
            if header.base_offset >= upper_bound or len(acquired) >= limits.max_records:
                break
            last = min(header.last_offset, upper_bound - 1)
            if last >= self.end_offset and self.end_offset - self.start_offset >= limits.max_in_flight and \
                    not any(r.state == AVAILABLE and header.base_offset <= o <= last for o, r in self.records.items()):
                break  # no room for new records and nothing to deliver again in this batch
            drop = aborted is not None and aborted.covers(header)
            cuts.add(max(header.base_offset, self.start_offset))
            covered.append((header.base_offset, header.last_offset))
            walked_to = header.last_offset
            capped = False
            for offset in range(max(header.base_offset, self.start_offset), last + 1):
                rec = self.records.get(offset)
                if offset < self.end_offset:
                    if rec is None or rec.state != AVAILABLE:
                        continue  # done, or held by a member
                elif self.end_offset - self.start_offset >= limits.max_in_flight:
                    capped = True  # the in-flight limit is a hard one: it splits a batch
                    break
                else:
                    rec = InFlight(AVAILABLE, 0)
                    self.records[offset] = rec
                    self.end_offset = offset + 1
                if drop:
                    del self.records[offset]  # an aborted transaction's record: archived, never delivered
                    continue
                rec.state, rec.member_id = ACQUIRED, member_id
                rec.delivery_count += 1
                rec.lock_deadline_ms = now_ms + limits.lock_duration_ms
                acquired.append((offset, rec.delivery_count))
                if limits.mode == RECORD_LIMIT and len(acquired) >= limits.max_records:
                    # the rest of the batch is kept, available (Kafka caches the whole batch, acquires part of it)
                    for rest in range(max(offset + 1, self.end_offset), last + 1):
                        self.records[rest] = InFlight(AVAILABLE, 0)
                    break
            if capped:
                break
            if last == header.last_offset:
                self.end_offset = max(self.end_offset, last + 1)  # a batch's offsets without a record are done
        # Available offsets the walk passed that no batch holds any more (compaction removed them): done
        for offset in [o for o, r in self.records.items() if r.state == AVAILABLE and walked_from <= o <= walked_to
                       and not any(first <= o <= last for first, last in covered)]:
            del self.records[offset]
        self._advance()
        return list(_ranges(acquired, cuts, batch_size))

    def acknowledge(self, member_id: str, batches: list[AcknowledgementBatch], delivery_count_limit: int,
                    now_ms: int, lock_duration_ms: int) -> tuple[ErrorCode, str | None]:
        """Apply a member's acknowledgements for this partition, all or none (Kafka rolls every transition of
        the partition back on an error). Offsets below the SPSO are done already and skipped."""
        plan: list[tuple[int, int]] = []
        for batch in batches:
            if batch.last_offset >= self.end_offset:
                return ErrorCode.INVALID_REQUEST, f"Batch {batch.first_offset}-{batch.last_offset} is past the " \
                                                  f"records acquired (end offset {self.end_offset})"
            # offsets below the SPSO are done already: skipped without walking them
            for offset in range(max(batch.first_offset, self.start_offset), batch.last_offset + 1):
                kind = batch.types[0] if len(batch.types) == 1 else batch.types[offset - batch.first_offset]
                rec = self.records.get(offset)
                if rec is None or rec.state != ACQUIRED:
                    return ErrorCode.INVALID_RECORD_STATE, f"The offset {offset} is not in the acquired state"
                if rec.member_id != member_id:
                    return ErrorCode.INVALID_RECORD_STATE, f"Member is not the owner of offset {offset}"
                plan.append((offset, kind))
        for offset, kind in plan:
            rec = self.records[offset]
            if kind == RELEASE:
                self._make_available(offset, rec, delivery_count_limit)
            elif kind == RENEW:
                rec.lock_deadline_ms = now_ms + lock_duration_ms  # KIP-1222: the lock starts again
            else:
                del self.records[offset]  # ACCEPT (acknowledged), REJECT or GAP (archived): done
        self._advance()
        return ErrorCode.NONE, None

    def release_member(self, member_id: str) -> bool:
        """A member's share session closed (epoch -1 or its connection): what it holds is available again, and
        that delivery does not count (Kafka's releaseAcquiredRecords lowers the delivery count by one)."""
        changed = False
        for rec in self.records.values():
            if rec.state == ACQUIRED and rec.member_id == member_id:
                rec.state, rec.member_id, rec.lock_deadline_ms = AVAILABLE, None, 0
                rec.delivery_count = max(0, rec.delivery_count - 1)
                changed = True
        return changed

    def move_start(self, log_start_offset: int) -> bool:
        """The log's start moved past the SPSO (retention, DeleteRecords): those offsets are gone (archived)."""
        if log_start_offset <= self.start_offset:
            return False
        for offset in [o for o in self.records if o < log_start_offset]:
            del self.records[offset]
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self._advance()
        return True

    def reset(self, start_offset: int) -> None:
        """AlterShareGroupOffsets: everything before `start_offset` is done, nothing is in flight."""
        self.records.clear()
        self.start_offset = self.end_offset = start_offset
        self.state_epoch += 1

    # --- internals -------------------------------------------------------------------------------------------

    def _make_available(self, offset: int, rec: InFlight, delivery_count_limit: int) -> None:
        if rec.delivery_count >= delivery_count_limit:
            del self.records[offset]  # archived: the delivery limit is reached
        else:
            rec.state, rec.member_id, rec.lock_deadline_ms = AVAILABLE, None, 0

    def _advance(self) -> None:
        self.start_offset = min(self.records) if self.records else max(self.start_offset, self.end_offset)


@dataclass(frozen=True)
class AbortedRanges:
    """Aborted transactions as (producer id, first offset, last offset): their data batches are never
    delivered to a read_committed share group (Kafka's SharePartition archives them)."""

    ranges: tuple[tuple[int, int, int], ...]

    def covers(self, header: RecordBatchHeader) -> bool:
        if not header.is_transactional or header.is_control:
            return False  # the markers are acquired like records (the client acknowledges them as GAP)
        return any(pid == header.producer_id and first <= header.base_offset <= last
                   for pid, first, last in self.ranges)


def batch_headers(data: bytes) -> Iterator[RecordBatchHeader]:
    """The headers of the whole batches in raw log bytes (a trailing cut-off batch is left out)."""
    pos = 0
    view = memoryview(data)
    while pos + HEADER_SIZE <= len(data):
        header = read_header(view[pos:pos + HEADER_SIZE])
        if header.size <= 0 or pos + header.size > len(data):
            return
        yield header
        pos += header.size


def slice_batches(data: bytes, first_offset: int, last_offset: int) -> bytes:
    """The whole batches of `data` that hold any offset in [first_offset, last_offset] (what ShareFetch returns)."""
    pos = start = end = 0
    found = False
    view = memoryview(data)
    while pos + HEADER_SIZE <= len(data):
        header = read_header(view[pos:pos + HEADER_SIZE])
        if header.size <= 0 or pos + header.size > len(data):
            break
        if header.last_offset >= first_offset and header.base_offset <= last_offset:
            if not found:
                start, found = pos, True
            end = pos + header.size
        pos += header.size
    return bytes(view[start:end]) if found else b""


def check_batches(batches: list[AcknowledgementBatch], renew: bool) -> str | None:
    """Kafka's KafkaApis.validateAcknowledgementBatches for one partition: None if well formed, else why (the
    partition's INVALID_REQUEST). RENEW (4) only in a renew acknowledgement (ShareFetch/ShareAcknowledge v2)."""
    allowed = (GAP, ACCEPT, RELEASE, REJECT, RENEW) if renew else (GAP, ACCEPT, RELEASE, REJECT)
    previous_last = -1
    for batch in batches:
        count = batch.last_offset - batch.first_offset + 1
        if batch.first_offset < 0 or count <= 0:
            return "First offset must not be greater than the last offset"
        if batch.first_offset <= previous_last:
            return "Acknowledgement batches overlap or are out of order"
        if not batch.types:
            return "Acknowledge types must not be empty"
        if len(batch.types) not in (1, count):
            return "Acknowledge types must be one, or one for each offset of the batch"
        if any(t not in allowed for t in batch.types):
            return "Unknown acknowledge type"
        previous_last = batch.last_offset
    return None


def _ranges(acquired: list[tuple[int, int]], cuts: set[int], batch_size: int) -> Iterator[AcquiredRange]:
    """Consecutive offsets with one delivery count as AcquiredRecords entries, a new entry starting at a log batch
    once the current one holds `batch_size` offsets (ShareFetch BatchSize; 0: no cut)."""
    start = prev = count = None
    for offset, delivery in acquired:
        if start is not None and prev is not None and count is not None and offset == prev + 1 and \
                delivery == count and not (batch_size > 0 and offset in cuts and offset - start >= batch_size):
            prev = offset
            continue
        if start is not None and prev is not None and count is not None:
            yield AcquiredRange(start, prev, count)
        start = prev = offset
        count = delivery
    if start is not None and prev is not None and count is not None:
        yield AcquiredRange(start, prev, count)
