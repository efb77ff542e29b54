"""Proper names as people write them: capitalised words that do not open a
sentence ("What did Anna research?" names Anna), and whether a text knows someone
by a name: it writes the name on its own, or inside longer names that agree beyond
it ("Dana", where a note says "Dana Whitfield" and is titled "Call With Dana
Whitfield"), not inside longer names that disagree ("Anna Pavlova", "Anna
Karenina": which Anna?), nor not at all.
What quality reads as `stranger`: a question about someone its answer does not know."""

import calendar
import re
import unicodedata

from .lexical import STOPWORDS
from .temporal import MONTHS

# capitalised, but no one's name: months, days and holidays, whole or cut short
_CALENDAR = frozenset(
    [*(month.title() for month in MONTHS), *calendar.day_name, *calendar.day_abbr, "Tues", "Weds", "Thur", "Thurs"]
    + ["Christmas", "Easter", "Halloween", "Thanksgiving", "Hanukkah", "Diwali", "Eid", "Ramadan"]
)
# holidays, no one's name: a Day or an Eve after one of these ("Memorial Day", "Christmas
# Eve"), or owned by one ("St. Patrick's Day", "New Year's Eve"), with its owner; Eve, Doris
# Day, "Day 3" and Anna of "Anna's Day off" are no holidays
_HOLIDAY = ("Day", "Eve")
_HOLIDAY_NAMES = _CALENDAR | {
    *("Memorial", "Independence", "Labor", "Labour", "Veterans", "Presidents", "Boxing", "Remembrance"),
    *("Columbus", "Election", "Earth", "Pride", "Victory", "Groundhog", "Canada", "Australia", "Bastille"),
}
_HOLIDAY_OWNERS = frozenset(
    ["Patrick", "Mother", "Mothers", "Father", "Fathers", "Valentine", "Year", "Grandparents", "Patriots"]
    + ["Saints", "Fool", "Fools"]
)
_OWNS_HOLIDAY = re.compile(r"['\u2019]s?[^\S\n]+(?:Day|Eve)\b")
_OWNED_HOLIDAY = re.compile(rf"\b(?:{'|'.join(sorted(_HOLIDAY_OWNERS))})['\u2019]s?[^\S\n]+$")
LONGEST = 4  # words of a name: a longer run of capitalised words is a title or a heading, no one's name


def _letters(categories):
    """A character class of the Latin and Cyrillic letters in `categories` (not the
    Greek: a claim's "Aβ" is no name)."""
    found = (chr(c) for c in (*range(0x41, 0x250), *range(0x400, 0x530), *range(0x1E00, 0x1F00)))
    return "[" + "".join(re.escape(c) for c in found if unicodedata.category(c) in categories) + "]"


