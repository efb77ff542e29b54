"""Term statistics for one query: how many chunks hold each stem, read once from
the FTS5 'row' vocabulary (knowledge_fts_terms) and kept for the rest of the
query — the common-word cut, idf weights and expansion all use the same counts."""

import json
import math

from . import lexical
from .config import COMMON_TERM_SHARE


class TermStats:
    def __init__(self, conn):
        self.conn = conn
        self._documents = None
        self._frequencies = {}  # stem -> number of chunks holding it

    @property
    def documents(self):
        """The number of chunks (at least 1, so ratios are defined)."""
        if self._documents is None:
            self._documents = self.conn.execute("select count(*) from knowledge").fetchone()[0] or 1
        return self._documents

    def frequencies(self, stems):
        """{stem: number of chunks holding it} for `stems`; each read once."""
        stems = set(stems)
        missing = sorted(stems - self._frequencies.keys())
        if missing:
            found = dict(
                self.conn.execute(
                    "select term, doc from knowledge_fts_terms where term in (select value from json_each(?))",
                    [json.dumps(missing)],
                ).fetchall()
            )
            self._frequencies.update({stem: found.get(stem, 0) for stem in missing})
        return {stem: self._frequencies[stem] for stem in stems}

    def idf(self, stem):
        return math.log(1 + self.documents / (self.frequencies([stem])[stem] + 0.5))

    def query_idf(self, text):
        """{stem: idf} of every searchable word of `text` (terms, phrases, compounds)."""
        spec = lexical.parse(text)
        words = spec.terms + [w for phrase in spec.phrases + spec.compounds for w in phrase]
        stems = sorted(set(lexical.stems(words).values()))
        self.frequencies(stems)
        return {stem: self.idf(stem) for stem in stems}

    def common_words(self, text):
        """The query's single words found in more than COMMON_TERM_SHARE of the chunks."""
        stemmed = lexical.stems(lexical.parse(text).terms)
        if not stemmed:
            return frozenset()
        frequencies = self.frequencies(stemmed.values())
        limit = COMMON_TERM_SHARE * self.documents
        return frozenset(w.lower() for w, stem in stemmed.items() if frequencies[stem] > limit)
