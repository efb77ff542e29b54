"""`mentions` edges: a chunk that names a known entity (exactly, case-insensitively,
at word boundaries) ties its document to that entity, so the graph leg can hop
between documents that never link to each other.

Work is queued in brain_mention_queue (made by a migration) inside each
document's transaction and done by `resolve_mentions`, so an interrupted ingest
is finished by the next one.
New chunks are matched against every entity with one Aho-Corasick automaton;
entities new to the brain are looked for in older chunks through FTS5 when they
are few, or with a second automaton over all text when they are many.
"""

import re

import ahocorasick

from .config import MENTION_FTS_LOOKUP_LIMIT, MENTION_MIN_CHARS

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

_CHUNKS = """
select k.id, k.document_id, d.entity_id, coalesce(k.title, '') || char(10) || k.content
from knowledge k join documents d on d.document_id = k.document_id
where d.entity_id is not null
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
    queued_chunks = f"k.id in (select id from {QUEUE_TABLE} where kind = 'chunk')"
    has_chunks = conn.execute(f"select 1 from {QUEUE_TABLE} where kind = 'chunk' limit 1").fetchone()
    if not has_chunks and not entity_ids:
        return 0
    entities = conn.execute(ENTITY_NAMES).fetchall()
    edges = set()

    def match(rows, automaton):
        for knowledge_id, document_id, from_id, text in rows:
            for target in _found(automaton, text):
                if target != from_id:
                    edges.add((from_id, target, knowledge_id, document_id))

    if has_chunks and entities:
        match(conn.execute(f"{_CHUNKS} and {queued_chunks}"), build_automaton(entities))
    new_entities = [e for e in entities if e[0] in entity_ids]
    if new_entities:
        # older chunks, not matched above, may name an entity that is new
        automaton = build_automaton(new_entities)
        if len(new_entities) <= MENTION_FTS_LOOKUP_LIMIT:
            conn.execute("create temp table if not exists temp_ids (id integer primary key)")
            conn.execute("delete from temp_ids")
            conn.executemany("insert into temp_ids (id) values (?)", [(i,) for i in _fts_candidates(conn, new_entities)])
            rows = conn.execute(f"{_CHUNKS} and k.id in (select id from temp_ids) and not {queued_chunks}")
        else:
            rows = conn.execute(f"{_CHUNKS} and not {queued_chunks}")
        match(rows, automaton)
    cursor = conn.executemany(
        "insert or ignore into relationships (from_entity_id, to_entity_id, relation_type, "
        f"knowledge_id, document_id) values (?, ?, '{MENTIONS}', ?, ?)",
        sorted(edges),
    )
    added = max(cursor.rowcount, 0)  # rows inserted: total_changes would count the change log's too
    conn.execute(f"delete from {QUEUE_TABLE}")
    return added


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
