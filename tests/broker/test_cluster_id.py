"""The cluster id: the `cluster.id` setting names a new log dir's cluster (Kafka: `kafka-storage format
--cluster-id`); a log dir keeps the id in its meta.properties; log dirs of two clusters stop `tidelog serve`
with one line, as Kafka's InconsistentClusterIdException stops the broker."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tidelog.storage.checkpoints import read_properties
from tidelog.testing import BrokerHandle

ROOT = Path(__file__).resolve().parents[2]
FIRST, SECOND = "MkU3OEVBNTcwNTJENDM2Qk", "Q2x1c3RlcklkTnVtYmVyMg"


def described_cluster_id(bootstrap: str) -> str:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the answer: a dropped handle cancels it
    cluster_id: str = admin.describe_cluster().result(30).cluster_id
    return cluster_id


def test_setting_names_a_new_log_dir_and_the_dir_keeps_its_id(
        tmp_path: Path, tidelog_broker_factory: Callable[..., BrokerHandle], caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    broker = tidelog_broker_factory(log_dir=data, overrides={"cluster.id": FIRST})
    assert described_cluster_id(broker.bootstrap) == FIRST
    assert read_properties(data / "meta.properties")["cluster.id"] == FIRST
    caplog.set_level(logging.WARNING, logger="tidelog.storage.log_manager")
    broker.restart(overrides={"cluster.id": SECOND})  # the setting no longer applies: the dir has its id
    assert described_cluster_id(broker.bootstrap) == FIRST
    assert read_properties(data / "meta.properties")["cluster.id"] == FIRST
    assert any(FIRST in r.getMessage() and "only names a new log dir" in r.getMessage() for r in caplog.records)


def test_log_dirs_of_two_clusters_stop_serve_with_one_line(tmp_path: Path) -> None:
    def serve(*dirs: Path, cluster_id: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tidelog", "serve", "--log-dirs", ",".join(map(str, dirs)),
                               "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                               "--override", f"cluster.id={cluster_id}"],
                              capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))

    first, second = tmp_path / "one", tmp_path / "two"
    for path, cluster_id in ((first, FIRST), (second, SECOND)):
        path.mkdir()
        (path / "meta.properties").write_text(f"version=1\nnode.id=1\ncluster.id={cluster_id}\n")
    out = serve(first, second, cluster_id=FIRST)
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("tidelog: ") and FIRST in last and SECOND in last, out.stderr
