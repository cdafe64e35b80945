"""Codec layer for the non-hot APIs: kafka-python 3.0.12's schema classes (what tidelog uses now) vs `kio`
(dataclasses generated from Kafka's JSON schemas, native reader, Python writer). Prints tables only; no
pass/fail. Runs in ~30 s. Skips the kio columns (with a message) when kio is not installed.

    python bench/codecs.py [--quick]

Measured: request decode (the body after the request header, as tidelog's connection hands it over) and
response build+encode (a handler always builds the objects) / encode alone, in microseconds per op, best
of several timeit repeats; import time of each library in a fresh interpreter; and behaviour on inputs
tidelog must survive (truncated body, unknown tagged fields, null arrays, trailing bytes).
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import subprocess
import sys
import timeit
import uuid
from collections.abc import Callable
from typing import Any

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from tidelog.protocol.messages import _MESSAGES, request_class, response_class  # noqa: E402

try:
    import kio  # noqa: F401
    from kio.schema.errors import ErrorCode as KioErrorCode
    from kio.serial import entity_reader, entity_writer
    from kio.static.primitive import i32, i32Timedelta

    HAVE_KIO = True
except ImportError:
    HAVE_KIO = False

TOPICS, PARTITIONS = 100, 10
ZERO = uuid.UUID(int=0)


def kmod(name: str) -> Any:
    """A kio schema module, e.g. kmod('metadata.v12.response')."""
    return importlib.import_module("kio.schema." + name)


def kio_encode(obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


def kio_decode(cls: Any) -> Callable[[bytes], Any]:
    reader = entity_reader(cls)
    return lambda data: reader(data, 0)[0]


# ---------------------------------------------------------------- cases
# Request bytes are made by kafka-python; both libraries decode the same bytes. Responses are built and encoded
# by each library and the bytes compared (a cross-check that the two agree on the wire format).


def metadata_request_bytes(v: int) -> bytes:
    cls = request_class(3)
    topics = [cls.MetadataRequestTopic(topic_id=ZERO, name=f"topic-{t:03d}") for t in range(TOPICS)]
    return bytes(cls[v](topics=topics, allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False).encode(version=v))


def kp_metadata_response(v: int) -> Any:
    cls = response_class(3)
    topics = [cls.MetadataResponseTopic(
        error_code=0, name=f"topic-{t:03d}", topic_id=ZERO, is_internal=False, authorized_operations=None,
        partitions=[cls.MetadataResponseTopic.MetadataResponsePartition(
            error_code=0, partition_index=p, leader_id=1, leader_epoch=0, replica_nodes=[1], isr_nodes=[1],
            offline_replicas=[]) for p in range(PARTITIONS)]) for t in range(TOPICS)]
    return cls[v](throttle_time_ms=0, brokers=[cls.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9092,
                                                                          rack=None)],
                  cluster_id="tidelog-cluster-id", controller_id=1, topics=topics)


def kio_metadata_response(v: int) -> Any:
    m = kmod(f"metadata.v{v}.response")
    topics = tuple(m.MetadataResponseTopic(
        error_code=KioErrorCode.none, name=f"topic-{t:03d}", topic_id=ZERO, is_internal=False,
        partitions=tuple(m.MetadataResponsePartition(
            error_code=KioErrorCode.none, partition_index=p, leader_id=1, leader_epoch=0, replica_nodes=(1,),
            isr_nodes=(1,), offline_replicas=()) for p in range(PARTITIONS))) for t in range(TOPICS))
    return m.MetadataResponse(throttle_time=ZERO_MS, brokers=(m.MetadataResponseBroker(
        node_id=1, host="127.0.0.1", port=9092, rack=None),), cluster_id="tidelog-cluster-id", controller_id=1,
        topics=topics)


def offset_commit_request_bytes(v: int) -> bytes:
    cls = request_class(8)
    topics = [cls.OffsetCommitRequestTopic(name=f"topic-{t}", partitions=[
        cls.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=1000 + p, committed_leader_epoch=0, committed_metadata="")
        for p in range(10)]) for t in range(5)]
    return bytes(cls[v](group_id="group-1", generation_id_or_member_epoch=3, member_id="member-" + "x" * 36,
                        group_instance_id=None, topics=topics).encode(version=v))


def kp_offset_commit_response(v: int) -> Any:
    cls = response_class(8)
    return cls[v](throttle_time_ms=0, topics=[cls.OffsetCommitResponseTopic(name=f"topic-{t}", partitions=[
        cls.OffsetCommitResponseTopic.OffsetCommitResponsePartition(partition_index=p, error_code=0)
        for p in range(10)]) for t in range(5)])


def kio_offset_commit_response(v: int) -> Any:
    m = kmod(f"offset_commit.v{v}.response")
    return m.OffsetCommitResponse(throttle_time=ZERO_MS, topics=tuple(m.OffsetCommitResponseTopic(
        name=f"topic-{t}", partitions=tuple(m.OffsetCommitResponsePartition(
            partition_index=p, error_code=KioErrorCode.none) for p in range(10))) for t in range(5)))


def join_group_request_bytes(v: int) -> bytes:
    cls = request_class(11)
    protocols = [cls.JoinGroupRequestProtocol(name=n, metadata=b"\x00\x03" + b"\x00" * 60)
                 for n in ("range", "cooperative-sticky")]
    return bytes(cls[v](group_id="group-1", session_timeout_ms=45000, rebalance_timeout_ms=300000,
                        member_id="", group_instance_id=None, protocol_type="consumer", protocols=protocols,
                        reason=None).encode(version=v))


def kp_join_group_response(v: int) -> Any:
    cls = response_class(11)
    return cls[v](throttle_time_ms=0, error_code=0, generation_id=4, protocol_type="consumer",
                  protocol_name="range", leader="member-0", skip_assignment=False, member_id="member-0",
                  members=[cls.JoinGroupResponseMember(member_id=f"member-{i}", group_instance_id=None,
                                                       metadata=b"\x00\x03" + b"\x00" * 60) for i in range(10)])


def kio_join_group_response(v: int) -> Any:
    m = kmod(f"join_group.v{v}.response")
    return m.JoinGroupResponse(
        throttle_time=ZERO_MS, error_code=KioErrorCode.none, generation_id=4, protocol_type="consumer",
        protocol_name="range", leader="member-0", skip_assignment=False, member_id="member-0",
        members=tuple(m.JoinGroupResponseMember(member_id=f"member-{i}", group_instance_id=None,
                                                metadata=b"\x00\x03" + b"\x00" * 60) for i in range(10)))


API_RANGES = [(k, 0, 5) for k in range(60)]  # ~ApiVersions of a broker serving 60 APIs


def kp_api_versions_response(v: int) -> Any:
    cls = response_class(18)
    return cls[v](error_code=0, api_keys=[cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                                          for k, lo, hi in API_RANGES],
                  throttle_time_ms=0, supported_features=[], finalized_features_epoch=-1, finalized_features=[],
                  zk_migration_ready=False)


def kio_api_versions_response(v: int) -> Any:
    m = kmod(f"api_versions.v{v}.response")
    return m.ApiVersionsResponse(
        error_code=KioErrorCode.none, api_keys=tuple(m.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                                                     for k, lo, hi in API_RANGES),
        throttle_time=ZERO_MS, supported_features=(), finalized_features_epoch=-1, finalized_features=(),
        zk_migration_ready=False)


CONFIGS = [(f"some.topic.config.{i}", str(i * 1000), [(f"some.topic.config.{i}", str(i * 1000), 5)])
           for i in range(40)]


def kp_describe_configs_response(v: int) -> Any:
    cls = response_class(32)
    result_cls = cls.DescribeConfigsResult
    entry_cls = result_cls.DescribeConfigsResourceResult
    syn_cls = entry_cls.DescribeConfigsSynonym
    return cls[v](throttle_time_ms=0, results=[result_cls(
        error_code=0, error_message=None, resource_type=2, resource_name="topic-1", configs=[entry_cls(
            name=n, value=val, read_only=False, config_source=5, is_sensitive=False,
            synonyms=[syn_cls(name=sn, value=sv, source=ss) for sn, sv, ss in syns], config_type=3,
            documentation=None) for n, val, syns in CONFIGS])])


def kio_describe_configs_response(v: int) -> Any:
    m = kmod(f"describe_configs.v{v}.response")
    return m.DescribeConfigsResponse(throttle_time=ZERO_MS, results=(m.DescribeConfigsResult(
        error_code=KioErrorCode.none, error_message=None, resource_type=2, resource_name="topic-1",
        configs=tuple(m.DescribeConfigsResourceResult(
            name=n, value=val, read_only=False, config_source=5, is_sensitive=False,
            synonyms=tuple(m.DescribeConfigsSynonym(name=sn, value=sv, source=ss) for sn, sv, ss in syns),
            config_type=3, documentation=None) for n, val, syns in CONFIGS)),))


def list_offsets_request_bytes(v: int) -> bytes:
    cls = request_class(2)
    topic_cls = cls.ListOffsetsTopic
    return bytes(cls[v](replica_id=-1, isolation_level=1, topics=[topic_cls(name=f"topic-{t}", partitions=[
        topic_cls.ListOffsetsPartition(partition_index=p, current_leader_epoch=0, timestamp=-1)
        for p in range(10)]) for t in range(10)]).encode(version=v))


def kp_list_offsets_response(v: int) -> Any:
    cls = response_class(2)
    topic_cls = cls.ListOffsetsTopicResponse
    return cls[v](throttle_time_ms=0, topics=[topic_cls(name=f"topic-{t}", partitions=[
        topic_cls.ListOffsetsPartitionResponse(partition_index=p, error_code=0, timestamp=-1, offset=123456,
                                               leader_epoch=0) for p in range(10)]) for t in range(10)])


def kio_list_offsets_response(v: int) -> Any:
    m = kmod(f"list_offsets.v{v}.response")
    return m.ListOffsetsResponse(throttle_time=ZERO_MS, topics=tuple(m.ListOffsetsTopicResponse(
        name=f"topic-{t}", partitions=tuple(m.ListOffsetsPartitionResponse(
            partition_index=p, error_code=KioErrorCode.none, timestamp=-1, offset=123456, leader_epoch=0)
            for p in range(10))) for t in range(10)))


def api_versions_request_bytes(v: int) -> bytes:
    cls = request_class(18)
    return bytes(cls[v](client_software_name="apache-kafka-java", client_software_version="3.9.1").encode(version=v))


# (label, api key, kio module name, version, request-bytes maker)
REQUESTS: list[tuple[str, int, str, int, Callable[[int], bytes]]] = [
    ("Metadata req v12 (100 topics)", 3, "metadata", 12, metadata_request_bytes),
    ("OffsetCommit req v9 (50 parts)", 8, "offset_commit", 9, offset_commit_request_bytes),
    ("JoinGroup req v9", 11, "join_group", 9, join_group_request_bytes),
    ("ListOffsets req v7 (100 parts)", 2, "list_offsets", 7, list_offsets_request_bytes),
    ("ApiVersions req v4", 18, "api_versions", 4, api_versions_request_bytes),
]
# (label, version, kafka-python builder, kio builder)
RESPONSES: list[tuple[str, int, Callable[[int], Any], Callable[[int], Any]]] = [
    ("Metadata resp v12 (100x10)", 12, kp_metadata_response, kio_metadata_response),
    ("OffsetCommit resp v9 (50)", 9, kp_offset_commit_response, kio_offset_commit_response),
    ("JoinGroup resp v9 (10 mbrs)", 9, kp_join_group_response, kio_join_group_response),
    ("ApiVersions resp v4 (60)", 4, kp_api_versions_response, kio_api_versions_response),
    ("DescribeConfigs resp v4 (40)", 4, kp_describe_configs_response, kio_describe_configs_response),
    ("ListOffsets resp v7 (100)", 7, kp_list_offsets_response, kio_list_offsets_response),
]
ZERO_MS: Any = None  # kio's i32Timedelta(0), set in main() when kio is present


def best_us(fn: Callable[[], object], budget_s: float) -> float:
    """Best-of-5 microseconds per call, with the loop count sized so one repeat takes ~budget_s/5."""
    timer = timeit.Timer(fn)
    one = min(timer.repeat(repeat=3, number=1))
    number = max(1, int((budget_s / 5) / max(one, 1e-7)))
    return min(timer.repeat(repeat=5, number=number)) / number * 1e6


def fmt(x: float | None) -> str:
    return "-" if x is None else (f"{x:9.1f}" if x < 1000 else f"{x:9.0f}")


def bench_codecs(budget_s: float) -> None:
    print("\n== decode of request bodies (µs/op, best of 5) ==")
    print(f"{'case':34} {'bytes':>6} {'kafka-py':>9} {'kio':>9} {'ratio':>6}")
    for label, key, name, v, make in REQUESTS:
        data = make(v)
        kp_cls = request_class(key)[v]
        kp_us = best_us(lambda c=kp_cls, d=data, v=v: c.decode(d, version=v), budget_s)
        kio_us = None
        if HAVE_KIO:
            decode = kio_decode(kmod(f"{name}.v{v}.request").__dict__[_kio_request_name(key)])
            decode(data)  # warm the reader cache
            kio_us = best_us(lambda f=decode, d=data: f(d), budget_s)
        ratio = f"{kp_us / kio_us:5.1f}x" if kio_us else ""
        print(f"{label:34} {len(data):6d} {fmt(kp_us)} {fmt(kio_us)} {ratio:>6}")

    print("\n== response: build objects + encode / encode alone (µs/op, best of 5) ==")
    print(f"{'case':30} {'bytes':>6} {'kp build+enc':>12} {'kio build+enc':>13} {'kp enc':>9} {'kio enc':>9}"
          f" {'same bytes':>10}")
    for label, v, kp_build, kio_build in RESPONSES:
        kp_obj = kp_build(v)
        kp_bytes = bytes(kp_obj.encode(version=v))
        kp_full = best_us(lambda b=kp_build, v=v: b(v).encode(version=v), budget_s)
        kp_enc = best_us(lambda o=kp_obj, v=v: o.encode(version=v), budget_s)
        kio_full = kio_enc = None
        same = "n/a"
        if HAVE_KIO:
            kio_obj = kio_build(v)
            same = "yes" if kio_encode(kio_obj) == kp_bytes else "NO"
            kio_full = best_us(lambda b=kio_build, v=v: kio_encode(b(v)), budget_s)
            kio_enc = best_us(lambda o=kio_obj: kio_encode(o), budget_s)
        print(f"{label:30} {len(kp_bytes):6d} {fmt(kp_full):>12} {fmt(kio_full):>13} {fmt(kp_enc)} {fmt(kio_enc)}"
              f" {same:>10}")


def _kio_request_name(key: int) -> str:
    return {3: "MetadataRequest", 8: "OffsetCommitRequest", 11: "JoinGroupRequest", 2: "ListOffsetsRequest",
            18: "ApiVersionsRequest"}[key]


# ---------------------------------------------------------------- import time

KP_IMPORT = (
    "import sys; sys.path.insert(0, {root!r}); import time; t=time.perf_counter();"
    "from tidelog.protocol import messages as m; [m.request_class(k) for k in m._MESSAGES];"
    "print(time.perf_counter()-t)"
)
# kio: the serial layer, plus every request+response module of every version of the same APIs (a broker
# that validates its registry at start imports them all; a lazy one pays per version on first use).
KIO_CORE = "import time; t=time.perf_counter(); import kio.serial, kio.index; print(time.perf_counter()-t)"
# kio's phantom types import hypothesis when it is importable (to register strategies): a production install
# has no hypothesis, tidelog's test extra does. NO_HYP hides it.
NO_HYP = "import sys; sys.modules['hypothesis'] = None; "
KIO_ALL = (
    "import time; t=time.perf_counter(); import kio.serial; from kio.index import load_payload_module as L;"
    "from kio.schema.index import api_key_map as A, schema_name_map as S; from kio.static.constants import "
    "EntityType as E; keys={keys!r};"
    "[L(k, v, e) for k in keys for v in S[A[k]] for e in (E.request, E.response)];"
    "print(time.perf_counter()-t)"
)
BASELINE = "import time; t=time.perf_counter(); import io, uuid, dataclasses, enum; print(time.perf_counter()-t)"


def import_seconds(code: str, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        best = min(best, float(out.stdout.strip().splitlines()[-1]))
    return best


def bench_imports(runs: int) -> None:
    print(f"\n== import time in a fresh interpreter (ms, best of {runs}) ==")
    keys = sorted(_MESSAGES)
    rows = [(f"kafka-python: kafka.protocol for tidelog's {len(keys)} API keys (lazy pkg)",
             KP_IMPORT.format(root=ROOT))]
    if HAVE_KIO:
        nver = _kio_version_count(keys)
        rows += [("kio: kio.serial + kio.index, hypothesis importable (test venv)", KIO_CORE),
                 ("kio: kio.serial + kio.index, no hypothesis (production)", NO_HYP + KIO_CORE),
                 (f"kio: + all {nver} versions of the same APIs (req+resp), no hypothesis",
                  NO_HYP + KIO_ALL.format(keys=keys))]
    for label, code in rows:
        print(f"  {label:66} {import_seconds(code, runs) * 1000:7.1f}")


def _kio_version_count(keys: list[int]) -> int:
    from kio.schema.index import api_key_map, schema_name_map

    return sum(len(schema_name_map[api_key_map[k]]) for k in keys)


# ---------------------------------------------------------------- behaviour on awkward input


def unknown_tag_request(v: int) -> bytes:
    """ApiVersions v3+ body with an unknown tagged field (tag 42) appended to the top-level tag buffer."""
    body = bytearray(api_versions_request_bytes(v))
    assert body[-1] == 0
    body[-1:] = b"\x01" + bytes([42, 3]) + b"abc"  # 1 tag: tag=42 len=3 "abc"
    return bytes(body)


def nested_unknown_tag(meta: bytes) -> bytes:
    """Metadata v12 request with tag 42 added to the first topic's tag buffer (array len, uuid, name, tags)."""
    pos = 1 + 16 + 1 + len("topic-000")
    assert meta[pos] == 0
    return meta[:pos] + b"\x01\x2a\x01\x00" + meta[pos + 1:]


