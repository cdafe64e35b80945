"""Hypothesis: hostile SASL frames (random mechanisms, tokens in every state, bare frames after a v0 handshake,
truncated headers) never crash the broker, never log a traceback and never log a secret they carry."""

from __future__ import annotations

import logging
import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelog.protocol.messages import request_class
from tidelog.testing import KafkaWire, SecureBrokerHandle

SECRET = "fuzz-secret-3141"  # planted in tokens; must never reach the log
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI", "", SECRET, "plain\0x"]


def _token() -> st.SearchStrategy[bytes]:
    plain = st.tuples(st.text(max_size=12), st.sampled_from(["alice", "", SECRET, "a\0b"]),
                      st.sampled_from([SECRET, "alice-secret", ""])).map(
        lambda t: "\0".join(t).encode("utf-8", "surrogatepass"))
    scram = st.sampled_from([f"n,,n=alice,r={SECRET}", f"c=biws,r={SECRET},p=AAAA", "n,a=x,n=y,r=z",
                             f"n,,n={SECRET},r=abc,tokenauth=true", "p=tls-unique,,n=a,r=b", "n,,n=a=ZZ,r=b",
                             f"n,,\x01auth=Bearer {SECRET}.e30.\x01\x01"]).map(str.encode)
    return st.one_of(st.binary(max_size=300), plain, scram)


STEP = st.one_of(
    st.tuples(st.just("handshake"), st.sampled_from(MECHANISMS), st.sampled_from([0, 1])),
    st.tuples(st.just("authenticate"), _token(), st.sampled_from([0, 1, 2])),
    st.tuples(st.just("raw"), _token(), st.just(0)),
    st.tuples(st.just("garbage"), st.binary(min_size=0, max_size=40), st.just(0)),
)


def _run(bootstrap: str, steps: list[tuple[str, object, int]]) -> None:
    wire = KafkaWire(bootstrap, timeout=10)
    try:
        for kind, arg, version in steps:
            if kind == "handshake":
                wire.send(17, version, request_class(17)[version](mechanism=arg))
            elif kind == "authenticate":
                wire.send(36, version, request_class(36)[version](auth_bytes=arg))
            elif kind == "raw":
                assert isinstance(arg, bytes)
                wire.sock.sendall(struct.pack(">i", len(arg)) + arg)
            else:
                assert isinstance(arg, bytes)
                wire.sock.sendall(struct.pack(">i", len(arg)) + arg)
            try:
                wire.read_frame()
            except (EOFError, OSError):
                return  # closed: the expected end of most hostile conversations
    finally:
        wire.close()


def _still_serving(bootstrap: str) -> None:
    with KafkaWire(bootstrap) as wire:
        assert wire.request(17, 1, request_class(17)[1](mechanism="PLAIN")).error_code == 0
        assert wire.request(36, 2, request_class(36)[2](auth_bytes=b"\0alice\0alice-secret")).error_code == 0
        assert wire.request(3, 1, request_class(3)[1](topics=[])).brokers


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=6))
def test_hostile_sasl_frames(secure: SecureBrokerHandle, caplog: pytest.LogCaptureFixture,
                             steps: list[tuple[str, object, int]]) -> None:
    caplog.set_level(logging.INFO)
    caplog.clear()
    _run(secure.listeners["SASL_PLAINTEXT"], steps)
    _still_serving(secure.listeners["SASL_PLAINTEXT"])
    for record in caplog.records:
        if not record.name.startswith("tidelog"):
            continue
        text = record.getMessage() + (record.exc_text or "")
        assert SECRET not in text and "alice-secret" not in text, text
        assert record.exc_info is None, text  # one line, never a traceback
        assert record.levelno < logging.ERROR, text


def test_tls_port_garbage(secure: SecureBrokerHandle) -> None:
    host, port = secure.listeners["SASL_SSL"].split(":")
    for payload in (b"\x16\x03\x01\x00\x05hello", b"\x00" * 64, b"GET / HTTP/1.1\r\n\r\n"):
        with socket.create_connection((host, int(port)), timeout=15) as s:
            s.sendall(payload)
            s.settimeout(15)
            try:
                while s.recv(4096):
                    pass
            except (ConnectionResetError, TimeoutError):
                pass
    _still_serving(secure.listeners["SASL_PLAINTEXT"])
