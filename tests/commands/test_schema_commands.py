"""`tidelog schema ...` as subprocesses against a real broker with its Schema Registry on: register, list, get,
check and delete, cross-checked over the registry's REST API; errors are one line with Confluent's error code."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any

from tests.commands.conftest import tidelog, unique
from tidelog.testing import BrokerHandle, free_port

V1 = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
V2 = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": "string", "default": ""}]})
NO_DEFAULT = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "owner", "type": "string"}]})


def schema(broker: BrokerHandle, *args: str, stdin: str | None = None, env: dict[str, str] | None = None,
           url: bool = True) -> Any:
    return tidelog("schema", *args, *(["--url", broker.schema_registry_url] if url else []), stdin=stdin, env=env)


def schema_json(broker: BrokerHandle, *args: str, expect_rc: int = 0) -> Any:
    out = schema(broker, *args, "--format", "json")
    assert out.returncode == expect_rc, f"exit {out.returncode}\nstdout: {out.stdout}\nstderr: {out.stderr}"
    return json.loads(out.stdout)


def rest(broker: BrokerHandle, path: str) -> Any:
    with urllib.request.urlopen(broker.schema_registry_url + path, timeout=30) as response:
        return json.loads(response.read())


def test_register_list_get_and_check(tidelog_schema_registry: BrokerHandle) -> None:
    broker = tidelog_schema_registry
    subject = unique("orders-value")
    first = schema_json(broker, "register", subject, "--schema", V1)
    assert first["subject"] == subject and first["version"] == 1
    second = schema(broker, "register", subject, "-f", "-", stdin=V2)  # from stdin, text output
    assert second.returncode == 0, second.stderr
    assert second.stdout.split()[3:5] == [subject, "2"]
    versions = rest(broker, f"/subjects/{subject}/versions")
    assert versions == [1, 2]

    [row] = [r for r in schema_json(broker, "list") if r["subject"] == subject]
    assert row == {"subject": subject, "latest_version": 2, "id": rest(broker, f"/subjects/{subject}/versions/2")["id"],
                   "schema_type": "AVRO", "versions": [1, 2], "compatibility": "BACKWARD"}
    listed = schema(broker, "list", "--prefix", subject)
    assert listed.returncode == 0, listed.stderr
    assert [line.split() for line in listed.stdout.splitlines()] == [
        ["SUBJECT", "VERSION", "ID", "TYPE", "COMPATIBILITY", "VERSIONS"],
        [subject, "2", str(row["id"]), "AVRO", "BACKWARD", "2"]]

    got = schema_json(broker, "get", subject, "--version", "1")
    assert (got["version"], got["id"], json.loads(got["schema"])) == (1, first["id"], json.loads(V1))
    text = schema(broker, "get", subject)  # the latest, its schema pretty-printed under the fields
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[:2] == [f"subject  {subject}", "version  2"]
    assert '    {\n      "name": "note",' in text.stdout
    by_id = schema_json(broker, "get", "--id", str(first["id"]))
    assert by_id["subjects"] == [{"subject": subject, "version": 1}]

    ok = schema_json(broker, "check", subject, "--schema", V2)
    assert ok == {"subject": subject, "version": "latest", "is_compatible": True, "messages": []}
    bad = schema(broker, "check", subject, "--schema", NO_DEFAULT)
    assert bad.returncode == 1  # a script can gate on it
    assert bad.stdout.splitlines()[0] == "INCOMPATIBLE"
    assert "owner" in bad.stdout  # Confluent's verbose reason names the field without a default

    refused = schema(broker, "register", subject, "--schema", NO_DEFAULT)
    assert refused.returncode == 1 and refused.stdout == ""
    [line] = refused.stderr.splitlines()
    assert line.startswith("tidelog schema register: ") and line.endswith("(error code 40901)"), line
    assert rest(broker, f"/subjects/{subject}/versions") == [1, 2]  # not stored


def test_json_and_protobuf_with_a_reference(tidelog_schema_registry: BrokerHandle) -> None:
    broker = tidelog_schema_registry
    common = unique("common")
    schema_json(broker, "register", common, "-t", "protobuf", "--schema",
                'syntax = "proto3";\npackage shop;\nmessage Money { int64 cents = 1; }\n')
    subject = unique("payments-value")
    registered = schema_json(broker, "register", subject, "-t", "PROTOBUF", "-r", f"money.proto={common}:1",
                             "--schema", 'syntax = "proto3";\npackage shop;\nimport "money.proto";\n'
                                         "message Payment { shop.Money amount = 1; }\n")
    got = schema_json(broker, "get", subject)
    assert got["schemaType"] == "PROTOBUF" and got["id"] == registered["id"]
    assert got["references"] == [{"name": "money.proto", "subject": common, "version": 1}]
    json_subject = unique("events-value")
    schema_json(broker, "register", json_subject, "-t", "json", "--schema", '{"type": "object"}')
    [row] = [r for r in schema_json(broker, "list", "--prefix", json_subject)]
    assert row["schema_type"] == "JSON"


def test_delete_soft_then_permanent(tidelog_schema_registry: BrokerHandle) -> None:
    broker = tidelog_schema_registry
    subject = unique("gone-value")
    schema_json(broker, "register", subject, "--schema", V1)
    schema_json(broker, "register", subject, "--schema", V2)
    assert schema_json(broker, "delete", subject, "--version", "2")["deleted_versions"] == [2]
    assert rest(broker, f"/subjects/{subject}/versions") == [1]
    soft = schema_json(broker, "delete", subject)
    assert soft == {"subject": subject, "deleted_versions": [1], "permanent": False}
    assert subject not in rest(broker, "/subjects")
    assert [r["subject"] for r in schema_json(broker, "list", "--deleted", "--prefix", subject)] == [subject]
    hard = schema_json(broker, "delete", subject, "--permanent")
    assert hard["deleted_versions"] == [1, 2]
    assert subject not in rest(broker, "/subjects?deleted=true")


def test_errors_are_one_line_with_confluents_code(tidelog_schema_registry: BrokerHandle) -> None:
    broker = tidelog_schema_registry
    missing = schema(broker, "get", "no-such-subject")
    assert missing.returncode == 1
    assert missing.stderr.splitlines() == ["tidelog schema get: Subject 'no-such-subject' not found. (error code 40401)"]
    subject = unique("one-value")
    schema_json(broker, "register", subject, "--schema", V1)
    no_version = schema(broker, "get", subject, "-v", "7")
    assert no_version.stderr.strip().endswith("(error code 40402)"), no_version.stderr
    invalid = schema(broker, "register", subject, "--schema", '{"type": "record", "name": "X"}')
    assert invalid.returncode == 1
    [line] = invalid.stderr.splitlines()
    assert line.endswith("(error code 42201)"), line
    port = free_port()
    down = tidelog("schema", "list", "--url", f"http://127.0.0.1:{port}")
    assert down.returncode == 1
    [line] = down.stderr.splitlines()
    assert line.startswith(f"tidelog schema list: cannot reach the schema registry at http://127.0.0.1:{port}: "), line
    # credentials in --url never reach the error line
    down = tidelog("schema", "list", "--url", f"http://alice:s3cret@127.0.0.1:{port}")
    [line] = down.stderr.splitlines()
    assert line.startswith(f"tidelog schema list: cannot reach the schema registry at http://127.0.0.1:{port}: "), line
    # the credentials may come from the environment instead of the command line (and are checked the same way)
    bad_user = schema(broker, "list", env={"TIDELOG_SCHEMA_REGISTRY_USER_INFO": "no-colon"})
    assert bad_user.stderr.splitlines() == [
        "tidelog schema list: --user / $TIDELOG_SCHEMA_REGISTRY_USER_INFO: expected NAME:PASSWORD"]


def test_url_defaults_to_the_configured_registry_port(tidelog_schema_registry: BrokerHandle) -> None:
    """Without --url the command reads schema.registry.port as the broker does (here TIDELOG_* variables)."""
    broker = tidelog_schema_registry
    port = urllib.parse.urlsplit(broker.schema_registry_url).port
    subject = unique("default-url-value")
    schema_json(broker, "register", subject, "--schema", V1)
    out = schema(broker, "list", "--prefix", subject, "--format", "json", url=False,
                 env={"TIDELOG_SCHEMA_REGISTRY_PORT": str(port)})
    assert out.returncode == 0, out.stderr
    assert [r["subject"] for r in json.loads(out.stdout)] == [subject]
