"""The memory-typing rules match lowercased text with case-sensitive patterns (faster
than re.I); that must give exactly the answers the case-insensitive patterns give."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tierbot.llm import extraction

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"


def _lines() -> list[str]:
    out = []
    for name in ("extraction_lines.tsv", "extraction_heldout.tsv"):
        for line in (DATA / name).read_text(encoding="utf-8").splitlines():
            if line and not line.startswith("#"):
                text = line.split("\t")[2]
                out += [text, text.upper(), text.title(), text.swapcase()]
    return out


def _folded() -> list[tuple[str, extraction._Folded]]:
    found = [(n, p) for n, p in vars(extraction).items() if isinstance(p, extraction._Folded)]
    found += [(f"rule {kind}", p) for kind, _, p in extraction._RULES]
    return found


def test_every_folded_pattern_answers_as_its_case_insensitive_form() -> None:
    lines = _lines()
    patterns = _folded()
    assert len(lines) > 1000 and len(patterns) >= 18
    for name, folded in patterns:
        plain = re.compile(folded.pattern, re.I)
        for text in lines:
            assert folded.search(text) == bool(plain.search(text)), (name, text)
            assert folded.match(text) == bool(plain.match(text)), (name, text)


def test_classification_does_not_depend_on_case() -> None:
    # "REMEMBER THAT…" in capitals is the same statement: the rules type it alike.
    assert extraction.classify("I love hiking in the Alps.")[0] == "preference"
    assert extraction.classify("I LOVE HIKING IN THE ALPS.")[0] == "preference"
    assert extraction.classify("We decided to ship on Friday.")[0] == "decision"
    assert extraction.classify("WE DECIDED TO SHIP ON FRIDAY.")[0] == "decision"


def test_a_pattern_written_with_capitals_is_refused_at_import() -> None:
    # Matched against lowercased text, "Dana" could never match: refuse it loudly.
    with pytest.raises(ValueError, match="lower case"):
        extraction._Folded(r"\bDana\b")
    assert extraction._Folded(r"\b[A-Z][a-z]+ \S+").search("dana says")  # [A-Z] and \S stay
