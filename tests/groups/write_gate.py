"""Fault hooks that hold a metadata file's writer thread (tidelog.metadata.writer) at its write step, for the
streams- and share-state store tests: what the broker answers while a write is held, fails, or is let go."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tidelog.metadata.writer import MetadataFaultPoint

WAIT_S = 60.0


class WriteGate:
    """Holds the writer thread of the metadata file named `file_name` at its write step while closed."""

    def __init__(self, file_name: str) -> None:
        self.file_name = file_name
        self.opened = threading.Event()
        self.opened.set()
        self.reached = threading.Event()
        self.holder: threading.Thread | None = None  # the writer thread that last reached the gate
        self.failing: Exception | None = None  # the exception the next write raises at the gate

    def at(self, point: object, subject: object = None) -> None:
        if point == MetadataFaultPoint.WRITE and subject == self.file_name:
            self.holder = threading.current_thread()
            self.reached.set()
            assert self.opened.wait(WAIT_S), "the gate was never opened"
            if self.failing is not None:  # the held write fails (once) with it
                failing, self.failing = self.failing, None
                raise failing

    def close(self) -> None:
        self.reached.clear()
        self.opened.clear()

    def open(self) -> None:
        self.opened.set()

    def open_when(self, condition: Callable[[], bool]) -> Opener:
        """A thread opening the gate once `condition()` holds (or after WAIT_S, `met` then False)."""
        opener = Opener(self, condition)
        opener.start()
        return opener


class Opener(threading.Thread):
    def __init__(self, gate: WriteGate, condition: Callable[[], bool]) -> None:
        super().__init__(name="gate-opener", daemon=True)
        self.gate, self.condition, self.met = gate, condition, False

    def run(self) -> None:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and not self.gate.opened.is_set():
            if self.condition():
                self.met = True
                break
            time.sleep(0.01)
        self.gate.open()


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting until {what}"
        time.sleep(0.01)
