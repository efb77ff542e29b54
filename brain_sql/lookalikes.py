"""Characters that read like others, from Unicode's table of confusable characters
(UTS #39's confusables.txt), as the confusable-homoglyphs package ships it: the
table in a file of the wheel, read offline, and kept up to date by its maintainers.
The package keeps each pair both ways (a → а and а → a) and drops which side is
the prototype; a source maps to one prototype, so the characters that read alike
are the connected ones, and any one of them stands for all (the lowest: ASCII
where there is one). A source that reads as several characters ('m' as 'rn')
keeps its text. Loaded on first use, once a process."""

import functools
import json
import unicodedata
from importlib.resources import files

_LRM = "\u200e"  # the table wraps right-to-left characters in left-to-right marks


@functools.cache
def _table():
    """({character: the one its kind reads as}, {character: the text it reads as, of several})."""
    pairs = json.loads(files("confusable_homoglyphs").joinpath("confusables.json").read_text(encoding="utf-8"))
    parent, texts = {}, {}

    def root(character):
        while parent.setdefault(character, character) != character:
            character = parent[character]
        return character

    for source, alike in pairs.items():
        source = source.replace(_LRM, "")
        for entry in alike:
            target = entry["c"].replace(_LRM, "")
            if len(source) == 1 and len(target) == 1:
                low, high = sorted((root(source), root(target)))
                parent[high] = low
            elif len(source) == 1:  # a prototype of several characters is never a source
                texts[source] = target
    return {character: root(character) for character in list(parent)}, texts


def skeleton(text):
    """`text` as it reads: UTS #39's skeleton (NFD, each character by the one its
    kind reads as, NFD again). Two texts with one skeleton look alike."""
    kinds, texts = _table()
    mapped = "".join(
        "".join(kinds.get(c, c) for c in texts[character]) if character in texts else kinds.get(character, character)
        for character in unicodedata.normalize("NFD", text)
    )
    return unicodedata.normalize("NFD", mapped)


_DASH = "\u2014"  # EM DASH: the table puts — ― ─ ━ with ー, apart from -


def punctuation_read_as(character):
    """What a punctuation mark or symbol outside ASCII reads as, when that is ASCII
    text (∕ and ⁄ as '/', ‐ and − as '-', ’ as "'"), or '-' for a longer dash (— ―
    ─: beside a word on a page, a hyphen); None otherwise, and for every letter,
    digit and mark: letters that read like others (Cyrillic а, Katakana ノ) are
    the words of their scripts."""
    if character.isascii() or unicodedata.category(character)[0] not in "PS":
        return None
    read = skeleton(character)
    if read == character:
        return None
    if read.isascii():
        return read
    return "-" if read == skeleton(_DASH) else None
