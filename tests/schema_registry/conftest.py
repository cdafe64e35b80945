"""Fixtures of the Schema Registry tests: one broker per module with the registry on (the plugin's
`tidelog_schema_registry`: `schema.registry.port=0`, an ephemeral loopback port), and a small HTTP client that returns Confluent's status and JSON body as they are."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from tidelog.testing import BrokerHandle

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class Registry:
    """Plain HTTP against the registry: `call(method, path, body)` -> (status, decoded JSON body, headers)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
             content_type: str = CONTENT_TYPE) -> tuple[int, Any]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": content_type, "Accept": CONTENT_TYPE})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, text, ctype = response.status, response.read(), response.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            status, text, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
        assert ctype.startswith(CONTENT_TYPE), f"{method} {path}: content type {ctype!r}"
        return status, json.loads(text)

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = self.call(method, path, body)
        assert status == 200, f"{method} {path} -> {status} {answer}"
        return answer

    def error(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, int]:
        """(HTTP status, error_code) of a call expected to fail."""
        status, answer = self.call(method, path, body, raw)
        assert status >= 400, f"{method} {path} unexpectedly answered {status} {answer}"
        assert set(answer) == {"error_code", "message"}, answer
        return status, answer["error_code"]


@pytest.fixture(scope="module")
def registry_broker(tidelog_schema_registry: BrokerHandle) -> BrokerHandle:
    """The plugin's broker with the registry on, one per module."""
    return tidelog_schema_registry


@pytest.fixture(scope="module")
def registry(registry_broker: BrokerHandle) -> Registry:
    return Registry(registry_broker.schema_registry_url)


@pytest.fixture
def subject(request: pytest.FixtureRequest) -> str:
    """A subject of its own for each test (the module's broker is shared)."""
    return f"{request.node.name[:60]}-{uuid.uuid4().hex[:8]}-value"
