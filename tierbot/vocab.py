"""The one vocabulary of compaction, shared by the compactor, the store, metrics, CLI and /status.

Every place that names a kind of compaction or how one ended uses these enums
(they are ``StrEnum``: their values are the strings the store, the logs, the
metrics labels and the CLI have always shown, so nothing on disk or on a
dashboard changes).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["COUNTER_KEYS", "TIERS", "CompactionKind", "Outcome"]


class CompactionKind(StrEnum):
    """What a compaction does.

    ``BACKGROUND``, ``AGGRESSIVE`` and ``EMERGENCY`` are the usage tiers (80%,
    85%, 95% by default); ``META`` summarizes summaries; ``RESCUE`` summarizes
    the messages an emergency truncation set aside.
    """

    BACKGROUND = "background"
    AGGRESSIVE = "aggressive"
    EMERGENCY = "emergency"
    META = "meta"
    RESCUE = "rescue"


class Outcome(StrEnum):
    """How a compaction ended.

    ``OK``: the summary replaced its messages; ``NOOP``: it ran but would free
    nothing, so nothing changed and those messages are not tried again;
    ``FAILED``: an error (the model, a timeout, an unusable summary), retried on
    a later trigger.
    """

    OK = "ok"
    NOOP = "noop"
    FAILED = "failed"

    @classmethod
    def of(cls, stored: str) -> Outcome:
        """The outcome a stored string names; older stores wrote ``error`` for a failure."""
        return cls.FAILED if stored == "error" else cls(stored)


#: The kinds a usage threshold chooses, mildest first.
TIERS: tuple[CompactionKind, ...] = (
    CompactionKind.BACKGROUND,
    CompactionKind.AGGRESSIVE,
    CompactionKind.EMERGENCY,
)

#: The per-channel compaction counters /status and ``channel show`` print, in order:
#: successful passes by kind, then the passes that freed nothing or failed.
COUNTER_KEYS: tuple[str, ...] = (
    CompactionKind.BACKGROUND,
    CompactionKind.AGGRESSIVE,
    CompactionKind.EMERGENCY,
    CompactionKind.META,
    Outcome.NOOP,
    Outcome.FAILED,
)
