"""Logging setup: structlog on top of the stdlib `logging` module.

Console (readable, key=value) by default; `json` gives one JSON object per line for log shippers. Modules that
use stdlib `logging.getLogger(__name__)` (storage, config, ...) go through the same formatter, so a broker's
output is uniform whichever API a module logs with.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

_configured = False


def get_logger(name: str) -> Any:
    """A structlog logger bound to `name` (cheap; safe to call at import time)."""
    import structlog

    return structlog.get_logger(name)


def configure_logging(fmt: str = "console", level: str | int = "INFO", stream: Any = None) -> None:
    """Configure structlog + stdlib logging once per process (later calls just change the level)."""
    global _configured
    import structlog

    if isinstance(level, str):
        level = logging.getLevelName(level.upper())
        if not isinstance(level, int):
            level = logging.INFO
    root = logging.getLogger()
    root.setLevel(level)
    if _configured:
        return
    _configured = True
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
    formatter = structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        foreign_pre_chain=shared,
    )
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter)
    root.handlers[:] = [handler]