def null_group_id() -> bytes:
    """JoinGroup v9 body whose first field, the non-nullable compact string group_id, is null (length 0)."""
    body = join_group_request_bytes(9)
    assert body[:8] == b"\x08group-1"
    return b"\x00" + body[8:]


def fitness() -> None:
    print("\n== behaviour on input tidelog must survive ==")
    meta = metadata_request_bytes(12)
    null_topics = bytes(request_class(3)[12](topics=None, allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False).encode(version=12))
    cases: list[tuple[str, int, str, int, bytes]] = [
        ("truncated Metadata v12 body", 3, "metadata", 12, meta[:-7]),
        ("Metadata v12, trailing garbage", 3, "metadata", 12, meta + b"\x00\x01"),
        ("Metadata v12, topics = null array", 3, "metadata", 12, null_topics),
        ("ApiVersions v4, unknown tag 42", 18, "api_versions", 4, unknown_tag_request(4)),
        ("Metadata v12, unknown tag 42 in a topic entry", 3, "metadata", 12, nested_unknown_tag(meta)),
        ("JoinGroup v9, group_id (not nullable) = null", 11, "join_group", 9, null_group_id()),
        ("empty body for JoinGroup v9", 11, "join_group", 9, b""),
    ]
    for label, key, name, v, data in cases:
        print(f"  {label}")
        try:
            r = request_class(key)[v].decode(data, version=v)
            print(f"    kafka-python: ok -> {_short(r)}")
        except Exception as exc:  # noqa: BLE001 - reporting what each library raises is the point
            print(f"    kafka-python: {type(exc).__module__}.{type(exc).__name__}: {exc}")
        if HAVE_KIO:
            cls = kmod(f"{name}.v{v}.request").__dict__[_kio_request_name(key)]
            try:
                obj, size = entity_reader(cls)(data, 0)
                extra = f" (consumed {size} of {len(data)} bytes)"
                print(f"    kio:          ok -> {_short(obj)}{extra}")
            except Exception as exc:  # noqa: BLE001
                print(f"    kio:          {type(exc).__module__}.{type(exc).__name__}: {exc}")
    if HAVE_KIO:
        try:
            entity_reader(kmod("metadata.v12.request").MetadataRequest)(bytearray(meta), 0)
            print("  kio reading a bytearray/writable memoryview: ok")
        except Exception as exc:  # noqa: BLE001
            print(f"  kio reading a bytearray (tidelog's frame buffer): {type(exc).__name__}: {exc}")
        t0 = timeit.timeit(lambda: (i32(5), i32Timedelta.parse(__import__("datetime").timedelta(0))), number=20000)
        print(f"  kio typed wrappers i32(x) + i32Timedelta.parse(td): {t0 / 20000 * 1e6:.2f} µs per pair")


def _short(obj: object) -> str:
    text = repr(obj)
    return text if len(text) < 90 else text[:87] + "..."


def main() -> None:
    global ZERO_MS
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter timing loops")
    args = parser.parse_args()
    budget = 0.08 if args.quick else 0.25
    import kafka.protocol  # noqa: F401 - resolved lazily by tidelog.protocol.messages

    print(f"python {sys.version.split()[0]}; kafka-python {_version('kafka-python')}; "
          f"kio {_version('kio') if HAVE_KIO else 'NOT INSTALLED'}")
    if not HAVE_KIO:
        print("kio is not installed (pip install kio): kio columns are skipped, kafka-python alone is measured.")
    else:
        import datetime

        ZERO_MS = i32Timedelta.parse(datetime.timedelta(0))
    bench_imports(3 if args.quick else 5)
    bench_codecs(budget)
    fitness()


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    main()
