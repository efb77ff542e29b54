"""The lexical spec: user text to a safe FTS5 MATCH expression.

Terms, "quoted phrases", -"exclusions" (and -term), and exact code paths and
identifiers (`src/main.rs`, `parse_annotations`) are understood. Every item is
emitted as a quoted FTS5 string of the tokens FTS5's unicode61 tokenizer would
see, so no input can smuggle in FTS5 syntax: the result is always valid, and
matches nothing when the text has nothing to search for.
"""

import functools
import re
import threading
from dataclasses import dataclass, field

import numpy as np

from .config import COMMON_PHRASE_ROWS, MAX_PHRASES
from .connection import sqlite3

# unicode61 treats letters and digits as token characters and all else (the
# underscore included) as separators.
_TOKEN = re.compile(r"[^\W_]+")
_ITEM = re.compile(r'(-?)"([^"]*)"?|(-?)(\S+)')
_CODE_LIKE = re.compile(r"[/\\._:]|\(\)|[a-z][A-Z]")
MAX_ITEMS = 64
PARSED_TEXTS = 1024  # texts whose cut is kept: query texts, of PARSED_CHARS at most
PARSED_CHARS = 2000
STEMS_KEPT = 100_000  # words whose stem is kept (stems), of STEM_WORD_CHARS at most
STEM_WORD_CHARS = 64
_stem_of: dict[str, str | None] = {}  # word -> its index term, or None for a word with no token
_UNKNOWN = object()
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
    text = text or ""
    cut = _cut(text) if len(text) <= PARSED_CHARS else _cut.__wrapped__(text)
    for (quoted_minus, quoted, bare_minus, bare), words in cut:
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


def asked(text):
    """`text` without its exclusions (-word, -"phrase"): what the query asks for.
    Only the lexical leg reads an exclusion, to leave out the rows holding it; what
    is embedded, the entities and speakers named and the names a hit must know are
    read from the rest, so that "refund policy -Dana" does not start the walk
    from Dana."""
    text = text or ""
    if "-" not in text:
        return text
    cut = _cut(text) if len(text) <= PARSED_CHARS else _cut.__wrapped__(text)
    kept, at = [], 0
    for match, ((quoted_minus, quoted, bare_minus, _), words) in zip(_ITEM.finditer(text), cut):
        if words and (quoted_minus if quoted is not None else bare_minus):
            kept.append(text[at : match.start()])
            at = match.end()
    if not kept:
        return text
    return re.sub(r"\s{2,}", " ", "".join(kept + [text[at:]])).strip()


@functools.lru_cache(maxsize=PARSED_TEXTS)
def _cut(text):
    """((the item's groups, its words as FTS5 cuts them), ...) of each item of `text`:
    one recall parses its text a dozen times (each leg, the quality estimate, the
    names), and each cut is a round of FTS5 inserts."""
    items = [match.groups() for match in _ITEM.finditer(text)]
    cut = fts_tokens([quoted if quoted is not None else bare for _, quoted, _, bare in items])
    return tuple(zip(items, map(tuple, cut)))


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


def plan(text, common=frozenset(), rows=0):
    """The Match for any text; nothing to match when it has no words.

    Single words in `common` (lowercase; words most documents contain) are left
    out while rarer words remain: they add little to BM25 and cost a scan of
    most of the index. A quoted phrase, an excluded one or a code path of several
    words is matched as a phrase up to MAX_PHRASES of them, in that order, and,
    where the search reaches more than COMMON_PHRASE_ROWS `rows`, when one of its
    words is not common: matching one reads its words' positions in every row
    holding them (a second for "of the" at a million memories). The others are
    matched as their words (an excluded one not at all).
    """
    spec = parse(text)
    budget = MAX_PHRASES

    def as_phrase(words):
        nonlocal budget
        if len(words) < 2:
            return True
        if budget < 1 or rows > COMMON_PHRASE_ROWS and all(w.lower() in common for w in words):
            return False
        budget -= 1
        return True

    required, excluded, compounds, loose = [], [], [], []
    for words in dict.fromkeys(tuple(p) for p in spec.phrases):
        (required if as_phrase(words) else loose).append(words)
    excluded = [words for words in dict.fromkeys(tuple(e) for e in spec.exclusions) if as_phrase(words)]
    for words in dict.fromkeys(tuple(c) for c in spec.compounds):
        (compounds if as_phrase(words) else loose).append(words)
    words = spec.terms + [w for item in loose for w in item if w not in STOPWORDS]
    terms = [t for t in words if t.lower() not in common]
    if not terms and not compounds and not required:
        terms = words
    optional = list(dict.fromkeys(compounds + [(t,) for t in terms]))
    if not optional and not required:
        return Match()
    return Match(tuple(required[:MAX_ITEMS]), tuple((required + optional)[:MAX_ITEMS]), tuple(excluded[:MAX_ITEMS]))