_UPPER, _LOWER = _letters(("Lu", "Lt")), _letters(("Ll",))
_APOSTROPHE = "'\u2019\u2018\u02bc"  # as typed, typeset, or a modifier letter
# a capitalised word, in either alphabet ("José", "Łukasz", "Ömer"), after a surname's
# prefix ("O'Brien", "McDonald", "LaToya") and joined by hyphens to other capitalised
# words ("Mary-Jane"); not "AlphaBeta", nor "N-cadherin" or "Aire-expressing"
_CAPITALISED = rf"{_UPPER}{_LOWER}+"
_PREFIX = rf"(?:[OD][{_APOSTROPHE}]|Mc|Mac|D[aeiu]|L[ae]|Van|Von)"
_HYPHEN = "\\-\u2010\u2011\u2013"  # a hyphen as typed or typeset ("Hutchinson\u2013Gilford")
_WORD = rf"{_PREFIX}?{_CAPITALISED}(?:[{_HYPHEN}]{_PREFIX}?{_CAPITALISED})*"
# each apostrophe or hyphen as the pattern of any of its kind (escaped)
_MARKS = {mark: f"[{marks}]" for marks in (_APOSTROPHE, _HYPHEN) for mark in marks.replace("\\", "")}
# each letter to its letter without accents, one for one, so that offsets hold
_UNACCENTED = {
    c: base
    for c in range(0xC0, 0x250)
    if (base := unicodedata.normalize("NFD", chr(c))[0]) != chr(c) and base.isalpha()
}
_GAP = r"[^\S\n]+"  # between the words of a name: spaces or tabs, not a line break
_JOINER = rf"(?:[{_HYPHEN}]|{_GAP})"  # between the parts of a hyphenated name, as written or spaced
# a run of capitalised words ("Corey Taylor"), not part of a word, a number or a hyphenated
# term ("Rad51", "N-cadherin", "Aire-expressing"); "Anna's" names Anna
_RUN = re.compile(rf"(?<![\w-])(?<!\w[{_APOSTROPHE}]){_WORD}(?:{_GAP}{_WORD})*(?![\w-])")
_RUN_BEFORE = re.compile(rf"(?:{_WORD}{_GAP})+$")
_RUN_AFTER = re.compile(rf"(?:{_GAP}{_WORD})+")
# titles and abbreviations a sentence does not end at ("Dr. Smith", "St. Louis")
_TITLES = "Dr|Mr|Mrs|Ms|Mx|Prof|St|Mt|Ft|Jr|Sr|Rev|Gen|Col|Capt|Lt|Sgt|Gov|Sen|Rep|Fig|No|Vol|Inc|Ltd|Co|Corp"
_ABBREVIATION = re.compile(rf"(?<![\w-])(?:{_TITLES})\.$")
# a word after one of these (or first) opens a sentence, a quote or a list's item
_OPENERS = ".?!:\"'\u2018\u201c(\n-*>#|\u2022"
NEAR = 64  # characters either side of a name read for the rest of a longer one
# given names that are everyday words: in lower case the word, no one's name ("mark the
# invoices", "in summer", "the art of"); a tool's name ("nginx") is known in lower case
_EVERYDAY = frozenset(
    """mark bill rose grace frank hope jack art summer victor faith joy dawn june april august
    ray rich chase drew dean lane sky storm river brook rob pat sue gene guy don bob max jade
    ruby amber holly ivy iris lily daisy violet olive heather hazel sage autumn winter hunter
    mason carter cooper parker baker miles wade penny sandy melody crystal dusty rusty angel
    honey ginger pearl coral sunny page reed cliff glen dale heath basil clay gray grey rocky
    stone king duke earl prince piper scout nick jay robin wren finch drake hawk pepper cherry
    berry misty rain snow star ash bay bud buck cash colt jet kit ace harmony destiny liberty
    justice trinity major sterling forest bear wolf""".split()
)
_LABEL = re.compile(r"[*_]*:")  # after a name in capitals: a speaker's label
_NUMBERED = re.compile(r"[^\S\n]+\d")  # after a run: a numbered part, no one's name ("Day 3", "Apollo 11")


def names_in(text):
    """The names `text` writes: its runs of capitalised words, less a run's first
    word when it opens a sentence, less the months, days and holidays ("Memorial
    Day", "St. Patrick's Day"), and less an abbreviation ("Dr." of "Dr. Smith");
    a run of more than LONGEST words, or numbered ("Day 3"), is none."""
    found = []
    for match in _RUN.finditer(text):
        if text.startswith(".", match.end()) and _ABBREVIATION.search(text[match.start() : match.end() + 1]):
            continue
        if _NUMBERED.match(text, match.end()):
            continue
        words = match.group().split()
        if _holiday(text, match, words):
            continue
        if _opens_at(text, match.start()):
            words = words[1:]
        words = [word for word in words if not _CALENDAR.intersection(_parts(word))]  # "Monday-Friday" too
        if 0 < len(words) <= LONGEST and " ".join(words) not in found:
            found.append(" ".join(words))
    return found


def _holiday(text, match, words):
    """Whether the run `match` of `words` in `text` is a holiday (_HOLIDAY_NAMES)."""
    if words[-1] in _HOLIDAY_OWNERS and _OWNS_HOLIDAY.match(text, match.end()):
        return True
    if words[-1] not in _HOLIDAY:
        return False
    owned = _OWNED_HOLIDAY.search(text, max(0, match.start() - NEAR), match.start())
    return len(words) > 1 and words[-2] in _HOLIDAY_NAMES or owned is not None


def _opens_at(text, at):
    """Whether the word at `at` in `text` opens a sentence, read from the NEAR
    characters before it."""
    before = text[max(0, at - NEAR) : at].rstrip(" \t\u00a0")  # a line break opens a sentence: a title ends there
    if not before:
        return at <= NEAR
    return before[-1] in _OPENERS and not _ABBREVIATION.search(before)


def _parts(name):
    """The words of `name` and of its hyphen-joined words ("Mary-Jane": Mary, Jane)."""
    return [part for part in re.split(_JOINER, name) if part]


