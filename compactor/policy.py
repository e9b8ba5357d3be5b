"""The compaction policy: usage and thresholds -> action.  A pure function."""

from __future__ import annotations

from enum import StrEnum

from tierbot.config import CompactionConfig


class Tier(StrEnum):
    """What the compactor should do at a given usage, mildest first."""

    NONE = "none"
    BACKGROUND = "background"
    AGGRESSIVE = "aggressive"
    EMERGENCY = "emergency"


def choose_tier(usage: float, config: CompactionConfig) -> Tier:
    """The tier for ``usage`` (a fraction of the context window); each threshold is inclusive."""
    if usage >= config.emergency_threshold:
        return Tier.EMERGENCY
    if usage >= config.aggressive_threshold:
        return Tier.AGGRESSIVE
    if usage >= config.background_threshold:
        return Tier.BACKGROUND
    return Tier.NONE


def fraction_for(tier: Tier, config: CompactionConfig) -> float:
    """Share of the live messages a tier takes, oldest first."""
    return {
        Tier.BACKGROUND: config.background_fraction,
        Tier.AGGRESSIVE: config.aggressive_fraction,
        Tier.EMERGENCY: config.emergency_fraction,
    }.get(tier, 0.0)
