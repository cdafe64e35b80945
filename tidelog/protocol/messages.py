"""Request/response classes from kafka-python's schema-driven `kafka.protocol`, loaded lazily.

Importing the `kafka` package runs its `__init__`, which pulls in the whole client (admin, net,
producer, consumer: ~0.25 s). The broker needs only `kafka.protocol`, so `_install_lazy_kafka_package`
registers `kafka` as a package whose `__init__` runs on first attribute access instead. Code in the same
process that later does `from kafka import KafkaProducer` still gets the real package.

`encode_response` encodes a response by walking its schema until walking that message version has cost about what
compiling its encoder would (~3 ms for Metadata: too much for a first Metadata answer), then compiles it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
import types
from functools import cache
from typing import Any

# api_key -> (module under kafka.protocol, request class, response class)
_MESSAGES: dict[int, tuple[str, str, str]] = {
    0: ("producer.produce", "ProduceRequest", "ProduceResponse"),
    1: ("consumer.fetch", "FetchRequest", "FetchResponse"),
    2: ("consumer.offsets", "ListOffsetsRequest", "ListOffsetsResponse"),
    3: ("metadata.metadata", "MetadataRequest", "MetadataResponse"),
    8: ("consumer.group", "OffsetCommitRequest", "OffsetCommitResponse"),
    9: ("consumer.group", "OffsetFetchRequest", "OffsetFetchResponse"),
    10: ("metadata.find_coordinator", "FindCoordinatorRequest", "FindCoordinatorResponse"),
    11: ("consumer.group", "JoinGroupRequest", "JoinGroupResponse"),
    12: ("consumer.group", "HeartbeatRequest", "HeartbeatResponse"),
    13: ("consumer.group", "LeaveGroupRequest", "LeaveGroupResponse"),
    14: ("consumer.group", "SyncGroupRequest", "SyncGroupResponse"),
    15: ("admin.groups", "DescribeGroupsRequest", "DescribeGroupsResponse"),
    16: ("admin.groups", "ListGroupsRequest", "ListGroupsResponse"),
    17: ("sasl", "SaslHandshakeRequest", "SaslHandshakeResponse"),
    18: ("tidelog.protocol.kafka44", "ApiVersionsRequest", "ApiVersionsResponse"),  # v5: Kafka 4.4
    19: ("admin.topics", "CreateTopicsRequest", "CreateTopicsResponse"),
    20: ("admin.topics", "DeleteTopicsRequest", "DeleteTopicsResponse"),
    21: ("admin.topics", "DeleteRecordsRequest", "DeleteRecordsResponse"),
    22: ("producer.transaction", "InitProducerIdRequest", "InitProducerIdResponse"),
    23: ("consumer.offsets", "OffsetForLeaderEpochRequest", "OffsetForLeaderEpochResponse"),
    24: ("producer.transaction", "AddPartitionsToTxnRequest", "AddPartitionsToTxnResponse"),
    25: ("producer.transaction", "AddOffsetsToTxnRequest", "AddOffsetsToTxnResponse"),
    26: ("producer.transaction", "EndTxnRequest", "EndTxnResponse"),
    28: ("tidelog.protocol.kafka44", "TxnOffsetCommitRequest", "TxnOffsetCommitResponse"),  # v6: Kafka 4.4
    29: ("admin.acl", "DescribeAclsRequest", "DescribeAclsResponse"),
    30: ("admin.acl", "CreateAclsRequest", "CreateAclsResponse"),
    31: ("admin.acl", "DeleteAclsRequest", "DeleteAclsResponse"),
    32: ("admin.configs", "DescribeConfigsRequest", "DescribeConfigsResponse"),
    33: ("admin.configs", "AlterConfigsRequest", "AlterConfigsResponse"),
    34: ("admin.cluster", "AlterReplicaLogDirsRequest", "AlterReplicaLogDirsResponse"),
    35: ("admin.cluster", "DescribeLogDirsRequest", "DescribeLogDirsResponse"),
    36: ("sasl", "SaslAuthenticateRequest", "SaslAuthenticateResponse"),
    37: ("admin.topics", "CreatePartitionsRequest", "CreatePartitionsResponse"),
    42: ("tidelog.protocol.kafka44", "DeleteGroupsRequest", "DeleteGroupsResponse"),  # v3: Kafka 4.4
    43: ("admin.topics", "ElectLeadersRequest", "ElectLeadersResponse"),
    44: ("admin.configs", "IncrementalAlterConfigsRequest", "IncrementalAlterConfigsResponse"),
    45: ("admin.topics", "AlterPartitionReassignmentsRequest", "AlterPartitionReassignmentsResponse"),
    48: ("admin.client_quotas", "DescribeClientQuotasRequest", "DescribeClientQuotasResponse"),
    49: ("admin.client_quotas", "AlterClientQuotasRequest", "AlterClientQuotasResponse"),
    55: ("admin.cluster", "DescribeQuorumRequest", "DescribeQuorumResponse"),
    57: ("admin.cluster", "UpdateFeaturesRequest", "UpdateFeaturesResponse"),
    46: ("admin.topics", "ListPartitionReassignmentsRequest", "ListPartitionReassignmentsResponse"),
    47: ("consumer.group", "OffsetDeleteRequest", "OffsetDeleteResponse"),
    50: ("admin.users", "DescribeUserScramCredentialsRequest", "DescribeUserScramCredentialsResponse"),
    51: ("admin.users", "AlterUserScramCredentialsRequest", "AlterUserScramCredentialsResponse"),
    60: ("admin.cluster", "DescribeClusterRequest", "DescribeClusterResponse"),
    61: ("admin.transactions", "DescribeProducersRequest", "DescribeProducersResponse"),
    # not in kafka-python 3.0.12: tidelog's own codecs from Kafka's JSON schemas (absolute module name)
    68: ("tidelog.protocol.kip848", "ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse"),
    69: ("tidelog.protocol.kip848", "ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse"),
    71: ("tidelog.protocol.telemetry", "GetTelemetrySubscriptionsRequest", "GetTelemetrySubscriptionsResponse"),
    72: ("tidelog.protocol.telemetry", "PushTelemetryRequest", "PushTelemetryResponse"),
    74: ("tidelog.protocol.telemetry", "ListConfigResourcesRequest", "ListConfigResourcesResponse"),
    76: ("tidelog.protocol.share", "ShareGroupHeartbeatRequest", "ShareGroupHeartbeatResponse"),
    77: ("tidelog.protocol.share", "ShareGroupDescribeRequest", "ShareGroupDescribeResponse"),
    78: ("tidelog.protocol.share", "ShareFetchRequest", "ShareFetchResponse"),
    79: ("tidelog.protocol.share", "ShareAcknowledgeRequest", "ShareAcknowledgeResponse"),
    90: ("tidelog.protocol.share", "DescribeShareGroupOffsetsRequest", "DescribeShareGroupOffsetsResponse"),
    91: ("tidelog.protocol.share", "AlterShareGroupOffsetsRequest", "AlterShareGroupOffsetsResponse"),
    92: ("tidelog.protocol.share", "DeleteShareGroupOffsetsRequest", "DeleteShareGroupOffsetsResponse"),
    88: ("tidelog.protocol.streams", "StreamsGroupHeartbeatRequest", "StreamsGroupHeartbeatResponse"),
    89: ("tidelog.protocol.streams", "StreamsGroupDescribeRequest", "StreamsGroupDescribeResponse"),
    93: ("tidelog.protocol.streams", "StreamsGroupTopologyDescriptionUpdateRequest",
         "StreamsGroupTopologyDescriptionUpdateResponse"),
    65: ("admin.transactions", "DescribeTransactionsRequest", "DescribeTransactionsResponse"),
    66: ("admin.transactions", "ListTransactionsRequest", "ListTransactionsResponse"),
    75: ("admin.topics", "DescribeTopicPartitionsRequest", "DescribeTopicPartitionsResponse"),
}


class _LazyKafkaPackage(types.ModuleType):
    """`kafka` with its `__path__` set (so submodules import) but its `__init__` deferred."""

    _loaded = False

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or type(self)._loaded:
            raise AttributeError(name)
        type(self)._loaded = True
        spec = self.__spec__
        assert spec is not None and spec.loader is not None
        spec.loader.exec_module(self)
        return getattr(self, name)


def _install_lazy_kafka_package() -> None:
    if "kafka" in sys.modules:
        return
    spec = importlib.util.find_spec("kafka")
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError("kafka-python is not installed")
    module = _LazyKafkaPackage("kafka")
    module.__spec__ = spec
    module.__file__ = spec.origin
    module.__path__ = list(spec.submodule_search_locations)
    module.__package__ = "kafka"
    sys.modules["kafka"] = module


class _FilesResources:
    """`importlib.resources` as kafka-python's schema loader uses it, through `files()`: its legacy
    `read_text` emits a DeprecationWarning per schema, which fails users' `pytest -W error` sessions. A schema
    next to its package's `__init__` on disk is read directly (`files()` imports importlib's readers and zipfile:
    ~1.5 ms before the first ApiVersions answer); anything else (a zipped install) goes through `files()`."""

    @staticmethod
    def read_text(package: str, resource: str) -> str:
        origin = getattr(importlib.import_module(package), "__file__", None)
        if origin is not None:
            try:
                with open(os.path.join(os.path.dirname(origin), resource), encoding="utf-8") as f:
                    return f.read()
            except OSError:
                pass
        # lazy for start-up time: only for schemas not on disk (see the docstring)
        from importlib import resources

        return resources.files(package).joinpath(resource).read_text(encoding="utf-8")


class _ImportlibForSchemas:
    resources = _FilesResources


def quiet_schema_loader() -> None:
    """Point kafka-python's `load_json` at `_FilesResources` (its module's own `importlib` name only; nothing
    global changes) before any schema class is built."""
    _install_lazy_kafka_package()
    loader = importlib.import_module("kafka.protocol.schemas.load_json")
    if getattr(loader, "importlib", None) is importlib:
        loader.importlib = _ImportlibForSchemas  # type: ignore[attr-defined]


@cache
def _classes(api_key: int) -> tuple[Any, Any]:
    module_name, request_name, response_name = _MESSAGES[api_key]
    _install_lazy_kafka_package()
    quiet_schema_loader()
    absolute = module_name.startswith("tidelog.")
    module = importlib.import_module(module_name if absolute else "kafka.protocol." + module_name)
    return getattr(module, request_name), getattr(module, response_name)


def request_class(api_key: int) -> Any:
    """The kafka-python request class (index it with a version: `cls[v]`) for `api_key`."""
    return _classes(api_key)[0]


def response_class(api_key: int) -> Any:
    """The kafka-python response class for `api_key`."""
    return _classes(api_key)[1]


# kafka-python compiles a flat encoder per message version at its first `encode` (generated source, compile():
# ~3 ms for a Metadata response, twenty times what walking the schema takes to encode a small one). A message version
# is encoded by walking the schema (kafka-python's StructField.encode: the same bytes, 2-3x slower per call) until
# the walks have cost about what a compile does (WALK_BUDGET_S: a large response is compiled at its second send) or
# it has been sent COMPILE_AFTER times; start-up and rarely used APIs then never pay for a compile.
WALK_BUDGET_S = 0.002
COMPILE_AFTER = 16
_walked: dict[tuple[type[Any], int], float] = {}  # (message class, version) -> seconds spent walking its schema


def encode_response(response: Any, version: int) -> bytes:
    """The body of kafka-python `response` at `version` (without the response header)."""
    key = (type(response), version)
    spent = _walked.get(key, 0.0)
    if spent >= WALK_BUDGET_S:
        body: bytes = response.encode(version=version)
        return body
    started = time.perf_counter()
    flexible = response.flexible_version_q(version)
    walked: bytes = response._struct.encode(response, version=version, compact=flexible, tagged=flexible)
    _walked[key] = spent + max(time.perf_counter() - started, WALK_BUDGET_S / COMPILE_AFTER)
    return walked
