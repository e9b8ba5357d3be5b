"""choose_tier and fraction_for: usage -> which tier acts, and how much it takes."""

from __future__ import annotations

import pytest

from compactor.policy import choose_tier, fraction_for
from tierbot.config import CompactionConfig
from tierbot.vocab import CompactionKind

CFG = CompactionConfig()  # 0.80 / 0.85 / 0.95


@pytest.mark.parametrize(
    ("usage", "tier"),
    [
        (0.0, None),
        (0.7999, None),
        (0.80, CompactionKind.BACKGROUND),  # each threshold is inclusive
        (0.8499, CompactionKind.BACKGROUND),
        (0.85, CompactionKind.AGGRESSIVE),
        (0.9499, CompactionKind.AGGRESSIVE),
        (0.95, CompactionKind.EMERGENCY),
        (1.7, CompactionKind.EMERGENCY),  # over the window (a huge paste)
    ],
)
def test_each_threshold_starts_its_tier_inclusively(usage: float, tier: object) -> None:
    assert choose_tier(usage, CFG) is tier


def test_tiers_follow_the_operators_thresholds_not_the_defaults() -> None:
    cfg = CompactionConfig(
        branch_preflight_threshold=0.3,
        background_threshold=0.5,
        aggressive_threshold=0.6,
        emergency_threshold=0.7,
    )
    assert [choose_tier(u, cfg) for u in (0.49, 0.5, 0.6, 0.7)] == [
        None,
        CompactionKind.BACKGROUND,
        CompactionKind.AGGRESSIVE,
        CompactionKind.EMERGENCY,
    ]


def test_each_tier_takes_its_configured_share_and_nothing_else_takes_any() -> None:
    cfg = CompactionConfig(background_fraction=0.2, aggressive_fraction=0.4, emergency_fraction=0.6)
    assert fraction_for(CompactionKind.BACKGROUND, cfg) == 0.2
    assert fraction_for(CompactionKind.AGGRESSIVE, cfg) == 0.4
    assert fraction_for(CompactionKind.EMERGENCY, cfg) == 0.6
    assert fraction_for(CompactionKind.META, cfg) == 0.0
    assert fraction_for(None, cfg) == 0.0
