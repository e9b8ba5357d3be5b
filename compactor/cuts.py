"""Where to cut: which of the oldest live messages a compaction may take.

Rules, in order: summaries, markers and pinned messages are never taken; a
tool exchange is never split; the newest turn (the last user message and what
follows it) always stays; the cut moves to a turn boundary (a user message
after the bot's reply) when one is within a fifth of the cut.

A tool exchange is a call with every result that answers it, matched by call
id rather than by position (other messages may sit between them), and, for a
branch, also the ``branch_result`` pair that brings its conclusion back later:
the ``{"started": "branch-3"}`` result links the two.  An exchange whose branch
is still running (``in_flight``) is open: it stays live, whole, and a cut takes
what is around it (so a long branch never stops a channel from shrinking).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Sequence

from tierbot.messages import Message, Role

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


def _started(m: Message) -> str | None:
    """The branch or worker id a ``{"started": ...}`` tool result names, if any."""
    if m.role is not Role.TOOL_RESULT or '"started"' not in m.text:
        return None
    try:
        body = json.loads(m.text)
    except ValueError:
        return None
    started = body.get("started") if isinstance(body, dict) else None
    return started if isinstance(started, str) else None


def exchanges(
    items: Sequence[Message], in_flight: Collection[str] = ()
) -> tuple[list[tuple[int, int]], set[int]]:
    """The tool exchanges in ``items``: ``(first, last)`` index of every finished one that
    spans more than one message, and the indexes of the messages of open ones (a branch
    in ``in_flight`` has not brought its branch_result back yet)."""
    parent: dict[str, str] = {}

    def find(k: str) -> str:
        while parent.setdefault(k, k) != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    keys: list[list[str]] = []
    for m in items:
        own: list[str] = []
        if m.role is Role.TOOL_CALL:
            own = [str(c.get("id")) for c in m.meta.get("calls", []) if c.get("id")]
        elif m.role is Role.TOOL_RESULT and m.meta.get("call_id"):
            own = [str(m.meta["call_id"])]
            started = _started(m)
            if started:
                own.append(started)  # the later branch_result call carries this id
        for k in own[1:]:
            parent[find(own[0])] = find(k)
        keys.append(own)
    members: dict[str, list[int]] = {}
    for i, own in enumerate(keys):
        for k in own:
            members.setdefault(find(k), []).append(i)
    open_roots = {find(k) for k in in_flight if k in parent}
    spans = [
        (min(idx), max(idx))
        for root, idx in members.items()
        if root not in open_roots and max(idx) > min(idx)
    ]
    held = {i for root in open_roots for i in members.get(root, [])}
    return spans, held


def _splits(spans: Sequence[tuple[int, int]], cut: int) -> bool:
    """True if cutting before index ``cut`` leaves part of an exchange on each side."""
    return any(lo < cut <= hi for lo, hi in spans)


def choose_cut(
    items: Sequence[Message], fraction: float, in_flight: Collection[str] = ()
) -> list[Message]:
    """The oldest ``fraction`` of ``items`` (by count) that may be compacted, cut on structure.

    ``items`` is the whole live context in order; ``in_flight`` names the branches
    still running.  The result is empty when nothing may be taken.
    """
    cand = compactable(items)
    spans, held = exchanges(cand, in_flight)
    if held:  # a running branch's exchange stays; the cut works around it
        cand = [m for i, m in enumerate(cand) if i not in held]
        spans, _ = exchanges(cand)
    if not cand:
        return []
    limit_index = last_turn_start(cand)
    if limit_index <= 0:
        return []
    target = min(max(1, math.ceil(fraction * len(cand))), limit_index)

    def at_boundary(c: int) -> bool:
        return 0 < c <= limit_index and _is_turn_start(cand, c) and not _splits(spans, c)

    slack = max(1, target // 5)
    cut = next(
        (c for d in range(slack + 1) for c in (target + d, target - d) if at_boundary(c)),
        target,
    )
    # Never split an exchange: take the rest of it too, else leave all of it.
    forward = cut
    while _splits(spans, forward) and forward < limit_index:
        forward += 1
    if not _splits(spans, forward):
        return list(cand[:forward])
    backward = cut
    while backward > 0 and _splits(spans, backward):
        backward -= 1
    return list(cand[:backward])
