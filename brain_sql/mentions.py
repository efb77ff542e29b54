"""`mentions` edges: a chunk that names a known entity (exactly, case-insensitively,
at word boundaries) ties its document to that entity, so the graph leg can hop
between documents that never link to each other.

Work is queued in brain_mention_queue (made by a migration) inside each
document's transaction and done by `resolve_mentions`, so an interrupted ingest
is finished by the next one.

New chunks are matched with one Aho-Corasick automaton. A few new chunks in a big
brain do not read every name for it: the runs of words of their text are looked
up in the name index (brain_mention_names: each entity name by the hash of its
words, kept up to date from the change log), and only the names found there go
into the automaton, which decides as before. Many new chunks next to few names
take every name. Entities new to the brain are looked for in older chunks
through FTS5, by their rare words or their phrase, unless reading all older text
costs less.
"""

import itertools
import json
import re

import ahocorasick
import numpy as np
import xxhash

from .config import (
    MENTION_FTS_CANDIDATES, MENTION_FTS_RARE, MENTION_INDEX_CHARS_PER_NAME, MENTION_MIN_CHARS,
    MENTION_SCAN_CHUNKS_PER_ENTITY, MENTION_SCAN_CHUNKS_PER_PHRASE,
)  # fmt: skip
from .lexical import tokens
from .schema import CHANGES_TABLE, MENTION_NAMES_SEEN_TABLE, MENTION_NAMES_TABLE, QUEUE_TABLE

MENTIONS = "mentions"  # the relation a chunk's text naming an entity is recorded as

_ELIGIBLE = f"coalesce(e.entity_type, '') != 'tag' and length(e.name) >= {MENTION_MIN_CHARS}"
# Entities a mention may name: not tags (taxonomy, reached by tagged_with edges).
# An alias resolves to the entity it is an alias of (its first alias_of edge, as the
# read state resolves the names in a query).
ENTITY_NAMES = f"""
select e.id, e.name, coalesce(
  (select r.to_entity_id from relationships r
   where r.from_entity_id = e.id and r.relation_type = 'alias_of' order by r.id limit 1), e.id) as target
from entities e
where {_ELIGIBLE}
"""

_CHUNKS = """
select k.id, k.document_id, d.entity_id, coalesce(k.title, '') || char(10) || k.content
from knowledge k join documents d on d.document_id = k.document_id
where d.entity_id is not null
"""

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


def build_automaton(entities):
    """An Aho-Corasick automaton of (id, name, target) entities, matching casefolded names."""
    named = {}
    for _, name, target in entities:
        for key in names_of(name):
            targets = named.setdefault(key, [])
            if target not in targets:
                targets.append(target)
    return automaton_of(named)


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


def _found(automaton, text):
    return {target for _, _, target in spans(automaton, text)}


def resolve_mentions(conn):
    """Do all queued mention matching; returns how many mentions edges were added."""
    entity_ids = {i for (i,) in conn.execute(f"select id from {QUEUE_TABLE} where kind = 'entity'")}
    has_chunks = conn.execute(f"select 1 from {QUEUE_TABLE} where kind = 'chunk' limit 1").fetchone()
    if not has_chunks and not entity_ids:
        return 0
    _follow_names(conn)
    edges = set()

    def match(rows, automaton):
        for knowledge_id, document_id, from_id, text in rows:
            for target in _found(automaton, text):
                if target != from_id:
                    edges.add((from_id, target, knowledge_id, document_id))

    queued = _match_new_chunks(conn, match) if has_chunks else 0
    new_entities = _entities(conn, entity_ids)
    if new_entities:
        _match_older_chunks(conn, new_entities, queued, match)
    cursor = conn.executemany(
        "insert or ignore into relationships (from_entity_id, to_entity_id, relation_type, "
        f"knowledge_id, document_id) values (?, ?, '{MENTIONS}', ?, ?)",
        sorted(edges),
    )
    added = max(cursor.rowcount, 0)  # rows inserted: total_changes would count the change log's too
    conn.execute(f"delete from {QUEUE_TABLE}")
    return added


_QUEUED = f"k.id in (select id from {QUEUE_TABLE} where kind = 'chunk')"


