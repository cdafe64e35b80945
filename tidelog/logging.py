"""Logging setup: structlog on top of the stdlib `logging` module.

Console (readable, key=value) by default; `json` gives one JSON object per line for log shippers. Modules that
use stdlib `logging.getLogger(__name__)` (storage, config, ...) go through the same formatter, so a broker's
output is uniform whichever API a module logs with.

structlog costs ~50 ms to import, so `configure_logging` only installs the stdlib handler; structlog is
imported and configured when the first record is formatted (or `get_logger` is called), which keeps it off
the path to the first answered request. `tidelog serve` also holds the records logged while it starts
(`configure_logging(hold=True)`) and writes them once it has started (`release_held_logs()`, or at exit).
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

_configured = False
_fmt = "console"
_structlog_lock = threading.Lock()
_structlog_formatter: logging.Formatter | None = None


def get_logger(name: str) -> Any:
    """A structlog logger bound to `name` (cheap after the first call)."""
    # lazy for start-up time: structlog loads with the first log line
    import structlog

    if _configured:
        _structlog_formatter_for(_fmt)  # structlog.configure() before the logger is first used
    return structlog.get_logger(name)


def _structlog_formatter_for(fmt: str) -> logging.Formatter:
    """Configure structlog (once) and return the stdlib formatter that renders through it."""
    global _structlog_formatter
    with _structlog_lock:
        if _structlog_formatter is not None:
            return _structlog_formatter
        # lazy for start-up time, as in get_logger()
        import structlog

        shared: list[Any] = [
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
        ]
        renderer: Any
        if fmt == "json":
            renderer = structlog.processors.JSONRenderer()
            shared.append(structlog.processors.format_exc_info)
        else:
            renderer = structlog.dev.ConsoleRenderer(colors=False)
        structlog.configure(
            processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
            logger_factory=structlog.stdlib.LoggerFactory(),
            wrapper_class=structlog.stdlib.BoundLogger,
            cache_logger_on_first_use=True,
        )
        _structlog_formatter = structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=shared,
        )
        return _structlog_formatter


class _LazyStructlogFormatter(logging.Formatter):
    """Formats through structlog's ProcessorFormatter, built on the first record."""

    def __init__(self, fmt: str) -> None:
        super().__init__()
        self._fmt_name = fmt

    def format(self, record: logging.LogRecord) -> str:
        return _structlog_formatter_for(self._fmt_name).format(record)


class _HoldingHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A StreamHandler that, while held, keeps records unformatted (formatting the first one imports structlog,
    ~10 ms of a broker's start-up) and writes them, in order, on `release_held()` or `flush()` (logging.shutdown
    at exit). A process ending with os._exit while held loses them."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._held: list[logging.LogRecord] | None = None

    def hold(self) -> None:
        self.acquire()
        try:
            self._held = []
        finally:
            self.release()

    def emit(self, record: logging.LogRecord) -> None:
        if self._held is not None:  # Handler.handle holds self.lock here
            self._held.append(record)
            return
        super().emit(record)

    def release_held(self) -> None:
        self.acquire()
        try:
            held, self._held = self._held, None
            for record in held or ():
                super().emit(record)
        finally:
            self.release()

    def flush(self) -> None:
        if self._held is not None:
            self.release_held()
        super().flush()


_handler: _HoldingHandler | None = None


def release_held_logs() -> None:
    """Write the records held since `configure_logging(hold=True)` and stop holding (idempotent)."""
    if _handler is not None:
        _handler.release_held()


def configure_logging(fmt: str = "console", level: str | int = "INFO", stream: Any = None,
                      hold: bool = False) -> None:
    """Configure structlog + stdlib logging once per process (later calls just change the level). `hold`: keep
    the records until `release_held_logs()` (`tidelog serve` while it starts)."""
    global _configured, _fmt
    if isinstance(level, str):
        level = logging.getLevelName(level.upper())
        if not isinstance(level, int):
            level = logging.INFO
    root = logging.getLogger()
    root.setLevel(level)
    if _configured:
        return
    _configured = True
    _fmt = fmt
    global _handler
    _handler = _HoldingHandler(stream or sys.stderr)
    _handler.setFormatter(_LazyStructlogFormatter(fmt))
    if hold:
        _handler.hold()
    root.handlers[:] = [_handler]
