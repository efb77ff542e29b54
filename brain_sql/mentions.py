"""`mentions` edges: a chunk that names a known entity (exactly, case-insensitively,
at word boundaries) ties its document to that entity, so the graph leg can hop
between documents that never link to each other.

Work is queued in brain_mention_queue (made by a migration) inside each
document's transaction and done by a `Resolution` step by step, in short
transactions (a remember's first step in its own, the rest in ones of their
own after it; ingest's in its turns), so what an interrupted writer left is
finished by the next ingest, or `check --repair` (`resolve_mentions`, at once). A step reads
its own part of the work, and again only the entities the change log names since
the step before: its cost grows with what it matches, not with the brain.

New chunks are matched against the names of the entities they may name: a few
new chunks in a big brain do not read every name for it. The runs of words of
their text are looked up in the name index (brain_mention_names: each entity
name by the hash of its words, kept up to date from the change log by
`follow_names`), and only the names found there, with those of the entities
changed since the index looked, are matched, as every name would be. Many new
chunks next to few names take every name. Names are found with one Aho-Corasick
automaton when the chunks are many, else by dict lookups. Entities new to the
brain are looked for in older chunks through FTS5, by their rare words or their
phrase, unless reading all older text costs less.
"""

import bisect
import collections
import itertools
import json
import re
import threading
import time

import ahocorasick
import numpy as np
import xxhash

from .config import (
    MAX_CHUNK_MENTIONS,
    MENTION_FTS_CANDIDATES,
    MENTION_FTS_RARE,
    MENTION_INDEX_CHARS_PER_NAME,
    MENTION_INDEX_REMEMBER_SECONDS,
    MENTION_LOOKUP_CHUNKS,
    MENTION_MIN_CHARS,
    MENTION_SCAN_CHUNKS_PER_ENTITY,
    MENTION_SCAN_CHUNKS_PER_PHRASE,
    MENTION_STEP_EDGES,
)
from .connection import main_file
from .lexical import tokens
from .schema import CHANGES_TABLE, MENTION_NAMES_SEEN_TABLE, MENTION_NAMES_TABLE, QUEUE_TABLE
from .slots import sorted_unique

MENTIONS = "mentions"  # the relation a chunk's text naming an entity is recorded as

# Entities a mention may name: not tags (taxonomy, reached by tagged_with edges).
_ELIGIBLE = f"coalesce(e.entity_type, '') != 'tag' and length(e.name) >= {MENTION_MIN_CHARS}"
_NAMES = f"select e.id, e.name from entities e where {_ELIGIBLE}"
# An alias resolves to the entity it is an alias of (its first alias_of edge, as the
# read state resolves the names in a query).
_TARGETS = """
select e.id, coalesce(
  (select r.to_entity_id from relationships r
   where r.from_entity_id = e.id and r.relation_type = 'alias_of' order by r.id limit 1), e.id)
from entities e where e.id in (select value from json_each(?))
"""

# chunks whose document's entity is there (plain SQL may delete one; an edge from it is refused)
_CHUNKS = """
select k.id, k.document_id, d.entity_id, coalesce(k.title, '') || char(10) || k.content
from knowledge k join documents d on d.document_id = k.document_id
where exists (select 1 from entities e where e.id = d.entity_id)
"""
_IN = "k.id in (select value from json_each(?))"
_OLDER = f"k.id not in (select id from {QUEUE_TABLE} where kind = 'chunk')"  # not queued to be matched with every name

