"""Absolute dates in a query ("on 31 July, 2023", "in August 2023", "2023-07-31").

Recall favours nodes created inside the windows a query names: a question about
what someone said "on 3 June, 2023" is about the messages of that day.  Only
absolute dates are read; relative ones ("last week") need the asker's own date,
and a bare year is too coarse to help.  Times are local, like message timestamps
turned into dates by the adapters.
"""

from __future__ import annotations

import calendar
import re
from datetime import datetime, timedelta

_MONTHS = {
    name.lower(): i
    for i in range(1, 13)
    for name in (calendar.month_name[i], calendar.month_abbr[i])
}
_MONTHS["sept"] = 9
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_PATTERNS = [
    re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<mnum>[01]\d)-(?P<day>[0-3]\d)\b"),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s*{_YEAR}?\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\s+{_DAY}\b(?:,?\s*{_YEAR})?", re.IGNORECASE),
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
]
_ANY_YEAR = re.compile(r"\b(?:19|20)\d\d\b")
#: Slack around a named day: the asker's day and the writer's may differ by a time zone.
DAY_SLACK = timedelta(days=1)


def find_windows(query: str) -> tuple[list[tuple[float, float]], str]:
    """(time windows the query names, the query with those dates cut out)."""
    windows: list[tuple[float, float]] = []
    years = [int(y) for y in _ANY_YEAR.findall(query)]
    rest = query
    for pattern in _PATTERNS:
        for m in list(pattern.finditer(rest)):
            window = _window(m, years[-1] if years else None)
            if window is not None:
                windows.append(window)
                rest = rest.replace(m.group(0), " ", 1)
    return windows, rest


def _window(m: re.Match[str], default_year: int | None) -> tuple[float, float] | None:
    groups = m.groupdict()
    year = int(groups["year"]) if groups.get("year") else default_year
    if year is None:
        return None
    month = int(groups["mnum"]) if groups.get("mnum") else _MONTHS[groups["month"].lower()]
    try:
        if groups.get("day"):
            day = datetime(year, month, int(groups["day"]))
            return (day - DAY_SLACK).timestamp(), (day + timedelta(days=1) + DAY_SLACK).timestamp()
        first = datetime(year, month, 1)
        last = datetime(year + (month == 12), month % 12 + 1, 1)
        return first.timestamp(), last.timestamp()
    except ValueError:  # "31 February"
        return None
