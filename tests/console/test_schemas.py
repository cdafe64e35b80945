"""The console's Schemas view against a real broker with its Schema Registry on: schemas registered by
confluent-kafka's SchemaRegistryClient show in /api/schemas and on the pages, with a unified diff between
versions; with the registry off the view is absent. One broker for the module (subjects named per test)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient

from tests.console.conftest import Api, screenshot
from tidelog.testing import BrokerHandle

pytestmark = [pytest.mark.timeout(120), pytest.mark.tidelog(overrides={"metrics.port": 0, "schema.registry.port": 0})]

V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
V2 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"},
                                                   {"name": "note", "type": "string", "default": ""}]}


@pytest.fixture(scope="module")
def sr_api(tidelog_module_broker: BrokerHandle) -> Api:
    return Api(tidelog_module_broker)


@pytest.fixture(scope="module")
def client(tidelog_module_broker: BrokerHandle) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": tidelog_module_broker.schema_registry_url})


def two_versions(client: SchemaRegistryClient, stem: str) -> tuple[str, int, int]:
    subject = f"{stem}-{uuid.uuid4().hex[:8]}-value"
    first = client.register_schema(subject, Schema(json.dumps(V1), "AVRO"))
    second = client.register_schema(subject, Schema(json.dumps(V2), "AVRO"))
    return subject, first, second


def test_subjects_list_and_subject_versions(sr_api: Api, client: SchemaRegistryClient) -> None:
    subject, first, second = two_versions(client, "orders")
    client.set_compatibility(subject, "FULL")
    [row] = [r for r in sr_api.get("/api/schemas") if r["subject"] == subject]
    assert row == {"subject": subject, "latest_version": 2, "id": second, "schema_type": "AVRO", "versions": 2,
                   "compatibility": "FULL", "mode": "READWRITE"}

    shown = sr_api.get(f"/api/schemas/{subject}")
    assert (shown["compatibility"], shown["compatibility_set"]) == ("FULL", True)
    assert [(v["version"], v["id"], v["deleted"]) for v in shown["versions"]] == [(1, first, False), (2, second, False)]
    assert json.loads(shown["versions"][1]["pretty"]) == V2
    assert '\n  "fields": [\n' in shown["versions"][1]["pretty"]  # indented, not the stored one-line text

    client.delete_version(subject, 2)  # soft: flagged on the subject page, gone from the list's latest
    shown = sr_api.get(f"/api/schemas/{subject}")
    assert [(v["version"], v["deleted"]) for v in shown["versions"]] == [(1, False), (2, True)]
    [row] = [r for r in sr_api.get("/api/schemas") if r["subject"] == subject]
    assert (row["latest_version"], row["id"], row["versions"]) == (1, first, 1)


def test_json_and_protobuf_subjects_with_references(sr_api: Api, client: SchemaRegistryClient) -> None:
    common = f"money-{uuid.uuid4().hex[:8]}"
    client.register_schema(common, Schema('syntax = "proto3";\npackage shop;\nmessage Money { int64 cents = 1; }\n',
                                          "PROTOBUF"))
    payment = f"payment-{uuid.uuid4().hex[:8]}"
    client.register_schema(payment, Schema(
        'syntax = "proto3";\npackage shop;\nimport "money.proto";\nmessage Payment { shop.Money amount = 1; }\n',
        "PROTOBUF", [SchemaReference("money.proto", common, 1)]))
    event = f"event-{uuid.uuid4().hex[:8]}"
    client.register_schema(event, Schema(json.dumps({"type": "object", "properties": {"a": {"type": "string"}}}),
                                         "JSON"))
    rows = {r["subject"]: r for r in sr_api.get("/api/schemas")}
    assert (rows[payment]["schema_type"], rows[event]["schema_type"]) == ("PROTOBUF", "JSON")
    [version] = sr_api.get(f"/api/schemas/{payment}")["versions"]
    assert version["references"] == [{"name": "money.proto", "subject": common, "version": 1}]
    assert "message Payment" in version["pretty"]
    page = sr_api.text(f"/schemas/{payment}")
    assert f'href="/schemas/{common}"' in page  # the reference links to its subject


def test_diff_between_versions(sr_api: Api, client: SchemaRegistryClient) -> None:
    subject, first, second = two_versions(client, "diffed")
    diff = sr_api.get(f"/api/schemas/{subject}/diff")  # default: the latest against the one before
    assert (diff["from"], diff["to"], diff["from_id"], diff["to_id"]) == (1, 2, first, second)
    assert diff["diff"].splitlines()[:2] == [f"--- {subject} v1 (id {first})", f"+++ {subject} v2 (id {second})"]
    added = [line["text"] for line in diff["lines"] if line["kind"] == "add"]
    assert '+      "name": "note",' in added and '+      "default": ""' in added
    assert not [line for line in diff["lines"] if line["kind"] == "del" and "id" in line["text"]]

    back = sr_api.get(f"/api/schemas/{subject}/diff?from=2&to=1")
    assert '-      "name": "note",' in [line["text"] for line in back["lines"] if line["kind"] == "del"]
    same = sr_api.get(f"/api/schemas/{subject}/diff?from=1&to=1")
    assert same["identical"] and same["lines"] == []

    assert sr_api.call("GET", f"/api/schemas/{subject}/diff?from=1&to=9", token=False)[0] == 404
    assert sr_api.call("GET", f"/api/schemas/{subject}/diff?from=x", token=False)[0] == 400
    status, body = sr_api.call("GET", "/api/schemas/no-such-subject", token=False)
    assert status == 404 and "no-such-subject" in body["error"]


def test_schemas_view_absent_when_the_registry_is_off(readonly_api: Api) -> None:
    status, body = readonly_api.call("GET", "/api/schemas", token=False)
    assert status == 404 and "schema.registry.port" in body["error"]
    assert 'href="/schemas"' not in readonly_api.text("/")


def test_browser_schemas_subject_and_diff(sr_api: Api, client: SchemaRegistryClient, page: Any) -> None:
    subject, first, second = two_versions(client, "browsed")
    page.goto(sr_api.base + "/")
    page.click("nav a[href='/schemas']")
    page.wait_for_url("**/schemas")
    row = page.locator(f"#subjects tr[data-subject='{subject}']")
    assert row.locator("td.version").inner_text().strip() == "2"
    assert row.locator("td.id").inner_text().strip() == str(second)
    assert row.locator("td.compatibility").inner_text().strip() == "BACKWARD"
    screenshot(page, "schemas")

    row.locator("a").click()
    page.wait_for_url(f"**/schemas/{subject}")
    assert page.locator("#versions tr[data-version]").count() == 2
    assert '"name": "note"' in page.locator("pre.schema[data-version='2']").inner_text()
    screenshot(page, "schema-subject")

    page.click("#versions tr[data-version='2'] a.diff-previous")
    page.wait_for_url(f"**/schemas/{subject}/diff?from=1&to=2")
    added = page.locator("#diff .add").all_inner_texts()
    assert '+      "name": "note",' in added
    assert page.locator("#diff .del").count() == 0 or all(
        "note" not in t for t in page.locator("#diff .del").all_inner_texts())
    screenshot(page, "schema-diff")

    page.select_option("#compare select[name=from]", "2")
    page.select_option("#compare select[name=to]", "1")
    page.click("#compare button[type=submit]")
    page.wait_for_url(f"**/schemas/{subject}/diff?from=2&to=1")
    assert '-      "name": "note",' in page.locator("#diff .del").all_inner_texts()