# A word as `spans` bounds names: a run of characters that are alphanumeric or "_".
_WORD = re.compile(r"\w+")


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
    """The names of the entities a chunk may mention (those _NAMES reads; of `ids`
    only, when given), found in text by `found`: by an automaton when texts are
    `many`, else by lookups. `refresh` inside each later transaction keeps them
    exact across transactions, reading again just the entities the change log
    names since it last looked (all, when the log no longer tells): names new
    since are found too (by one more finder), and a name found is one its entity
    has now. With `since` (a position in the log, `_position`), `ids` are those the
    name index found as of that change (`_named_entities`), and the entities the log
    names after it join them. Which entity an alias stands for is read as edges are
    written (`_targets`)."""

    def __init__(self, conn, ids=None, many=True, since=None):
        self.many, self.names, self.finders = many, {}, []  # names: {entity id: its name, as the finders have it}
        self.only = None if ids is None or since is not None else set(ids)  # the entities it is of, when fixed
        self.since = _position(conn) if since is None else since  # read first: what changes after is read again
        self._read(conn, None if ids is None else set(ids))
        self.refresh(conn)

    def refresh(self, conn):
        changed, self.since = _changed_entities(conn, self.since)
        if self.only is not None:
            changed = self.only if changed is None else changed & self.only
        self._read(conn, changed)
        return self

    def _read(self, conn, ids):
        """Read the names of the entities `ids` (all when None) as they are now; a
        finder more for those new or renamed."""
        if ids is None:
            current = dict(conn.execute(_NAMES))
            gone = set(self.names) - set(current)
        elif ids:
            current = dict(
                conn.execute(f"{_NAMES} and e.id in (select value from json_each(?))", [json.dumps(sorted(ids))])
            )
            gone = ids - set(current)
        else:
            return
        for i in gone:
            self.names.pop(i, None)
        named = {}
        for i, name in current.items():
            if self.names.get(i) != name:
                self.names[i] = name
                for key in names_of(name):
                    named.setdefault(key, []).append(i)
        if named:
            self.finders.append(automaton_of(named) if self.many else _Lookup(named))

    def found(self, text):
        """The ids of the entities `text` names: MAX_CHUNK_MENTIONS at most, those named
        first (the longer name first where two start together)."""
        found, at, folded = set(), [], None
        for finder in self.finders:
            for start, end, entity_id in spans(finder, text):
                folded = folded or text.casefold()
                name = self.names.get(entity_id)
                if name is not None and folded[start:end] in names_of(name):
                    found.add(entity_id)
                    at.append((start, start - end, entity_id))
        if len(found) <= MAX_CHUNK_MENTIONS:
            return found
        kept = set()
        for *_, entity_id in sorted(at):
            if len(kept) == MAX_CHUNK_MENTIONS:
                break
            kept.add(entity_id)
        return kept


def resolve_mentions(conn, chunks=None, entities=None):
    """Do the queued mention matching at once in the caller's transaction: all of
    it, or that of the given chunk and entity ids (a remember's own); returns how
    many mentions edges were added."""
    resolution = Resolution(conn, chunks, entities)
    resolution.step()
    return resolution.added


_TEXTS_AT_ONCE = 1000  # chunks whose text is looked up in the name index together
_CHUNKS_AT_ONCE = 1000  # queued chunks a step reads at once (what is still queued of them, and their text)
_SCAN_AT_ONCE = 1000  # older chunks read between looks at the clock


