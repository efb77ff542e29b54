"""The lexical spec: user text to a safe FTS5 MATCH expression.

Terms, "quoted phrases", -"exclusions" (and -term), and exact code paths and
identifiers (`src/main.rs`, `parse_annotations`) are understood. Every item is
emitted as a quoted FTS5 string of the tokens FTS5's unicode61 tokenizer would
see, so no input can smuggle in FTS5 syntax: the result is always valid, and
matches nothing when the text has nothing to search for.
"""

import re
from dataclasses import dataclass, field

# unicode61 treats letters and digits as token characters and all else (the
# underscore included) as separators.
_TOKEN = re.compile(r"[^\W_]+")
_ITEM = re.compile(r'(-?)"([^"]*)"?|(-?)(\S+)')
MAX_ITEMS = 64
MATCH_NOTHING = '""'

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    few for from further had has have having he her here hers herself him himself his how
    i if in into is it its itself just me more most my myself no nor not now of off on
    once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves""".split()
)


@dataclass
class LexicalSpec:
    terms: list = field(default_factory=list)  # single tokens, OR-ed
    phrases: list = field(default_factory=list)  # token tuples, all required
    exclusions: list = field(default_factory=list)  # token tuples, none allowed


def tokens(text):
    return _TOKEN.findall(text)


def parse(text):
    """Split user text into terms, required phrases and exclusions."""
    spec = LexicalSpec()
    for match in _ITEM.finditer(text or ""):
        quoted_minus, quoted, bare_minus, bare = match.groups()
        if quoted is not None:
            words = tuple(tokens(quoted))
            if words:
                (spec.exclusions if quoted_minus else spec.phrases).append(words)
            continue
        words = tuple(tokens(bare))
        if not words:
            continue
        if bare_minus:
            spec.exclusions.append(words)
        elif len(words) > 1:
            # a code path or identifier: its parts must stand together
            spec.phrases.append(words)
        elif words[0].lower() not in STOPWORDS:
            spec.terms.append(words[0])
    return spec


def _quote(words):
    return '"' + " ".join(w.replace('"', '""') for w in words) + '"'


def fts_query(text):
    """A valid FTS5 MATCH expression for any text; MATCH_NOTHING when it has no words."""
    spec = parse(text)
    optional = list(dict.fromkeys(_quote((t,)) for t in spec.terms))
    required = list(dict.fromkeys(_quote(p) for p in spec.phrases))
    excluded = list(dict.fromkeys(_quote(e) for e in spec.exclusions))
    if not optional and not required:
        return MATCH_NOTHING
    any_of = " OR ".join((required + optional)[:MAX_ITEMS])
    if required:
        expression = " AND ".join(required[:MAX_ITEMS] + [f"({any_of})"])
    else:
        expression = any_of
    for item in excluded[:MAX_ITEMS]:
        expression = f"({expression}) NOT {item}"
    return expression
