"""docs/APIS.md is generated from the code (issue #15): the committed file must be what scripts/gen_apis_doc.py
writes, every difference from Kafka 4.4's advertised ranges must carry its reason, and every API key tidelog does
not serve must say why."""

from __future__ import annotations

import difflib
import subprocess
import sys
from pathlib import Path

from tidelog.broker.apis import API_TABLE, ApiEntry
from tidelog.broker.apis_doc import (
    KAFKA,
    NOT_SERVED,
    REFERENCE,
    ServedApi,
    problems,
    range_difference,
    render,
    served_apis,
)
from tidelog.broker.kafka_versions import KAFKA_44
from tidelog.protocol.api_keys import ApiKey

ROOT = Path(__file__).resolve().parent.parent
SERVED = {int(e.key) for e in API_TABLE}


def test_committed_apis_md_is_the_generators_output() -> None:
    expected = render((ROOT / "docs" / "APIS.template.md").read_text(encoding="utf-8"))
    committed = (ROOT / "docs" / "APIS.md").read_text(encoding="utf-8")
    if committed != expected:
        diff = "".join(list(difflib.unified_diff(committed.splitlines(True), expected.splitlines(True),
                                                 "docs/APIS.md (committed)", "generated"))[:40])
        raise AssertionError("docs/APIS.md is out of date: run `.venv/bin/python scripts/gen_apis_doc.py` "
                             f"(or `make docs`) and commit it\n{diff}")


def test_script_check_mode_agrees() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_apis_doc.py"), "--check"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_the_reference_is_kafka_44() -> None:
    assert REFERENCE == "Kafka 4.4" and KAFKA is KAFKA_44


def test_every_difference_from_kafka_44_has_a_reason() -> None:
    apis = served_apis()
    assert problems(apis) == []
    differing = {int(api.entry.key): api for api in apis if api.differs}
    # the ones known today (KIP-714 without a plugin), so a range moving to Kafka's or away from it shows up here
    # as well as in the generated table
    assert set(differing) == {71, 72}
    for api in differing.values():
        assert api.entry.difference.strip(), api.entry
        cell = api.difference()
        assert cell.startswith(range_difference(api.advertised, api.kafka) + ": ") and cell != "same"
    for api in apis:
        if not api.differs:
            assert api.difference() == "same" and api.entry.difference == "", api.entry
        assert api.notes, f"tidelog.broker.apis.{api.entry.module}.NOTES is empty"


def test_every_kafka_44_api_not_served_has_a_reason() -> None:
    unserved = set(KAFKA) - SERVED
    assert unserved == {27, 38, 39, 40, 41, 64, 80, 81, *range(83, 88), 94}
    for key in unserved:
        assert NOT_SERVED[ApiKey(key)].strip(), key
    # every other key tidelog does not serve has one too, and no served key is listed as not served
    assert {int(k) for k in NOT_SERVED} == {int(k) for k in ApiKey} - SERVED


def test_a_difference_without_a_reason_or_a_stale_one_is_refused() -> None:
    """The checks the generator runs can fail: a range cut below Kafka's without a reason, a reason left on a
    range that is Kafka's again, an API neither served nor explained."""
    end_txn = next(e for e in API_TABLE if e.key == ApiKey.END_TXN)
    fetch = next(e for e in API_TABLE if e.key == ApiKey.FETCH)
    cut = ServedApi(ApiEntry(ApiKey.FETCH, "fetch", 4, 16), "notes", KAFKA[1])
    stale = ServedApi(end_txn._replace(difference="KIP-890 part 2 is not implemented"), "notes", KAFKA[26])
    others = [ServedApi(e, "notes", KAFKA.get(int(e.key))) for e in API_TABLE
              if e not in (end_txn, fetch) and e.key != ApiKey.CREATE_PARTITIONS]
    found = problems([cut, stale, *others])
    assert any(p.startswith("Fetch: advertises (4, 16)") for p in found), found
    assert any(p.startswith("EndTxn: advertises Kafka 4.4's range now") for p in found), found
    assert any(p.startswith("CreatePartitions (key 37) is not served") for p in found), found
    assert range_difference((4, 16), (4, 18)) == "v17–18 not offered"
    assert range_difference((3, 13), (0, 13)) == "v0–2 not offered"
    assert range_difference((0, 2), (1, 2)) == "v0 offered, removed in Kafka 4.4"
    assert range_difference((0, 0), None) == "not advertised by Kafka 4.4"