class Resolution:
    """The queued mention matching, done a step at a time in the caller's write
    transactions (`step`): first the queued chunks, matched with the names they may
    hold (`_chunk_names`), then the queued entities, looked for in older chunks. It
    is the work queued when it is made (of the `chunks` / `entities` ids only, when
    given): what other writers queue meanwhile is theirs to match. `prepare`,
    outside any transaction and after `follow_names`, finds the names and builds
    the automatons ahead (the slow part) for `step` to bring up to date; without
    it, the first step does, after following the name index for at most
    MENTION_INDEX_REMEMBER_SECONDS."""

    def __init__(self, conn, chunks=None, entities=None):
        self.conn = conn
        self.chunk_ids, self.entity_ids = self._queued("chunk", chunks), self._queued("entity", entities)
        self.added = 0  # mentions edges
        self.names = None  # Names for the queued chunks
        self.upto = 0  # chunk_ids[:upto] are matched (or were not queued any more)
        self.matched = set()  # chunks matched here with every name they may hold: no older chunks for new_names
        self.new_names = None  # Names of the queued entities, for older chunks
        self.looked_for = None  # those of entity_ids still queued when the search of older chunks began
        self.looking = None  # that search (_look_in_older_chunks), as far as it went

    def prepare(self):
        if self.chunk_ids:
            self.names = self._chunk_names(self.chunk_ids)
        if self.entity_ids and self._older() > 0:
            self.new_names = Names(self.conn, self.entity_ids)
        return self

    def step(self, deadline=None):
        """Match until `deadline` (time.perf_counter) has passed or MENTION_STEP_EDGES
        edges are found, at least one chunk or entity, or all when None; returns
        whether anything is left to match. A step's own work grows with what it
        matches, not with all there is to match."""
        if self.upto < len(self.chunk_ids):
            if self._chunks(deadline):
                return True
            if _passed(deadline):  # the entities in a step of their own
                return bool(self.entity_ids) and self.looked_for != []
        return self._entities(deadline)

    def _queued(self, kind, ids):
        sql, params = f"select id from {QUEUE_TABLE} where kind = ?", [kind]
        if ids is not None:
            sql, params = f"{sql} and id in (select value from json_each(?))", [kind, json.dumps(sorted(ids))]
        return [i for (i,) in self.conn.execute(f"{sql} order by id", params)]

    def _chunk_names(self, ids):
        """Names for the queued chunks `ids`: of the entities the name index finds in
        their text while that is short next to how many entities there are (a
        quarter of a microsecond a character to look up, 20 a name for an automaton
        of every name), else of every entity."""
        many = len(ids) > MENTION_LOOKUP_CHUNKS
        since = _index_position(self.conn)
        if since is not None:
            size = self.conn.execute(
                "select coalesce(sum(length(k.content) + length(coalesce(k.title, ''))), 0) "
                f"from knowledge k where {_IN}",
                [json.dumps(ids)],
            ).fetchone()[0]
            entities = self.conn.execute("select coalesce(max(id), 0) from entities").fetchone()[0]  # at least as many
            if size < MENTION_INDEX_CHARS_PER_NAME * entities:
                # the keys read into memory once the text outgrows a character a name (reading
                # them costs about as much as looking up that many characters' runs in SQL)
                keys = since if size >= entities or _known_keys.held(self.conn) else None
                found = set()
                for start in range(0, len(ids), _TEXTS_AT_ONCE):
                    rows = self.conn.execute(f"{_CHUNKS} and {_IN}", [json.dumps(ids[start : start + _TEXTS_AT_ONCE])])
                    found |= _named_entities(self.conn, [text for *_, text in rows], keys)
                return Names(self.conn, found, many, since)
        return Names(self.conn, many=many)

    def _chunks(self, deadline):
        """Match the queued chunks in id order from where the last step stopped, a
        part at a time; returns whether any are left."""
        if self.names is None:
            follow_names(self.conn, time.perf_counter() + MENTION_INDEX_REMEMBER_SECONDS)
            self.names = self._chunk_names(self.chunk_ids)
        else:
            self.names.refresh(self.conn)
        edges = set()
        while self.upto < len(self.chunk_ids):
            part = self._queued("chunk", self.chunk_ids[self.upto : self.upto + _CHUNKS_AT_ONCE])  # not matched since
            done = self.chunk_ids[min(self.upto + _CHUNKS_AT_ONCE, len(self.chunk_ids)) - 1]
            # chunks without a row here (gone, or of no document entity) are done too
            for row in self.conn.execute(f"{_CHUNKS} and {_IN} order by k.id", [json.dumps(part)]):
                edges |= _edges([row], self.names)
                if _full(deadline, edges):
                    done = row[0]
                    break
            finished = [i for i in part if i <= done]
            self.matched.update(finished)
            self._unqueue("chunk", finished)
            self.upto = bisect.bisect_right(self.chunk_ids, done)
            if _full(deadline, edges):
                break
        self._add(edges)
        return self.upto < len(self.chunk_ids)

    def _entities(self, deadline):
        """Look for the queued entities in chunks matched before they were made;
        returns whether any are left."""
        if self.looked_for is None:
            self.looked_for = self._queued("entity", self.entity_ids)
            self.looking = self._look_in_older_chunks(self.looked_for)
        if not self.looked_for:
            return False
        if self.new_names is not None:
            self.new_names.refresh(self.conn)
        edges, done, left = set(), [], False
        for found, finished in self.looking:
            edges |= found
            done += finished
            if _full(deadline, edges):
                left = True
                break
        self._add(edges)
        self._unqueue("entity", done if left else self.looked_for)
        if not left:
            self.looked_for = []
        return left

    def _look_in_older_chunks(self, ids):
        """Yield (edges, the entities of `ids` done) a part at a time, looking for the
        entities `ids` in the chunks not matched here: through FTS5 by each one's
        rare words, then by the phrases of those whose rare words pick too many
        chunks; or by reading all older text, when that costs less than the lookups."""
        older = self._older()
        if older <= 0:
            return  # every chunk is new: matched here already
        if self.new_names is None:
            self.new_names = Names(self.conn, self.entity_ids)
        scan = older <= MENTION_SCAN_CHUNKS_PER_ENTITY * len(ids)
        if not scan:
            phrases, counts = {}, {}
            for entity_id in ids:
                name = self.new_names.names.get(entity_id)  # none: gone, or no longer a name to find
                candidates, phrased = _fts_candidates(self.conn, [(entity_id, name)] if name else [], counts)
                phrases.update(phrased)
                yield self._older_edges(candidates), [] if phrased else [entity_id]
            scan = len(phrases) * MENTION_SCAN_CHUNKS_PER_PHRASE > older  # cheaper than their phrases' lookups
            if not scan:
                for entity_id, queries in phrases.items():
                    # a part at a time, the entity done with its last: a name in 23,000 older chunks
                    # held one step's lock for 1.3 s (review 154)
                    found = sorted(_fts_rows(self.conn, *queries))
                    parts = [found[start : start + _SCAN_AT_ONCE] for start in range(0, len(found), _SCAN_AT_ONCE)]
                    for number, part in enumerate(parts or [[]], 1):
                        yield self._older_edges(part), [entity_id] if number >= len(parts) else []
                return
        last = 0
        while True:
            rows = self.conn.execute(
                f"{_CHUNKS} and k.id > ? and {_OLDER} order by k.id limit {_SCAN_AT_ONCE}", [last]
            ).fetchall()
            if not rows:
                return
            last = rows[-1][0]
            yield _edges([row for row in rows if row[0] not in self.matched], self.new_names), []

    def _older(self):
        """About how many chunks there are that were not queued when this was made."""
        return self.conn.execute("select coalesce(max(id), 0) from knowledge").fetchone()[0] - len(self.chunk_ids)

    def _older_edges(self, candidates):
        """The edges of the candidate chunks not matched here to the queued entities."""
        rows = self.conn.execute(
            f"{_CHUNKS} and {_IN} and {_OLDER}", [json.dumps(sorted(set(candidates) - self.matched))]
        )
        return _edges(rows, self.new_names)

    def _add(self, edges):
        """Write the mentions edges (from, entity named, chunk, document), each to the
        entity the named one stands for now (itself, or the one it is an alias of)."""
        targets = dict(self.conn.execute(_TARGETS, [json.dumps(sorted({named for _, named, _, _ in edges}))]))
        rows = {
            (from_id, targets[named], knowledge_id, document_id)
            for from_id, named, knowledge_id, document_id in edges
            if named in targets and targets[named] != from_id
        }
        cursor = self.conn.executemany(
            "insert or ignore into relationships (from_entity_id, to_entity_id, relation_type, "
            f"knowledge_id, document_id) values (?, ?, '{MENTIONS}', ?, ?)",
            self._within_limit(rows),
        )
        self.added += max(cursor.rowcount, 0)  # rows inserted: total_changes would count the change log's too

    def _within_limit(self, rows):
        """`rows` but those that would tie a chunk to more than MAX_CHUNK_MENTIONS entities
        with the mentions it holds (a chunk matched again as entities arrive in batches),
        the entities made first kept."""
        chunks = sorted({knowledge_id for _, _, knowledge_id, _ in rows})
        held = dict(
            self.conn.execute(
                f"select knowledge_id, count(*) from relationships where relation_type = '{MENTIONS}' "
                "and knowledge_id in (select value from json_each(?)) group by knowledge_id",
                [json.dumps(chunks)],
            )
        )
        kept = []
        for row in sorted(rows, key=lambda row: (row[2], row[1])):
            if held.get(row[2], 0) < MAX_CHUNK_MENTIONS:
                held[row[2]] = held.get(row[2], 0) + 1
                kept.append(row)
        return sorted(kept)

    def _unqueue(self, kind, ids):
        self.conn.execute(
            f"delete from {QUEUE_TABLE} where kind = ? and id in (select value from json_each(?))",
            [kind, json.dumps(ids)],
        )


