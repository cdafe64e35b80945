"""The console's JSON API against a real broker, with real clients writing and reading beside it."""

from __future__ import annotations

import json
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from tests.console.conftest import Api, wait_until


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]],
            partition: int = 0, **kwargs: object) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        return [producer.send(topic, key=k, value=v, headers=h, partition=partition, **kwargs).get(30).offset
                for k, v, h in records]
    finally:
        producer.close(30)


def test_topics_list_and_detail(api: Api) -> None:
    api.broker.create_topic("orders-api", {"partitions": 2, "configs": {"cleanup.policy": "compact"}})
    produce(api.broker.bootstrap, "orders-api", [(b"k%d" % i, b"v", []) for i in range(3)], partition=1)
    row = next(t for t in api.get("/api/topics") if t["name"] == "orders-api")
    assert (row["partitions"], row["records"], row["cleanup.policy"]) == (2, 3, "compact")
    assert row["size_bytes"] > 0 and row["retention.ms"] == "604800000"

    topic = api.get("/api/topics/orders-api")
    assert [(p["partition"], p["log_start_offset"], p["high_watermark"], p["last_stable_offset"])
            for p in topic["partitions"]] == [(0, 0, 0, 0), (1, 0, 3, 3)]
    segments = topic["partitions"][1]["segments"]
    assert len(segments) == 1 and segments[0]["active"] and segments[0]["base_offset"] == 0
    assert segments[0]["size_bytes"] > 0 and segments[0]["age_ms"] >= 0
    configs = {c["name"]: c for c in topic["configs"]}
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["cleanup.policy"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["segment.bytes"]["source"] == "DEFAULT_CONFIG"
    assert api.call("GET", "/api/topics/no-such-topic", token=False)[0] == 404


def test_records_by_offset_timestamp_end_and_filters(api: Api) -> None:
    api.broker.create_topic("browse-api", {"partitions": 1})
    base_ts = int(time.time() * 1000) - 60_000
    records = [(f"user-{i}".encode(), json.dumps({"n": i}).encode(), [("trace", f"t-{i}".encode())])
               for i in range(30)]
    producer = KafkaProducer(bootstrap_servers=api.broker.bootstrap, acks="all", linger_ms=0)
    try:
        for i, (k, v, h) in enumerate(records):
            producer.send("browse-api", key=k, value=v, headers=h, partition=0, timestamp_ms=base_ts + i * 1000)
        producer.send("browse-api", key=None, value=bytes(range(250, 256)), partition=0,
                      timestamp_ms=base_ts + 30_000)
        producer.send("browse-api", key=b"big", value=b"x" * 5000, partition=0, timestamp_ms=base_ts + 31_000)
        producer.flush(30)
    finally:
        producer.close(30)

    page = api.get("/api/topics/browse-api/records?partition=0&offset=beginning&limit=5")
    assert [r["offset"] for r in page["records"]] == [0, 1, 2, 3, 4] and page["next_offset"] == 5
    first = page["records"][0]
    assert first["key"] == {"format": "text", "text": "user-0", "size": 6, "truncated": False}
    assert first["value"]["format"] == "json" and json.loads(first["value"]["text"]) == {"n": 0}
    assert first["headers"] == [{"key": "trace", "value": {"format": "text", "text": "t-0", "size": 3,
                                                            "truncated": False}}]
    assert [r["offset"] for r in api.get("/api/topics/browse-api/records?offset=10&limit=2")["records"]] == [10, 11]
    at = api.get(f"/api/topics/browse-api/records?timestamp={base_ts + 20_500}&limit=1")["records"]
    assert [r["offset"] for r in at] == [21]
    end = api.get("/api/topics/browse-api/records?offset=end&limit=2")
    assert [r["offset"] for r in end["records"]] == [30, 31] and end["end_reached"]
    binary, big = end["records"]
    assert binary["key"] is None and binary["value"] == {"format": "hex", "text": "fafbfcfdfeff", "size": 6,
                                                         "truncated": False}
    assert big["value"]["truncated"] and len(big["value"]["text"]) < 5000 and big["value"]["size"] == 5000
    whole = api.get("/api/topics/browse-api/records?offset=31&limit=1&full=1")["records"][0]
    assert whole["value"]["text"] == "x" * 5000 and not whole["value"]["truncated"]

    by_key = api.get("/api/topics/browse-api/records?key=user-1&limit=50")["records"]
    assert [r["offset"] for r in by_key] == [1] + list(range(10, 20))
    by_header = api.get("/api/topics/browse-api/records?header=trace=t-27")["records"]
    assert [r["offset"] for r in by_header] == [27]
    by_value = api.get("/api/topics/browse-api/records?value=%22n%22%3A%203")["records"]
    assert [r["offset"] for r in by_value] == [3]
    assert api.call("GET", "/api/topics/browse-api/records?offset=abc", token=False)[0] == 400
    assert api.call("GET", "/api/topics/browse-api/records?partition=7", token=False)[0] == 404


def test_writes_create_produce_alter_delete(api: Api) -> None:
    status, body = api.call("POST", "/api/topics", {"name": "made-api", "partitions": 2,
                                                    "configs": {"retention.ms": "3600000"}})
    assert status == 201, body
    assert api.call("POST", "/api/topics", {"name": "made-api", "partitions": 1})[0] == 409
    status, body = api.call("POST", "/api/topics/made-api/records",
                            {"partition": 1, "key": "k", "value": "hello", "headers": {"h": "v"}})
    assert status == 201 and body["partition"] == 1 and body["offset"] == 0
    consumer = KafkaConsumer(bootstrap_servers=api.broker.bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition("made-api", 1)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got = wait_until(lambda: consumer.poll(timeout_ms=500).get(tp), what="the produced record")
    finally:
        consumer.close()
    assert (got[0].key, got[0].value, list(got[0].headers)) == (b"k", b"hello", [("h", b"v")])

    status, body = api.call("PUT", "/api/topics/made-api/configs", {"configs": {"retention.ms": "7200000",
                                                                               "segment.ms": "600000"}})
    assert status == 200, body
    admin = KafkaAdminClient(bootstrap_servers=api.broker.bootstrap)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "made-api")],
                                           config_filter="all")
        configs = next(iter(next(iter(described.values())).values()))
        assert configs["retention.ms"]["value"] == "7200000" and configs["segment.ms"]["value"] == "600000"
        assert api.call("PUT", "/api/topics/made-api/configs", {"configs": {"segment.ms": None}})[0] == 200
        assert api.call("PUT", "/api/topics/made-api/configs", {"configs": {"no.such.config": "1"}})[0] == 400
        status, body = api.call("DELETE", "/api/topics/made-api")
        assert status == 200, body
        assert "made-api" not in admin.list_topics()
    finally:
        admin.close()


