"""A recall's hits cut to the room the window has: what the asker has just been shown
goes last, so "what else?" brings what it has not seen."""

from __future__ import annotations

import json

from memory_graph.tools import fit_hits
from tierbot.tokens import get_counter

HITS = [
    {"id": f"mem_{i}", "type": "fact", "content": f"locker {i} has code {4400 + i}"}
    for i in range(12)
]


def _contents(result: str) -> list[str]:
    return [h["content"] for h in json.loads(result) if "content" in h]


def _room(n: int) -> int:
    """The fewest tokens that hold ``n`` hits (and the note of how many were left out)."""
    count = get_counter().count_message
    found = json.dumps(HITS)
    return next(r for r in range(10, 2000) if len(_contents(fit_hits(found, r, count))) == n)


def test_hits_the_last_reply_quoted_go_after_the_ones_it_did_not() -> None:
    count = get_counter().count_message
    found = json.dumps(HITS)
    first = _contents(fit_hits(found, _room(4), count))
    assert first == [h["content"] for h in HITS[:4]]
    shown = "Here is what you told me: " + "; ".join(first) + "; and 8 more things."
    again = _contents(fit_hits(found, _room(4), count, shown=shown))
    assert again == [h["content"] for h in HITS[4:8]], again
    # Everything fits: nothing is reordered or left out.
    assert _contents(fit_hits(found, 10_000, count, shown=shown)) == [h["content"] for h in HITS]
    # A reply that quoted them all: they come back best first.
    every = "; ".join(h["content"] for h in HITS)
    assert _contents(fit_hits(found, _room(4), count, shown=every)) == first