def _edges(rows, names):
    """(from, entity named, chunk, document) of the `_CHUNKS` rows naming `names`."""
    return {
        (from_id, named, knowledge_id, document_id)
        for knowledge_id, document_id, from_id, text in rows
        for named in names.found(text)
    }


def _passed(deadline):
    return deadline is not None and time.perf_counter() >= deadline


def _full(deadline, edges):
    """Whether a step with `deadline` stops matching, to write the `edges` it found."""
    return deadline is not None and (len(edges) >= MENTION_STEP_EDGES or time.perf_counter() >= deadline)


def _fts_candidates(conn, entities, counts=None):
    """(the chunks whose full-text index holds all the rare words of a name of one
    of the (id, name) `entities`, {entity id: the phrases of its names to
    look up}) for the names whose rare words pick too many chunks to read, or that
    have none: a phrase lookup reads the whole index of each of its words, of "the"
    too. `counts` keeps {word: the chunks holding it, or None where they are
    MENTION_FTS_RARE or more} across calls: a name's rare words' chunks are met in
    memory, one FTS5 query a word."""
    candidates, phrases, counts = set(), {}, {} if counts is None else counts
    key = main_file(conn)
    common = _common_words.setdefault(key, set()) if key else set()  # an in-memory brain's are its own
    for entity_id, name in entities:
        for form in names_of(name):
            words = tokens(form)
            for word in words:
                if word in common:
                    counts[word] = None
                elif word not in counts:
                    held = _fts_rows(conn, f'"{word}"', limit=MENTION_FTS_RARE)
                    counts[word] = None if len(held) >= MENTION_FTS_RARE else held
                    if counts[word] is None:
                        common.add(word)
            if not words or any(counts[word] is not None and not counts[word] for word in words):
                continue  # a word no chunk holds: no chunk names it
            rare = [counts[word] for word in dict.fromkeys(words) if counts[word] is not None]
            held = set.intersection(*rare) if rare else None
            if held is not None and len(held) < MENTION_FTS_CANDIDATES:
                candidates.update(held)
            else:
                phrases.setdefault(entity_id, []).append('"' + " ".join(words) + '"')
    return candidates, phrases


