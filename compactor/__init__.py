"""The compactor: a programmatic monitor of each channel's context usage (no LLM)."""

from compactor.compactor import (
    Compactor,
    Plan,
    forced_note,
)
from compactor.cuts import choose_cut, compactable, last_turn_start
from compactor.policy import Tier, choose_tier, fraction_for

__all__ = [
    "Compactor",
    "Plan",
    "Tier",
    "choose_cut",
    "choose_tier",
    "compactable",
    "forced_note",
    "fraction_for",
    "last_turn_start",
]
