"""docs/ARCHITECTURE.md and docs/INTERNALS.md stay true: every repository file they name exists, and they cite no
served-API count or version range (docs/APIS.md, generated from the code, is the one place for those)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ["docs/ARCHITECTURE.md", "docs/INTERNALS.md"]
# A path as the docs write it: `tidelog/...`, `tests/...`, `docs/...`, `bench/...` or a bare `pyproject.toml`.
CITED_PATH = re.compile(r"`((?:tidelog|tests|docs|bench|scripts)/[\w./-]+|pyproject\.toml|setup\.py)`")
VERSION_RANGE = re.compile(r"\bv?\d+\s?[–-]\s?\d+\b(?=\)|\s*(?:versions?)\b)|\(v\d+[–-]\d+\)")
API_COUNT = re.compile(r"(?<![\w-])\d+\s+(?:served\s+)?APIs\b")  # not "KIP-848 APIs"


@pytest.mark.parametrize("doc", DOCS)
def test_every_named_file_exists(doc: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    cited = {m.group(1).rstrip("/.") for m in CITED_PATH.finditer(text)}
    assert cited, f"{doc} names no file: the pattern is wrong"
    missing = sorted(p for p in cited if "<" not in p and not (ROOT / p).exists())
    assert missing == [], f"{doc} names files that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS)
def test_no_api_counts_or_served_version_ranges(doc: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    assert API_COUNT.findall(text) == [], f"{doc} cites an API count; docs/APIS.md has them"
    assert VERSION_RANGE.findall(text) == [], f"{doc} cites a version range; docs/APIS.md has them"


def test_the_checks_catch_what_they_look_for() -> None:
    assert CITED_PATH.findall("see `tidelog/broker/nope.py` and `docs/APIS.md`") == ["tidelog/broker/nope.py",
                                                                                   "docs/APIS.md"]
    assert API_COUNT.findall("tidelog serves 26 served APIs") and API_COUNT.findall("about 90 APIs")
    assert not API_COUNT.findall("the KIP-848 APIs")
    assert VERSION_RANGE.findall("FetchRequest (v4–16)") and VERSION_RANGE.findall("Fetch 4-16 versions")
