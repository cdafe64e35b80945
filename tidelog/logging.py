"""Logging setup: structlog on top of the stdlib `logging` module.

Console (readable, key=value) by default; `json` gives one JSON object per line for log shippers. Modules that
use stdlib `logging.getLogger(__name__)` (storage, config, ...) go through the same formatter, so a broker's
output is uniform whichever API a module logs with.

structlog costs ~50 ms to import, so `configure_logging` only installs the stdlib handler; structlog is
imported and configured when the first record is formatted (or `get_logger` is called), which keeps it off
the path to the first answered request.
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


def configure_logging(fmt: str = "console", level: str | int = "INFO", stream: Any = None) -> None:
    """Configure structlog + stdlib logging once per process (later calls just change the level)."""
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
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_LazyStructlogFormatter(fmt))
    root.handlers[:] = [handler]
