"""Supersession: when a newer memory replaced an older one, kept in plain columns
of `knowledge` so recall can answer "what was true then" (as_of) as well as now.

A memory is valid at T when valid_from <= T < valid_to (an unset end is open)
and it was not superseded by T. `superseded_at` / `superseded_by` (the time, and
the document_id of the memory that replaced it) are derived data, recomputed
from what memories state whenever a write touches them, so they are the same
after any sequence of writes and forgets, and `brain check` compares them with
a fresh derivation.

Only a memory that anyone who may read the older one may read too replaces it
(not flagged; in its scope or a parent scope), so no reader's answer changes
because of a memory it cannot see. A memory is replaced by:

- a memory whose `supersedes` names its `_id` (external_id), from that memory's
  valid_from (else observed_at, else created_at) — if it had begun by then;
- a later version of its own record: the same `_id` stored again with a later
  valid_from keeps the stored version as history (a document of its own whose
  `version_of` names the record's current document), replaced from the next
  version's valid_from; the current version replaces all of its history. One
  stored with an earlier valid_from than the current version's is history
  itself, never over a later one (one with the same valid_from as a history
  version corrects that one). Without valid_from on either side, or the same
  as the current version's, a write corrects the current version in place.

The vec0 column valid_until (vectors.VEC_METADATA) is min(valid_to, superseded_at).
"""

import collections
import json

from .wording import shown

# Only a memory that whoever may read `k` may read too replaces it: not flagged,
# and in k's scope or one of its parents (a reader of a scope reads its parents).
_VISIBLE_WITH_K = """not e.flagged
      and (e.scope = '/' or e.scope = k.scope or substr(k.scope, 1, length(e.scope) + 1) = e.scope || '/')"""
# what replaced knowledge row `k` first: [time, document_id], or null; ties by document_id
_REPLACED_BY = f"""(
  select json_array(at, by) from (
    select coalesce(e.valid_from, e.observed_at, e.created_at) as at, e.document_id as by
    from knowledge e
    where k.external_id is not null and e.supersedes = k.external_id and e.document_id is not k.document_id
      and (k.valid_from is null or k.valid_from <= coalesce(e.valid_from, e.observed_at, e.created_at))
      and {_VISIBLE_WITH_K}
    union all
    select coalesce(e.valid_from, e.observed_at, e.created_at), e.document_id
    from knowledge e
    where k.version_of is not null and (e.document_id = k.version_of or e.version_of = k.version_of)
      and e.document_id != k.document_id
      and (e.version_of is null or coalesce(e.valid_from, '') > coalesce(k.valid_from, ''))
      and {_VISIBLE_WITH_K}
  ) order by at, by limit 1
)"""


def stale(conn, where="1", params=()):
    """{knowledge id: (superseded_at, superseded_by)} for rows selected by `where`
    (on knowledge `k`) whose stored supersession differs from a fresh derivation."""
    found = {}
    for knowledge_id, at, by, derived in conn.execute(
        f"select k.id, k.superseded_at, k.superseded_by, {_REPLACED_BY} from knowledge k where {where}", params
    ):
        expected = tuple(json.loads(derived)) if derived else (None, None)
        if (at, by) != expected:
            found[knowledge_id] = expected
    return found


def rederive(conn, where="1", params=()):
    """Write the derived supersession of the rows `where` selects, changing only
    those that differ (each change is logged and mirrored to vec0). Returns their ids."""
    changed = stale(conn, where, params)
    conn.executemany(
        "update knowledge set superseded_at = ?, superseded_by = ? where id = ?",
        [(at, by, knowledge_id) for knowledge_id, (at, by) in changed.items()],
    )
    return sorted(changed)


def touched(conn, document_ids):
    """(external ids, lineages) whose supersession these documents bear on: their
    own `_id`s, the `_id`s they supersede, and the records they are versions of.
    Read before and after a write: what it changed lies in the union."""
    external_ids, lineages = set(), set()
    for external_id, supersedes, lineage in conn.execute(
        "select distinct external_id, supersedes, coalesce(version_of, document_id) from knowledge "
        "where document_id in (select value from json_each(?))",
        [json.dumps(sorted(set(document_ids)))],
    ):
        external_ids |= {x for x in (external_id, supersedes) if x is not None}
        lineages.add(lineage)
    return external_ids, lineages


