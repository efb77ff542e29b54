"""Proper names as people write them: capitalised words that do not open a
sentence ("What did Anna research?" names Anna), and whether a text knows someone
by a name: it writes the name on its own, or only ever inside one and the same
longer name ("Dana", where a note always says "Dana Whitfield"), not inside two
or more ("Anna Pavlova", "Anna Karenina": which Anna?), nor not at all.
What quality reads as `stranger`: a question about someone its answer does not know."""

import calendar
import re

from .temporal import MONTHS

# capitalised, but no one's name: months and days, whole or cut short
_CALENDAR = frozenset(
    [*(month.title() for month in MONTHS), *calendar.day_name, *calendar.day_abbr, "Tues", "Thur", "Thurs"]
)
_WORD = r"[A-Z][a-z]+"
_GAP = r"[^\S\n]+"  # between the words of a name: spaces or tabs, not a line break
# a run of capitalised words ("Corey Taylor"), not part of a word, a number or a hyphenated
# term ("Rad51", "N-cadherin", "Aire-expressing"); "Anna's" names Anna
_RUN = re.compile(rf"(?<![\w-]){_WORD}(?:{_GAP}{_WORD})*(?![\w-])")
_RUN_BEFORE = re.compile(rf"(?:{_WORD}{_GAP})+$")
_RUN_AFTER = re.compile(rf"(?:{_GAP}{_WORD})+")
# titles and abbreviations a sentence does not end at ("Dr. Smith", "St. Louis")
_TITLES = "Dr|Mr|Mrs|Ms|Mx|Prof|St|Mt|Ft|Jr|Sr|Rev|Gen|Col|Capt|Lt|Sgt|Gov|Sen|Rep|Fig|No|Vol|Inc|Ltd|Co|Corp"
_ABBREVIATION = re.compile(rf"(?<![\w-])(?:{_TITLES})\.$")
_OPENERS = ".?!:\"'\u2018\u201c(\n"  # a word after one of these (or first) opens a sentence or a quote
NEAR = 64  # characters either side of a name read for the rest of a longer one


def names_in(text):
    """The names `text` writes: its runs of capitalised words, less a run's first
    word when it opens a sentence, less the months and days, and less an
    abbreviation ("Dr." of "Dr. Smith")."""
    found = []
    for match in _RUN.finditer(text):
        if text.startswith(".", match.end()) and _ABBREVIATION.search(text[match.start() : match.end() + 1]):
            continue
        words = match.group().split()
        if _opens(text[max(0, match.start() - NEAR) : match.start()], match.start() <= NEAR):
            words = words[1:]
        words = [word for word in words if word not in _CALENDAR]
        if words and " ".join(words) not in found:
            found.append(" ".join(words))
    return found


def _opens(before, whole):
    """Whether a word after `before` opens a sentence (`whole`: `before` is all the
    text there is before it)."""
    before = before.rstrip(" \t\u00a0")  # a line break opens a sentence: a title ends there
    if not before:
        return whole
    return before[-1] in _OPENERS and not _ABBREVIATION.search(before)


def knows(text, name):
    """Whether `text` knows someone by `name` (in any case; a number may follow it:
    "Deltex1" names Deltex): it writes it on its own, or inside one and the same
    longer name wherever it writes it. A name of several words is known by any of
    them ("Priya Patel" where the text says "Priya")."""
    words = name.split()
    return _knows(text, words) or (len(words) > 1 and any(_knows(text, [word]) for word in words))


def _knows(text, words):
    longer, unsure = set(), False
    pattern = r"(?<!\w)" + _GAP.join(map(re.escape, words)) + r"(?![^\W\d_])"
    for match in re.finditer(pattern, text, re.IGNORECASE):
        start = max(0, match.start() - NEAR)
        before = _RUN_BEFORE.search(text, start, match.start())
        after = _RUN_AFTER.match(text, match.end(), match.end() + NEAR)
        ahead = before.group().split() if before else []
        if ahead and _opens(text[max(0, before.start() - NEAR) : before.start()], before.start() <= NEAR):
            ahead = ahead[1:]  # "In San Francisco", "Per Dana Whitfield": any word may open a sentence
            unsure = unsure or not ahead and not after
        name = ahead + words + (after.group().split() if after else [])
        if name == words and not (before and not ahead):
            return True
        if name != words:
            longer.add(" ".join(name).lower())
    return len(longer) == 1 or (unsure and not longer)
