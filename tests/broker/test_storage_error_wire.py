"""A full disk seen from the wire: the produce that cannot be written gets KAFKA_STORAGE_ERROR, no partial batch
becomes visible, and the broker keeps serving other clients (reads of everything acknowledged before it).

The broker runs as a subprocess under RLIMIT_FSIZE (with SIGXFSZ ignored, so write() fails with EFBIG), which
makes the kernel refuse the write that crosses the limit: a real failing disk write, not a mock.
"""

from __future__ import annotations

import sys
from pathlib import Path

from broker_testlib import METADATA, batch, produce
from test_fetch import fetch, partition_data

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.protocol.record_batch import crc_is_valid, iter_batches
from tidelog.testing import BrokerProcess, KafkaWire

FILE_SIZE_LIMIT = 256 * 1024
RECORDS_PER_BATCH = 10
VALUE = b"x" * 1000

# Runs before the broker: limits apply to the process and survive exec, and so does an ignored signal.
_LIMITED_EXEC = (
    "import os, resource, signal, sys; "
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
    f"resource.setrlimit(resource.RLIMIT_FSIZE, ({FILE_SIZE_LIMIT}, {FILE_SIZE_LIMIT})); "
    "os.execv(sys.executable, [sys.executable] + sys.argv[1:])"
)


def auto_create(client: KafkaWire, topic: str) -> None:
    metadata = request_class(METADATA)[1]
    response = client.request(METADATA, 1, metadata(topics=[metadata.MetadataRequestTopic(name=topic)]))
    assert [(t.name, t.error_code) for t in response.topics] == [(topic, 0)]


class FileSizeLimitedBroker(BrokerProcess):
    def command(self) -> list[str]:
        return [sys.executable, "-c", _LIMITED_EXEC, *super().command()[1:]]


def test_full_disk_answers_kafka_storage_error_and_keeps_serving(tmp_path: Path) -> None:
    # Small preallocated indexes so that only the .log file can reach the limit.
    overrides = {"log.index.size.max.bytes": 4096, "auto.create.topics.enable": True}
    with FileSizeLimitedBroker(tmp_path / "data", overrides=overrides) as broker:
        acked: list[int] = []
        error = ErrorCode.NONE
        with KafkaWire(broker.bootstrap) as producer:
            auto_create(producer, "disk")
            for i in range(2 * FILE_SIZE_LIMIT // len(VALUE) // RECORDS_PER_BATCH):
                response = produce(producer, "disk", batch(RECORDS_PER_BATCH, value=VALUE,
                                                           start=i * RECORDS_PER_BATCH))
                error = ErrorCode(response.error_code)
                if error != ErrorCode.NONE:
                    break
                acked.append(response.base_offset)
        assert error == ErrorCode.KAFKA_STORAGE_ERROR
        assert acked and acked == [i * RECORDS_PER_BATCH for i in range(len(acked))]

        # A second client: the broker is alive, and exactly the acknowledged batches are readable.
        with KafkaWire(broker.bootstrap, client_id="second") as reader:
            [data] = partition_data(fetch(reader, [("disk", 0, 0)], partition_max_bytes=4 << 20,
                                          max_bytes=4 << 20))
            assert data.error_code == 0
            assert data.high_watermark == len(acked) * RECORDS_PER_BATCH
            records = bytes(data.records)
            batches = list(iter_batches(records))
            assert [h.base_offset for _, h in batches] == acked
            assert all(crc_is_valid(records, pos, h) for pos, h in batches)
            # Another topic's small write still succeeds: the failure was the one append, not the broker.
            auto_create(reader, "other")
            ok = produce(reader, "other", batch(1))
            assert (ok.error_code, ok.base_offset) == (0, 0)

        # Nothing partial on disk: the .log holds exactly the acknowledged batches, each intact.
        log_bytes = (tmp_path / "data" / "disk-0" / "00000000000000000000.log").read_bytes()
        on_disk = list(iter_batches(log_bytes))
        assert [h.base_offset for _, h in on_disk] == acked
        assert sum(h.size for _, h in on_disk) == len(log_bytes)
