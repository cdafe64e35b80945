"""The same fault controls on a broker subprocess (`BrokerProcess`), through its loopback control channel."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tidelog.testing import BrokerProcess


def test_process_faults_pause_drop_and_restart(tmp_path: Path) -> None:
    from kafka import KafkaProducer
    from kafka.errors import InvalidTimestampError

    with BrokerProcess(tmp_path / "data", overrides={"num.partitions": 1}) as broker:
        p = KafkaProducer(bootstrap_servers=broker.bootstrap, retry_backoff_ms=50, enable_idempotence=False,
                          reconnect_backoff_max_ms=200)
        try:
            broker.inject_errors("Produce", ["NOT_LEADER_OR_FOLLOWER"])
            assert p.send("t", b"retried").get(60).offset == 0
            assert broker.pending_errors("Produce") == 0
            broker.inject_errors("Produce", [32])  # INVALID_TIMESTAMP, by its code
            with pytest.raises(InvalidTimestampError):
                p.send("t", b"rejected").get(60)
            assert broker.drop_connections() >= 1
            assert p.send("t", b"after-drop").get(60).offset == 1
            broker.pause()
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((broker.host, broker.port), timeout=5).close()
            future = p.send("t", b"while-paused")
            broker.resume()
            assert future.get(60).offset == 2
            broker.restart()
            assert p.send("t", b"after-restart").get(60).offset == 3
            with pytest.raises(RuntimeError, match="unknown API"):
                broker.inject_errors("NoSuchApi", ["NOT_LEADER_OR_FOLLOWER"])
        finally:
            p.close()


def test_process_without_fault_control(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", fault_control=False) as broker:
        assert "--fault-control-port" not in broker.command()
        with pytest.raises(RuntimeError, match="fault_control=False"):
            broker.pause()