def _match_new_chunks(conn, match):
    """Match the queued chunks against the names the name index finds in them, or
    against every name when their text is long next to how many there are; returns
    how many chunks were queued."""
    size, count = conn.execute(
        f"select coalesce(sum(length(k.content) + length(coalesce(k.title, ''))), 0), count(*) from knowledge k "
        f"where {_QUEUED}"
    ).fetchone()
    names = conn.execute("select coalesce(max(id), 0) from entities").fetchone()[0]  # at least as many as there are
    if size < MENTION_INDEX_CHARS_PER_NAME * names:
        chunks = conn.execute(f"{_CHUNKS} and {_QUEUED}").fetchall()
        entities = _named_entities(conn, [text for *_, text in chunks])
    else:
        chunks, entities = conn.execute(f"{_CHUNKS} and {_QUEUED}"), conn.execute(ENTITY_NAMES).fetchall()
    match(chunks, build_automaton(entities))
    return count


def _match_older_chunks(conn, new_entities, queued, match):
    """Match the chunks not queued against the entities new to the brain: those
    FTS5 finds for them while its lookups cost less than reading all their text."""
    older = conn.execute("select coalesce(max(id), 0) from knowledge").fetchone()[0] - queued
    if older <= 0:
        return  # all chunks are new: matched already
    scanned = new_entities
    if older > MENTION_SCAN_CHUNKS_PER_ENTITY * len(new_entities):
        candidates, phrases = _fts_candidates(conn, new_entities)
        scan = len(phrases) * MENTION_SCAN_CHUNKS_PER_PHRASE > older  # cheaper than their phrases' lookups
        scanned = [entity for entity in new_entities if entity in phrases] if scan else []
        for entity in set(phrases) - set(scanned):
            candidates.update(_fts_rows(conn, *phrases[entity]))
        conn.execute("create temp table if not exists temp_ids (id integer primary key)")
        conn.execute("delete from temp_ids")
        conn.executemany("insert into temp_ids (id) values (?)", [(i,) for i in candidates])
        rows = conn.execute(f"{_CHUNKS} and k.id in (select id from temp_ids) and not {_QUEUED}")
        match(rows, build_automaton(new_entities))
    if scanned:
        match(conn.execute(f"{_CHUNKS} and not {_QUEUED}"), build_automaton(scanned))


def _entities(conn, ids):
    """ENTITY_NAMES rows of the entities with these ids, by id."""
    if not ids:
        return []
    return conn.execute(f"{ENTITY_NAMES} and e.id in (select value from json_each(?)) order by e.id",
                        [json.dumps(sorted(ids))]).fetchall()  # fmt: skip


def _fts_candidates(conn, entities):
    """(the chunks whose full-text index holds all the rare words of an entity's
    name, {entity: the phrases of its names to look up}) for the entities whose
    names' rare words pick too many chunks to read, or have none: a phrase
    lookup reads the whole index of each of its words, of "the" too."""
    candidates, phrases, counts = set(), {}, {}
    for entity in entities:
        for form in names_of(entity[1]):
            words = tokens(form)
            for word in words:
                if word not in counts:
                    counts[word] = _fts_count(conn, f'"{word}"', MENTION_FTS_RARE)
            if not words or not all(counts[word] for word in words):
                continue  # a word no chunk holds: no chunk names it
            rare = " AND ".join(f'"{word}"' for word in dict.fromkeys(words) if counts[word] < MENTION_FTS_RARE)
            if rare and _fts_count(conn, rare, MENTION_FTS_CANDIDATES) < MENTION_FTS_CANDIDATES:
                candidates.update(_fts_rows(conn, rare))
            else:
                phrases.setdefault(entity, []).append('"' + " ".join(words) + '"')
    return candidates, phrases


def _fts_count(conn, query, limit):
    """How many chunks the FTS5 query matches, up to `limit`."""
    return conn.execute(
        "select count(*) from (select 1 from knowledge_fts where knowledge_fts match ? limit ?)", (query, limit)
    ).fetchone()[0]


def _fts_rows(conn, *queries):
    """The chunks any of the FTS5 queries match."""
    sql = "select rowid from knowledge_fts where knowledge_fts match ?"
    return {i for query in queries for (i,) in conn.execute(sql, (query,))}


# -- the name index -------------------------------------------------------------


