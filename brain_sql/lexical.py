"""The lexical spec: user text to a safe FTS5 MATCH expression.

Terms, "quoted phrases", -"exclusions" (and -term), and exact code paths and
identifiers (`src/main.rs`, `parse_annotations`) are understood. Every item is
emitted as a quoted FTS5 string of the tokens FTS5's unicode61 tokenizer would
see, so no input can smuggle in FTS5 syntax: the result is always valid, and
matches nothing when the text has nothing to search for.
"""

import re
import threading
from dataclasses import dataclass, field

from .connection import sqlite3

# unicode61 treats letters and digits as token characters and all else (the
# underscore included) as separators.
_TOKEN = re.compile(r"[^\W_]+")
_ITEM = re.compile(r'(-?)"([^"]*)"?|(-?)(\S+)')
_CODE_LIKE = re.compile(r"[/\\._:]|\(\)|[a-z][A-Z]")
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
    phrases: list = field(default_factory=list)  # "quoted" token tuples, all required
    compounds: list = field(default_factory=list)  # code paths and identifiers: OR-ed phrases
    exclusions: list = field(default_factory=list)  # token tuples, none allowed


def tokens(text):
    return _TOKEN.findall(text)


def parse(text):
    """Split user text into terms, required phrases and exclusions, each word a
    token as FTS5's unicode61 tokenizer cuts it (see fts_tokens)."""
    spec = LexicalSpec()
    items = [match.groups() for match in _ITEM.finditer(text or "")]
    cut = fts_tokens([quoted if quoted is not None else bare for _, quoted, _, bare in items])
    for (quoted_minus, quoted, bare_minus, bare), words in zip(items, map(tuple, cut)):
        if quoted is not None:
            if words:
                (spec.exclusions if quoted_minus else spec.phrases).append(words)
            continue
        if not words:
            continue
        if bare_minus:
            spec.exclusions.append(words)
        elif len(words) > 1 and _CODE_LIKE.search(bare):
            # a code path or identifier: its parts stand together
            spec.compounds.append(words)
        elif len(words) > 1:
            # a hyphenated or otherwise joined word: its parts count one by one
            spec.terms.extend(w for w in words if w not in STOPWORDS)
        elif words[0] not in STOPWORDS:
            spec.terms.append(words[0])
    return spec


def _quote(words):
    return '"' + " ".join(w.replace('"', '""') for w in words) + '"'


@dataclass(frozen=True)
class Match:
    """What a query matches, as word tuples: a row must hold every `required`
    phrase, one of `any_of` (the required ones among them, as FTS5 is told) and
    none of `excluded`."""

    required: tuple = ()
    any_of: tuple = ()
    excluded: tuple = ()

    def expression(self):
        """The FTS5 MATCH expression: always valid, MATCH_NOTHING when empty."""
        if not self.any_of:
            return MATCH_NOTHING
        any_of = " OR ".join(_quote(p) for p in self.any_of)
        expression = " AND ".join([_quote(p) for p in self.required] + [f"({any_of})"]) if self.required else any_of
        for item in self.excluded:
            expression = f"({expression}) NOT {_quote(item)}"
        return expression

    def phrases(self):
        """Every phrase of the expression, in its order: FTS5 scores each one."""
        return (self.required + self.any_of + self.excluded) if self.any_of else ()


def plan(text, common=frozenset()):
    """The Match for any text; nothing to match when it has no words.

    Single words in `common` (lowercase; words most documents contain) are left
    out while rarer words remain: they add little to BM25 and cost a scan of
    most of the index.
    """
    spec = parse(text)
    terms = [t for t in spec.terms if t.lower() not in common]
    if not terms and not spec.compounds and not spec.phrases:
        terms = spec.terms
    optional = list(dict.fromkeys([tuple(c) for c in spec.compounds] + [(t,) for t in terms]))
    required = list(dict.fromkeys(tuple(p) for p in spec.phrases))
    excluded = list(dict.fromkeys(tuple(e) for e in spec.exclusions))
    if not optional and not required:
        return Match()
    return Match(tuple(required[:MAX_ITEMS]), tuple((required + optional)[:MAX_ITEMS]), tuple(excluded[:MAX_ITEMS]))


def fts_query(text, common=frozenset()):
    """A valid FTS5 MATCH expression for any text (see `plan`)."""
    return plan(text, common).expression()


_local = threading.local()


def _tokenizer():
    """This thread's in-memory FTS5 tables: one with knowledge_fts's tokenizer,
    one with the unicode61 under its stemmer."""
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = _local.conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.execute("create virtual table words using fts5(word, tokenize='porter unicode61')")
        conn.execute("create virtual table word_terms using fts5vocab(words, 'instance')")
        conn.execute("create virtual table plain using fts5(text, tokenize='unicode61')")
        conn.execute("create virtual table plain_terms using fts5vocab(plain, 'instance')")
    return conn


def fts_tokens(texts):
    """Each text's words as FTS5 cuts them — case folded, diacritics removed, not
    stemmed — in order. Python's idea of a letter is a newer Unicode's than
    FTS5's, so the index's own tokenizer decides: a quoted token then matches
    exactly what the index holds for it."""
    texts = list(texts)
    if not texts:
        return []
    conn = _tokenizer()
    conn.execute("delete from plain")
    conn.executemany("insert into plain (rowid, text) values (?, ?)", list(enumerate(texts)))
    found = [[] for _ in texts]
    for doc, term in conn.execute("select doc, term from plain_terms order by doc, offset"):
        found[doc].append(term)
    return found


def stems(words):
    """{word: the term FTS5's 'porter unicode61' tokenizer indexes it as}.

    Uses a private in-memory FTS5 table with the same tokenizer, so the stems
    are exactly those in knowledge_fts_vocab; a word that yields no token is left out.
    """
    words = list(dict.fromkeys(words))
    if not words:
        return {}
    conn = _tokenizer()
    conn.execute("delete from words")
    conn.executemany("insert into words (rowid, word) values (?, ?)", list(enumerate(words)))
    return {words[doc]: term for term, doc in conn.execute("select term, doc from word_terms where offset = 0")}


def phrase_terms(words):
    """The terms FTS5 looks for, in order, for a quoted phrase of `words`."""
    conn = _tokenizer()
    conn.execute("delete from words")
    conn.execute("insert into words (rowid, word) values (0, ?)", (" ".join(words),))
    return tuple(term for (term,) in conn.execute("select term from word_terms order by offset"))


def indexed_terms(text):
    """Every term knowledge_fts indexes `text` under: what MATCH finds it by."""
    conn = _tokenizer()
    conn.execute("delete from words")
    conn.execute("insert into words (rowid, word) values (0, ?)", (text,))
    return {term for (term,) in conn.execute("select distinct term from word_terms")}


def terms_held(texts, terms):
    """For each of `texts`, the set of `terms` (index terms, as stems() gives them)
    knowledge_fts would index it under: one pass of the tokenizer over them all."""
    texts, terms = list(texts), sorted(set(terms))
    held = [set() for _ in texts]
    if not texts or not terms:
        return held
    conn = _tokenizer()
    conn.execute("delete from words")
    conn.executemany("insert into words (rowid, word) values (?, ?)", list(enumerate(texts)))
    for term in terms:
        for (doc,) in conn.execute("select distinct doc from word_terms where term = ?", (term,)):
            held[doc].add(term)
    return held
