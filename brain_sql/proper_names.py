"""Proper names as people write them: capitalised words that do not open a
sentence ("What did Anna research?" names Anna), and whether a text names one as
that name rather than only inside a longer one ("Anna Pavlova" does not name
Anna).
What quality reads as `stranger`: a question about someone the answer never names."""

import calendar
import re

# capitalised, but no one's name
_CALENDAR = frozenset([*calendar.month_name[1:], *calendar.day_name])
# a run of capitalised words ("Corey Taylor"), not part of a word, a number or a hyphenated
# term ("Rad51", "N-cadherin", "Aire-expressing"); "Anna's" names Anna
_RUN = re.compile(r"(?<![\w-])[A-Z][a-z]+(?: [A-Z][a-z]+)*(?![\w-])")
_WORD_BEFORE = re.compile(r"[A-Z][a-z]+ $")
_WORD_AFTER = re.compile(r" [A-Z][a-z]")
_OPENERS = '.?!:"\u201c(\n'  # a word after one of these (or first) opens a sentence or a quote


def names_in(text):
    """The names `text` writes: its runs of capitalised words, less a run's first
    word when it opens a sentence, and less the months and days."""
    found = []
    for match in _RUN.finditer(text):
        words = match.group().split(" ")
        if opens(text[: match.start()]):
            words = words[1:]
        words = [word for word in words if word not in _CALENDAR]
        if words:
            found.append(" ".join(words))
    return found


def opens(before):
    """Whether a word after `before` opens a sentence."""
    before = before.rstrip()
    return not before or before[-1] in _OPENERS


def names_itself(text, name):
    """Whether `text` writes `name` (in any case) as a name of its own, not only
    inside a longer one: without a capitalised word right after it, nor right
    before it ("Anna Pavlova" names neither Anna nor Pavlova, "Elton John" not
    John). A capitalised word opening a sentence may be a name's or any word's
    ("Big Ben is...", "In San Francisco..."): after one, `name` names itself only
    when the text never writes it inside a longer name. A number may follow it
    ("Deltex1" names Deltex)."""
    alone = longer = False
    for match in re.finditer(rf"(?<!\w){re.escape(name)}(?![^\W\d_])", text, re.IGNORECASE):
        before = text[: match.start()]
        word = _WORD_BEFORE.search(before)
        if _WORD_AFTER.match(text, match.end()) or (word and not opens(before[: word.start()])):
            longer = True
        elif not word:
            return True
        else:
            alone = True
    return alone and not longer
