"""split_message: pieces within the limit, cut at the most natural boundary, fences intact."""

from __future__ import annotations

import random
import re

import pytest

from bot.adapters.split import split_message

FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")


def content(text: str) -> str:
    """Everything but whitespace and fence lines: what splitting must preserve."""
    lines = [line for line in text.split("\n") if not FENCE.match(line)]
    return "".join("".join(lines).split())


def fences_balanced(piece: str) -> bool:
    """Every fence opened in ``piece`` is closed in it (CommonMark-style, same char, >= length)."""
    open_fence: str | None = None
    for line in piece.split("\n"):
        m = FENCE.match(line)
        if not m:
            continue
        fence = m.group(1)
        if open_fence is None:
            open_fence = fence
        elif (
            fence[0] == open_fence[0]
            and len(fence) >= len(open_fence)
            and not line.strip()[len(fence) :]
        ):
            open_fence = None
    return open_fence is None


def check(text: str, limit: int) -> list[str]:
    pieces = split_message(text, limit)
    assert all(len(p) <= limit for p in pieces), [len(p) for p in pieces]
    assert all(p.strip() for p in pieces)
    assert content("\n".join(pieces)) == content(text)
    return pieces


def test_short_text_is_one_piece_unchanged() -> None:
    """Text within the limit comes back as one identical piece."""
    assert split_message("  hello\n\nworld  ", 2000) == ["  hello\n\nworld  "]


def test_empty_or_blank_text_gives_no_pieces() -> None:
    """Nothing to send for empty or whitespace-only text (platforms reject empty messages)."""
    assert split_message("", 2000) == []
    assert split_message(" \n\t\n", 2000) == []


def test_tiny_limit_is_refused() -> None:
    """A limit too small to hold a fenced piece is a programming error."""
    with pytest.raises(ValueError, match="at least 16"):
        split_message("some text", 10)


def test_cuts_between_paragraphs_first() -> None:
    """Two paragraphs that each fit are cut exactly at the blank line."""
    a, b = "A" * 30 + " end.", "B" * 30 + " end."
    assert check(f"{a}\n\n{b}", 50) == [a, b]


def test_paragraphs_are_packed_greedily() -> None:
    """Small paragraphs share a piece while they fit; the blank lines between them stay."""
    paras = [f"para {i} here." for i in range(6)]
    pieces = check("\n\n".join(paras), 50)
    assert pieces[0] == "para 0 here.\n\npara 1 here.\n\npara 2 here."
    assert len(pieces) == 2


def test_long_paragraph_is_cut_between_lines() -> None:
    """A paragraph over the limit is cut at a line break, not inside a line."""
    lines = [f"line number {i:02d}" for i in range(10)]
    pieces = check("\n".join(lines), 60)
    for piece in pieces:
        assert all(line in lines for line in piece.split("\n"))


def test_long_line_is_cut_between_sentences() -> None:
    """A line over the limit is cut after a sentence's end punctuation."""
    text = "This is one sentence. Here is another one! Is this the third? Yes it is."
    pieces = check(text, 45)
    assert pieces == ["This is one sentence. Here is another one!", "Is this the third? Yes it is."]


def test_cjk_sentences_are_cut_after_full_stops() -> None:
    """Sentences without spaces (Chinese, Japanese) are cut after 。！？."""
    text = "这是第一句话。" * 5
    pieces = check(text, 20)
    assert all(p.endswith("。") for p in pieces)


def test_long_sentence_is_cut_between_words() -> None:
    """A sentence over the limit is cut at a space, never inside a word."""
    words = [f"word{i}" for i in range(40)]
    pieces = check(" ".join(words), 50)
    for piece in pieces:
        assert all(w in words for w in piece.split(" "))


def test_run_without_whitespace_is_cut_hard() -> None:
    """Only a run with no whitespace at all is cut mid-word, at exactly the limit."""
    assert split_message("x" * 45, 20) == ["x" * 20, "x" * 20, "x" * 5]


def test_code_block_that_fits_moves_whole_to_the_next_piece() -> None:
    """A fenced block that fits in a piece is never cut, even when the current piece is used."""
    code = "```python\n" + "\n".join(f"print({i})" for i in range(8)) + "\n```"
    text = "Intro line that takes room.\n\n" + code + "\n\nAfter."
    pieces = check(text, len(code) + 5)
    assert code in pieces
    assert all(fences_balanced(p) for p in pieces)