def fts_query(text, common=frozenset(), rows=0):
    """A valid FTS5 MATCH expression for any text (see `plan`)."""
    return plan(text, common, rows).expression()


def term_text(raw):
    """An index term as FTS5 holds it (bytes): its porter stemmer may cut a token
    inside a character, so a term is not always UTF-8; the bytes it cannot decode
    are kept as Python does for file names (surrogateescape), to go back as they were."""
    return raw.decode("utf-8", "surrogateescape")


def term_bytes(term):
    """A term as term_text gave it, as the bytes to compare with FTS5's (`term =
    cast(? as text)`)."""
    return term.encode("utf-8", "surrogateescape")


_local = threading.local()


def _tokenizer():
    """This thread's in-memory FTS5 tables: one with knowledge_fts's tokenizer,
    one with the unicode61 under its stemmer. Contentless, so 'delete-all' empties
    them at once: deleted rows would stay in the index and slow every later read."""
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = _local.conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.execute("create virtual table words using fts5(word, tokenize='porter unicode61', content='')")
        conn.execute("create virtual table word_terms using fts5vocab(words, 'instance')")
        conn.execute("create virtual table plain using fts5(text, tokenize='unicode61', content='')")
        conn.execute("create virtual table plain_terms using fts5vocab(plain, 'instance')")
    return conn


def fts_tokens(texts):
    """Each text's words as FTS5 cuts them — case folded, diacritics removed, not
    stemmed — in order. Python's idea of a letter is a newer Unicode's than
    FTS5's, so the index's own tokenizer decides: a quoted token then matches
    exactly what the index holds for it."""
    texts = list(texts)
    # ASCII text is cut here as unicode61 cuts it (_FOLD): an FTS5 round costs a millisecond
    found = [_ascii_tokens(text) if text.isascii() else [] for text in texts]
    other = [i for i, text in enumerate(texts) if not text.isascii()]
    if other:
        conn = _tokenizer()
        conn.execute("insert into plain (plain) values ('delete-all')")
        conn.executemany("insert into plain (rowid, text) values (?, ?)", [(i, texts[i]) for i in other])
        for doc, term in conn.execute("select doc, cast(term as blob) from plain_terms order by doc, offset"):
            found[doc].append(term_text(term))
    return found


def _ascii_tokens(text):
    return [token[:FTS_MAX_TOKEN].decode() for token in text.encode().translate(_FOLD).split()]


def stems(words):
    """{word: the term FTS5's 'porter unicode61' tokenizer indexes it as}.

    Uses a private in-memory FTS5 table with the same tokenizer, so the stems
    are exactly those in knowledge_fts_vocab; a word that yields no token is left out.
    """
    words = list(dict.fromkeys(words))
    known = {word: _stem_of.get(word, _UNKNOWN) for word in words}
    missing = [word for word, stem in known.items() if stem is _UNKNOWN]
    if missing:
        conn = _tokenizer()
        conn.execute("insert into words (words) values ('delete-all')")
        conn.executemany("insert into words (rowid, word) values (?, ?)", list(enumerate(missing)))
        found = dict.fromkeys(missing)  # None: the word yields no token
        for term, doc in conn.execute("select cast(term as blob), doc from word_terms where offset = 0"):
            found[missing[doc]] = term_text(term)
        known.update(found)
        if len(_stem_of) < STEMS_KEPT:  # a recall asks for its query's words several times over
            _stem_of.update((word, stem) for word, stem in found.items() if len(word) <= STEM_WORD_CHARS)
    return {word: stem for word, stem in known.items() if stem is not None}


def phrase_terms(words):
    """The terms FTS5 looks for, in order, for a quoted phrase of `words`."""
    conn = _tokenizer()
    conn.execute("insert into words (words) values ('delete-all')")
    conn.execute("insert into words (rowid, word) values (0, ?)", (" ".join(words),))
    return tuple(
        term_text(term) for (term,) in conn.execute("select cast(term as blob) from word_terms order by offset")
    )


