"""`mentions` edges: a chunk that names a known entity (exactly, case-insensitively,
at word boundaries) ties its document to that entity, so the graph leg can hop
between documents that never link to each other.

Work is queued in brain_mention_queue (made by a migration) inside each
document's transaction and done by `resolve_mentions` (a remember's, in its own
transaction) or a `Resolution` step by step (ingest's, in short transactions of
their own), so an interrupted ingest is finished by the next one.
New chunks are matched against every entity name: with one Aho-Corasick automaton
when they are many, else by dict lookups; entities new to the brain are looked
for in older chunks through FTS5 when they are few, or with a second automaton
over all text when they are many.
"""

import bisect
import json
import re
import time

import ahocorasick

from .config import MENTION_FTS_LOOKUP_LIMIT, MENTION_LOOKUP_CHUNKS, MENTION_MIN_CHARS

MENTIONS = "mentions"  # the relation a chunk's text naming an entity is recorded as
from .lexical import tokens

QUEUE_TABLE = "brain_mention_queue"

# Entities a mention may name: not tags (taxonomy, reached by tagged_with edges).
# An alias resolves to the entity it is an alias of (its first alias_of edge, as the
# read state resolves the names in a query).
ENTITY_NAMES = f"""
select e.id, e.name, coalesce(
  (select r.to_entity_id from relationships r
   where r.from_entity_id = e.id and r.relation_type = 'alias_of' order by r.id limit 1), e.id) as target
from entities e
where coalesce(e.entity_type, '') != 'tag' and length(e.name) >= {MENTION_MIN_CHARS}
"""

# chunks whose document's entity is there (plain SQL may delete one; an edge from it is refused)
_CHUNKS = """
select k.id, k.document_id, d.entity_id, coalesce(k.title, '') || char(10) || k.content
from knowledge k join documents d on d.document_id = k.document_id
where exists (select 1 from entities e where e.id = d.entity_id)
"""


def queue(conn, kind, ids):
    """Queue chunk ids (kind 'chunk') or entity ids (kind 'entity') for matching."""
    conn.executemany(f"insert or ignore into {QUEUE_TABLE} (kind, id) values (?, ?)", [(kind, i) for i in ids])


_DISAMBIGUATOR = re.compile(r"^(.+?)\s+\([^()]+\)$")


def names_of(name):
    """The casefolded forms a name is found by: itself and, for a title with a
    trailing disambiguator such as "Mark King (musician)", the name before it."""
    folded = name.casefold()
    if not folded.endswith(")"):
        return (folded,)
    base = _DISAMBIGUATOR.match(folded)
    if base and len(base.group(1)) >= MENTION_MIN_CHARS:
        return (folded, base.group(1))
    return (folded,)


def automaton_of(named):
    """An automaton finding each key of {casefolded name: [targets, in order]}."""
    automaton = ahocorasick.Automaton()
    for key, targets in named.items():
        if targets:
            automaton.add_word(key, tuple((len(key), target) for target in targets))
    if not len(automaton):
        return None  # no names to find; pyahocorasick cannot search an empty automaton
    automaton.make_automaton()
    return automaton


def spans(automaton, text):
    """(start, end, target) of each entity name standing in `text` as whole words,
    in any case; offsets are into the casefolded text."""
    if automaton is None:
        return
    folded = text.casefold()
    for end, matches in automaton.iter(folded):
        after = folded[end + 1 : end + 2]
        if after and (after.isalnum() or after == "_"):
            continue
        for length, target in matches:
            start = end - length + 1
            before = folded[start - 1 : start] if start > 0 else ""
            if not before or not (before.isalnum() or before == "_"):
                yield start, end + 1, target


_WORD_BREAK = re.compile(r"\W")  # not alphanumeric nor "_": where `spans` lets a name begin or end


