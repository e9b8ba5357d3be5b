"""Whom a question's pronoun stands for."""

from __future__ import annotations

import pytest

from tierbot.llm.pronouns import person_named, with_person


@pytest.mark.parametrize(
    ("question", "person", "expected"),
    [
        ("what editor does she use?", "Priya", "what editor does Priya use?"),
        ("Where does her brother live?", "Ana", "Where does Ana's brother live?"),
        ("What do you know about her?", "Ana", "What do you know about Ana?"),
        ("When did you last see her today?", "Ana", "When did you last see Ana today?"),
        (
            "What car does he drive and where is his office?",
            "Tom",
            "What car does Tom drive and where is Tom's office?",
        ),
        ("Where does Rui live?", "Ana", "Where does Rui live?"),  # names someone itself
        ("What is my locker code?", "Ana", "What is my locker code?"),  # no pronoun
        ("what editor does she use?", "", "what editor does she use?"),  # nobody named
    ],
)
def test_a_pronoun_is_read_as_the_person_named_before(
    question: str, person: str, expected: str
) -> None:
    assert with_person(question, person) == expected


def test_only_one_person_named_is_whom_a_pronoun_stands_for() -> None:
    assert person_named("Where does Priya sit?") == "Priya"
    assert person_named("Where do Ana and Rui live?") == ""  # "they" is both
    assert person_named("What happens on Monday?") == ""  # a day is no one
    assert person_named("What is my name?") == ""
