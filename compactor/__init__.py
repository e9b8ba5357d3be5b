"""The compactor: a programmatic monitor of each channel's context usage (no LLM).

This floor owns the compaction *policy*: which tier a usage reaches
(:mod:`compactor.policy`), where a cut may fall without splitting a turn
(:mod:`compactor.cuts`), the per-channel monitor that plans passes and counts
them (:mod:`compactor.compactor`) and the scheduling arithmetic shared by
channels and branches (:mod:`compactor.scheduler`).  It never changes a history:
the channel actor applies its plans.

It may import only the kernel (tierbot); never workers, branches, channels or bot.
"""

from compactor.compactor import (
    Compactor,
    Plan,
    forced_note,
)
from compactor.cuts import choose_cut, compactable, last_turn_start
from compactor.policy import choose_tier, fraction_for

__all__ = [
    "Compactor",
    "Plan",
    "choose_cut",
    "choose_tier",
    "compactable",
    "forced_note",
    "fraction_for",
    "last_turn_start",
]