class _Lookup:
    """Finds the keys of {casefolded name: [targets]} in text as an automaton does
    (its `iter`), by looking up each run of text between word breaks, up to the
    longest name: for a few texts, quicker than building an automaton of all names."""

    def __init__(self, named):
        self.named, self.longest = named, max(map(len, named), default=0)

    def iter(self, folded):
        breaks = [m.start() for m in _WORD_BREAK.finditer(folded)] + [len(folded)]
        start = 0
        for i, stop in enumerate(breaks):
            for end in breaks[i : bisect.bisect_right(breaks, start + self.longest, lo=i)]:
                found = self.named.get(folded[start:end])
                if found:
                    yield end - 1, tuple((end - start, target) for target in found)
            start = stop + 1


class Names:
    """The names of the entities a chunk may mention (ENTITY_NAMES; those of `ids`
    only, when given), found in text by `found`: by an automaton when texts are
    `many`, else by lookups. `refresh` inside each later transaction keeps it exact
    across transactions: names new since are found too (by one more finder), and
    each name found is checked against its entity as it is now (gone, renamed, or
    an alias since)."""

    def __init__(self, conn, ids=None, many=True):
        self.ids, self.many = ids, many
        self.entities, self.finders = {}, []
        self.refresh(conn)

    def refresh(self, conn):
        sql, params = ENTITY_NAMES, []
        if self.ids is not None:
            sql, params = f"{ENTITY_NAMES} and e.id in (select value from json_each(?))", [json.dumps(sorted(self.ids))]
        current = {i: (name, target) for i, name, target in conn.execute(sql, params)}
        named = {}
        for i, (name, _) in current.items():
            if self.entities.get(i, (None,))[0] != name:
                for key in names_of(name):
                    named.setdefault(key, []).append(i)
        self.entities = current
        if named:
            self.finders.append(automaton_of(named) if self.many else _Lookup(named))
        return self

    def found(self, text):
        """The entities `text` names (the entities they are aliases of)."""
        targets, folded = set(), None
        for finder in self.finders:
            for start, end, entity_id in spans(finder, text):
                folded = folded or text.casefold()
                entity = self.entities.get(entity_id)
                if entity and folded[start:end] in names_of(entity[0]):
                    targets.add(entity[1])
        return targets


def resolve_mentions(conn, chunks=None, entities=None):
    """Do the queued mention matching at once in the caller's transaction: all of
    it, or that of the given chunk and entity ids (a remember's own); returns how
    many mentions edges were added."""
    resolution = Resolution(conn, chunks, entities)
    resolution.step()
    return resolution.added


