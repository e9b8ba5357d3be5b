"""What an answer looks like: a "when" question is answered by words that place things
in time, a "how many" question by a number.

Recall favours candidates carrying the kind of words the question asks for (a classic
answer-type heuristic of question answering).  Only question openings that say
unambiguously what they want are read; any other query expects nothing in particular.
"""

from __future__ import annotations

import calendar
import re

_MONTHS = "|".join(calendar.month_name[i].lower() for i in range(1, 13))
_TIME = (
    "yesterday|today|tonight|tomorrow|last|next|ago|recently|soon|earlier|later|since|"
    "weekend|weeks?|months?|years?|morning|afternoon|evening|night|"
    "monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    f"{_MONTHS}|(?:19|20)\\d\\d|[0-3]?\\d(?:st|nd|rd|th)"
)
_NUMBER = (
    "\\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|hundred|"
    "thousand|once|twice|several|couple|dozen|few|many"
)
_TIME_WORDS = re.compile(rf"\b(?:{_TIME})\b", re.IGNORECASE)
_NUMBER_WORDS = re.compile(rf"\b(?:{_NUMBER})\b", re.IGNORECASE)
_TIME_OR_NUMBER = re.compile(rf"\b(?:{_TIME}|{_NUMBER})\b", re.IGNORECASE)

_OPENINGS: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = (
    (re.compile(r"^\W*(?:when|what (?:time|date|day|month|year))\b", re.I), _TIME_WORDS),
    (re.compile(r"^\W*how long\b", re.I), _TIME_OR_NUMBER),
    (re.compile(r"^\W*how (?:many|much|often)\b", re.I), _NUMBER_WORDS),
)


def expected_answer(query: str) -> re.Pattern[str] | None:
    """A pattern that an answer to ``query`` likely matches, or None when it says nothing."""
    for opening, answer in _OPENINGS:
        if opening.match(query):
            return answer
    return None
