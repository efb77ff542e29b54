"""Date phrases inside a query ("last week", "since March 2026", "in May"),
resolved against a fixed evaluation time into a since/until window.

Only phrases that name a time window unambiguously count: a bare year ("in
2005") is left alone, as it is far more often content than a filter.
"""

import calendar
import datetime
import re

from .fields import query_text, sqlite_time, utc_to

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


MONTH_LOOKBACK_YEARS = 10


def _latest_covered(window, covered):
    """The latest of `window` (since, until; either may be None) and the same
    window up to MONTH_LOOKBACK_YEARS years earlier in which `covered` finds
    memories; `window` itself when none has any."""
    for back in range(MONTH_LOOKBACK_YEARS + 1):
        try:
            shifted = tuple(t.replace(year=t.year - back) if t else None for t in window)
            if covered(*shifted):
                return shifted
        except (ValueError, OverflowError):  # 29 February in a year without one; out of range in UTC
            continue
    return window


def _yearless(kind, groups):
    """Whether the phrase names its window relative to now: every phrase but a
    date given with its year ("since March 2026", "before 2026-06-01")."""
    if kind in ("since", "until"):
        iso = (groups.get("date") or "")[:1].isdigit()
        return not (iso or groups.get("year") or groups.get("year2"))
    return not groups.get("year")


def _window(kind, match, now, seen, now_utc):
    """(since, until) that the phrase `match` of `kind` names, as wall times of
    `now`'s (a span back from now: as UTC times, None's the other); `seen(since,
    until)`, when given, says where memories were observed."""
    groups = match.groupdict()
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if kind in ("since", "until"):
        start = _date(match, now)[0]
        if seen and _yearless(kind, groups):
            # "since June": the latest June with memories after it; "before June": with memories on both sides
            both = (lambda a, b: seen(a, None) and seen(None, a)) if kind == "until" else seen
            start = _latest_covered((start, None), both)[0]
        return (start, None) if kind == "since" else (None, start)
    if kind in ("last_n", "last"):  # a span back from now, as long in any zone: read in UTC (now_utc)
        return now_utc - datetime.timedelta(days=int(groups.get("n") or 1) * _UNITS[groups["unit"].lower()]), None
    if kind == "this":
        unit = groups["unit"].lower()
        if unit == "week":
            return today - datetime.timedelta(days=today.weekday()), None
        return (today.replace(day=1) if unit == "month" else today.replace(month=1, day=1)), None
    if kind == "yesterday":
        return today - datetime.timedelta(days=1), today
    if kind == "today":
        return today, today + datetime.timedelta(days=1)
    window = _date(match, now)  # in_month
    return _latest_covered(window, seen) if seen and _yearless(kind, groups) else window


def extract(text, now, covered=None, zone=None):
    """(since, until, text without the phrases); since/until None where not named.

    `now` is a naive UTC datetime; invalid dates ("February 31") are left as text.
    The phrases name days of `zone` (a tzinfo, default UTC): asked at 20:00 in
    California, "yesterday" is California's yesterday, and the window is given in UTC.
    A month named without its year ("in June", "since June") is the latest June
    by `now` — or, given `covered(since, until)` (whether memories were observed
    then), the latest of the last MONTH_LOOKBACK_YEARS Junes that has any: asked
    in November about a conversation held two years ago, "in June" means its June.
    Given `covered`, a phrase relative to now ("last year", "in June") whose
    window holds no memory is left in the text, not applied: asked of an old
    conversation, "the camping trip last year" is about the trip.
    """

    def utc(moment):  # a wall time of `zone` as naive UTC
        if zone is None or moment is None:
            return moment
        return moment.replace(tzinfo=zone).astimezone(datetime.timezone.utc).replace(tzinfo=None)

    def seen(since, until):  # whether memories were observed between two wall times of `zone`
        return covered(*(sqlite_time(utc(t)) if t else None for t in (since, until)))

    now_utc = now
    try:
        now = utc_to(now, zone)
    except OverflowError:  # at the calendar's ends, days are UTC's
        zone = None
    since = until = None
    for kind, pattern in PATTERNS:
        match = pattern.search(text)
        if not match:
            continue
        groups = match.groupdict()
        try:
            window = _window(kind, match, now, seen if covered else None, now_utc)
            window = window if kind in ("last_n", "last") else tuple(utc(t) for t in window)
        except (ValueError, OverflowError):
            continue
        if _yearless(kind, groups) and covered and not covered(*(sqlite_time(t) if t else None for t in window)):
            continue  # a window relative to now holding no memory: the phrase is about something else
        since, until = window[0] or since, window[1] or until
        text = query_text(text[: match.start()] + " " + text[match.end() :]).strip()  # one space in its place
    return (sqlite_time(since) if since else None), (sqlite_time(until) if until else None), text


