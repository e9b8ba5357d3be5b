"""A channel's live context with an exact running token total.

Every message is counted once, when it enters (its ``tokens`` field); the
context keeps the sum, so usage after each message is O(1) whatever the
history's length.  Replacing messages (a summary swap, a truncation) adjusts
the sum by what left and what came in.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

from tierbot.messages import Message, Role


def _order(m: Message) -> tuple[float, int]:
    return (m.pos, m.id)


class LiveContext:
    """The ordered live messages of one channel plus the fixed prompt overhead."""

    def __init__(self, messages: Iterable[Message] = (), *, fixed_tokens: int = 0) -> None:
        self._items: list[Message] = sorted(messages, key=_order)
        self.message_tokens = sum(m.tokens for m in self._items)
        # Running counts of summaries and markers, so the compactor's per-message check
        # never scans the history.
        self.summary_tokens = sum(m.tokens for m in self._items if m.role is Role.SUMMARY)
        self.summary_count = sum(1 for m in self._items if m.role is Role.SUMMARY)
        self.marker_count = sum(1 for m in self._items if m.role is Role.MARKER)
        self.fixed_tokens = fixed_tokens
        self._reported: int | None = None
        self._total_at_report = 0

    # -- reading ---------------------------------------------------------------

    @property
    def items(self) -> Sequence[Message]:
        return self._items

    def __len__(self) -> int:
        return len(self._items)

    @property
    def total(self) -> int:
        """Tokens the next call will send: fixed prompt + live messages, or more if the
        provider reported more for the last call (plus what was added since)."""
        total = self.fixed_tokens + self.message_tokens
        if self._reported is not None:
            return max(total, self._reported + (total - self._total_at_report))
        return total

    def usage(self, window: int) -> float:
        return self.total / window if window > 0 else 0.0

    def summaries(self) -> list[Message]:
        return [m for m in self._items if m.role is Role.SUMMARY]

    def ids(self) -> set[int]:
        return {m.id for m in self._items}

    # -- writing -----------------------------------------------------------------

    def append(self, msg: Message) -> None:
        """Add a message that entered the history (O(1) when it is the newest)."""
        # Ordered by (pos, id), looked up through the messages themselves: a resident
        # channel keeps no second list of keys.
        key = _order(msg)
        if not self._items or key > _order(self._items[-1]):
            self._items.append(msg)
        else:
            self._items.insert(bisect.bisect_left(self._items, key, key=_order), msg)
        self._count(msg, 1)

    def _count(self, msg: Message, sign: int) -> None:
        self.message_tokens += sign * msg.tokens
        if msg.role is Role.SUMMARY:
            self.summary_tokens += sign * msg.tokens
            self.summary_count += sign
        elif msg.role is Role.MARKER:
            self.marker_count += sign

    def set_fixed(self, tokens: int) -> None:
        self.fixed_tokens = tokens

    def report_input_tokens(self, tokens: int) -> None:
        """Remember what the provider counted for the call just made."""
        self._reported = tokens
        self._total_at_report = self.fixed_tokens + self.message_tokens

    def replace(self, remove_ids: Iterable[int], replacement: Message | None) -> list[Message]:
        """Remove messages by id (wherever they are) and insert ``replacement``; return the
        removed ones.  Resets the provider's reported count, which no longer applies."""
        remove = set(remove_ids)
        removed = [m for m in self._items if m.id in remove]
        if removed:
            self._items = [m for m in self._items if m.id not in remove]
            for m in removed:
                self._count(m, -1)
        if replacement is not None:
            self.append(replacement)
        self._reported = None
        return removed

    def update(self, msg: Message) -> None:
        """Replace the live message with ``msg.id`` by ``msg`` (text, pos or meta changed)."""
        self.replace([msg.id], msg)
