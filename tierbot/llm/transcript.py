"""The transcript format compaction requests use, for every provider.

Each message becomes ``[<platform id>] <author>: <text>`` so a model can cite
message ids when it saves memories, and the offline provider can parse it back.
The bot's own lines carry :data:`BOT_MARK` after its name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

#: Follows the author of the bot's own lines: ``[id] tierbot (bot): ...``.
BOT_MARK = "(bot)"

_LINE = re.compile(r"^\[(?P<id>[^\]\n]{1,200})\] (?P<author>[^:\n]{0,120}): ?(?P<text>.*)$")


@dataclass(frozen=True, slots=True)
class TranscriptEntry:
    id: str
    author: str
    text: str


def format_transcript(entries: Iterable[TranscriptEntry]) -> str:
    """One entry per line; continuation lines of multi-line texts are indented."""
    out = []
    for e in entries:
        text = e.text.replace("\n", "\n  ")
        out.append(f"[{e.id}] {e.author}: {text}")
    return "\n".join(out)


def parse_transcript(text: str) -> list[TranscriptEntry]:
    """Inverse of :func:`format_transcript` (lines that do not start an entry continue one)."""
    entries: list[TranscriptEntry] = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            entries.append(TranscriptEntry(m["id"], m["author"].strip(), m["text"]))
        elif entries and line.strip():
            last = entries[-1]
            entries[-1] = TranscriptEntry(last.id, last.author, last.text + "\n" + line.strip())
    return entries
