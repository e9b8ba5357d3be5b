"""Keeping up with bursts: which range to compact next while others are in flight.

The compactor may have several background/aggressive passes in flight for one
channel (up to ``parallel_compactions``), each on a disjoint range of the
oldest live messages, launched oldest range first and swapped in in the same
order.  A further pass starts only while the usage *projected* after every
in-flight pass lands is still at or over ``background_threshold``: one pass
that will bring the channel back under never gets company.

Messages an emergency set aside are rescued in bounded chunks
(:func:`rescue_chunk`), oldest first, so no single summary covers thousands of
messages and each chunk lands as an ordinary summary with its provenance.

Every function here is pure: no store, no clock.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from tierbot.config import CompactionConfig
from tierbot.messages import Message, Role

__all__ = [
    "Pace",
    "in_flight_ids",
    "projected_usage",
    "rescue_chunk",
    "start_threshold",
    "summary_budget",
    "summary_room",
    "uncovered",
]


def summary_room(config: CompactionConfig, window: int, fixed: int = 0) -> float:
    """Tokens summaries may fill before the oldest are merged: ``summary_share`` of what
    the conversation has of the window once the ``fixed`` prompt (system prompt, tool
    specs) is in.

    Not of the whole window: with a system prompt and tools of 934 tokens in a
    1,500-token window, a quarter of the window (375 tokens) of summaries alone put the
    context at 87 %, over the aggressive threshold with no conversation left to compact,
    and every turn then ended in an emergency truncation.
    """
    return config.summary_share * max(0, window - fixed)


def summary_budget(config: CompactionConfig, window: int, fixed: int = 0) -> int:
    """Tokens one summary may take: ``max_summary_tokens``, but never more than half the
    share summaries may fill (:func:`summary_room`), so a small window is not flooded by
    its summaries."""
    share = int(summary_room(config, window, fixed) / 2)
    return max(32, min(config.max_summary_tokens, share))


def in_flight_ids(plans: Iterable[Collection[Message]]) -> set[int]:
    """Ids of every message covered by the given in-flight ranges."""
    return {m.id for covered in plans for m in covered}


def uncovered(items: Sequence[Message], busy: Collection[int]) -> list[Message]:
    """``items`` without the messages an in-flight pass already covers, in order.

    In-flight ranges are the oldest compactable messages, so what remains is
    still a contiguous run that :func:`compactor.cuts.choose_cut` can cut.
    """
    return [m for m in items if m.id not in busy] if busy else list(items)


def projected_usage(
    usage: float, window: int, ranges: Sequence[tuple[int, int]], budget: int
) -> float:
    """Usage once every in-flight range is replaced by its summary, estimated at half
    what it covers up to ``budget`` tokens.

    ``ranges`` holds, per range, the tokens it covers and how many of them are still
    live (messages an emergency already took out of the context free nothing).  An
    estimate that is too low only delays a further pass until the next message or
    the swap; one that is too high starts passes nobody needed.
    """
    if not ranges or window <= 0:
        return usage
    freed = sum(live for _, live in ranges)
    added = sum(min(budget, covered // 2) for covered, _ in ranges)
    return usage - (freed - added) / window


def rescue_chunk(messages: Sequence[Message], max_tokens: int, max_messages: int) -> list[Message]:
    """The oldest run of set-aside ``messages`` one rescue summary covers.

    At most ``max_messages`` messages and ``max_tokens`` tokens (always at least
    one message), oldest first; the chunk never ends between a tool call and
    its result, so it may run a few messages past the bounds to keep a pair whole.
    """
    ordered = sorted(messages, key=lambda m: (m.pos, m.id))
    out: list[Message] = []
    tokens = 0
    for m in ordered:
        if out and (len(out) >= max_messages or tokens + m.tokens > max_tokens):
            if not _pair_open(out, m):
                break
        out.append(m)
        tokens += m.tokens
    return out


def _pair_open(chunk: Sequence[Message], nxt: Message) -> bool:
    """True if ending ``chunk`` before ``nxt`` would separate a tool call from its result."""
    return chunk[-1].role is Role.TOOL_CALL or nxt.role is Role.TOOL_RESULT


class Pace:
    """How fast a channel fills and how long its passes take, to start passes early.

    A pass started at ``background_threshold`` lands one pass-duration later; if
    messages arrive fast enough to climb to the emergency threshold meanwhile, it
    lands too late however many run side by side.  :meth:`lead` is the usage that
    arrives during one pass (inbound tokens per second over the last few seconds
    times the slowest of the last three passes), so the compactor can start that
    much earlier.  It is zero until a pass has finished: a cold channel starts at
    its threshold.
    """

    WINDOW_SECONDS = 5.0

    __slots__ = ("_arrivals", "_durations", "_tokens")

    def __init__(self) -> None:
        # Plain lists, not deques: a deque costs ~600 bytes even empty, and every
        # resident channel has a Pace.  Both stay short (a few seconds; three passes).
        self._arrivals: list[tuple[float, int]] = []
        self._tokens = 0
        self._durations: tuple[float, ...] = ()

    def _expire(self, now: float) -> None:
        cut = 0
        for at, tokens in self._arrivals:
            if at >= now - self.WINDOW_SECONDS:
                break
            self._tokens -= tokens
            cut += 1
        if cut:
            del self._arrivals[:cut]

    def arrived(self, tokens: int, now: float) -> None:
        self._arrivals.append((now, tokens))
        self._tokens += tokens
        self._expire(now)

    def took(self, seconds: float) -> None:
        self._durations = (*self._durations[-2:], max(0.0, seconds))

    def rate(self, now: float) -> float:
        """Inbound tokens per second over the last :attr:`WINDOW_SECONDS`."""
        self._expire(now)
        if not self._arrivals:
            return 0.0
        span = max(0.5, now - self._arrivals[0][0])
        return self._tokens / span

    def lead(self, window: int, now: float) -> float:
        """Usage (a fraction of ``window``) that arrives while one pass runs."""
        if not self._durations or window <= 0:
            return 0.0
        return self.rate(now) * max(self._durations) / window


def start_threshold(config: CompactionConfig, lead: float) -> float:
    """Where a background pass starts: ``background_threshold``, or up to a quarter lower
    when passes would otherwise land after the channel reached the emergency tier."""
    if not config.predictive_start:
        return config.background_threshold
    return max(config.background_threshold - lead, 0.75 * config.background_threshold)