class Resolution:
    """The queued mention matching, done a step at a time in the caller's write
    transactions (`step`): first the queued chunks, matched with every entity name,
    then the queued entities, looked for in older chunks. It is the work queued
    when it is made (of the `chunks` / `entities` ids only, when given): what other
    writers queue meanwhile is theirs to match. `prepare`, outside any transaction,
    builds the automatons ahead (the slow part) for `step` to bring up to date."""

    def __init__(self, conn, chunks=None, entities=None):
        self.conn = conn
        self.chunk_ids, self.entity_ids = self._queued("chunk", chunks), self._queued("entity", entities)
        self.added = 0  # mentions edges
        self.names = None  # Names of every entity, for the queued chunks
        self.new_names = None  # Names of the queued entities, for older chunks
        self.scanned = 0  # how far (chunk id) older chunks were scanned for new_names
        self.matched = set()  # chunks matched with every name here: no older chunks for new_names

    def prepare(self):
        if self.chunk_ids:
            self.names = Names(self.conn, many=len(self.chunk_ids) > MENTION_LOOKUP_CHUNKS)
        if self.entity_ids:
            self.new_names = Names(self.conn, self.entity_ids)
        return self

    def step(self, deadline=None):
        """Match until `deadline` (time.perf_counter) has passed, at least one chunk
        or entity, or all when None; returns whether anything is left to match."""
        chunks = self._queued("chunk", self.chunk_ids)
        if chunks and self._chunks(chunks, deadline):
            return True
        if chunks and _passed(deadline):  # the entities in a step of their own
            return bool(self._queued("entity", self.entity_ids))
        return self._entities(deadline)

    def _queued(self, kind, ids):
        sql, params = f"select id from {QUEUE_TABLE} where kind = ?", [kind]
        if ids is not None:
            sql, params = f"{sql} and id in (select value from json_each(?))", [kind, json.dumps(sorted(ids))]
        return [i for (i,) in self.conn.execute(f"{sql} order by id", params)]

    def _chunks(self, ids, deadline):
        """Match queued chunks (`ids`) in id order; returns whether any are left."""
        if self.names is None:
            self.names = Names(self.conn, many=len(ids) > MENTION_LOOKUP_CHUNKS)
        else:
            self.names.refresh(self.conn)
        edges, done = set(), ids[-1]  # chunks without a row here (gone, or of no document entity) are done too
        rows = self.conn.execute(
            f"{_CHUNKS} and k.id in (select value from json_each(?)) order by k.id", [json.dumps(ids)]
        )
        for row in rows:
            edges |= _edges([row], self.names)
            if _passed(deadline):
                done = row[0]
                break
        self._add(edges)
        finished = [i for i in ids if i <= done]
        self.matched.update(finished)
        self._unqueue("chunk", finished)
        return len(finished) < len(ids)

    def _entities(self, deadline):
        """Look for the queued entities in chunks matched before they were made;
        returns whether any are left."""
        if self.new_names is None:
            self.new_names = Names(self.conn, self.entity_ids)
        ids = self._queued("entity", self.entity_ids)
        if not ids:
            return False
        self.new_names.refresh(self.conn)
        older = f"k.id not in (select id from {QUEUE_TABLE} where kind = 'chunk')"
        edges, done = set(), ids
        if len(self.entity_ids) <= MENTION_FTS_LOOKUP_LIMIT:
            # one FTS5 lookup an entity, as many as the time allows
            for n, entity_id in enumerate(ids):
                entity = self.new_names.entities.get(entity_id)
                candidates = _fts_candidates(self.conn, [(entity_id, *entity)] if entity else []) - self.matched
                rows = self.conn.execute(f"{_CHUNKS} and k.id in (select value from json_each(?)) and {older}",
                                         [json.dumps(sorted(candidates))])  # fmt: skip
                edges |= _edges(rows, self.new_names)
                if _passed(deadline):
                    done = ids[: n + 1]
                    break
        else:
            # one pass over all older text, as far as the time allows
            rows = self.conn.execute(f"{_CHUNKS} and k.id > ? and {older} order by k.id", [self.scanned])
            for row in rows:
                if row[0] not in self.matched:
                    edges |= _edges([row], self.new_names)
                self.scanned = row[0]
                if _passed(deadline):
                    done = []
                    break
        self._add(edges)
        self._unqueue("entity", done)
        return len(done) < len(ids)

    def _add(self, edges):
        cursor = self.conn.executemany(
            "insert or ignore into relationships (from_entity_id, to_entity_id, relation_type, "
            f"knowledge_id, document_id) values (?, ?, '{MENTIONS}', ?, ?)",
            sorted(edges),
        )
        self.added += max(cursor.rowcount, 0)  # rows inserted: total_changes would count the change log's too

    def _unqueue(self, kind, ids):
        self.conn.execute(
            f"delete from {QUEUE_TABLE} where kind = ? and id in (select value from json_each(?))",
            [kind, json.dumps(ids)],
        )


def _edges(rows, names):
    """mentions edges (from, to, chunk, document) of `_CHUNKS` rows naming `names`."""
    return {(from_id, target, knowledge_id, document_id)
            for knowledge_id, document_id, from_id, text in rows
            for target in names.found(text) if target != from_id}  # fmt: skip


def _passed(deadline):
    return deadline is not None and time.perf_counter() >= deadline


def _fts_candidates(conn, entities):
    """Chunks whose full-text index holds all of an entity name's words in order."""
    candidates = set()
    for _, name, _ in entities:
        for form in names_of(name):
            words = tokens(form)
            if not words:
                continue
            phrase = '"' + " ".join(words) + '"'
            candidates.update(
                i for (i,) in conn.execute("select rowid from knowledge_fts where knowledge_fts match ?", (phrase,))
            )
    return candidates
