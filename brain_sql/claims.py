"""Literal support of a claim by a text: deterministic, case-insensitive and
tolerant of whitespace, with the character ranges where the claim stands.

The claim's words stand in the text one after another, any whitespace between
them, in any case as Python's `re.IGNORECASE` compares characters: what
`re.finditer` of the words joined by `\\s+` finds. It is found here in time that
grows with the text and the claim, not their product (a regex retries the claim
at every place: seconds of one core, and the server held, for a long claim
against a long text). Both are folded to one character of each case class; the
text's whitespace runs become one separator; and the claim, so written, is an
ordinary substring search."""

import bisect
import importlib
import re
from functools import lru_cache
from typing import Any

_EDGE_PUNCTUATION = " \t\r\n.,;:!?\"'()[]{}"
_WORDS = re.compile(r"\S+")  # whitespace as `\s` means it, the claim's `\s+`
# re's own case rules (Lib/re/_compiler.py): a character's simple lower case, and
# the few lower cases it also takes as equal ("ſ" and "s", "ı" and "i")
_tolower = importlib.import_module("_sre").unicode_tolower
_EXTRA_CASES = importlib.import_module("re._casefix")._EXTRA_CASES


# the letters that are their own lower case yet equal to another ("s" and "ſ")
_PAIRED = {chr(c) for c in (*_EXTRA_CASES, *(o for others in _EXTRA_CASES.values() for o in others))}


@lru_cache(maxsize=4096)
def _folded(code: int) -> int:
    """One character standing for every character re.IGNORECASE takes as equal to `code`."""
    lower = _tolower(code)
    return min((lower, *_EXTRA_CASES.get(lower, ())))


def _fold(text: str) -> str:
    """`text` with each letter as _folded writes it. Only a letter with a lower case of
    its own, or one of the pairs, can be written otherwise: the others (most of a text
    of many scripts) are not looked at one by one."""
    cased = (ord(c) for c in set(text) if c in _PAIRED or c.lower() != c)
    return text.translate({code: folded for code in cased if (folded := _folded(code)) != code})


def verify(claim: str | None, text: str | None) -> dict[str, Any]:
    """{"supported", "decision", "match_ranges"}: match_ranges are [start, end)
    character offsets into `text` of each occurrence of the claim."""
    words = (claim or "").strip(_EDGE_PUNCTUATION).split()
    ranges = _occurrences(words, text) if words and text else []
    return {
        "supported": bool(ranges),
        "decision": "supported" if ranges else "unsupported",
        "match_ranges": ranges,
    }


def _occurrences(words: list[str], text: str) -> list[list[int]]:
    """[start, end) of each occurrence, leftmost first, none overlapping (finditer's)."""
    folded = _fold(text)
    pieces = [(m.start(), m.end()) for m in _WORDS.finditer(text)]  # the text between whitespace runs
    wanted = [_fold(word) for word in words]
    used = set(folded).union(*wanted)
    separator = next(chr(c) for c in range(0x10FFFF, -1, -1) if chr(c) not in used)
    joined = separator.join(folded[a:b] for a, b in pieces)
    needle = separator.join(wanted)
    starts = []  # where each piece starts in `joined`
    at = 0
    for a, b in pieces:
        starts.append(at)
        at += b - a + 1
    ranges, piece, at = [], 0, joined.find(needle)
    while at >= 0:
        end = at + len(needle) - 1  # its last character, in a piece (a word never ends on whitespace)
        piece = bisect.bisect_right(starts, at, lo=piece) - 1
        last = bisect.bisect_right(starts, end, lo=piece) - 1
        ranges.append([pieces[piece][0] + at - starts[piece], pieces[last][0] + end - starts[last] + 1])
        at = joined.find(needle, at + len(needle))
    return ranges