_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a couple of": 2,
    "a few": 3,
}
_COUNT = "|".join(sorted((re.escape(n).replace(r"\ ", r"\s+") for n in _NUMBERS), key=len, reverse=True))
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
RELATIVE = re.compile(
    # "the day before yesterday", "the day before the day before yesterday" (nine at most)
    r"\b(?:(?P<day>(?:(?:the\s+)?day\s+before\s+){1,9}yesterday|(?:(?:the\s+)?day\s+after\s+){1,9}tomorrow"
    r"|yesterday|today|tonight|tomorrow|last\s+night|this\s+morning)"
    r"|(?P<step>last|next|this|past|coming)\s+(?P<unit>week(?:end)?|month|year|summer|winter|spring|fall|autumn)"
    r"(?!\s+of\b)"  # not "the last week of June", "this year of all years"
    rf"|(?<!the )last\s+(?P<weekday>{_DAYS})(?!\s+(?:of|in)\b)"  # not "the last Friday of June"
    rf"|(?P<count>\d+|{_COUNT})\s+(?P<units>day|week(?:end)?|month|year)s?\s+ago)\b",
    re.I,
)
_WEEKDAY = r"(?:mon|tues?|wed|wednes|thu|thur|thurs|fri|sat|satur|sun)(?:day)?"
# a time a lowercased text states beside its RELATIVE phrases: a date, a month with its
# day or year, a year, a weekday said as past or coming, or a span of days to decades
# ("for 4 years"); and "in June" (capitalised: in_month's phrase) in the text itself
_STATED = re.compile(
    r"\b(?:\d{4}-\d{2}-\d{2}"
    rf"|(?:{_NAMES})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_NAMES})"
    rf"|(?:{_NAMES})\.?,?\s+\d{{4}}|1[6-9]\d\d|20\d\d"
    rf"|(?:last|this|next|past|on)\s+{_WEEKDAY}"
    rf"|(?:\d+|{_COUNT})\s+(?:day|week|weekend|month|year|decade)s?)\b"
)
_RELATIVE_LOWER = re.compile(RELATIVE.pattern)  # RELATIVE, on lowercased text: faster than ignoring case
_IN_MONTH = dict(PATTERNS)["in_month"]
# the words one of which every phrase these find holds, but for a number: a text with
# neither states no time, known without the patterns' slower search
_TIME_WORDS = frozenset(
    [*MONTHS, "yesterday", "today", "tonight", "tomorrow", "night", "morning", "ago"]
    + ["summer", "winter", "spring", "fall", "autumn"]
    + [unit + plural for unit in ("day", "week", "weekend", "month", "year", "decade") for plural in ("", "s")]
    + "mon monday tue tues tuesday wed wednes wednesday thu thur thurs thursday".split()
    + "fri friday sat satur saturday sun sunday".split()
)
_LETTERS, _DIGIT = re.compile(r"[a-z]+"), re.compile(r"\d")
# a question asking for a time: when something happened, how long ago or for how long
_ASKS_WHEN = re.compile(
    r"\b(?:when\s+(?:did|do|does|is|was|were|will|would|has|have|had|are|can|could|should)"
    r"|since\s+when|how\s+long|(?:what|which)\s+(?:year|month|date|day|week|weekend|season)"
    r"|how\s+many\s+(?:days|weeks|months|years))\b",
    re.I,
)


def asks_when(question):
    """Whether `question` asks for a time ("When did she move?", "How long ago...",
    "What year..."): its answer is a time some memory states."""
    return _ASKS_WHEN.search(question) is not None


def _no_time_word(lower):
    """Whether lowercased `lower` holds none of the words every time phrase holds, nor
    a digit: then it states no time, known without the patterns' slower search."""
    return _TIME_WORDS.isdisjoint(_LETTERS.findall(lower)) and not _DIGIT.search(lower)


def states_time(text):
    """Whether `text` states a time: a phrase relative to when it was said
    ("yesterday", "two weeks ago": RELATIVE), a date, a month named with its day or
    year or after "in", a year, a weekday ("last Friday") or a span ("for four years")."""
    lower = text.lower()
    if _no_time_word(lower):
        return False
    return bool(_RELATIVE_LOWER.search(lower) or _STATED.search(lower) or _IN_MONTH.search(text))