# {brain file: the words found common there (in MENTION_FTS_RARE chunks or more)}: a word
# stays common but where chunks are deleted, and one taken as common that no longer is
# only has its names looked up by phrase, which finds the same chunks (counting one
# costs a fifth of a millisecond at a million chunks, for each of a title's words)
_common_words: dict[str, set[str]] = {}


def _fts_rows(conn, *queries, limit=-1):
    """The chunks any of the FTS5 queries match (up to `limit` a query)."""
    sql = "select rowid from knowledge_fts where knowledge_fts match ? limit ?"
    return {i for query in queries for (i,) in conn.execute(sql, (query, limit))}


# -- the name index -------------------------------------------------------------


_SEED, _MIX, _MASK = 0x243F6A8885A308D3, 0x9E3779B97F4A7C15, (1 << 64) - 1


def _word_hash(word):
    return xxhash.xxh3_64_intdigest(word.encode("utf-8", "surrogatepass"))


def _hash(words):
    """A signed 64-bit hash of a sequence of words (SQLite's integers are signed):
    each word's hash folded in, as `_Runs.hashes` does for every run of a text."""
    value = _SEED
    for word in words:
        value = ((value ^ _word_hash(word)) * _MIX) & _MASK
    return value - (1 << 64) if value >= 1 << 63 else value


# How name_keys makes keys: bump it with any change to them (or to names_of), and
# every brain's name index is made again at its next ingest.
NAME_KEYS_VERSION = 1


def name_keys(name):
    """(head, words, hash) of each form of `name` (names_of): the hash of its words,
    their number, and the hash of its first two (all of them, when fewer). A form
    standing in a text as whole words is a run of the text's words (its edges are
    not word characters, nor what stands beside it), so it is found by looking up
    the runs that start at each word."""
    keys = set()
    for form in names_of(name):
        words = _WORD.findall(form)
        keys.add((_hash(words[:2]), len(words), _hash(words)))
    return keys


# changes read, or entity ids indexed, between looks at the clock (about 0.1 s of work)
_FOLLOW_AT_ONCE = 10_000


def follow_names(conn, deadline=None):
    """Bring the name index up to the entities as they are now, in the caller's
    write transaction, a part at a time until `deadline` (time.perf_counter; None:
    all); returns whether any is left. It re-indexes the entities the change log
    names since it last looked, as they are now. When the log no longer reaches
    back there or says anything may have changed, or the index was made with other
    keys, it is made again, entity id by entity id, and is not used until it is
    (`_index_position`); then it follows the log from where that began."""
    while True:
        seq, stamp, keys, rebuilt = conn.execute(
            f"select seq, stamp, keys, rebuilt from {MENTION_NAMES_SEEN_TABLE}"
        ).fetchone() or (0, None, None, None)
        follows, last = _log_follows(conn, (seq, stamp))
        if keys != NAME_KEYS_VERSION or not follows:
            _seen(conn, last, rebuilt=0)
            continue
        if rebuilt is not None:  # made again: the next entity ids
            upto = rebuilt + _FOLLOW_AT_ONCE
            if upto >= conn.execute("select coalesce(max(id), 0) from entities").fetchone()[0]:
                upto = None  # the last part: any entity id above
            if upto is None:
                _index(conn, "{id} > ?", [rebuilt])
            else:
                _index(conn, "{id} > ? and {id} <= ?", [rebuilt, upto])
            _seen(conn, (seq, stamp), rebuilt=upto)
        elif seq == last[0]:
            return False
        else:  # following: the next changes
            upto = min(seq + _FOLLOW_AT_ONCE, last[0])
            logged = conn.execute(
                f"select kind, key from {CHANGES_TABLE} where seq > ? and seq <= ? and kind in ('entity', 'all')",
                (seq, upto),
            ).fetchall()
            if any(kind == "all" for kind, _ in logged):
                _seen(conn, last, rebuilt=0)
                continue
            _index(conn, "{id} in (select value from json_each(?))", [json.dumps(sorted({key for _, key in logged}))])
            _seen(conn, (upto, _stamp(conn, upto)))
        if _passed(deadline):
            return True


