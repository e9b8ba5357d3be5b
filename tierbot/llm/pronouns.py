"""Whom a question's pronoun stands for: the one person named just before it.

"Where does Priya sit and what editor does she use?" asks two questions, and the second
is about Priya; so is "Where does she sit?" asked right after "What editor does Priya
use?".  Answers are found by the words a question shares with what was said, and "she"
shares nothing with "Priya's favourite editor is Vim", so the question is asked again
with the name in place of the pronoun.  A pronoun stands for a person only when exactly
one was named: after "Where do Ana and Rui live?", "they" is left as it is.
"""

from __future__ import annotations

import re

from tierbot.llm.text import CALENDAR_WORDS

__all__ = ["people_named", "person_named", "refers", "with_person"]

# A name inside a sentence (not its first word, which any sentence capitalises).
_NAME = re.compile(r"(?<=\S )(?!I\b)([A-Z][a-z][\w-]*)(?:['\u2019]s)?\b")
# Capitalised words that are no one: days, months, the bot, greetings.
_NOT_PEOPLE = frozenset([*CALENDAR_WORDS, "tierbot", "christmas", "easter"])
_PRONOUN = re.compile(r"\b(she|he|they|him|them|her|his|their)\b(\s+\w+)?", re.I)
_POSSESSIVE = frozenset({"his", "their"})
# Words after "her" that make it whom, not whose: "ask her about", "see her today".
_NOT_A_THING = frozenset(
    "about after again and anymore at before by for from in last lately now of on or "
    "recently still then to today tomorrow too with yesterday".split()
)


def people_named(text: str) -> set[str]:
    """The people ``text`` names: "Priya" of "Where does Priya sit?"."""
    return {m[1] for m in _NAME.finditer(text) if m[1].lower() not in _NOT_PEOPLE}


def person_named(text: str) -> str:
    """The one person ``text`` names, or "" when it names nobody or more than one."""
    found = people_named(text)
    return found.pop() if len(found) == 1 else ""


def refers(text: str) -> bool:
    """Whether ``text`` holds a third-person pronoun ("she", "his", …)."""
    return _PRONOUN.search(text) is not None


def with_person(question: str, person: str) -> str:
    """``question`` with its third-person pronouns standing for ``person``: "what editor
    does she use?" and "Priya" give "what editor does Priya use?", "where does her
    brother live?" "where does Priya's brother live?"; a question naming someone
    itself, or with no such pronoun, comes back as it is."""
    if not person or people_named(question):
        return question

    def named(m: re.Match[str]) -> str:
        word, after = m[1].lower(), m[2] or ""
        whose = word in _POSSESSIVE or (
            word == "her" and after.strip() != "" and after.strip().lower() not in _NOT_A_THING
        )
        return f"{person}'s{after}" if whose else f"{person}{after}"

    return _PRONOUN.sub(named, question)
