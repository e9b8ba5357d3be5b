"""What a channel reports about itself: one frozen value for /status, ops and the CLI."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

__all__ = ["ChannelSnapshot"]


@dataclass(frozen=True, slots=True)
class ChannelSnapshot:
    """One channel's numbers at one instant (:meth:`ChannelActor.snapshot`).

    ``compactions`` counts passes by kind and outcome (``tierbot.vocab.COUNTER_KEYS``
    plus ``rescue``); ``compaction_running`` is the kind of the pass in flight;
    ``background`` lists the channel's branches and workers as ``/status`` shows
    them; ``thresholds`` maps each tier to its share of the window.
    """

    channel: str
    live_messages: int
    summaries: int
    live_tokens: int
    context_window: int
    usage: float
    peak_usage: float
    compactions: dict[str, int]
    compaction_running: str | None
    background: tuple[dict[str, Any], ...]
    thresholds: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        """The snapshot as the ops endpoint serves it (keys in field order)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["compactions"] = dict(self.compactions)
        out["background"] = [dict(run) for run in self.background]
        out["thresholds"] = dict(self.thresholds)
        return out
