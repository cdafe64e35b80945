"""Apache Kafka's broker ApiVersions answer by release, as {api key: (min, max)}: the reference docs/APIS.md and the
parity tests compare tidelog's API_TABLE with.

- `KAFKA_43`: kafka-python 3.0.12's record of Kafka 4.3's answer (`kafka.protocol.broker_version_data`).
- `KAFKA_44`: written out here, since kafka-python 3.0.12 stops at 4.3. Kafka 4.4's message JSON
  (clients/src/main/resources/common/message/*Request.json, `validVersions` with `latestVersionUnstable` unset or
  false) could not be read whole at the release: the apache/kafka snapshot reachable here is trunk of 2024-10
  (4.0.0-SNAPSHOT) and no kafka-clients 4.4.0 jar is reachable. So `KAFKA_44` is Kafka 4.3's answer plus the
  version changes in the message JSON between the tags 4.3.1 and 4.4.0-rc4 (1156b2752a, 2026-10-06), listed in
  `KAFKA_44_CHANGES` with what each rests on. Where the JSON was read (apache/kafka files at the commits named
  there, which carry these KIPs' changes, or a copy named there; their dates could not be checked here), its
  `validVersions` is quoted; each also appears in the 4.3.1...4.4.0-rc4 commit log as a third party recorded it.
  Replace this table with one read from the 4.4.0 message JSON (or a kafka-python release that records 4.4) when
  either can be had.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

KAFKA_43: Mapping[int, tuple[int, int]] = MappingProxyType(dict(BROKER_API_VERSIONS[(4, 3)]))

# Kafka 4.4.0's broker ApiVersions answer (a broker with the default finalized features, as KAFKA_43's record).
KAFKA_44: Mapping[int, tuple[int, int]] = MappingProxyType({
    0: (0, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 8: (2, 10), 9: (1, 10), 10: (0, 6), 11: (0, 9), 12: (0, 4),
    13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 5), 19: (2, 7), 20: (1, 6), 21: (0, 2),
    22: (0, 5), 23: (2, 4), 24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 2), 28: (0, 6), 29: (1, 3), 30: (1, 3),
    31: (1, 3), 32: (1, 4), 33: (0, 2), 34: (1, 2), 35: (1, 5), 36: (0, 2), 37: (0, 3), 38: (1, 3), 39: (1, 2),
    40: (1, 2), 41: (1, 3), 42: (0, 3), 43: (0, 2), 44: (0, 1), 45: (0, 1), 46: (0, 0), 47: (0, 0), 48: (0, 1),
    49: (0, 1), 50: (0, 0), 51: (0, 0), 55: (0, 2), 57: (0, 2), 60: (0, 2), 61: (0, 0), 64: (0, 0), 65: (0, 0),
    66: (0, 2), 68: (0, 1), 69: (0, 1), 74: (0, 1), 75: (0, 0), 76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2),
    80: (0, 1), 81: (0, 0), 83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1), 88: (0, 1), 89: (0, 1),
    90: (0, 1), 91: (0, 0), 92: (0, 0), 93: (0, 0), 94: (0, 0),
})

# Every key whose range moved from Kafka 4.3 to 4.4, and the source of its 4.4 range.
KAFKA_44_CHANGES: Mapping[int, str] = MappingProxyType({
    18: "ApiVersions v5, KIP-1242 (ClusterId/NodeId, REBOOTSTRAP_REQUIRED): KAFKA-20246 parts 1-3 in 4.4.0-rc4, "
        "part 3 (apache/kafka PR #22512) marking v5 stable; validVersions 0-5 and the v5 fields in "
        "krabka-io/krabka-protocol's copy of ApiVersionsRequest.json (02746b4, a third party's edit), matching "
        "Kafka's ApiVersionsRequestTest (v5 = HIGHEST_SUPPORTED_VERSION) and franz-go PR #1446's 4.4.0-rc1 "
        "capture; no apache/kafka copy of the 4.4 JSON was read",
    28: "TxnOffsetCommit v6, KIP-1319 (topic IDs): KAFKA-20444 '[12/12] Mark TxnOffsetCommit v6 as stable' "
        "(b9945c8e84, apache/kafka PR #22523) in 4.4.0-rc4; TxnOffsetCommitRequest.json and "
        "TxnOffsetCommitResponse.json @ dajac/kafka 35bebdfb3c (the KIP-1319 author's branch), validVersions 0-6",
    42: "DeleteGroups v3, KIP-1331 (per-group ErrorMessage): DeleteGroupsResponse.json @3ef07f0e9a, "
        "validVersions 0-3",
    88: "StreamsGroupHeartbeat v1, KIP-1331: StreamsGroupHeartbeatRequest.json @09ed70433d, validVersions 0-1, "
        "latestVersionUnstable false",
    89: "StreamsGroupDescribe v1, KIP-1331: StreamsGroupDescribeRequest.json @07a283acad, validVersions 0-1; the "
        "response's v1 fields (TopologyDescription nullable, TopologyDescriptionStatus int8 default 0, both "
        "untagged at 1+, then AssignorName) from StreamsGroupDescribeResponse.json's diff in apache/kafka PR "
        "#22920 and Kafka's streams cross-version system test (v0 has no AssignorName); AssignorName's "
        "nullability was not read",
    93: "StreamsGroupTopologyDescriptionUpdate, new key, KIP-1331: "
        "StreamsGroupTopologyDescriptionUpdateRequest.json @ece569d071, validVersions 0",
    94: "UnregisterController, new key (KAFKA-20395, in 4.4.0-rc4): UnregisterControllerRequest.json @ae0443b5e3, "
        "validVersions 0, listeners broker and controller (a broker forwards it, as UnregisterBroker)",
})