def settle(conn, *found):
    """Re-derive the supersession of every row the `touched` results bear on."""
    external_ids = sorted(set().union(*(ids for ids, _ in found)))
    lineages = json.dumps(sorted(set().union(*(lines for _, lines in found))))
    return rederive(
        conn,
        "k.external_id in (select value from json_each(?)) or k.document_id in (select value from json_each(?)) "
        "or k.version_of in (select value from json_each(?))",
        [json.dumps(external_ids), lineages, lineages],
    )


def later_version(conn, document):
    """Whether `document` is a later version of the record stored under its document
    id: it has an `_id` and a valid_from later than the stored version's (or the
    stored one has none). Then the stored version is kept as history (see
    keep_as_history); otherwise a same-_id write is a correction, made in place."""
    later = document.fields.get("valid_from")
    if document.external_id is None or not later:
        return False
    stored = conn.execute(
        "select valid_from from knowledge where document_id = ? and version_of is null limit 1", (document.document_id,)
    ).fetchone()
    return stored is not None and (stored[0] is None or stored[0] < later)


def keep_as_history(conn, document):
    """Move the version stored under `document`'s id aside as history — its rows,
    edges and documents row under a document id of its own, `version_of` naming
    the record's — so the new version is added beside it, not over it. Returns
    whether the stored version was flagged."""
    valid_from, flagged = conn.execute(
        "select min(valid_from), max(flagged) from knowledge where document_id = ?", (document.document_id,)
    ).fetchone()
    record = document.document_id
    _move(conn, record, _history_id(conn, record, valid_from), version_of=record)
    return bool(flagged)


def place_earlier(conn, document):
    """When `document` is an earlier version of the record stored under its id (an
    `_id`, and a valid_from before the current version's), write it as history
    instead of over the later version (see earlier_place). Returns whether it was
    placed so."""
    place = earlier_place(conn, document)
    if place is not None:
        document.document_id, document.version_of = place
    return place is not None


def earlier_place(conn, document):
    """(document id, record) where place_earlier puts `document`, or None: under the
    id of the record's history version with the same valid_from (a correction of
    that one), else a new one; its `version_of` names the record."""
    begins = document.fields.get("valid_from")
    if document.external_id is None or not begins or document.version_of is not None:
        return None
    record = document.document_id
    current = conn.execute(
        "select valid_from from knowledge where document_id = ? and version_of is null limit 1", (record,)
    ).fetchone()
    if current is None or current[0] is None or current[0] <= begins:
        return None
    same = conn.execute(
        "select document_id from knowledge where version_of = ? and valid_from = ? order by document_id limit 1",
        (record, begins),
    ).fetchone()
    return same[0] if same else _history_id(conn, record, begins), record


def place_of(conn, document):
    """(document id, record) of `document` as an earlier version: given (`_version_of`),
    or where place_earlier will put it; None when it is no earlier version."""
    return (document.document_id, document.version_of) if document.version_of else earlier_place(conn, document)


