"""Quoted material: how text that is not the operator's reaches a model.

Only the operator's system prompt is sent as system text.  Everything derived
from what users said (summaries, recalled memories, branch conclusions, tool
results, notes about the conversation) travels in a non-system message, inside
``<quoted>`` or ``<memory>`` tags, the delimiters the default system prompt
tells the model to treat as material rather than instructions.  Inside a block
``&``, ``<`` and ``>`` are escaped, so no text can close its tag or open a new
one; :func:`blocks` reverses it for code that reads a prompt back (the offline
provider).

Invariant: ``blocks(quote(t, source=s))`` is ``[Block("quoted", s, t)]`` for every
string ``t``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tierbot.llm.base import ChatMessage

__all__ = [
    "Block",
    "blocks",
    "demote_system",
    "is_quoted",
    "quote",
    "quote_tool_result",
    "unquote",
]

Tag = Literal["quoted", "memory"]

_BLOCK = re.compile(r'<(quoted|memory)\b(?:\s+source="([^"<>]*)")?[^>]*>\n?(.*?)\n?</\1>', re.S)
_SOURCE_SAFE = re.compile(r"[^A-Za-z0-9_.:-]")


@dataclass(frozen=True, slots=True)
class Block:
    """One quoted block read back: its tag, where it came from, and its original text."""

    tag: str
    source: str
    text: str


def quote(text: str, *, source: str, tag: Tag = "quoted") -> str:
    """``text`` as one escaped ``<tag source="...">`` block; ``source`` says what it is."""
    src = _SOURCE_SAFE.sub("_", source)
    return f'<{tag} source="{src}">\n{html.escape(text, quote=False)}\n</{tag}>'


def quote_tool_result(tool: str, text: str) -> str:
    """A tool's result as a model reads it: recalled memories in ``<memory>``, anything
    else (searches, branch conclusions, errors) in ``<quoted>``."""
    if tool == "memory_recall":
        return quote(text, source=f"tool:{tool}", tag="memory")
    return quote(text, source=f"tool:{tool}")


def is_quoted(content: str) -> bool:
    """True when ``content`` is quoted material (made by :func:`quote`), not a person's words."""
    return bool(_BLOCK.fullmatch(content.strip()))


def blocks(content: str) -> list[Block]:
    """Every quoted block in ``content``, unescaped, in order."""
    return [Block(m[1], m[2] or "", html.unescape(m[3])) for m in _BLOCK.finditer(content)]


def unquote(content: str) -> str:
    """The original text of a quoted message, or ``content`` itself when it is not quoted."""
    if not is_quoted(content):
        return content
    return "\n".join(b.text for b in blocks(content))


def demote_system(messages: Sequence[ChatMessage]) -> tuple[str, list[ChatMessage]]:
    """Split a request into the system text and the conversation, for a provider.

    Only the leading system messages (the operator's prompt, and the instructions
    tierbot adds to it) are system text.  A system message further down is never
    promoted: it is sent as a quoted user message, so nothing that entered the
    conversation later can speak with the operator's voice.
    """
    system: list[str] = []
    i = 0
    while i < len(messages) and messages[i].role == "system":
        if messages[i].content:
            system.append(messages[i].content)
        i += 1
    rest = [
        ChatMessage("user", quote(m.content, source="note")) if m.role == "system" else m
        for m in messages[i:]
    ]
    return "\n\n".join(system), rest
