"""structlog setup: pretty on a terminal, JSON lines otherwise, bound context everywhere.

The level is applied by a processor rather than baked into the bound-logger
class, so :func:`set_log_level` changes it live for every logger, including
loggers bound before the change (a channel actor binds its logger once).

Logs are for people: nothing counts or reacts to them.  Metrics and ``/status``
subscribe to typed events on the runtime's bus (:mod:`tierbot.events`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import IO, Any, TextIO, cast

import structlog

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
_METHOD_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "msg": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
}

_min_level = logging.INFO


def _filter_level(logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> Any:
    if _METHOD_LEVELS.get(method_name, logging.INFO) < _min_level:
        raise structlog.DropEvent
    return event_dict


def set_log_level(level: str) -> None:
    """Change the level live: every logger, bound before or after, follows at once."""
    global _min_level
    _min_level = _LEVELS.get(level, logging.INFO)
    logging.getLogger().setLevel(max(_min_level, logging.WARNING))


def configure_logging(
    level: str = "info", fmt: str = "auto", stream: IO[str] | None = None
) -> None:
    """Route structlog (and stdlib logging) to ``stream`` (stderr) at ``level``.

    ``fmt`` is ``pretty``, ``json`` or ``auto`` (pretty when the stream is a terminal).
    Safe to call again; :func:`set_log_level` alone changes just the level.
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
            _filter_level,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        # Every level reaches the processors, where _filter_level applies the live level.
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, stream)),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(
        level=max(_LEVELS.get(level, logging.INFO), logging.WARNING), stream=stream, force=True
    )
    set_log_level(level)
