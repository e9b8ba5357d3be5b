"""Split a reply into pieces a platform accepts, at the most natural boundary.

``split_message(text, limit)`` is pure: every piece is at most ``limit``
characters (Unicode code points, as Discord and Slack count them), pieces are
cut at paragraph, then line, then sentence, then word boundaries, and only a
run of text with no whitespace at all is cut mid-word.  A fenced code block
(```` ``` ```` or ``~~~``) is never cut in the middle of a line unless one of
its lines alone is too long: when a block does not fit in one piece it is
closed at the end of each piece and reopened (with its info string, so
highlighting survives) at the start of the next.

Whitespace at a cut is dropped; everything else is kept verbatim, so joining
the pieces (minus the added fences) gives the original text back up to the
whitespace at the cuts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["split_message"]

_FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_PARAGRAPH = re.compile(r"\n(?:[ \t]*\n)+")
_LINE = re.compile(r"\n")
_SENTENCE = re.compile(r"(?<=[.!?])[ \t]+|(?<=[。！？])")
_WORD = re.compile(r"\s+")
_LEVELS = (_PARAGRAPH, _LINE, _SENTENCE, _WORD)
_BLANK_HEAD = re.compile(r"(?:[ \t]*\n)+")
_BLANK_TAIL = re.compile(r"(?:\n[ \t]*)+$")


@dataclass(frozen=True, slots=True)
class _Code:
    """A fenced code block: its opening line, body lines and closing line (None if unclosed)."""

    opening: str
    body: list[str]
    closing: str | None

    @property
    def text(self) -> str:
        lines = [self.opening, *self.body]
        if self.closing is not None:
            lines.append(self.closing)
        return "\n".join(lines)


def split_message(text: str, limit: int) -> list[str]:
    """Split ``text`` into pieces of at most ``limit`` characters; see the module docstring.

    Returns no pieces for empty or whitespace-only text, one piece when it fits.
    Raises ValueError when ``limit`` is too small to hold a useful piece (< 16).
    """
    if limit < 16:
        raise ValueError(f"limit must be at least 16 characters, got {limit}")
    if not text.strip():
        return []
    if len(text) <= limit:
        return [text]
    atoms: list[tuple[str, str]] = []  # (separator before, piece of at most `limit` chars)
    for sep, block in _blocks(text):
        if isinstance(block, _Code):
            parts = _split_code(block, limit)
            atoms.append((sep, parts[0]))
            atoms.extend(("\n", part) for part in parts[1:])
        else:
            pieces = _split_prose(block, limit, 0)
            atoms.append((sep, pieces[0][1]))
            atoms.extend(pieces[1:])
    return _pack(atoms, limit)


def _blocks(text: str) -> list[tuple[str, str | _Code]]:
    """Cut ``text`` into prose and fenced code blocks, each with the separator before it."""
    blocks: list[tuple[str, str | _Code]] = []
    prose: list[str] = []
    lines = text.split("\n")
    sep = ""
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        fence = m.group("fence") if m else ""
        if not m or (fence[0] == "`" and "`" in m.group("info")):
            prose.append(lines[i])
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        if prose:
            tail = _add_prose(blocks, sep, "\n".join(prose))
            prose, sep = [], tail + "\n"
        closing = lines[end] if end < len(lines) else None
        blocks.append((sep, _Code(lines[i], lines[i + 1 : end], closing)))
        sep = "\n"
        i = end + 1
    if prose:
        _add_prose(blocks, sep, "\n".join(prose))
    return blocks


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return (
        len(stripped) >= len(fence)
        and stripped[0] == fence[0]
        and stripped == stripped[0] * len(stripped)
    )


def _add_prose(blocks: list[tuple[str, str | _Code]], sep: str, prose: str) -> str:
    """Append the paragraphs of ``prose`` to ``blocks``; return its trailing blank lines.

    Blank lines around the prose become part of the separators next to it, so
    no piece starts or ends with an empty line.
    """
    head = _BLANK_HEAD.match(prose)
    tail = _BLANK_TAIL.search(prose)
    start = head.end() if head else 0
    end = max(start, tail.start()) if tail else len(prose)
    sep += prose[:start]
    body = prose[start:end]
    if body:
        for i, (s, piece) in enumerate(_cut(body, _PARAGRAPH)):
            blocks.append((sep if i == 0 else s, piece))
        return prose[end:]
    return sep


def _cut(text: str, pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    """``text`` cut at ``pattern``: (separator before, piece) pairs; the first separator is ''."""
    out: list[tuple[str, str]] = []
    pos, sep = 0, ""
    for m in pattern.finditer(text):
        out.append((sep, text[pos : m.start()]))
        pos, sep = m.end(), m.group()
    out.append((sep, text[pos:]))
    return out


def _split_prose(text: str, limit: int, level: int) -> list[tuple[str, str]]:
    """Pieces of ``text``, each at most ``limit``, cut at ``_LEVELS[level]`` or finer."""
    if len(text) <= limit:
        return [("", text)]
    if level == len(_LEVELS):
        return [("", text[i : i + limit]) for i in range(0, len(text), limit)]
    out: list[tuple[str, str]] = []
    for sep, piece in _cut(text, _LEVELS[level]):
        finer = _split_prose(piece, limit, level + 1)
        out.append((sep, finer[0][1]))
        out.extend(finer[1:])
    return out


def _split_code(code: _Code, limit: int) -> list[str]:
    """The block whole when it fits, else parts each closed and reopened with the same fence."""
    text = code.text
    if len(text) <= limit:
        return [text]
    fence = _FENCE_OPEN.match(code.opening)
    assert fence is not None
    closing = code.closing if code.closing is not None else fence.group("fence")
    opening = code.opening
    budget = limit - len(opening) - len(closing) - 2
    if budget < max(8, limit // 4):
        # An absurdly long info string would leave no room for code: drop it.
        opening = fence.group("fence")
        budget = limit - len(opening) - len(closing) - 2
    body_lines: list[str] = []
    for line in code.body:
        if len(line) <= budget:
            body_lines.append(line)
        else:
            body_lines.extend(_pack(_split_prose(line, budget, 3), budget, keep_blank=True))
    bodies = _pack([("\n", line) for line in body_lines], budget, keep_blank=True)
    parts = [f"{opening}\n{body}\n{closing}" for body in bodies] or [f"{opening}\n{closing}"]
    if code.closing is None:
        # The original block ran to the end unclosed: leave its last part that way too.
        parts[-1] = parts[-1][: -len(closing) - 1]
    return parts


def _pack(atoms: list[tuple[str, str]], limit: int, *, keep_blank: bool = False) -> list[str]:
    """Greedily join (separator, atom) pairs into pieces of at most ``limit`` characters."""
    pieces: list[str] = []
    current: str | None = None
    for sep, atom in atoms:
        if current is None:
            current = atom
        elif len(current) + len(sep) + len(atom) <= limit:
            current += sep + atom
        else:
            pieces.append(current)
            current = atom
    if current is not None:
        pieces.append(current)
    if keep_blank:
        return pieces
    return [p.rstrip() for p in pieces if p.strip()]
