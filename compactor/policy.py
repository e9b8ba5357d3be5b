"""The compaction policy: usage and thresholds -> which tier acts.  Pure functions."""

from __future__ import annotations

from tierbot.config import CompactionConfig
from tierbot.vocab import CompactionKind

__all__ = ["choose_tier", "fraction_for"]


def choose_tier(usage: float, config: CompactionConfig) -> CompactionKind | None:
    """The tier for ``usage`` (a fraction of the context window), or None below them all.

    Each threshold is inclusive: at exactly ``background_threshold`` the background
    tier acts.
    """
    if usage >= config.emergency_threshold:
        return CompactionKind.EMERGENCY
    if usage >= config.aggressive_threshold:
        return CompactionKind.AGGRESSIVE
    if usage >= config.background_threshold:
        return CompactionKind.BACKGROUND
    return None


def fraction_for(tier: CompactionKind | None, config: CompactionConfig) -> float:
    """Share of the live messages a tier takes, oldest first (0 for anything else)."""
    if tier is CompactionKind.BACKGROUND:
        return config.background_fraction
    if tier is CompactionKind.AGGRESSIVE:
        return config.aggressive_fraction
    if tier is CompactionKind.EMERGENCY:
        return config.emergency_fraction
    return 0.0
