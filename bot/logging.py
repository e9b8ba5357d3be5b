"""structlog setup: pretty on a terminal, JSON lines otherwise, bound context everywhere."""

from __future__ import annotations

import logging
import sys
from typing import IO, Any

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}  # fmt: skip


def configure_logging(level: str = "info", fmt: str = "auto", stream: IO[str] | None = None) -> None:
    """Route structlog (and stdlib logging) to ``stream`` (stderr) at ``level``.

    ``fmt`` is ``pretty``, ``json`` or ``auto`` (pretty when the stream is a terminal).
    """
    stream = stream or sys.stderr
    if fmt == "auto":
        fmt = "pretty" if getattr(stream, "isatty", lambda: False)() else "json"
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=False)
        if fmt == "pretty"
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(_LEVELS.get(level, logging.INFO), logging.WARNING),
                        stream=stream, force=True)  # fmt: skip