def version_refusal(conn, document, current=None, given=None):
    """Why `document` may not be placed as an earlier version (`_version_of`) of the
    record it names, or None: it has earlier versions of its own, or would keep its
    stored version as one (a later version: they would be history of history), or
    the record it names is no current record. `given` ({document id: the record it
    is an earlier version of}: a remember call's, or those an ingest accepted so
    far) may move its stored earlier versions under another record first. With
    `current` (the current records a remember call gives beside it) the record it
    names must be stored or among them. Without (an ingest, whose later files may
    give it), it must not be the record itself nor a version stored as history, or
    in `given`: a cycle."""
    document_id, version_of = document.document_id, document.version_of
    given = given or {}
    if current is None:
        cycle = version_of == document_id or version_of in given
        named = not cycle and not _has("document_id = ? and version_of is not null", version_of, conn)
    else:
        named = version_of in current or _has("document_id = ? and version_of is null", version_of, conn)
    if not named:
        return (
            f"'_version_of' names no current record: {shown(version_of)} (it takes the record's document id, as "
            "'_document' gives it and export writes it; give that record in the same call, or remember it first)"
        )
    why = "it cannot become an earlier version of another record"
    if document_id in given.values() or _history_kept(conn, document_id, given):
        return f"{shown(document_id)} has earlier versions of its own: {why}"
    if later_version(conn, document):
        return (
            f"it is a later version of {shown(document_id)} (its valid_from is later than the stored one's, or the "
            f"stored one has none), which would keep the stored one as an earlier version of its own: {why} (give "
            "it the stored valid_from, or none)"
        )
    return None


def _history_kept(conn, record, given):
    """Whether a version stored as history of `record` stays its own: `given` does
    not make it an earlier version of another record."""
    return any(
        given.get(version, record) == record
        for (version,) in conn.execute("select distinct document_id from knowledge where version_of = ?", (record,))
    )


def placed_refusal(conn, document, given):
    """Why `document`, with no `_version_of`, may not be written as it would be in
    an ingest that made records earlier versions of others (`given`, as
    version_refusal reads it), or None; else what it makes history is added to
    `given`. An earlier version by its valid_from (earlier_place) may not be of a
    record made history, nor a later version (later_version) be of one; the
    record a later version keeps as history has history of its own."""
    place = earlier_place(conn, document)
    record = place[1] if place else document.document_id
    later = place is None and later_version(conn, document)
    if (place or later) and record in given:
        return (
            f"it is {'an earlier' if place else 'a later'} version of {shown(record)}, which an earlier record "
            f"makes an earlier version of {shown(given[record])}: a version cannot have versions of its own"
        )
    if place:
        given[place[0]] = record
    elif later:
        given[("kept", record)] = record
    return None


def _has(where, value, conn):
    """Whether a memory `where` (one parameter, `value`) selects is stored."""
    return conn.execute(f"select 1 from knowledge where {where} limit 1", (value,)).fetchone() is not None


def taken_twice(place):
    """Why a record is refused whose place as an earlier version (place_of) an
    earlier record of its call or file takes: written, the two would be two
    documents under one id."""
    version, record = map(shown, place)
    return f"it is the earlier version {version} of {record} that an earlier record also gives: give it once"


def regrouped(conn, documents):
    """The ids of those `documents` given a `_version_of` that their stored memories
    do not name: written again even when their content is unchanged."""
    given = {d.document_id: d.version_of for d in documents if d.version_of}
    if not given:
        return set()
    return {
        document_id
        for document_id, version_of in conn.execute(
            "select document_id, max(coalesce(version_of, '')) from knowledge "
            "where document_id in (select value from json_each(?)) group by document_id",
            [json.dumps(sorted(given))],
        )
        if version_of != given[document_id]
    }


def mark_history(conn, document):
    """After an earlier version (place_earlier) is written: its rows name their
    record, and are flagged when the record's current version is (a version of a
    flagged memory goes into recall only reviewed)."""
    conn.execute(
        "update knowledge set version_of = :record, flagged = max(flagged, "
        "(select coalesce(max(flagged), 0) from knowledge where document_id = :record)) where document_id = :history",
        {"record": document.version_of, "history": document.document_id},
    )


def _history_id(conn, record, valid_from):
    """A new document id for a version of `record` kept as history: `record@valid_from`."""
    history = f"{record}@{valid_from or 'start'}"
    taken = conn.execute(
        "select count(*) from documents where document_id like ? escape '\\'", (_like(history) + "%",)
    ).fetchone()[0]
    return f"{history}~{taken + 1}" if taken else history


