"""Live reload of config.toml: watch the file, validate in full, apply what can apply live.

:class:`ConfigWatcher` polls the file's content hash every ``interval``
seconds (a ``touch`` is not a change), waits until it stops changing
(``debounce``), and reloads; SIGHUP (:meth:`ConfigWatcher.request_reload`)
takes the same path at once.  A reload:

1. loads and validates the whole file exactly like startup, the context windows
   included (:func:`check_windows`); an invalid edit is rejected
   (``config.rejected`` with the ConfigError text naming every key path) and the
   last good config keeps running;
2. diffs it against the running config, key path by key path, and splits the
   changes into *live* keys (:data:`LIVE_KEYS`) and keys that need a restart;
3. builds the effective config: the new file, with every restart-required key
   kept at its running value, and hands it to ``runtime.set_config``; channels
   pick it up at their next check, per-channel overrides are resolved once for
   the new config object;
4. logs ``config.reloaded`` (live keys), ``config.restart_required`` (keys that
   wait for a restart, compared with what is running, so reverting an edit
   clears them) or ``config.unchanged``.

A key not in :data:`LIVE_KEYS` needs a restart: a new setting is reported as
such until the code reading it reads ``runtime.config`` at each use and its
field is marked :data:`tierbot.config.LIVE` (and docs/operations.md says so).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import structlog
from pydantic import BaseModel

from channels import window_problems
from tierbot.config import Config, live_keys, load_config
from tierbot.errors import ConfigError, ConfigProblem
from tierbot.logging import set_log_level
from tierbot.tokens import encoding_for_model, get_counter

if TYPE_CHECKING:
    from bot.runtime import Runtime

log = structlog.get_logger("tierbot.reload")

LIVE_KEYS: frozenset[str] = live_keys()
"""Key paths that apply to a running bot, generated from the config models' marks
(:data:`tierbot.config.LIVE`); everything else needs a restart."""

Outcome = Literal["applied", "unchanged", "rejected"]


@dataclass(frozen=True, slots=True)
class ReloadResult:
    """What one reload did: applied live keys, keys waiting for a restart, or the error."""

    outcome: Outcome
    live: tuple[str, ...] = ()
    restart_required: tuple[str, ...] = ()
    error: str = ""
    at: float = 0.0
    trigger: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "live": list(self.live),
            "restart_required": list(self.restart_required),
            "error": self.error,
            "at": self.at,
            "trigger": self.trigger,
        }


def is_live(path: str) -> bool:
    """Whether a change to key ``path`` applies without a restart."""
    parts = path.split(".")
    return any(".".join(parts[:n]) in LIVE_KEYS for n in range(1, len(parts) + 1))


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, path + "."))
        else:
            out[path] = value  # lists (allow-lists, [[channels]]) compare as one value
    return out


def changed_keys(old: Config, new: Config) -> list[str]:
    """Key paths whose value differs between ``old`` and ``new``, sorted."""
    a, b = _flatten(old.model_dump()), _flatten(new.model_dump())
    return sorted(k for k in a.keys() | b.keys() if a.get(k, _MISSING) != b.get(k, _MISSING))


_MISSING = object()


def _keep(model: BaseModel, running: BaseModel, parts: list[str]) -> BaseModel:
    """``model`` with the value at ``parts`` taken from ``running`` (no revalidation)."""
    head = parts[0]
    if len(parts) == 1:
        return model.model_copy(update={head: getattr(running, head)})
    child = _keep(getattr(model, head), getattr(running, head), parts[1:])
    return model.model_copy(update={head: child})


def effective_config(new: Config, running: Config, restart_keys: list[str]) -> Config:
    """``new`` with every key in ``restart_keys`` kept at its ``running`` value."""
    out: BaseModel = new
    for key in restart_keys:
        out = _keep(out, running, key.split("."))
    assert isinstance(out, Config)
    return out


def check_windows(new: Config, effective: Config) -> None:
    """Raise :class:`ConfigError` when a ``context_window`` leaves its conversation too little
    room (:func:`channels.window_problems`), as startup would.

    Both configs are checked: ``new`` (the file, counted with the encoding it names) is what
    the next start would refuse, and ``effective`` (the file with the restart-only keys at
    their running values, such as ``[memory] enabled``, which decides the tools offered) is
    what the channels would run with now.
    """
    problems: list[ConfigProblem] = []
    for cfg in (new, effective) if effective is not new else (new,):
        counter = get_counter(cfg.llm.encoding or encoding_for_model(cfg.llm.model))
        seen = {p.path for p in problems}
        problems += [p for p in window_problems(cfg, counter) if p.path not in seen]
    if problems:
        raise ConfigError(new.source, problems)


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


class ConfigWatcher:
    """Reloads ``path`` into ``runtime`` when it changes or on SIGHUP; an async context manager.

    Never raises out of a reload: a bad edit is logged and reported in
    :attr:`last`, and the running config stays.
    """

    def __init__(
        self,
        runtime: Runtime,
        path: str | os.PathLike[str],
        *,
        interval: float = 1.0,
        debounce: float = 0.5,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.runtime = runtime
        self.path = Path(path)
        self.interval = interval
        self.debounce = debounce
        self._environ = environ
        self.last: ReloadResult | None = None
        self.last_applied: ReloadResult | None = None
        self.restart_required: tuple[str, ...] = ()
        self._digest = _digest(self.path)
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._forced = False
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ConfigWatcher:
        self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def start(self) -> None:
        """Start watching (idempotent)."""
        if self._task is None:
            self._task = asyncio.create_task(self._watch(), name="config-watcher")

    async def aclose(self) -> None:
        """Stop watching. Safe to call twice; a reload never stops halfway (it does not await)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def request_reload(self) -> None:
        """Reload as soon as possible, changed or not (the SIGHUP handler)."""
        self._forced = True
        self._wake.set()

    async def _watch(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)
            self._wake.clear()
            if self._forced:
                self._forced = False
                await self.reload("signal")
                continue
            # A hash, not the mtime: coarse mtimes miss a quick same-size edit, and a
            # touch without a change is no reload.  The file is small.
            digest = _digest(self.path)
            if digest == self._digest:
                continue
            # Let the editor finish: reload once the content holds still.
            while True:
                await asyncio.sleep(self.debounce)
                now = _digest(self.path)
                if now == digest:
                    break
                digest = now
            if digest != self._digest:
                await self.reload("file")

    async def reload(self, trigger: str = "manual") -> ReloadResult:
        """Validate the file and apply what applies live; see the module docstring."""
        async with self._lock:
            try:
                result = self._reload(trigger)
            except Exception as exc:  # a bug here must not stop the watcher or the bot
                log.exception("config.reload_failed", path=str(self.path), trigger=trigger)
                result = ReloadResult(
                    "rejected",
                    restart_required=self.restart_required,
                    error=f"reload failed: {exc!r}",
                    at=time.time(),
                    trigger=trigger,
                )
        self.last = result
        if result.outcome == "applied":
            self.last_applied = result
        return result

    def _reload(self, trigger: str) -> ReloadResult:
        metrics = self.runtime.metrics
        now = time.time()
        self._digest = _digest(self.path)
        running = self.runtime.config
        try:
            new = load_config(self.path, self._environ)
            changes = changed_keys(running, new)
            restart = tuple(k for k in changes if not is_live(k))
            effective = effective_config(new, running, list(restart)) if restart else new
            check_windows(new, effective)
        except ConfigError as exc:
            metrics.config_reloads.labels("rejected").inc()
            log.error(
                "config.rejected",
                path=str(self.path),
                trigger=trigger,
                keys=[p.path for p in exc.problems],
                error=str(exc),
                hint="the last good config keeps running; fix the file and save it again",
            )
            return ReloadResult(
                "rejected",
                restart_required=self.restart_required,
                error=str(exc),
                at=now,
                trigger=trigger,
            )
        live = tuple(k for k in changes if is_live(k))
        if restart != self.restart_required and restart:
            log.warning(
                "config.restart_required",
                path=str(self.path),
                keys=list(restart),
                hint="these keys keep their running values until tierbot restarts",
            )
        self.restart_required = restart
        metrics.config_restart_pending.set(len(restart))
        if not live:
            metrics.config_reloads.labels("unchanged").inc()
            log.info(
                "config.unchanged",
                path=str(self.path),
                trigger=trigger,
                restart_required=list(restart),
            )
            return ReloadResult("unchanged", (), restart, at=now, trigger=trigger)
        self.runtime.set_config(effective)
        if "logging.level" in live:
            set_log_level(effective.logging.level)
        metrics.config_reloads.labels("applied").inc()
        metrics.config_reloaded_at.set(now)
        log.info(
            "config.reloaded",
            path=str(self.path),
            trigger=trigger,
            keys=list(live),
            restart_required=list(restart),
        )
        return ReloadResult("applied", live, restart, at=now, trigger=trigger)
