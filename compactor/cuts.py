"""Where to cut: which of the oldest live messages a compaction may take.

Rules, in order: summaries, markers and pinned messages are never taken; a
tool call and its result are never split; the newest turn (the last user
message and what follows it) always stays; the cut moves to a turn boundary
(a user message after the bot's reply) when one is within a fifth of the cut.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from bot.messages import Message, Role

_FIXED = (Role.SUMMARY, Role.MARKER, Role.SYSTEM)


def compactable(items: Sequence[Message]) -> list[Message]:
    """Live messages a compaction may cover, oldest first."""
    return [m for m in items if m.role not in _FIXED and not m.pinned]


def last_turn_start(items: Sequence[Message]) -> int:
    """Index in ``items`` where the newest turn begins: its user message.

    A turn is a user message and everything after it until the next user message.
    """
    i = len(items) - 1
    while i >= 0 and items[i].role is not Role.USER:
        i -= 1
    return i if i >= 0 else len(items)


def _is_turn_start(items: Sequence[Message], i: int) -> bool:
    """A user message that follows the bot's side of a turn: the cleanest place to cut."""
    return items[i].role is Role.USER and (i == 0 or items[i - 1].role is not Role.USER)


def _splits_tool_pair(items: Sequence[Message], cut: int) -> bool:
    """True if ``cut`` separates a tool call from its result."""
    if cut <= 0 or cut >= len(items):
        return False
    return items[cut - 1].role is Role.TOOL_CALL or items[cut].role is Role.TOOL_RESULT


def choose_cut(items: Sequence[Message], fraction: float) -> list[Message]:
    """The oldest ``fraction`` of ``items`` (by count) that may be compacted, cut on structure.

    ``items`` is the whole live context in order; the result is empty when
    nothing may be taken.
    """
    cand = compactable(items)
    if not cand:
        return []
    limit_index = last_turn_start(cand)
    if limit_index <= 0:
        return []
    target = min(max(1, math.ceil(fraction * len(cand))), limit_index)

    def at_boundary(c: int) -> bool:
        return 0 < c <= limit_index and _is_turn_start(cand, c)

    slack = max(1, target // 5)
    cut = next(
        (c for d in range(slack + 1) for c in (target + d, target - d) if at_boundary(c)),
        target,
    )
    # Never separate a tool call from its result: take the result too, else leave the call.
    forward = cut
    while _splits_tool_pair(cand, forward) and forward < limit_index:
        forward += 1
    if not _splits_tool_pair(cand, forward):
        return list(cand[:forward])
    backward = cut
    while backward > 0 and _splits_tool_pair(cand, backward):
        backward -= 1
    return list(cand[:backward])