def knows(text, name):
    """Whether `text` knows someone by `name`: it writes it as a name (capitalised, in
    capitals only as a label: "SAM" is an acronym; a number may follow it: "Deltex1"
    names Deltex) on its own, or inside longer names that all agree beyond it ("Dana
    Whitfield", "Call With Dana Whitfield"; not "Anna Pavlova" and "Anna Karenina");
    or in lower case, as notes write a tool ("nginx" knows Nginx), but for a stop
    word or a given name that is an everyday word ("will" knows no Will, "mark" no
    Mark). A name of several words is known by one of them written on its own
    ("Priya Patel" where the text says "Priya"; not where it says "Priya Shah"), or
    by all of them in lower case ("launch day"), and with or without its accents
    ("Akinoshu Kenji", "Akinoshū Kenji"); a name of one word only as written ("Zoe"
    is not "Zoë", nor "Melanie" "Mélanie"). A name holding a hyphen ("Mary-Jane",
    "Hutchinson-Gilford", "Deploy-Runbook") is known written in any case with any
    hyphen or a space between its parts ("Mary Jane", "non-Hodgkin", "deploy
    runbook"), but as a name, capitalised, only as a name is known (not where the text
    holds two longer ones, "Mary Jane Watson" and "Mary Jane Girls"); not by its
    parts apart: a text about Mary and Jane knows no Mary-Jane (nor, so, one that
    says "Nadal beat Federer" the Federer-Nadal rivalry)."""
    if re.search(rf"[{_HYPHEN}]", name):
        parts, plain = _parts(unaccented(name)), unaccented(text)
        for match in re.finditer(rf"(?<!\w){_JOINER.join(map(escaped, parts))}(?!\w)", plain, re.IGNORECASE):
            if not all(part[0].isupper() for part in _parts(match.group())):
                return True  # a term, in lower or mixed case: "non-Hodgkin", "deploy runbook"
        if _knows(plain, parts, between=_JOINER):  # a name, as a name is known ("Mary Jane", not two Mary Janes)
            return True
    words = name.split()
    if len(words) > 1:
        text, words = unaccented(text), unaccented(name).split()
    everyday = len(words) == 1 and (words[0].lower() in STOPWORDS or words[0].lower() in _EVERYDAY)
    if _knows(text, words) or not everyday and _in_lower_case(text, words):
        return True
    return len(words) > 1 and any(_knows(text, [word], alone=True) for word in dict.fromkeys(words))


def unaccented(text):
    """`text` with each accented Latin letter as its letter ("Zoë" as "Zoe"), one for
    one, so that offsets hold."""
    return text.translate(_UNACCENTED)


def escaped(name):
    """A pattern of `name` as written, any apostrophe or hyphen for its own ("O'Brien"
    names O\u2019Brien, "Hutchinson-Gilford" Hutchinson\u2013Gilford)."""
    return "".join(_MARKS.get(c, re.escape(c)) for c in name)


def _in_lower_case(text, words):
    """Whether `text` writes `words` in lower case, as whole words."""
    if max(re.findall(r"\w+", words[0].lower()) or [""], key=len) not in text:  # mostly not: spared the search
        return False
    pattern = r"(?<!\w)" + _GAP.join(escaped(word.lower()) for word in words) + r"(?!\w)"
    return re.search(pattern, text) is not None


def _written_as_name(text, match):
    """Whether text matching a name in any case writes it as a name: each word
    capitalised ("Sam", not "mark" or "will", the words), and in capitals only as a
    speaker's label ("TOM: ...", "**TOM:**"), not in a sentence or a heading ("SAM",
    the acronym; "MARK YOUR CALENDARS")."""
    words = match.group().split()
    if not all(word[0].isupper() for word in words):
        return False
    return not any(word.isupper() for word in words) or _LABEL.match(text, match.end()) is not None


def _knows(text, words, alone=False, between=_GAP):
    lefts, rights, unsure = set(), set(), False
    pattern = r"(?<!\w)" + between.join(map(escaped, words)) + r"(?![^\W\d_])"
    for match in re.finditer(pattern, text, re.IGNORECASE):
        if not _written_as_name(text, match):
            continue
        before = _RUN_BEFORE.search(text, max(0, match.start() - NEAR), match.start())
        after = _RUN_AFTER.match(text, match.end(), match.end() + NEAR)
        ahead = before.group().split() if before else []
        if ahead and _opens_at(text, before.start()):
            ahead = ahead[1:]  # "In San Francisco", "- Per Dana Whitfield": any word may open a sentence
            unsure = unsure or not ahead and not after
        if not ahead and not after:
            if not before:
                return True
            continue
        lefts.add(ahead[-1].lower() if ahead else None)
        rights.add(after.group().split()[0].lower() if after else None)
    if alone:
        return False
    if not lefts:
        return unsure
    # one person: every longer name holds the same word right before the name, or right after it
    return (len(lefts) == 1 and None not in lefts) or (len(rights) == 1 and None not in rights)