def test_writes_need_the_csrf_token(api: Api) -> None:
    assert api.call("POST", "/api/topics", {"name": "forged"}, token=False)[0] == 403
    assert api.call("POST", "/api/topics", {"name": "forged"}, token="wrong")[0] == 403
    status, body = api.call("POST", "/api/topics", {"name": "forged"},
                            headers={"Origin": "http://evil.example"})
    assert status == 403 and "cross-origin" in body["error"]
    assert "forged" not in [t["name"] for t in api.get("/api/topics")]


def test_group_lag_and_reset_only_when_empty(api: Api) -> None:
    api.broker.create_topic("lagged-api", {"partitions": 1})
    produce(api.broker.bootstrap, "lagged-api", [(None, b"v%d" % i, []) for i in range(10)])
    consumer = KafkaConsumer("lagged-api", bootstrap_servers=api.broker.bootstrap, group_id="api-group",
                             enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        records: list[object] = []
        wait_until(lambda: records.extend(sum(consumer.poll(timeout_ms=500, max_records=4).values(), []))
                   or len(records) >= 4, what="four records")
        from kafka.structs import OffsetAndMetadata

        consumer.commit({TopicPartition("lagged-api", 0): OffsetAndMetadata(4, "", -1)})
        group = api.get("/api/groups/api-group")
        assert group["offsets"] == [{"topic": "lagged-api", "partition": 0, "committed_offset": 4,
                                     "log_end_offset": 10, "lag": 6}]
        assert group["lag"] == 6 and group["lag_per_topic"] == {"lagged-api": 6}
        assert group["state"] == "Stable" and len(group["members"]) == 1
        assert group["members"][0]["assignment"] == [{"topic": "lagged-api", "partitions": [0]}]
        assert "api-group" in [g["group_id"] for g in api.get("/api/groups")]
        status, body = api.call("POST", "/api/groups/api-group/reset-offsets", {"topic": "lagged-api",
                                                                                "to": "earliest"})
        assert status == 409, body
    finally:
        consumer.close()
    wait_until(lambda: not api.get("/api/groups/api-group")["members"], what="the group to empty")
    status, body = api.call("POST", "/api/groups/api-group/reset-offsets", {"topic": "lagged-api", "to": "latest"})
    assert status == 200, body
    assert api.get("/api/groups/api-group")["lag"] == 0
    status, body = api.call("POST", "/api/groups/api-group/reset-offsets",
                            {"topic": "lagged-api", "to": "offset", "value": 2})
    assert status == 200 and api.get("/api/groups/api-group")["offsets"][0]["committed_offset"] == 2


def test_read_only_refuses_every_write_with_403(readonly_api: Api) -> None:
    session = readonly_api.get("/api/session")
    assert session["read_only"] is True
    for method, path, body in [("POST", "/api/topics", {"name": "nope"}), ("DELETE", "/api/topics/shown", None),
                               ("POST", "/api/topics/shown/records", {"value": "x"}),
                               ("PUT", "/api/topics/shown/configs", {"configs": {"retention.ms": "1"}}),
                               ("POST", "/api/topics/shown/configs", {"configs": {"retention.ms": "1"}}),
                               ("POST", "/api/groups/g/reset-offsets", {"topic": "shown", "to": "earliest"})]:
        status, answer = readonly_api.call(method, path, body)
        assert status == 403 and "read-only" in answer["error"], (method, path, status, answer)
    assert [t["name"] for t in readonly_api.get("/api/topics")] == ["shown"]
    assert readonly_api.get("/api/topics/shown")["partitions"][0]["high_watermark"] == 0


def test_metrics_and_cleaner_routes_still_served(api: Api) -> None:
    assert "tidelog_requests_total" in api.text("/metrics")
    assert isinstance(api.get("/api/cleaner"), list)
    assert api.call("GET", "/api/nothing-here", token=False)[0] == 404


def test_kip848_group_lag_and_state(api: Api) -> None:
    """A KIP-848 (group.protocol=consumer) group from confluent-kafka: its state comes from ListGroups, its lag
    from its committed offsets; a reset is refused while it is Stable."""
    from confluent_kafka import Consumer

    api.broker.create_topic("kip848-api", {"partitions": 1})
    produce(api.broker.bootstrap, "kip848-api", [(None, b"v%d" % i, []) for i in range(5)])
    consumer = Consumer({"bootstrap.servers": api.broker.bootstrap, "group.id": "api-848",
                         "group.protocol": "consumer", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "client.id": "console-848"})
    try:
        consumer.subscribe(["kip848-api"])
        seen: list[object] = []
        wait_until(lambda: seen.append(consumer.poll(0.5)) or sum(
            1 for m in seen if m is not None and not m.error()) >= 2, what="two records")
        last = [m for m in seen if m is not None and not m.error()][1]
        consumer.commit(message=last, asynchronous=False)
        group = api.get("/api/groups/api-848")
        assert (group["type"], group["state"]) == ("consumer", "Stable")
        assert group["offsets"] == [{"topic": "kip848-api", "partition": 0, "committed_offset": 2,
                                     "log_end_offset": 5, "lag": 3}]
        # its member, from ConsumerGroupDescribe (KIP-848), with the partition the broker assigned it
        [member] = group["members"]
        assert (member["member_id"], member["client_id"]) == (consumer.memberid(), "console-848")
        assert member["assignment"] == [{"topic": "kip848-api", "partitions": [0]}]
        assert consumer.memberid() in api.text("/groups/api-848")
        status, body = api.call("POST", "/api/groups/api-848/reset-offsets", {"topic": "kip848-api",
                                                                              "to": "earliest"})
        assert status == 409 and "Stable" in body["error"]
    finally:
        consumer.close()


def test_share_group_members(api: Api) -> None:
    """A KIP-932 share group's member (confluent-kafka's ShareConsumer) is listed from ShareGroupDescribe."""
    from confluent_kafka import ShareConsumer

    api.broker.create_topic("share-api", {"partitions": 1})
    produce(api.broker.bootstrap, "share-api", [(None, b"v", [])])
    consumer = ShareConsumer({"bootstrap.servers": api.broker.bootstrap, "group.id": "api-share",
                              "client.id": "console-share", "log_level": 0})
    try:
        consumer.subscribe(["share-api"])

        def members() -> list[dict[str, object]]:
            consumer.poll(timeout=0.3)
            groups = {g["group_id"]: g for g in api.get("/api/groups")}
            if "api-share" not in groups:
                return []
            found: list[dict[str, object]] = api.get("/api/groups/api-share")["members"]
            return found if found and found[0]["assignment"] else []

        [member] = wait_until(members, what="the share group's member with its assignment")
        group = api.get("/api/groups/api-share")
        assert (group["type"], group["state"]) == ("share", "Stable")
        assert member["client_id"] == "console-share" and member["member_id"]
        assert member["assignment"] == [{"topic": "share-api", "partitions": [0]}]
        assert str(member["member_id"]) in api.text("/groups/api-share")
    finally:
        consumer.close()


def test_quotas_view(api: Api) -> None:
    """Quotas set with AlterClientQuotas (user, client-id and a default) show in /api/quotas and on /quotas."""
    from tidelog.testing import KafkaWire

    with KafkaWire(api.broker.bootstrap) as wire:
        wire.alter_client_quota("user", "quota-alice", "producer_byte_rate", 1048576.0)
        wire.alter_client_quota("client-id", "quota-app", "consumer_byte_rate", 2097152.0)
        wire.alter_client_quota("ip", None, "connection_creation_rate", 1000.0)  # type: ignore[arg-type]
        try:
            quotas = api.get("/api/quotas")
            assert {"entity": {"user": "quota-alice"}, "values": {"producer_byte_rate": 1048576.0}} in quotas
            assert {"entity": {"client-id": "quota-app"}, "values": {"consumer_byte_rate": 2097152.0}} in quotas
            assert {"entity": {"ip": "<default>"}, "values": {"connection_creation_rate": 1000.0}} in quotas
            page = api.text("/quotas")
            assert "quota-alice" in page and "producer_byte_rate=1048576.0" in page
            assert "<td>&lt;default&gt;</td><td>connection_creation_rate=1000.0" in page
        finally:
            wire.alter_client_quota("user", "quota-alice", "producer_byte_rate", None)
            wire.alter_client_quota("client-id", "quota-app", "consumer_byte_rate", None)
            wire.alter_client_quota("ip", None, "connection_creation_rate", None)  # type: ignore[arg-type]
    assert not [q for q in api.get("/api/quotas") if "quota-alice" in q["entity"].values()]


def test_transactions_and_producers(api: Api) -> None:
    from confluent_kafka import Producer

    api.broker.create_topic("txn-api", {"partitions": 1})
    producer = Producer({"bootstrap.servers": api.broker.bootstrap, "transactional.id": "console-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("txn-api", key=b"k", value=b"v", partition=0)
    assert producer.flush(30) == 0
    txn = next(t for t in api.get("/api/transactions") if t["transactional_id"] == "console-txn")
    assert txn["state"] == "Ongoing" and txn["partitions"] == ["txn-api-0"] and txn["producer_id"] >= 0
    [active] = api.get("/api/topics/txn-api/producers")
    assert (active["producer_id"], active["current_transaction_start_offset"]) == (txn["producer_id"], 0)
    assert api.get("/api/topics/txn-api")["partitions"][0]["last_stable_offset"] == 0
    producer.commit_transaction(30)
    wait_until(lambda: next(t for t in api.get("/api/transactions")
                            if t["transactional_id"] == "console-txn")["state"] != "Ongoing", 30, "the commit")
    assert api.get("/api/topics/txn-api")["partitions"][0]["last_stable_offset"] == 2  # record + marker
