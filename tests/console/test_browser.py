"""The console's pages in headless Chromium (Playwright), against a real broker and real clients. Each test
waits on a condition it can see (a table cell, a URL), never on a fixed sleep; screenshots of every page go to
tmp/artifacts/console."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType

from tests.console.conftest import Api, screenshot, wait_until
from tidelog.storage import TopicPartition as LogPartition

pytestmark = pytest.mark.timeout(120)


def reload_until(page: Any, selector: str, text: str, timeout_s: float = 60.0) -> None:
    """Reload the page until `selector`'s text is `text` (server-rendered pages show a snapshot)."""
    def shown() -> bool:
        page.reload()
        cells = page.locator(selector)
        return cells.count() > 0 and cells.first.inner_text().strip() == text

    wait_until(shown, timeout_s, f"{selector} showing {text!r}")


def test_topic_created_in_the_console_receives_confluent_records(api: Api, page: Any) -> None:
    page.goto(api.base + "/topics")
    page.fill("#create-topic input[name=name]", "from-console")
    page.fill("#create-topic input[name=partitions]", "2")
    page.fill("#create-topic textarea[name=configs]", "retention.ms=3600000")
    page.click("#create-topic button[type=submit]")
    page.wait_for_url("**/topics/from-console")
    assert page.locator("#partitions > tbody > tr").count() == 3  # header + 2 partitions
    screenshot(page, "topic")

    producer = Producer({"bootstrap.servers": api.broker.bootstrap, "linger.ms": 0})
    for i in range(3):
        producer.produce("from-console", key=f"c-{i}", value=f'{{"order": {i}}}', partition=1,
                         headers=[("source", b"confluent")])
    assert producer.flush(30) == 0

    page.goto(api.base + "/topics/from-console/messages?partition=1&offset=beginning")
    rows = page.locator("#records tr[data-offset]")
    assert rows.count() == 3
    assert rows.nth(2).locator("td.key").inner_text().strip() == "c-2"
    assert '"order": 2' in rows.nth(2).locator("td.value").inner_text()
    assert " ".join(rows.nth(0).locator("td.headers").inner_text().split()) == "source: confluent"
    screenshot(page, "messages")

    page.fill("#produce input[name=key]", "from-form")
    page.fill("#produce textarea[name=headers]", "origin=browser")
    page.fill("#produce textarea[name=value]", "typed in the console")
    page.click("#produce button[type=submit]")
    page.wait_for_selector("#result.ok")
    assert '"offset":3' in page.locator("#result").inner_text()
    page.goto(api.base + "/topics/from-console/messages?partition=1&offset=3&header=origin%3Dbrowser")
    row = page.locator('#records tr[data-offset="3"]')
    assert row.locator("td.key").inner_text().strip() == "from-form"
    assert row.locator("td.value").inner_text().strip() == "typed in the console"
    page.goto(api.base + "/topics")
    row = page.locator('#topics tr[data-topic="from-console"] td')
    assert [row.nth(i).inner_text() for i in (1, 2)] == ["2", "4"]  # 3 from confluent-kafka, 1 from the form
    assert row.nth(5).inner_text() == "3600000"
    screenshot(page, "topics")


def test_message_found_by_key_substring_and_by_header(api: Api, page: Any) -> None:
    api.broker.create_topic("searched", {"partitions": 1})
    producer = KafkaProducer(bootstrap_servers=api.broker.bootstrap, acks="all", linger_ms=0)
    try:
        for i in range(40):
            producer.send("searched", key=f"customer-{i:03d}".encode(), value=b"x" * (3000 if i == 17 else 10),
                          headers=[("trace", f"span-{i}".encode())], partition=0)
        producer.flush(30)
    finally:
        producer.close(30)

    page.goto(api.base + "/topics/searched/messages")
    page.fill("#browse input[name=key]", "er-01")
    page.click("#browse button[type=submit]")
    page.wait_for_url("**key=er-01**")
    offsets = page.locator("#records tr[data-offset]")
    assert [offsets.nth(i).get_attribute("data-offset") for i in range(offsets.count())] == [
        str(i) for i in range(10, 20)]
    big = page.locator('#records tr[data-offset="17"]')
    assert "3000 bytes" in big.locator(".truncated").inner_text()
    big.locator("a.whole").click()
    page.wait_for_url("**full=1**")
    assert page.locator('#records tr[data-offset="17"] td.value pre').inner_text() == "x" * 3000
    screenshot(page, "messages-whole-value")

    page.goto(api.base + "/topics/searched/messages?header=trace%3Dspan-33")
    assert [page.locator("#records tr[data-offset]").nth(0).get_attribute("data-offset")] == ["33"]
    assert page.locator("#records tr[data-offset]").count() == 1
    screenshot(page, "messages-by-header")