def indexed_terms(text):
    """Every term knowledge_fts indexes `text` under: what MATCH finds it by."""
    conn = _tokenizer()
    conn.execute("insert into words (words) values ('delete-all')")
    conn.execute("insert into words (rowid, word) values (0, ?)", (text,))
    return {term_text(term) for (term,) in conn.execute("select distinct cast(term as blob) from word_terms")}


def terms_held(texts, terms):
    """For each of `texts`, the set of `terms` (index terms, as stems() gives them)
    knowledge_fts would index it under: one pass of the tokenizer over them all."""
    texts, terms = list(texts), sorted(set(terms))
    held = [set() for _ in texts]
    if not texts or not terms:
        return held
    conn = _tokenizer()
    conn.execute("insert into words (words) values ('delete-all')")
    conn.executemany("insert into words (rowid, word) values (?, ?)", list(enumerate(texts)))
    for term in terms:
        for (doc,) in conn.execute(
            "select distinct doc from word_terms where term = cast(? as text)", (term_bytes(term),)
        ):
            held[doc].add(term)
    return held


# unicode61 ends a token at every ASCII character but a letter or digit, and such a
# character never belongs to one: UTF-8 text cut at them gives runs FTS5 tokenizes
# one by one. A run of ASCII letters and digits is one token, its letters lowercased.
_FOLD = bytes(b + 32 if 65 <= b <= 90 else b if b >= 128 or chr(b).isalnum() else 32 for b in range(256))
FTS_MAX_TOKEN = 32768  # bytes of a token FTS5 indexes (FTS5_MAX_TOKEN_SIZE); the rest is cut off
PORTER_MIN, PORTER_MAX = 3, 64  # porter stems tokens of this many bytes only
SHORT_RUN = 16  # ASCII runs this long at most are told apart in numpy, by their bytes as two integers
RUN_CACHE = 500_000  # runs whose terms are remembered; all are forgotten when there are more
# run (UTF-8, ASCII letters lowercased) -> its term, or a tuple when it is not one token
_known: dict[bytes, str | tuple[str, ...]] = {}
_LOW_BYTES = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [(1 << 64) - 1], dtype=np.uint64)


def _terms_of(runs):
    """Each of `runs`' term, or a tuple of terms when it is not one token: ASCII
    ones stemmed by FTS5's porter when it would stem them, others tokenized by
    FTS5 itself. Remembered."""
    found = list(map(_known.get, runs))
    if None not in found:
        return found
    missing = [i for i, terms in enumerate(found) if terms is None]
    learnt, stemmed, other = {}, {}, []
    for run in {runs[i] for i in missing}:
        if not run.isascii():
            other.append(run)
        elif PORTER_MIN <= len(run) <= PORTER_MAX and not run.isdigit():  # a stem has a letter
            stemmed[run.decode()] = run
        else:  # as it is (not remembered: numbers would crowd out words)
            learnt[run] = run[:FTS_MAX_TOKEN].decode()
    remembered = {stemmed[token]: stem for token, stem in stems(stemmed).items()}
    if other:
        cut = [[] for _ in other]
        conn = _tokenizer()
        conn.execute("insert into words (words) values ('delete-all')")
        conn.executemany(
            "insert into words (rowid, word) values (?, ?)", [(i, run.decode()) for i, run in enumerate(other)]
        )
        for doc, term in conn.execute("select doc, cast(term as blob) from word_terms order by doc, offset"):
            cut[doc].append(term_text(term))
        remembered.update((run, terms[0] if len(terms) == 1 else tuple(terms)) for run, terms in zip(other, cut))
    if len(_known) + len(remembered) > RUN_CACHE:
        _known.clear()
    _known.update(remembered)
    learnt.update(remembered)
    for i in missing:
        found[i] = learnt[runs[i]]
    return found


@dataclass
class Indexed:
    """The terms a batch of rows is indexed under: (term, row, weight) triples,
    sorted by term then row, `term` indexing `terms`; and each row's tokens."""

    terms: list
    term: np.ndarray
    row: np.ndarray
    weight: np.ndarray
    tokens: np.ndarray

    def by_row(self):
        """[{term: weight}] for each row."""
        held = [{} for _ in self.tokens]
        for term, row, weight in zip(self.term.tolist(), self.row.tolist(), self.weight.tolist()):
            held[row][self.terms[term]] = weight
        return held


