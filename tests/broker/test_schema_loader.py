"""kafka-python's schema loader as tidelog.protocol.messages points it: a schema file next to its package is read
directly, anything else through importlib.resources.files() (same text, same FileNotFoundError, no warning)."""

from __future__ import annotations

import warnings
from importlib import resources

import pytest

from tidelog.protocol.messages import _FilesResources


@pytest.mark.parametrize(("package", "resource"), [("kafka.protocol.schemas.resources", "MetadataResponse.json"),
                                                   ("tidelog.protocol.schemas", "PushTelemetryRequest.json")])
def test_a_schema_reads_as_importlib_resources_reads_it(package: str, resource: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        text = _FilesResources.read_text(package, resource)
    assert text == resources.files(package).joinpath(resource).read_text(encoding="utf-8")
    assert '"apiKey"' in text


def test_a_missing_schema_raises_file_not_found() -> None:
    with pytest.raises(FileNotFoundError):
        _FilesResources.read_text("kafka.protocol.schemas.resources", "NoSuchRequest.json")