def _log_follows(conn, since):
    """(whether the change log tells every change after the position `since`, the
    position now): it holds the change there still, with its stamp (a brain
    restored from a backup and written again, or a log begun again, holds others
    at the same seqs), and every one after it."""
    seq, stamp = since
    now = _position(conn)
    if now[0] == seq:
        return now[1] == stamp, now
    first = conn.execute(f"select min(seq) from {CHANGES_TABLE}").fetchone()[0]
    return first is not None and first <= seq + 1 and now[0] > seq and _stamp(conn, seq) == stamp, now


def _position(conn):
    """Where the change log stands: (the seq of the last change logged, as
    sqlite_sequence has it, the log's newest entries may be gone too; its stamp)."""
    sql = "select coalesce(max(seq), 0) from sqlite_sequence where name = ?"
    seq = conn.execute(sql, [CHANGES_TABLE]).fetchone()[0]
    return seq, _stamp(conn, seq)


def _stamp(conn, seq):
    """The random stamp of change `seq` (None when it is gone, or from before m012)."""
    row = conn.execute(f"select stamp from {CHANGES_TABLE} where seq = ?", (seq,)).fetchone()
    return row[0] if row else None


def _changed_entities(conn, since):
    """(the ids of the entities the change log names after the position `since`,
    or None when it may not tell them all; the position now)."""
    follows, last = _log_follows(conn, since)
    if not follows:
        return None, last
    logged = conn.execute(
        f"select kind, key from {CHANGES_TABLE} where seq > ? and seq <= ? and kind in ('entity', 'all')",
        (since[0], last[0]),
    ).fetchall()
    return (None if any(kind == "all" for kind, _ in logged) else {key for _, key in logged}), last


def _index(conn, ids, params):
    """Index the entities whose ids meet `ids` (an SQL condition on "{id}") as they
    are now, dropping what the index held for those ids."""
    conn.execute(f"delete from {MENTION_NAMES_TABLE} where {ids.format(id='entity_id')}", params)
    rows = conn.execute(f"select e.id, e.name from entities e where {_ELIGIBLE} and {ids.format(id='e.id')}", params)
    conn.executemany(
        f"insert or ignore into {MENTION_NAMES_TABLE} (head, words, hash, entity_id) values (?, ?, ?, ?)",
        [(*key, entity_id) for entity_id, name in rows for key in name_keys(name)],
    )


def _seen(conn, position, rebuilt=None):
    """Where the index has looked: the change log up to `position` (seq, stamp);
    entity ids up to `rebuilt` while it is made again (None: all)."""
    conn.execute(f"delete from {MENTION_NAMES_SEEN_TABLE}")
    conn.execute(
        f"insert into {MENTION_NAMES_SEEN_TABLE} (seq, stamp, keys, rebuilt) values (?, ?, ?, ?)",
        (*position, NAME_KEYS_VERSION, rebuilt),
    )