def day_label(moment):
    """'8 May 2023': a date as people write and ask for it."""
    return f"{moment.day} {calendar.month_name[moment.month]} {moment.year}"


def _month_label(year, month):
    return f"{calendar.month_name[month]} {year}"


def resolve_relative(text, at, limit):
    """['yesterday: 7 May 2023', ...]: the relative time phrases of `text` ("last
    week", "two years ago") read against `at`, when the text was said — so a turn
    says when its events happened, not only when it was spoken. At most `limit`."""
    resolved = []
    if _no_time_word(text.lower()):
        return resolved
    for match in RELATIVE.finditer(text):
        if len(resolved) == limit:
            break
        phrase = " ".join(match.group(0).lower().split())  # one line, however the phrase was spaced
        read = RELATIVE.fullmatch(phrase)
        if read is None:
            continue  # "TONİGHT" lowercased is no phrase: a line check could not read back
        try:
            label = _relative_label(read, at)
        except (OverflowError, ValueError):  # "999999999 days ago", "tomorrow" on 9999-12-31: left unresolved
            continue
        if not any(year.isdigit() and 1 <= int(year) <= 9999 for year in label.split()[-1:]):
            continue  # "next year" said in 9999: no year to name
        line = f"{phrase}: {label}"
        if line not in resolved:
            resolved.append(line)
    return resolved


_TO_SATURDAY = datetime.timedelta(days=5)  # from a week's Monday
_WEEKDAYS = {name: number for number, name in enumerate(_DAYS.split("|"))}  # as datetime.weekday() counts


# what _relative_label writes: a day, a month or a year, the week or weekend of a day, a season
_LABEL = re.compile(
    r"(?:the week(?:end)? of )?(?:\d{1,2} )?(?:(?:%s) )?\d{1,4}|(?:summer|winter|spring|fall|autumn) \d{1,4}"
    % "|".join(calendar.month_name[1:])
)


def resolved_line(line):
    """Whether `line` is a time phrase resolve_relative wrote ('yesterday: 7 May 2023'),
    not a quote of a speaker named like one ("Last Friday: see you then")."""
    phrase, colon, label = line.partition(": ")
    return bool(colon) and RELATIVE.fullmatch(phrase) is not None and _LABEL.fullmatch(label) is not None


def _relative_label(match, at):
    """The day, week, month, year or season `match` names, said at `at`: a match of
    RELATIVE over a phrase resolve_relative lowercased and spaced singly."""
    day, step, count, weekday = (match.group(name) for name in ("day", "step", "count", "weekday"))
    if day:
        steps = {"yesterday": -1, "tomorrow": 1}.get(day.rsplit(" ", 1)[-1], 0)  # "last night", "today": 0
        shift = steps * (1 + day.count("day before") + day.count("day after"))
        return day_label(at + datetime.timedelta(days=shift))
    if weekday:  # "last Friday": the latest Friday before the day it was said
        back = (at.weekday() - _WEEKDAYS[weekday]) % 7 or 7
        return day_label(at - datetime.timedelta(days=back))
    if count:
        n = int(count) if count.isdigit() else _NUMBERS[count]
        unit = match.group("units")
        if unit == "weekend":  # "two weekends ago": as "last weekend" is one ago
            if n < 1:
                raise ValueError("no weekend is 0 weekends ago")
            return f"the weekend of {day_label(at - datetime.timedelta(days=at.weekday(), weeks=n) + _TO_SATURDAY)}"
        if unit == "year":
            return str(at.year - n)
        if unit == "month":
            month = (at.year * 12 + at.month - 1) - n
            return _month_label(month // 12, month % 12 + 1)
        return day_label(at - datetime.timedelta(days=n * _UNITS[unit]))
    unit = match.group("unit")
    sign = {"last": -1, "past": -1, "next": 1, "coming": 1}.get(step, 0)
    if unit in ("week", "weekend"):
        start = at - datetime.timedelta(days=at.weekday()) + datetime.timedelta(weeks=sign)
        if unit == "weekend":
            start += _TO_SATURDAY
        return f"the {unit} of {day_label(start)}"
    if unit == "month":
        month = at.year * 12 + at.month - 1 + sign
        return _month_label(month // 12, month % 12 + 1)
    if unit == "year":
        return str(at.year + sign)
    return f"{unit} {at.year + sign}"  # a season: the one of the year before, this year or the next
