"""Python's cyclic garbage collector, scheduled around the bot's traffic.

CPython collects reference cycles in three generations.  Its young pass walks what was
allocated since the last one (at most ``GC_YOUNG_THRESHOLD`` objects here: a few ms).
Its middle and full passes walk what survived young passes, which in a bot is mostly
its resident channels: at 10,000 of them a middle pass took 100-200 ms, several times in
a 20 s burst, and each one stalled every message waiting for its acknowledgement.  They
reclaimed nothing: the cycles a runtime makes die young, and an evicted channel is freed
by its reference count alone (see ``channels.actor``).

So while a runtime runs, Python's own schedule keeps only the young pass, and the
runtime runs the full pass itself (:class:`FullCollections`): once no message has
arrived for ``QUIET_SECONDS``, at most every ``QUIET_GAP_SECONDS``, and at least every
``[runtime] full_collection_seconds`` even if messages never stop.  The last runtime of
a process to stop gives the collector back its thresholds.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable

import structlog

log = structlog.get_logger("tierbot.runtime")

#: The young pass's threshold in a runtime process (Python's is 700).  A channel's
#: message allocates a few hundred tracked objects, so at 700 the collector ran every
#: few messages, and each run walked the generations that thousands of resident
#: channels fill: in a 10,000-channel burst it took 20 s of a 77 s run (26 full
#: collections), against 2.8 s at 20,000.  10,000 to 50,000 measured alike (856-872
#: msg/s against 648); 20,000 keeps the unreachable cycles waiting for a young pass to a
#: few MB.
GC_YOUNG_THRESHOLD = 20_000

#: The middle threshold while a runtime runs: young passes counted before Python would
#: run a middle pass on its own, i.e. never (the runtime runs the full pass instead).
DEFERRED = 1 << 30

#: No message for this long, and the process counts as quiet: a full pass then stalls
#: nobody's acknowledgement.
QUIET_SECONDS = 1.0

#: Quiet or not, full passes are at least this far apart (each walks every resident
#: channel: ~50 ms per 1,000 of them on a 2-core machine).
QUIET_GAP_SECONDS = 60.0


class _Process:
    """The interpreter's one collector, shared by the runtimes a process runs."""

    holders = 0
    saved: tuple[int, int, int] | None = None


def hold() -> None:
    """A runtime starts: the first one defers the middle and full passes and raises the
    young threshold to GC_YOUNG_THRESHOLD (never lowers it: a process that embeds the
    runtime may have set its own).  A young threshold of 0 (the collector switched off
    that way) is left alone."""
    if _Process.holders == 0:
        young, middle, old = gc.get_threshold()
        if young > 0:
            _Process.saved = (young, middle, old)
            gc.set_threshold(max(young, GC_YOUNG_THRESHOLD), DEFERRED, old)
    _Process.holders += 1


def release() -> None:
    """A runtime stops: the last one gives back the thresholds the first one found."""
    if _Process.holders == 0:
        return
    _Process.holders -= 1
    if _Process.holders == 0 and _Process.saved is not None:
        gc.set_threshold(*_Process.saved)
        _Process.saved = None


class FullCollections:
    """One runtime's side of the schedule: it is told of traffic, and runs the full
    pass when the process is quiet or when ``every()`` seconds passed without one."""

    def __init__(
        self,
        every: Callable[[], float],
        *,
        quiet: float = QUIET_SECONDS,
        gap: float = QUIET_GAP_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._every = every
        self._quiet = quiet
        self._gap = gap
        self._clock = clock
        self.last_traffic = self.last_full = clock()

    def traffic(self) -> None:
        """A message arrived (called once per submission: one clock read)."""
        self.last_traffic = self._clock()

    def due(self) -> bool:
        """Whether the full pass should run now.  Nothing is due when no young pass ran
        since the last full one (nothing survived to be walked), or when the collector
        is switched off."""
        if not gc.isenabled() or gc.get_count()[1] == 0:
            return False
        now = self._clock()
        since = now - self.last_full
        if since >= self._every():
            return True
        return since >= min(self._gap, self._every()) and now - self.last_traffic >= self._quiet

    def collect(self) -> int:
        """Run the full pass; the number of unreachable objects found."""
        quiet = self._clock() - self.last_traffic >= self._quiet
        started = time.perf_counter()
        found = gc.collect()
        self.last_full = self._clock()
        log.debug(
            "runtime.full_collection",
            seconds=round(time.perf_counter() - started, 4),
            unreachable=found,
            quiet=quiet,
        )
        return found

    async def run(self, poll: float = 0.25) -> None:
        """Check every ``poll`` seconds until cancelled."""
        while True:
            await asyncio.sleep(poll)
            if self.due():
                self.collect()


def freeze_startup_heap() -> None:
    """Move what the process holds once its first runtime is up (modules, tokenizer,
    config, store) into the collector's permanent generation; later runtimes of the same
    process (tests, benchmarks) leave it as it is.

    Those objects live as long as the process, yet every full collection walks them all:
    11-14 ms on a 2-core machine with the default modules loaded.  Frozen, the walk
    covers only what came later (live histories, in-flight work).  The garbage is
    collected first, so nothing unreachable is kept forever.  ``tierbot run`` freezes
    again once its operator seat is up.
    """
    if gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()