def stale_names(conn):
    """The ids of the entities the name index, where it says it is complete, holds
    otherwise than their names give (rows deleted, added or changed by plain SQL):
    their mentions in new text would go unfound. Entities the change log names since
    the index looked are left to it: it follows them on the next write. Read in one
    snapshot, _FOLLOW_AT_ONCE entity ids at a time (its memory bounded)."""
    own = not conn.in_transaction
    if own:
        conn.execute("begin")  # the log, the index and the entities from the same moment
    try:
        since = _index_position(conn)
        changed, _ = _changed_entities(conn, since) if since is not None else (None, None)
        if changed is None:  # being made again (not used until it is), or the log can't tell: made on the next write
            return []
        # rows plain SQL gave an entity id that is no whole number name no entity
        odd = f"select distinct entity_id from {MENTION_NAMES_TABLE} where typeof(entity_id) != 'integer'"
        wrong = [repr(row[0]) for row in conn.execute(odd)]
        bounds = "select min(id), max(id) from entities union all select min(entity_id), max(entity_id) from "
        ends = [
            row
            for row in conn.execute(f"{bounds}{MENTION_NAMES_TABLE} where typeof(entity_id) = 'integer'")
            if row[0] is not None
        ]
        if not ends:
            return wrong
        low, top = min(row[0] for row in ends) - 1, max(row[1] for row in ends)
        while low < top:  # a page of entities by id, and the index rows of their span
            page = conn.execute(f"{_NAMES} and e.id > ? order by e.id limit ?", (low, _FOLLOW_AT_ONCE)).fetchall()
            high = page[-1][0] if len(page) == _FOLLOW_AT_ONCE else top
            held = collections.defaultdict(set)
            spanned = (
                f"select head, words, hash, entity_id from {MENTION_NAMES_TABLE} "
                "where entity_id > ? and entity_id <= ? and typeof(entity_id) = 'integer'"
            )
            for head, words, hashed, entity_id in conn.execute(spanned, (low, high)):
                held[entity_id].add((head, words, hashed))
            wrong += [entity_id for entity_id, name in page if held.pop(entity_id, set()) != name_keys(name)]
            wrong += held  # rows of entities that are gone or hold no name to find
            low = high
        return sorted(set(wrong) - set(changed), key=lambda entity: (isinstance(entity, str), entity))
    finally:
        if own and conn.in_transaction:
            conn.execute("commit")


def remake_names(conn):
    """Make the name index again, whole, in the caller's transaction."""
    conn.execute(f"delete from {MENTION_NAMES_TABLE}")  # rows of no entity id included
    _seen(conn, _position(conn), rebuilt=0)
    follow_names(conn)


def _index_position(conn):
    """The position in the log (seq, stamp) of the change the name index is
    complete up to, or None while it is made again (or by other keys)."""
    seen = conn.execute(f"select seq, stamp, keys, rebuilt from {MENTION_NAMES_SEEN_TABLE}").fetchone()
    return tuple(seen[:2]) if seen and seen[2] == NAME_KEYS_VERSION and seen[3] is None else None


# Of each head, the numbers of words its names have: each the least above the last
# (an index seek each, however many names share the head).
_LENGTHS = f"""
with recursive lengths(head, words) as (
  select value, (select min(words) from {MENTION_NAMES_TABLE} where head = value) from json_each(?)
  union all
  select head, (select min(n.words) from {MENTION_NAMES_TABLE} n
                where n.head = lengths.head and n.words > lengths.words)
  from lengths where words is not null)
select head, words from lengths where words is not null
"""


class _KnownKeys:
    """The keys the name index holds, by brain file, in memory: the runs of a text
    that begin like a name (its first two words) and a probe whose hash is none of
    them name no entity, so only the others are looked up in SQL (runs that begin
    like a name are many where names share their first words: 2 s of SQL lookups
    for 5,000 chunks at a million names). Kept a superset of the index at a
    position of the change log: followed from it by the entities the log names
    since (their keys read again and added; keys no longer held only cost a
    lookup), read whole when the log no longer tells."""

    def __init__(self):
        self._lock = threading.Lock()
        self._known = {}  # file -> (the position they cover the index at, hashes, (head, words) pairs), sorted

    def held(self, conn):
        """Whether this process holds the keys of the brain on `conn` already."""
        with self._lock:
            return main_file(conn) in self._known

    def at(self, conn, since):
        """(sorted hashes, sorted (head, words) rows) of the name index complete up
        to log position `since`."""
        key = main_file(conn)
        with self._lock:
            position, *known = self._known.get(key, (None, None, None))
        if position == since:
            return known
        changed = _changed_entities(conn, position)[0] if position is not None else None
        sql = f"select head, words, hash from {MENTION_NAMES_TABLE}"
        if changed is None:
            known = _keys_of(conn.execute(sql).fetchall())
        elif changed:
            read = _keys_of(
                conn.execute(
                    f"{sql} where entity_id in (select value from json_each(?))", [json.dumps(sorted(changed))]
                )
            )
            known = [
                sorted_unique(np.concatenate((known[0], read[0]))),
                _unique_pairs(np.concatenate((known[1], read[1]))),
            ]
        if key:
            with self._lock:
                self._known[key] = (since, *known)
        return known