def test_group_consuming_with_kafka_python_shows_lag_falling_to_zero(api: Api, page: Any) -> None:
    api.broker.create_topic("lagging", {"partitions": 1})
    producer = KafkaProducer(bootstrap_servers=api.broker.bootstrap, acks="all", linger_ms=0)
    try:
        for i in range(20):
            producer.send("lagging", value=b"m%d" % i, partition=0)
        producer.flush(30)
    finally:
        producer.close(30)
    consumer = KafkaConsumer("lagging", bootstrap_servers=api.broker.bootstrap, group_id="browser-group",
                             enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=5)
    try:
        seen: list[Any] = []
        wait_until(lambda: seen.extend(sum(consumer.poll(timeout_ms=500).values(), [])) or len(seen) >= 5,
                   what="a first poll")
        consumer.commit()  # the position after what was polled
        committed = consumer.committed(TopicPartition("lagging", 0))
        page.goto(api.base + "/groups/browser-group")
        reload_until(page, '#offsets tr[data-tp="lagging-0"] td.lag', str(20 - committed))
        assert page.locator("#state").inner_text() == "Stable"
        assert page.locator("#members tr").count() == 2
        screenshot(page, "group-lagging")
        wait_until(lambda: seen.extend(sum(consumer.poll(timeout_ms=500).values(), [])) or len(seen) >= 20,
                   what="the rest of the records")
        consumer.commit()
        reload_until(page, '#offsets tr[data-tp="lagging-0"] td.lag', "0")
        assert page.locator("#total-lag").inner_text() == "0"
        screenshot(page, "group")
    finally:
        consumer.close()
    page.goto(api.base + "/groups")
    assert page.locator('#groups tr[data-group="browser-group"]').count() == 1
    screenshot(page, "groups")


def test_compacted_topic_cleaner_state_goes_from_active_segment_to_none_after_a_roll(api: Api,
                                                                                       page: Any) -> None:
    api.broker.create_topic("compacted", {"partitions": 1, "configs": {"cleanup.policy": "compact",
                                                                       "min.cleanable.dirty.ratio": "0.01"}})
    producer = KafkaProducer(bootstrap_servers=api.broker.bootstrap, acks="all", linger_ms=0)
    try:
        for key in "ABACBAC":
            producer.send("compacted", key=key.encode(), value=b"v", partition=0).get(30)
    finally:
        producer.close(30)
    page.goto(api.base + "/compaction")
    cell = '#cleaner tr[data-tp="compacted-0"] td.blocked-by'
    reload_until(page, cell, "active_segment")
    screenshot(page, "compaction-active-segment")

    log = api.broker.state.log_manager.get_log(LogPartition("compacted", 0))
    assert log is not None
    api.broker.call(log.roll)  # the records leave the active segment; nothing new arrives

    def cleaned() -> bool:
        page.reload()
        row = page.locator('#cleaner tr[data-tp="compacted-0"]')
        return row.count() == 1 and row.locator("td.blocked-by").inner_text() == "none" \
            and "3 kept" in row.inner_text()

    wait_until(cleaned, 60, "the cleaned partition showing none")
    screenshot(page, "compaction")
    page.goto(api.base + "/")
    wait_until(lambda: page.locator("#requests-chart .u-legend").count() > 0, 30, "the requests chart")
    assert page.locator("#bytes-chart canvas").count() == 1
    screenshot(page, "overview")


def test_config_edit_is_visible_to_describe_configs(api: Api, page: Any) -> None:
    api.broker.create_topic("edited", {"partitions": 1})
    page.goto(api.base + "/topics/edited")
    row = page.locator('#configs tr[data-config="retention.ms"]')
    assert row.locator("td.source").inner_text() == "DEFAULT_CONFIG"
    row.locator("input[name=value]").fill("123456789")
    row.locator("button[type=submit]").click()
    wait_until(lambda: page.locator('#configs tr[data-config="retention.ms"] td.source').inner_text()
               == "DYNAMIC_TOPIC_CONFIG", 30, "the page to show the new source")
    admin = KafkaAdminClient(bootstrap_servers=api.broker.bootstrap)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "edited")],
                                           config_filter="all")
    finally:
        admin.close()
    retention = next(iter(next(iter(described.values())).values()))["retention.ms"]
    assert (retention["value"], retention["config_source"]) == ("123456789", "DYNAMIC_TOPIC_CONFIG")
    screenshot(page, "topic-config-edited")


def test_read_only_pages_have_no_write_controls(readonly_api: Api, page: Any) -> None:
    producer = KafkaProducer(bootstrap_servers=readonly_api.broker.bootstrap, acks="all")
    try:
        producer.send("shown", key=b"k", value=b"v", partition=0).get(30)
    finally:
        producer.close(30)
    consumer = KafkaConsumer("shown", bootstrap_servers=readonly_api.broker.bootstrap, group_id="ro-group",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        wait_until(lambda: consumer.poll(timeout_ms=500), what="a record")
        consumer.commit()
    finally:
        consumer.close()
    for path, name in [("/", "ro-overview"), ("/topics", "ro-topics"), ("/topics/shown", "ro-topic"),
                       ("/topics/shown/messages", "ro-messages"), ("/groups/ro-group", "ro-group"),
                       ("/compaction", "ro-compaction"), ("/transactions", "ro-transactions"),
                       ("/security", "ro-security")]:
        page.goto(readonly_api.base + path)
        assert page.locator("nav .mode").inner_text() == "read-only"
        assert page.locator("form.api, button.api, form[data-method]").count() == 0, path
        assert page.locator('meta[name="csrf-token"]').get_attribute("content") == ""
        screenshot(page, name)
    assert page.evaluate("""async () => (await fetch('/api/topics', {method: 'POST',
        headers: {'Content-Type': 'application/json'}, body: JSON.stringify({name: 'x'})})).status""") == 403
    # the messages were shown all the same
    page.goto(readonly_api.base + "/topics/shown/messages")
    assert page.locator("#records tr[data-offset] td.key").first.inner_text().strip() == "k"


def test_topic_deleted_from_its_page(api: Api, page: Any) -> None:
    api.broker.create_topic("doomed", {"partitions": 1})
    page.goto(api.base + "/topics/doomed")
    page.click("#delete-topic")  # the confirm() dialog is accepted by the fixture
    page.wait_for_url("**/topics")
    assert page.locator('#topics tr[data-topic="doomed"]').count() == 0
    assert "doomed" not in [t["name"] for t in api.get("/api/topics")]