_SEED, _MIX, _MASK = 0x243F6A8885A308D3, 0x9E3779B97F4A7C15, (1 << 64) - 1


def _word_hash(word):
    return xxhash.xxh3_64_intdigest(word.encode("utf-8", "surrogatepass"))


def _hash(words):
    """A signed 64-bit hash of a sequence of words (SQLite's integers are signed):
    each word's hash folded in, as `_run_hashes` does for every run of a text."""
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


def _follow_names(conn):
    """Bring the name index up to the entities as they are now: re-index the
    entities the change log names since the index last looked (all of them when
    the log no longer reaches back that far, says anything may have changed, or
    the index was made with other keys)."""
    seen = conn.execute(f"select seq, keys from {MENTION_NAMES_SEEN_TABLE}").fetchone()
    first, last = conn.execute(f"select min(seq), coalesce(max(seq), 0) from {CHANGES_TABLE}").fetchone()
    changed = None  # everything
    followable = (
        seen is not None and seen[1] == NAME_KEYS_VERSION  # made with these keys
        and first is not None and first <= seen[0] + 1  # the log reaches back to where it looked
        and last >= seen[0]  # and goes on from there (it is this brain's log)
    )  # fmt: skip
    if followable:
        logged = conn.execute(
            f"select kind, key from {CHANGES_TABLE} where seq > ? and kind in ('entity', 'all')", (seen[0],)
        ).fetchall()
        if all(kind == "entity" for kind, _ in logged):
            changed = sorted({key for _, key in logged})
    if changed is None:
        conn.execute(f"delete from {MENTION_NAMES_TABLE}")
        rows = conn.execute(f"select e.id, e.name from entities e where {_ELIGIBLE}")
    else:
        conn.executemany(f"delete from {MENTION_NAMES_TABLE} where entity_id = ?", [(i,) for i in changed])
        rows = conn.execute(f"select e.id, e.name from entities e where {_ELIGIBLE} and e.id in "
                            "(select value from json_each(?))", [json.dumps(changed)]).fetchall()  # fmt: skip
    conn.executemany(
        f"insert or ignore into {MENTION_NAMES_TABLE} (head, words, hash, entity_id) values (?, ?, ?, ?)",
        ((*key, entity_id) for entity_id, name in rows for key in name_keys(name)),
    )
    conn.execute(f"delete from {MENTION_NAMES_SEEN_TABLE}")
    conn.execute(f"insert into {MENTION_NAMES_SEEN_TABLE} (seq, keys) values (?, ?)", (last, NAME_KEYS_VERSION))


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


def _named_entities(conn, texts):
    """ENTITY_NAMES rows of the entities whose names' words stand in `texts` as a
    run (with the names that have no words): those a full automaton could find there."""
    words = [_WORD.findall(text.casefold()) for text in texts]
    runs = _Runs([_word_hash(word) for text in words for word in text], [len(text) for text in words])
    folds = runs.hashes()
    _, singles = next(folds)
    _, pairs = next(folds)
    heads = {}  # number of words -> the heads of names of that many words
    for head, count in conn.execute(_LENGTHS, [json.dumps(np.unique(pairs[runs.starting(2)]).tolist())]):
        heads.setdefault(count, []).append(head)
    # names of one word are looked up at every word, names without a word in every text
    probes = [np.stack([singles, np.ones_like(singles), singles], axis=1), np.array([[_hash(()), 0, _hash(())]])]
    for count, hashes in itertools.chain([(2, pairs)], folds):
        if count > max(heads, default=0):
            break
        if count in heads:  # runs of `count` words whose first two begin such a name
            at = runs.starting(count) & np.isin(pairs, np.array(heads[count], dtype=np.int64))
            probes.append(np.stack([pairs[at], np.full(at.sum(), count), hashes[at]], axis=1))
    ids = {
        entity_id
        for (entity_id,) in conn.execute(
            f"select n.entity_id from json_each(?) p join {MENTION_NAMES_TABLE} n "
            "on n.head = json_extract(p.value, '$[0]') and n.words = json_extract(p.value, '$[1]') "
            "and n.hash = json_extract(p.value, '$[2]')",
            [json.dumps(_unique_rows(np.concatenate(probes)).tolist())],
        )
    }
    return _entities(conn, ids)


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