def _keys_of(rows):
    keys = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64).reshape(-1, 3)
    return [sorted_unique(keys[:, 2]), _unique_pairs(keys[:, :2])]


def _unique_pairs(pairs):
    """The distinct rows of an (n, 2) array, sorted."""
    pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    return pairs[np.concatenate(([True], np.any(pairs[1:] != pairs[:-1], axis=1)))] if len(pairs) else pairs


_known_keys = _KnownKeys()


def _heads(conn, pairs, since):
    """{number of words: the heads among `pairs` of names of that many words}."""
    heads = {}
    if since is None:
        for head, count in conn.execute(_LENGTHS, [json.dumps(pairs.tolist())]):
            heads.setdefault(count, []).append(head)
        return heads
    known = _known_keys.at(conn, since)[1]
    low, high = np.searchsorted(known[:, 0], pairs, "left"), np.searchsorted(known[:, 0], pairs, "right")
    at = np.concatenate([np.arange(a, b) for a, b in zip(low.tolist(), high.tolist()) if b > a] or [np.zeros(0, int)])
    for count in np.unique(known[at, 1]).tolist():
        heads[count] = known[at][known[at, 1] == count, 0].tolist()
    return heads


def _named_entities(conn, texts, since=None):
    """The ids of the entities the name index holds whose names' words stand in
    `texts` as a run (with the names that have no words): those an automaton of
    every name could find there. With `since`, the log position the index is
    complete up to, only runs whose keys it holds are looked up (_KnownKeys)."""
    words = [_WORD.findall(text.casefold()) for text in texts]
    runs = _Runs([_word_hash(word) for text in words for word in text], [len(text) for text in words])
    folds = runs.hashes()
    _, singles = next(folds)
    _, pairs = next(folds)
    heads = _heads(conn, sorted_unique(pairs[runs.starting(2)]), since)  # number of words -> heads of such names
    # names of one word are looked up at every word, names without a word in every text
    probes = [np.stack([singles, np.ones_like(singles), singles], axis=1), np.array([[_hash(()), 0, _hash(())]])]
    for count, hashes in itertools.chain([(2, pairs)], folds):
        if count > max(heads, default=0):
            break
        if count in heads:  # runs of `count` words whose first two begin such a name
            at = runs.starting(count) & np.isin(pairs, np.array(heads[count], dtype=np.int64))
            probes.append(np.stack([pairs[at], np.full(at.sum(), count), hashes[at]], axis=1))
    probes = _unique_rows(np.concatenate(probes))
    if since is not None:
        known = _known_keys.at(conn, since)[0]
        at = np.minimum(np.searchsorted(known, probes[:, 2]), max(len(known) - 1, 0))
        probes = probes[known[at] == probes[:, 2]] if len(known) else probes[:0]
    return {
        entity_id
        for (entity_id,) in conn.execute(
            f"select n.entity_id from json_each(?) p join {MENTION_NAMES_TABLE} n "
            "on n.head = json_extract(p.value, '$[0]') and n.words = json_extract(p.value, '$[1]') "
            "and n.hash = json_extract(p.value, '$[2]')",
            [json.dumps(probes.tolist())],
        )
    }


def _unique_rows(probes):
    """The (head, words, hash) probes without repeats: a run's hash tells it apart."""
    return probes[np.unique(probes[:, 2], return_index=True)[1]]


class _Runs:
    """The runs of words of several texts, as the texts' word hashes in one array."""

    def __init__(self, word_hashes, lengths):
        self.words = np.array(word_hashes, dtype=np.uint64)
        # where each word's text ends: a run must not reach past it
        self.ends = np.repeat(np.cumsum(lengths), lengths).astype(np.int64)

    def starting(self, count):
        """Mask of the words a run of `count` words starts at."""
        return np.arange(len(self.words)) + count <= self.ends

    def hashes(self):
        """(count, `_hash` of the run of `count` words starting at each word) for
        count 1, 2, ... (signed; where no such run starts, a hash of what follows)."""
        folded, count = np.full(len(self.words), _SEED, dtype=np.uint64), 0
        with np.errstate(over="ignore"):
            while True:
                following = np.concatenate([self.words[count:], np.zeros(min(count, len(self.words)), dtype=np.uint64)])
                folded, count = (folded ^ following) * np.uint64(_MIX), count + 1
                yield count, folded.view(np.int64)