def test_code_block_over_the_limit_is_closed_and_reopened() -> None:
    """A block too long for one piece is closed at each cut and reopened with its info string."""
    body = [f"value_{i} = compute({i})  # step {i}" for i in range(60)]
    text = "```python\n" + "\n".join(body) + "\n```"
    pieces = check(text, 400)
    assert len(pieces) > 3
    for piece in pieces:
        lines = piece.split("\n")
        assert lines[0] == "```python" and lines[-1] == "```"
        assert fences_balanced(piece)
    rejoined = [line for p in pieces for line in p.split("\n")[1:-1]]
    assert rejoined == body


def test_code_fence_is_never_cut_inside_a_line_when_lines_fit() -> None:
    """Inside a split code block every line arrives whole."""
    body = [f"    return {'x' * (i % 30)}" for i in range(50)]
    text = "Here:\n```\n" + "\n".join(body) + "\n```\nDone."
    pieces = check(text, 300)
    code_lines = [ln for p in pieces for ln in p.split("\n") if ln.startswith("    return")]
    assert code_lines == body


def test_code_line_longer_than_the_limit_is_cut_at_spaces_inside_fences() -> None:
    """A single code line over the limit is cut (at spaces) but each piece stays fenced."""
    text = "```js\n" + " ".join(["token"] * 60) + "\n```"
    pieces = check(text, 80)
    assert all(p.startswith("```js\n") and p.endswith("\n```") for p in pieces)


def test_tilde_and_longer_fences_are_respected() -> None:
    """``~~~`` fences and four-backtick fences around ``` lines are treated as one block."""
    inner = "```py\nprint('hi')\n```"
    text = "````markdown\n" + "\n".join([inner] * 12) + "\n````"
    pieces = check(text, 120)
    for piece in pieces:
        assert piece.startswith("````markdown\n") and piece.endswith("\n````")
    tilde = "~~~\n" + "\n".join(f"row {i}" for i in range(40)) + "\n~~~"
    assert all(p.startswith("~~~\n") and p.endswith("\n~~~") for p in check(tilde, 60))


def test_unclosed_fence_runs_to_the_end() -> None:
    """An unclosed block is closed in every piece but the last, which stays open like the input."""
    text = "Start.\n```sh\n" + "\n".join(f"echo {i}" for i in range(30))
    pieces = check(text, 60)
    code = [p for p in pieces if p.startswith("```sh")]
    assert all(p.endswith("\n```") for p in code[:-1])
    assert not code[-1].endswith("```")


def test_inline_triple_backticks_are_not_a_fence() -> None:
    """``` followed by text containing backticks on the same line is inline code, not a fence."""
    text = "```inline``` code here. " * 10
    pieces = check(text, 60)
    assert all(p.startswith("```inline```") for p in pieces)
    assert not any(p.endswith("\n```") for p in pieces)


def test_reply_of_4500_characters_with_code_fits_discord() -> None:
    """A 4,500-character reply with a code block becomes Discord-sized pieces with intact fences."""
    prose = " ".join(f"Sentence {i} explains a detail." for i in range(40))
    code = (
        "```python\n" + "\n".join(f"def f{i}(x):\n    return x * {i}" for i in range(70)) + "\n```"
    )
    text = prose + "\n\n" + code + "\n\nThat is all."
    text = text + "\n\n" + "More words. " * max(0, (4500 - len(text)) // 12)
    assert 4400 <= len(text) <= 4600
    pieces = check(text, 2000)
    assert len(pieces) == 3
    assert all(fences_balanced(p) for p in pieces)
    assert sum(p.count("```python") for p in pieces) >= 2


@pytest.mark.parametrize("seed", range(40))
def test_random_documents_keep_every_invariant(seed: int) -> None:
    """Random mixes of prose, lists and code keep limit, content and fence balance."""
    rng = random.Random(seed)
    blocks = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        if kind < 0.5:
            words = [
                rng.choice(["alpha", "beta", "gamma!", "delta.", "épée", "x" * rng.randint(1, 90)])
            ]
            words += [
                rng.choice(["one", "two.", "three?", "four"]) for _ in range(rng.randint(0, 120))
            ]
            blocks.append(" ".join(words))
        elif kind < 0.7:
            blocks.append("\n".join(f"- item {i}" for i in range(rng.randint(1, 30))))
        else:
            fence = rng.choice(["```", "~~~", "````"])
            info = rng.choice(["", "python", "js"])
            lines = [
                " " * rng.randint(0, 8) + "y" * rng.randint(0, 150)
                for _ in range(rng.randint(0, 40))
            ]
            blocks.append(f"{fence}{info}\n" + "\n".join(lines) + f"\n{fence}")
    text = rng.choice(["\n\n", "\n", "\n\n\n"]).join(blocks)
    limit = rng.choice([40, 100, 300, 2000])
    pieces = check(text, limit)
    assert all(fences_balanced(p) for p in pieces)
