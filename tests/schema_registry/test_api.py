"""Confluent Schema Registry's REST API as served on `schema.registry.port`: every endpoint, its payload and its
error codes (Confluent's Errors class), on one broker shared by the module (each test has its own subject).
Global settings (/config, /mode) are changed by one test each and restored before it returns."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.schema_registry.conftest import Registry
from tidelog.schema_registry.records import decode_key
from tidelog.testing import BrokerHandle

USER_V1 = json.dumps({"type": "record", "name": "User", "namespace": "t",
                      "fields": [{"name": "name", "type": "string"}]})
# v2 adds a field with a default: BACKWARD compatible with v1
USER_V2 = json.dumps({"type": "record", "name": "User", "namespace": "t",
                      "fields": [{"name": "name", "type": "string"},
                                 {"name": "age", "type": "int", "default": 0}]})
# adds a field without a default: not BACKWARD compatible with v1
USER_BAD = json.dumps({"type": "record", "name": "User", "namespace": "t",
                       "fields": [{"name": "name", "type": "string"}, {"name": "email", "type": "string"}]})


def register(registry: Registry, subject: str, schema: str, **extra: object) -> dict[str, object]:
    answer: dict[str, object] = registry.ok("POST", f"/subjects/{subject}/versions", {"schema": schema, **extra})
    return answer


def test_register_and_read_back(registry: Registry, subject: str) -> None:
    first = register(registry, subject, USER_V1)
    assert first["version"] == 1 and isinstance(first["id"], int)
    again = register(registry, subject, USER_V1)
    assert again["id"] == first["id"] and again["version"] == 1  # the same schema: the same id and version
    second = register(registry, subject, USER_V2)
    assert second["version"] == 2 and second["id"] != first["id"]

    assert registry.ok("GET", f"/subjects/{subject}/versions") == [1, 2]
    latest = registry.ok("GET", f"/subjects/{subject}/versions/latest")
    assert latest["subject"] == subject and latest["version"] == 2 and latest["id"] == second["id"]
    assert json.loads(latest["schema"]) == json.loads(USER_V2)
    assert "schemaType" not in latest  # AVRO is left out, as Confluent does
    assert registry.ok("GET", f"/subjects/{subject}/versions/-1")["version"] == 2
    one = registry.ok("GET", f"/subjects/{subject}/versions/1")
    assert one["id"] == first["id"]
    assert registry.ok("GET", f"/subjects/{subject}/versions/1/schema") == json.loads(one["schema"])
    assert subject in registry.ok("GET", "/subjects")
    assert registry.ok("GET", f"/subjects?subjectPrefix={subject[:20]}") == [subject]

    by_id = registry.ok("GET", f"/schemas/ids/{first['id']}")
    assert by_id == {"schema": one["schema"]}
    assert registry.ok("GET", f"/schemas/ids/{first['id']}/schema") == json.loads(one["schema"])
    assert registry.ok("GET", f"/schemas/ids/{first['id']}/versions") == [{"subject": subject, "version": 1}]
    assert registry.ok("GET", f"/schemas/ids/{first['id']}/subjects") == [subject]


def test_same_schema_in_two_subjects_shares_its_id(registry: Registry, subject: str) -> None:
    schema = json.dumps({"type": "record", "name": "Shared", "fields": [{"name": "x", "type": "long"}]})
    a = register(registry, subject, schema)
    b = register(registry, subject + "-other", schema)
    assert a["id"] == b["id"]
    versions = registry.ok("GET", f"/schemas/ids/{a['id']}/versions")
    assert {"subject": subject, "version": 1} in versions and {"subject": subject + "-other", "version": 1} in versions


def test_lookup(registry: Registry, subject: str) -> None:
    registered = register(registry, subject, USER_V1)
    found = registry.ok("POST", f"/subjects/{subject}", {"schema": USER_V1})
    assert found["id"] == registered["id"] and found["version"] == 1 and found["subject"] == subject
    assert registry.error("POST", f"/subjects/{subject}", {"schema": USER_V2}) == (404, 40403)
    assert registry.error("POST", f"/subjects/{subject}-missing", {"schema": USER_V1}) == (404, 40401)


def test_not_found_and_bad_versions(registry: Registry, subject: str) -> None:
    assert registry.error("GET", f"/subjects/{subject}/versions") == (404, 40401)
    assert registry.error("GET", f"/subjects/{subject}/versions/1") == (404, 40401)
    register(registry, subject, USER_V1)
    assert registry.error("GET", f"/subjects/{subject}/versions/7") == (404, 40402)
    for bad in ("0", "-2", "abc", "2147483648", "1.5"):
        assert registry.error("GET", f"/subjects/{subject}/versions/{bad}") == (422, 42202), bad
    assert registry.error("GET", "/schemas/ids/987654321") == (404, 40403)
    assert registry.error("GET", "/schemas/ids/not-a-number") == (404, 40403)
    assert registry.error("GET", "/no/such/path") == (404, 404)
    assert registry.error("PATCH", "/subjects") == (405, 405)


def test_incompatible_registration_is_refused_and_not_stored(registry: Registry, subject: str) -> None:
    register(registry, subject, USER_V1)
    status, answer = registry.call("POST", f"/subjects/{subject}/versions", {"schema": USER_BAD})
    assert (status, answer["error_code"]) == (409, 40901)
    assert "incompatible with an earlier schema" in answer["message"]
    assert registry.ok("GET", f"/subjects/{subject}/versions") == [1]
    assert registry.error("POST", f"/subjects/{subject}", {"schema": USER_BAD}) == (404, 40403)


def test_compatibility_endpoints(registry: Registry, subject: str) -> None:
    register(registry, subject, USER_V1)
    path = f"/compatibility/subjects/{subject}/versions"
    assert registry.ok("POST", f"{path}/latest", {"schema": USER_V2}) == {"is_compatible": True}
    assert registry.ok("POST", f"{path}/1", {"schema": USER_BAD}) == {"is_compatible": False}
    verbose = registry.ok("POST", f"{path}/latest?verbose=true", {"schema": USER_BAD})
    assert verbose["is_compatible"] is False and verbose["messages"]
    assert registry.ok("POST", f"{path}?verbose=true", {"schema": USER_V2}) == {"is_compatible": True,
                                                                              "messages": []}
    assert registry.error("POST", f"{path}/9", {"schema": USER_V2}) == (404, 40402)
    assert registry.error("POST", f"/compatibility/subjects/{subject}-none/versions/1",
                          {"schema": USER_V2}) == (404, 40401)


def test_subject_config(registry: Registry, subject: str) -> None:
    assert registry.error("GET", f"/config/{subject}") == (404, 40408)
    assert registry.ok("GET", f"/config/{subject}?defaultToGlobal=true")["compatibilityLevel"] == "BACKWARD"
    assert registry.ok("PUT", f"/config/{subject}", {"compatibility": "none"}) == {"compatibility": "NONE"}
    assert registry.ok("GET", f"/config/{subject}") == {"compatibilityLevel": "NONE"}
    register(registry, subject, USER_V1)
    register(registry, subject, USER_BAD)  # NONE: anything goes
    assert registry.error("PUT", f"/config/{subject}", {"compatibility": "SIDEWAYS"}) == (422, 42203)
    assert registry.ok("DELETE", f"/config/{subject}") == {"compatibilityLevel": "NONE"}
    assert registry.error("GET", f"/config/{subject}") == (404, 40408)


def test_global_config(registry: Registry) -> None:
    assert registry.ok("GET", "/config") == {"compatibilityLevel": "BACKWARD"}
    try:
        assert registry.ok("PUT", "/config", {"compatibility": "FULL_TRANSITIVE"}) == {
            "compatibility": "FULL_TRANSITIVE"}
        assert registry.ok("GET", "/config") == {"compatibilityLevel": "FULL_TRANSITIVE"}
        assert registry.error("PUT", "/config", {"compatibility": 3}) == (422, 42203)
    finally:
        assert registry.ok("DELETE", "/config")["compatibilityLevel"] in ("FULL_TRANSITIVE", "BACKWARD")
    assert registry.ok("GET", "/config") == {"compatibilityLevel": "BACKWARD"}


def test_soft_and_permanent_deletes(registry: Registry, subject: str) -> None:
    first = register(registry, subject, USER_V1)
    register(registry, subject, USER_V2)
    assert registry.error("DELETE", f"/subjects/{subject}/versions/1?permanent=true") == (404, 40407)
    assert registry.ok("DELETE", f"/subjects/{subject}/versions/1") == 1
    assert registry.error("DELETE", f"/subjects/{subject}/versions/1") == (404, 40406)
    assert registry.ok("GET", f"/subjects/{subject}/versions") == [2]
    assert registry.ok("GET", f"/subjects/{subject}/versions?deleted=true") == [1, 2]
    assert registry.error("GET", f"/subjects/{subject}/versions/1") == (404, 40402)
    assert registry.ok("GET", f"/subjects/{subject}/versions/1?deleted=true")["id"] == first["id"]
    # a soft-deleted version keeps its id readable: data written with it still decodes
    assert registry.ok("GET", f"/schemas/ids/{first['id']}")["schema"]
    assert registry.ok("DELETE", f"/subjects/{subject}/versions/1?permanent=true") == 1
    assert registry.error("GET", f"/subjects/{subject}/versions/1?deleted=true") == (404, 40402)

    assert registry.error("DELETE", f"/subjects/{subject}?permanent=true") == (404, 40405)
    assert registry.ok("DELETE", f"/subjects/{subject}") == [2]
    assert subject not in registry.ok("GET", "/subjects")
    assert subject in registry.ok("GET", "/subjects?deleted=true")
    assert registry.error("DELETE", f"/subjects/{subject}") == (404, 40404)
    assert registry.ok("DELETE", f"/subjects/{subject}?permanent=true") == [2]
    assert subject not in registry.ok("GET", "/subjects?deleted=true")
    assert registry.error("DELETE", f"/subjects/{subject}") == (404, 40401)
    # registering again after a permanent delete starts over at version 1
    assert register(registry, subject, USER_V1)["version"] == 1


def test_references_and_referencedby(registry: Registry, subject: str) -> None:
    address = json.dumps({"type": "record", "name": "Address", "namespace": "ref",
                          "fields": [{"name": "street", "type": "string"}]})
    register(registry, subject + "-address", address)
    person = json.dumps({"type": "record", "name": "Person", "namespace": "ref",
                         "fields": [{"name": "home", "type": "ref.Address"}]})
    refs = [{"name": "ref.Address", "subject": subject + "-address", "version": 1}]
    registered = register(registry, subject, person, references=refs)
    got = registry.ok("GET", f"/subjects/{subject}/versions/1")
    assert got["references"] == refs
    assert registry.ok("GET", f"/schemas/ids/{registered['id']}")["references"] == refs
    assert registry.ok("GET", f"/subjects/{subject}-address/versions/1/referencedby") == [registered["id"]]
    # a referenced version cannot be deleted (42206)
    assert registry.error("DELETE", f"/subjects/{subject}-address/versions/1") == (422, 42206)
    # a reference to version -1 is stored as the referenced subject's latest version
    pinned = register(registry, subject + "-latest", person,
                      references=[{"name": "ref.Address", "subject": subject + "-address", "version": -1}])
    assert pinned["id"] == registered["id"]
    assert registry.ok("GET", f"/subjects/{subject}-latest/versions/1")["references"] == refs
    missing = [{"name": "ref.Nope", "subject": subject + "-nope", "version": 1}]
    assert registry.error("POST", f"/subjects/{subject}/versions",
                          {"schema": person, "references": missing}) == (422, 42201)


def test_schema_types(registry: Registry) -> None:
    assert sorted(registry.ok("GET", "/schemas/types")) == ["AVRO", "JSON", "PROTOBUF"]


def test_bad_input_answers_confluent_codes(registry: Registry, registry_broker: BrokerHandle, subject: str) -> None:
    path = f"/subjects/{subject}/versions"
    assert registry.error("POST", path, raw=b"{not json") == (400, 400)
    assert registry.error("POST", path, raw=b"") == (400, 400)
    assert registry.error("POST", path, raw=b"\xff\xfe") == (400, 400)
    assert registry.error("POST", path, body=["a", "list"]) == (422, 42201)
    assert registry.error("POST", path, body={}) == (422, 42201)
    assert registry.error("POST", path, body={"schema": 42}) == (422, 42201)
    assert registry.error("POST", path, body={"schema": "{\"type\": \"nope\"}"}) == (422, 42201)
    assert registry.error("POST", path, body={"schema": "not even json"}) == (422, 42201)
    assert registry.error("POST", path, body={"schema": USER_V1, "schemaType": "XML"}) == (422, 42201)
    assert registry.error("POST", path, body={"schema": USER_V1, "references": "x"}) == (422, 42201)
    deep = "[" * 50_000 + "]" * 50_000  # nesting that would overflow a recursive parser
    assert registry.error("POST", path, body={"schema": deep})[1] == 42201
    huge = json.dumps({"schema": "x" * (9 << 20)}).encode()
    assert registry.error("POST", path, raw=huge) == (422, 42209)
    assert registry.error("PUT", "/config", raw=b"[") == (400, 400)
    assert registry.error("PUT", "/mode", body={"mode": "SIDEWAYS"}) == (422, 42204)
    assert registry.error("POST", f"/subjects/{subject}-bad%01/versions", body={"schema": USER_V1}) == (422, 42208)
    # the registry is still up and stored nothing for this subject
    assert registry.error("GET", path) == (404, 40401)
    assert registry.ok("GET", "/subjects") is not None


def test_read_only_mode(registry: Registry, subject: str) -> None:
    register(registry, subject, USER_V1)
    assert registry.ok("GET", "/mode") == {"mode": "READWRITE"}
    assert registry.ok("PUT", "/mode", {"mode": "READONLY"}) == {"mode": "READONLY"}
    try:
        assert registry.ok("GET", "/mode") == {"mode": "READONLY"}
        assert registry.error("POST", f"/subjects/{subject}/versions", {"schema": USER_V2}) == (422, 42205)
        assert registry.error("DELETE", f"/subjects/{subject}/versions/1") == (422, 42205)
        assert registry.error("DELETE", f"/subjects/{subject}") == (422, 42205)
        assert registry.error("PUT", f"/config/{subject}", {"compatibility": "NONE"}) == (422, 42205)
        # reads still work
        assert registry.ok("GET", f"/subjects/{subject}/versions") == [1]
        assert registry.ok("POST", f"/subjects/{subject}", {"schema": USER_V1})["version"] == 1
    finally:
        assert registry.ok("PUT", "/mode", {"mode": "READWRITE"}) == {"mode": "READWRITE"}
    assert register(registry, subject, USER_V2)["version"] == 2


def test_subject_mode(registry: Registry, subject: str) -> None:
    register(registry, subject, USER_V1)
    assert registry.error("GET", f"/mode/{subject}") == (404, 40409)
    assert registry.ok("GET", f"/mode/{subject}?defaultToGlobal=true") == {"mode": "READWRITE"}
    assert registry.ok("PUT", f"/mode/{subject}", {"mode": "READONLY"}) == {"mode": "READONLY"}
    assert registry.error("POST", f"/subjects/{subject}/versions", {"schema": USER_V2}) == (422, 42205)
    register(registry, subject + "-free", USER_V1)  # other subjects stay writable
    assert registry.ok("DELETE", f"/mode/{subject}") == {"mode": "READONLY"}
    assert register(registry, subject, USER_V2)["version"] == 2


def test_normalize(registry: Registry, subject: str) -> None:
    spaced = json.dumps(json.loads(USER_V1), indent=4)
    first = registry.ok("POST", f"/subjects/{subject}/versions?normalize=true", {"schema": spaced})
    assert registry.ok("POST", f"/subjects/{subject}?normalize=true", {"schema": USER_V1})["id"] == first["id"]


def test_schemas_topic_holds_confluent_layout(registry: Registry, registry_broker: BrokerHandle,
                                              subject: str) -> None:
    registered = register(registry, subject, USER_V1)
    registry.ok("PUT", f"/config/{subject}", {"compatibility": "FULL"})
    registry.ok("DELETE", f"/subjects/{subject}")
    registry.ok("DELETE", f"/subjects/{subject}?permanent=true")
    mine = [r for r in registry_broker.records("_schemas") if subject.encode() in r.key]
    keys = [json.loads(r.key) for r in mine]
    assert keys[0] == {"keytype": "SCHEMA", "subject": subject, "version": 1, "magic": 1}
    value = json.loads(mine[0].value or b"")
    assert value == {"subject": subject, "version": 1, "id": registered["id"], "schema": value["schema"],
                     "deleted": False}
    assert json.loads(value["schema"]) == json.loads(USER_V1)
    assert keys[1] == {"keytype": "CONFIG", "subject": subject, "magic": 0}
    assert json.loads(mine[1].value or b"") == {"subject": subject, "compatibilityLevel": "FULL"}
    assert keys[2] == {"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0}
    assert json.loads(mine[2].value or b"") == {"subject": subject, "version": 1}
    # the permanent delete: a tombstone for the version, then one for the subject's config (as Confluent)
    assert keys[3] == keys[0] and mine[3].value is None
    assert keys[4] == keys[1] and mine[4].value is None
    assert [decode_key(r.key).keytype for r in mine] == ["SCHEMA", "CONFIG", "DELETE_SUBJECT", "SCHEMA", "CONFIG"]


@pytest.fixture(autouse=True)
def _global_state_restored(registry: Registry) -> Iterator[None]:
    """Each test leaves the global compatibility and mode as it found them (the broker is shared)."""
    yield
    assert registry.ok("GET", "/mode") == {"mode": "READWRITE"}
    assert registry.ok("GET", "/config") == {"compatibilityLevel": "BACKWARD"}


def test_import_mode_keeps_the_given_ids(registry: Registry, subject: str) -> None:
    mode = f"/mode/{subject}"
    assert registry.error("POST", f"/subjects/{subject}/versions", {"schema": USER_V1, "id": 900_001,
                                                                     "version": 3}) == (422, 42205)
    assert registry.ok("PUT", mode, {"mode": "IMPORT"}) == {"mode": "IMPORT"}
    imported = register(registry, subject, USER_BAD, id=900_001, version=3)
    assert imported == {"id": 900_001, "version": 3}
    assert registry.ok("GET", "/schemas/ids/900001")["schema"]
    # an imported version is never overwritten
    assert registry.error("POST", f"/subjects/{subject}/versions", {"schema": USER_V1, "id": 900_002,
                                                                     "version": 3}) == (422, 42205)
    registry.ok("DELETE", mode)
    assert registry.ok("GET", f"/subjects/{subject}/versions") == [3]