def index_terms(rows, weights):
    """What knowledge_fts indexes `rows` under (each row its columns' texts, None
    for an empty one): each term with its occurrences weighed by their column's
    weight and summed, and each row's number of tokens (FTS5's docsize, the length
    its bm25 takes). As FTS5 cuts and stems them, to the term; runs of text are
    told apart in numpy and only a batch's distinct ones are looked up."""
    rows = list(rows)
    if not rows:
        return Indexed([], np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64))
    parts = [text.encode() if text else b"" for row in rows for text in row]
    if len(parts) != len(rows) * len(weights):
        raise ValueError("one text (or None) per weight in every row")
    text = b" ".join(parts).translate(_FOLD) + b" " * SHORT_RUN
    chars = np.frombuffer(text, np.uint8)
    part_start = np.cumsum([0] + [len(part) + 1 for part in parts[:-1]])
    inside = chars != 32
    edges = np.flatnonzero(inside[1:] != inside[:-1]) + 1
    if inside[0]:
        edges = np.concatenate(([0], edges))
    start, end = edges[0::2], edges[1::2]
    part = np.searchsorted(part_start, start, "right") - 1  # row * columns + column
    slow = end - start > SHORT_RUN  # ...and runs with any byte beyond ASCII
    slow[np.searchsorted(start, np.flatnonzero(chars >= 128), "right") - 1] = True
    # short ASCII runs: one token each, grouped by their bytes (two little-endian words)
    short = np.flatnonzero(~slow)
    words = np.ndarray((len(chars) - 7,), dtype="<u8", buffer=text, strides=(1,))
    at, size = start[short], end[short] - start[short]
    low = words[at] & _LOW_BYTES[np.minimum(size, 8)]
    high = words[at + 8] & _LOW_BYTES[np.clip(size - 8, 0, 8)]
    # sorted by a hash of them, equal runs come together: runs that only share a hash may
    # interleave, and then make more than one group (of the same term)
    mixed = (low * np.uint64(0x9E3779B97F4A7C15)) ^ (high * np.uint64(0xC2B2AE3D27D4EB4F))
    if len(short) < 1 << 24:  # the hash's top 40 bits, each run's place in the low 24: a sort, not an argsort
        place = np.arange(len(short), dtype=np.uint64)
        order = (np.sort((mixed & ~np.uint64(0xFFFFFF)) | place) & np.uint64(0xFFFFFF)).astype(np.int64)
    else:
        order = np.argsort(mixed)
    low, high = low[order], high[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (low[1:] != low[:-1]) | (high[1:] != high[:-1])
    firsts = short[order[new]]
    found = _terms_of([text[a:b] for a, b in zip(start[firsts].tolist(), end[firsts].tolist())])
    terms = {}
    group_term = np.array([terms.setdefault(term, len(terms)) for term in found], dtype=np.int64)
    short_term = np.empty(len(short), dtype=np.int64)
    short_term[order] = group_term[np.cumsum(new) - 1]
    # the rest, one by one
    rest = np.flatnonzero(slow)
    runs = [text[a:b] for a, b in zip(start[rest].tolist(), end[rest].tolist())]
    rest_part, rest_term = [], []
    for at_part, spelt in zip(part[rest].tolist(), _terms_of(runs)):
        for term in (spelt,) if spelt.__class__ is str else spelt:
            rest_part.append(at_part)
            rest_term.append(terms.setdefault(term, len(terms)))
    every_part = np.concatenate((part[short], np.array(rest_part, dtype=np.int64)))
    every_term = np.concatenate((short_term, np.array(rest_term, dtype=np.int64)))
    # every part is (row, column): sorted by term, row and column, equal ones together
    width = len(rows) * len(weights)
    key = np.sort(every_term * width + every_part)
    first = np.ones(len(key), dtype=bool)
    first[1:] = key[1:] // len(weights) != key[:-1] // len(weights)
    weight = np.asarray(weights, dtype=np.float64)[key % len(weights)]
    summed = np.add.reduceat(weight, np.flatnonzero(first)) if len(key) else weight
    term, part = np.divmod(key[first], width)
    row_tokens = np.bincount(every_part // len(weights), minlength=len(rows))
    return Indexed(list(terms), term, part // len(weights), summed, row_tokens)
