"""structlog setup: pretty on a terminal, JSON lines otherwise, bound context everywhere.

Two hooks serve the operator's seat:

* The level is applied by a processor rather than baked into the bound-logger
  class, so :func:`set_log_level` changes it live for every logger, including
  loggers bound before the change (a channel actor binds its logger once).
* An *event tap* early in the processor chain shows every event, whatever the
  level, to the sinks registered with :func:`add_event_sink` (the metrics).  A
  sink must be cheap and must not raise; if it does, the event is logged anyway.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, MutableMapping
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

EventSink = Callable[[str, MutableMapping[str, Any]], None]
"""``sink(method_name, event_dict)``: sees every event before level filtering."""

_sinks: list[EventSink] = []
_min_level = logging.INFO


def _tap(logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> Any:
    for sink in tuple(_sinks):
        try:
            sink(method_name, event_dict)
        except Exception:  # a metrics bug must never lose a log line
            pass
    return event_dict


def _filter_level(logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> Any:
    if _METHOD_LEVELS.get(method_name, logging.INFO) < _min_level:
        raise structlog.DropEvent
    return event_dict


def add_event_sink(sink: EventSink) -> None:
    """Show every later event to ``sink`` (and make sure the tap is in the chain)."""
    install_event_tap()
    if sink not in _sinks:
        _sinks.append(sink)


def remove_event_sink(sink: EventSink) -> None:
    """Stop showing events to ``sink``; safe to call twice."""
    if sink in _sinks:
        _sinks.remove(sink)


def install_event_tap() -> None:
    """Put the tap first in structlog's current processor chain unless it is there.

    For processes that never call :func:`configure_logging` (tests, embedding).
    The chain is changed in place so loggers bound earlier see the tap too.
    """
    processors = structlog.get_config()["processors"]
    if _tap in processors:
        return
    if isinstance(processors, list):
        processors.insert(0, _tap)
    else:
        structlog.configure(processors=[_tap, *processors])


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
            _tap,
            _filter_level,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        # Every level reaches the processors: the tap must see info events even when
        # the operator logs only warnings, and _filter_level applies the live level.
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, stream)),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(
        level=max(_LEVELS.get(level, logging.INFO), logging.WARNING), stream=stream, force=True
    )
    set_log_level(level)
