"""Date phrases inside a query ("last week", "since March 2026", "in May"),
resolved against a fixed evaluation time into a since/until window.

Only phrases that name a time window unambiguously count: a bare year ("in
2005") is left alone, as it is far more often content than a filter.
"""

import calendar
import datetime
import re

from .fields import sqlite_time

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
MONTHS["sept"] = 9
_NAMES = "|".join(sorted(MONTHS, key=len, reverse=True))
# a bare month after "in" must be capitalised: "in May", not "in may be"
_TITLED = "|".join(sorted((m.title() for m in MONTHS), key=len, reverse=True))
_DATE = (
    r"(?P<date>\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?"
    rf"|(?P<month>{_NAMES})\.?(?:\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?,?)?(?:\s+(?P<year>\d{{4}}))?"
    rf"|(?P<day2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<month2>{_NAMES})\.?\s+(?P<year2>\d{{4}}))"
)
_UNITS = {"day": 1, "week": 7, "month": 30, "year": 365}
PATTERNS = [
    ("since", re.compile(rf"\b(?:since|after)\s+{_DATE}\b", re.I)),
    ("until", re.compile(rf"\b(?:before|until|till)\s+{_DATE}\b", re.I)),
    ("last_n", re.compile(r"\b(?:in\s+the\s+)?(?:last|past)\s+(?P<n>\d+)\s+(?P<unit>day|week|month|year)s?\b", re.I)),
    ("last", re.compile(r"\b(?:in\s+the\s+)?(?:last|past)\s+(?P<unit>day|week|month|year)\b", re.I)),
    ("this", re.compile(r"\bthis\s+(?P<unit>week|month|year)\b", re.I)),
    ("yesterday", re.compile(r"\byesterday\b", re.I)),
    ("today", re.compile(r"\btoday\b", re.I)),
    ("in_month", re.compile(rf"\b(?:[Ii]n|[Dd]uring)\s+(?P<month>{_TITLED})\.?(?:\s+(?P<year>\d{{4}}))?\b")),
]


def _month_start(year, month):
    return datetime.datetime(year, month, 1)


def _next_month(moment):
    return _month_start(moment.year + moment.month // 12, moment.month % 12 + 1)


def _recent_month(month, now):
    """The start of the latest `month` that has begun by `now`."""
    year = now.year if month <= now.month else now.year - 1
    return _month_start(year, month)


def _date(match, now):
    """(start, end) of the date a _DATE group names."""
    groups = match.groupdict()
    if groups.get("date") and groups["date"][0].isdigit() and "-" in groups["date"]:
        start = datetime.datetime.fromisoformat(groups["date"].replace(" ", "T"))
        return start, start + datetime.timedelta(days=1)
    month_name = groups.get("month") or groups.get("month2")
    month = MONTHS[month_name.lower().rstrip(".")]
    day = groups.get("day") or groups.get("day2")
    year = groups.get("year") or groups.get("year2")
    if day:
        start = datetime.datetime(int(year) if year else now.year, month, int(day))
        return start, start + datetime.timedelta(days=1)
    start = _month_start(int(year), month) if year else _recent_month(month, now)
    return start, _next_month(start)


def extract(text, now):
    """(since, until, text without the phrases); since/until None where not named.

    `now` is a naive UTC datetime; invalid dates ("February 31") are left as text.
    """
    since = until = None
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    for kind, pattern in PATTERNS:
        match = pattern.search(text)
        if not match:
            continue
        groups = match.groupdict()
        try:
            if kind in ("since", "until"):
                start, end = _date(match, now)
                if kind == "since":
                    since = start
                else:
                    until = start
            elif kind == "last_n":
                since = now - datetime.timedelta(days=int(groups["n"]) * _UNITS[groups["unit"].lower()])
            elif kind == "last":
                since = now - datetime.timedelta(days=_UNITS[groups["unit"].lower()])
            elif kind == "this":
                unit = groups["unit"].lower()
                if unit == "week":
                    since = today - datetime.timedelta(days=today.weekday())
                elif unit == "month":
                    since = today.replace(day=1)
                else:
                    since = today.replace(month=1, day=1)
            elif kind == "yesterday":
                since, until = today - datetime.timedelta(days=1), today
            elif kind == "today":
                since, until = today, today + datetime.timedelta(days=1)
            elif kind == "in_month":
                since, until = _date(match, now)
        except (ValueError, OverflowError):
            continue
        text = (text[: match.start()] + " " + text[match.end() :]).strip()
    text = re.sub(r"\s+", " ", text)
    return (sqlite_time(since) if since else None), (sqlite_time(until) if until else None), text