def promote(conn, document_ids):
    """After the current versions `document_ids` were forgotten, the latest history
    version of each (by valid_from) becomes its record's current version again."""
    for document_id in document_ids:
        row = conn.execute(
            "select document_id from knowledge where version_of = ? "
            "group by document_id order by max(coalesce(valid_from, '')) desc, document_id desc limit 1",
            (document_id,),
        ).fetchone()
        if row:
            _move(conn, row[0], document_id, version_of=None)
            settle(conn, (set(), {document_id}))


def _move(conn, old, new, version_of):
    """Put document `old` (its chunks, the edges it stated, its documents row) under id `new`."""
    conn.execute("update knowledge set document_id = ?, version_of = ? where document_id = ?", (new, version_of, old))
    conn.execute("update relationships set document_id = ? where document_id = ?", (new, old))
    conn.execute("update documents set document_id = ? where document_id = ?", (new, old))


def _like(text):
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class Supersedes:
    """What a run's records supersede, each checked as it is read for a cycle with
    what the records before it and the stored memories supersede: a record that
    supersedes its own _id, or an _id that supersedes, one way or another, this
    record's (a -> b -> a), would hide every memory in the cycle from recall. A
    remember is checked again under the write lock when the brain changed meanwhile;
    `cycles` finds one that plain SQL wrote."""

    def __init__(self, conn):
        self.conn = conn
        self.stated = {}  # external id -> the _id it supersedes now (None: no longer any), as this run writes it

    def refusal(self, document):
        """Why `document` may not supersede what it names, or None (it is then noted)."""
        own, target = document.external_id, document.fields.get("supersedes")
        if own is None:
            return None  # nothing supersedes a record without an _id: it is in no cycle
        if target is None:
            if own in self.stated:
                self.stated[own] = None
            return None
        if target == own:
            return f"supersedes its own _id {shown(own)}: a memory cannot replace itself"
        path = self._path(target, own)
        if path:
            chain = ", which supersedes ".join(shown(x) for x in path)
            return (
                f"supersedes {chain}, this record's own _id: a cycle, in which each memory would hide "
                "the next from recall; correct or forget one of them instead"
            )
        self.stated[own] = target
        return None

    def _next(self, external_id):
        """The _ids that `external_id` supersedes: as this run states it (its history
        versions' as stored), else as stored."""
        stated = external_id in self.stated
        found = {
            target
            for (target,) in self.conn.execute(
                "select distinct supersedes from knowledge where external_id = ? and supersedes is not null"
                + (" and version_of is not null" if stated else ""),
                (external_id,),
            )
        }
        if stated and self.stated[external_id] is not None:
            found.add(self.stated[external_id])
        return found

    def _path(self, start, goal):
        """[start, ..., goal] along what each supersedes, or None when goal is not reached."""
        parents, queue = {start: None}, collections.deque([start])
        while queue:
            here = queue.popleft()
            for there in sorted(self._next(here)):
                if there == goal:
                    path = [goal]
                    while here is not None:
                        path.append(here)
                        here = parents[here]
                    return path[::-1]
                if there not in parents:
                    parents[there] = here
                    queue.append(there)
        return None


def cycles(conn):
    """Each set of _ids that supersede one another in a cycle (plain SQL can write
    one; remember and ingest refuse it), named in words, sorted."""
    edges = collections.defaultdict(set)
    for own, target in conn.execute(
        "select distinct external_id, supersedes from knowledge "
        "where external_id is not null and supersedes is not null"
    ):
        edges[own].add(target)
    found = []
    for members in components(edges):
        if len(members) > 1 or members[0] in edges[members[0]]:
            found.append(" and ".join(shown(m) for m in sorted(members)) + _cycle_words(members))
    return sorted(found)


def _cycle_words(members):
    return " supersedes itself" if len(members) == 1 else " supersede one another"


def components(edges):
    """Tarjan's strongly connected components of the graph `edges` ({node: the nodes it
    leads to}), iteratively: a chain of thousands of records, or of notes rotated
    (writer), is no recursion's."""
    index, low, on_stack, stack, result, counter = {}, {}, set(), [], [], 0
    for root in list(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                result.append(members)
    return result
