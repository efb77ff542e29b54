"""Writing one prepared document into a brain, inside the caller's transaction.

Its chunks are matched to the rows stored for it by content hash: unchanged text
keeps its row (and vector), changed text replaces its row, and the document's
edges are stated again. Entities are created on first mention; each new chunk
and entity is queued for mention matching in the same transaction.
"""

import bisect
import functools
import json
import math
import re
import time
from collections import Counter, defaultdict
from pathlib import Path

import xxhash

from . import conversation, mentions, validity
from .config import CARRIED_COPY_MIN_CHARS, MAX_ID, MAX_KEPT_ID
from .connection import max_variables
from .errors import BrainError, FieldError
from .fields import entity_key, normalize_fields
from .schema import next_knowledge_id, recorded_model
from .vectors import embedded_text, insert_vectors, storage_vectors
from .wording import shown

# knowledge columns written from a document's fields
FIELD_COLUMNS = (
    "class",
    "scope",
    "source",
    "domain",
    "created_at",
    "observed_at",
    "valid_from",
    "valid_to",
    "expires_at",
    "confidence",
    "relevance_tier",
    "owner",
    "access",
    "node_kind",
    "lawful_basis",
    "region",
    "knowledge_type",
    "supersedes",
)
_CHUNK_COLUMNS = ("chunk_index", "line_start", "line_end", "context")
_STORED_TIMES = ("created_at", "observed_at")
REMOVE_AT_ONCE = 50  # documents removed between looks at the clock
# a chunk's columns that come from its document (DocumentWriter._row_values)
_ROW_COLUMNS = (*FIELD_COLUMNS, "external_id", "source_path", "tags", "metadata", "embedding_model")
# a memory is created and observed when first stored, unless its input says when
# the columns a review decides (review.py: archive, restore, extend), with the values a
# record that states none has; a rewrite keeps them on a chunk whose text is unchanged
# unless the record states other values than before
DECIDED_COLUMNS = {"relevance_tier": 1, "expires_at": None}


_KEPT_COLUMNS = (*_ROW_COLUMNS, *_CHUNK_COLUMNS)


@functools.cache
def _update_kept(kept=()):
    """The update of a kept chunk's row, its _KEPT_COLUMNS values but those of `kept`
    (whose stored values stay) its parameters, then its id."""
    assignments = [
        f"[{c}] = coalesce(?, {c})" if c in _STORED_TIMES else f"[{c}] = ?" for c in _KEPT_COLUMNS if c not in kept
    ]
    return f"update knowledge set {', '.join(assignments)}, updated_at = current_timestamp where id = ?"


_INSERTED = (
    "id",
    "title",
    "content",
    "content_hash",
    "document_id",
    "heading_path",
    *_ROW_COLUMNS,
    *_CHUNK_COLUMNS,
    "flagged",
)
_INSERT_CHUNKS = f"insert into knowledge ({', '.join(f'[{n}]' for n in _INSERTED)}) "
CHUNKS_PER_INSERT = 500  # new chunks a statement at most: statements of up to 80 kB (SQLite takes up to 1 MB)
_CHUNK_VALUES = "({})".format(
    ", ".join("coalesce(?, current_timestamp)" if n in _STORED_TIMES else "?" for n in _INSERTED)
)
SHAPE_GROWTH = 4  # each shape of the chunk insert holds this many times the rows of the one below it


def _shape(count, most):
    """The rows of the chunk insert's shape that takes `count` new chunks: the least
    of 1, 4, 16, ... and `most` that holds them."""
    rows = 1
    while rows < min(count, most):
        rows = min(rows * SHAPE_GROWTH, most)
    return rows


@functools.cache
def _insert_shaped(rows):
    """The chunk insert of `rows` rows. A part of fewer chunks fills the rest with
    rows of NULLs, which its WHERE leaves out: a few shapes serve every part (a
    connection keeps each statement it prepared, 1.7 MB at 500 rows, and one of
    each size ingest meets would be hundreds)."""
    return f"{_INSERT_CHUNKS}select * from (values {', '.join([_CHUNK_VALUES] * rows)}) where column1 is not null"


def _stated_fields(columns):
    """{column: value} of the DECIDED_COLUMNS in a document's _ROW_COLUMNS values, but
    those of their default (most documents': {}, two bytes a documents row)."""
    values = {c: columns[_ROW_COLUMNS.index(c)] for c in DECIDED_COLUMNS}
    return {c: value for c, value in values.items() if value != DECIDED_COLUMNS[c]}


def stated_values(text):
    """{column: value} of every DECIDED_COLUMNS a document's stored stated_fields
    (`text`) records, {} when it records none: NULL, or what plain SQL wrote (no
    JSON object, or a value no record states as it is stored: a tier of "x", 7 or
    1e400, an expiry that is no time)."""
    stated = _json_object(text)
    if stated is None:
        return {}
    values = {c: stated.get(c, default) for c, default in DECIDED_COLUMNS.items()}
    given = {c: value for c, value in values.items() if value is not None}
    try:
        normal = normalize_fields(given)
    except FieldError:
        return {}
    if any(isinstance(value, bool) for value in given.values()) or normal != given:
        return {}
    return {**values, **normal}


def _json_object(text):
    """A JSON object stored as text, or None (NULL, or what plain SQL wrote otherwise)."""
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):  # plain SQL's '[[[...' too deep for the parser
        return None
    return value if isinstance(value, dict) else None


def record_head(first, stated=None):
    """The record an export states for the document whose first memory is the row
    `first` (a dict of its columns), but its memories (`_chunks`): its `_id`, where it
    was, its title, its fields (`stated`: what its record stated of those a review
    decides, where they differ), tags and metadata, as ingest reads them back."""
    stated = {**first, **(stated or {})}
    record = {}
    for key, column in (("_id", "external_id"), ("_document", "document_id")):
        if first[column] not in (None, ""):  # an empty external_id (plain SQL's) is none: ingest refuses ""
            record[key] = first[column]
    if first["document_id"] not in (None, ""):  # only a placed record takes these
        for key, column in (("_source_path", "source_path"), ("_version_of", "version_of")):
            if first[column] is not None:
                record[key] = first[column]
    if first["title"] is not None:
        record["title"] = first["title"]
    record.update((column, stated[column]) for column in FIELD_COLUMNS if stated[column] is not None)
    if conversation.stored_without_day(first["metadata"], first["context"]):  # observed_at: when it was stored
        record.pop("observed_at", None)
    elif first["context"] is not None and first["observed_at"] is not None:  # a turn said on its own day
        record["observed_at"] = conversation.observed_as_said(first["observed_at"], first["context"])
    for column in ("tags", "metadata"):
        if first[column] is not None:
            record[column] = _json_value(first[column])
    return record


def _json_value(text):
    """A JSON column's value; text that is no JSON, as it is (kept as metadata)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def _chunk_values(columns, chunk):
    """A chunk's _ROW_COLUMNS values: its document's, but where its own input gives
    one (an exported chunk's times, expiry or tier)."""
    if not chunk.fields:
        return columns
    return tuple(chunk.fields.get(name, value) for name, value in zip(_ROW_COLUMNS, columns))


class _Given:
    """The ids a run gave, as runs of consecutive ids (an ingest gives ids a run at a
    time: a million of them are a few runs, not a set of a million ints)."""

    def __init__(self):
        self.starts, self.ends = [], []  # sorted, disjoint: run i is starts[i]..ends[i]

    def __contains__(self, i):
        at = bisect.bisect_right(self.starts, i) - 1
        return at >= 0 and i <= self.ends[at]

    def update(self, ids):
        for i in sorted(ids):
            at = bisect.bisect_right(self.starts, i) - 1
            if at >= 0 and i <= self.ends[at] + 1:  # in or just after run `at`
                self.ends[at] = max(self.ends[at], i)
            else:
                at += 1
                self.starts.insert(at, i)
                self.ends.insert(at, i)
            if at + 1 < len(self.starts) and self.ends[at] + 1 >= self.starts[at + 1]:  # meets the next run
                self.ends[at] = max(self.ends[at], self.ends.pop(at + 1))
                self.starts.pop(at + 1)


def _new_ids(first, wanted, floor=None, given=()):
    """Ids for new chunks, in order, from `first` (next_knowledge_id's): a chunk's own
    wanted id (an exported memory's) where it was never given: above `floor` (every id
    up to it may have been), not in `given` (this run's), not taken before it, and at
    most MAX_KEPT_ID; else one above every id before it. An export's ids need not
    ascend (a note's earlier chunk edited has a higher id than its later ones), so
    `floor` is the mark when this run began writing, while no other writer gave an id
    since. A BrainError when they would pass MAX_ID."""
    floor = first - 1 if floor is None else floor
    ids, mark, taken = [], first - 1, set()
    for own in wanted:
        kept = own is not None and floor < own <= MAX_KEPT_ID and own not in given and own not in taken
        chosen = own if kept else mark + 1
        mark = max(mark, chosen)
        taken.add(chosen)
        ids.append(chosen)
    if mark > MAX_ID:
        raise BrainError(
            f"every memory id up to {MAX_ID:,} is given (a row plain SQL wrote with an id that high): "
            "no new memory can be stored in this brain; export it and ingest the export into a new one"
        )
    return ids


def content_hash(text):
    return xxhash.xxh3_64_hexdigest(text.encode("utf-8"))


def chunk_text(document, chunk):
    """The text a chunk of `document` is embedded and hashed as."""
    return embedded_text(document.title, chunk.heading_path, chunk.content, chunk.context)


def claimed(conn, documents):
    """{position in `documents`: why it is refused} for each document with no
    `_version_of` whose id an earlier version of a current record holds, kept as
    history (`X@2024-01-01 00:00:00`, or a record a later _version_of made
    history), when writing it would rewrite that version's memories (their text,
    title or context differ) or move it (its valid_from or scope): they would
    leave the history, their text lost, or break its order. One whose memories
    stay as they are is written as it says, still history. And
    each read from a file (not placed by its record) whose id another file's
    memory holds, stored or earlier in `documents` (a '#' in a file's name or in
    an _id can make one id of two: `a.jsonl#x.md` is a note's and a.jsonl's
    record x.md's): the next ingest of the other file would take it back."""
    # a placed one, current or history, stored as another record's
    refused = _other_records(conn, [(i, d) for i, d in enumerate(documents) if d.placed])
    given = [(i, d) for i, d in enumerate(documents) if not d.version_of]
    if not given:
        return refused
    held = {
        document_id: (path, version_of, digest)
        for document_id, path, version_of, digest in conn.execute(
            "select value, d.source_path, (select k.version_of from knowledge k where k.document_id = value "
            "and k.version_of is not null and exists (select 1 from knowledge c where c.document_id = k.version_of "
            "and c.version_of is null) limit 1), d.content_hash "
            "from json_each(?) join documents d on d.document_id = value",
            [json.dumps(sorted({d.document_id for _, d in given}))],
        )
    }
    for position, document in given:
        if position in refused:
            continue
        mine = (document.source_path, None, None)  # a placed one claims no file's id: it is put back
        held_now = (
            held.get(document.document_id, mine) if document.placed else held.setdefault(document.document_id, mine)
        )
        path, version_of, digest = held_now
        if version_of is not None and digest != document.digest and _rewrites(conn, document):
            refused[position] = (
                f"its id {shown(document.document_id)} is that of an earlier version of {shown(version_of)} "
                f"kept as history: to change that version, give it '_version_of' {shown(version_of)} (with "
                "'_document'); else give the record another _id"
            )
        elif document.placed:
            continue
        elif path is not None and document.source_path is not None and path != document.source_path:
            refused[position] = (
                f"its id {shown(document.document_id)} is that of a memory of {shown(path)} (a '#' in a file's "
                "name or in an _id made one id of two): rename the file or give the record another _id"
            )
    return refused


def _other_records(conn, placed):
    """{position: why} for each placed document (`_document`) that is stored as
    another record's (another `_id`, or a note's): it would take that record's
    place, which its file would take back on its next ingest, and that `_id`
    would name nothing (review 105)."""
    if not placed:
        return {}
    stored = {
        document_id: external_id
        for document_id, held, external_id in conn.execute(
            "select value, exists (select 1 from knowledge where document_id = value), "
            "(select external_id from knowledge where document_id = value limit 1) from json_each(?)",
            [json.dumps(sorted({d.document_id for _, d in placed}))],
        )
        if held
    }
    placed = [(position, document) for position, document in placed if document.document_id in stored]
    return {
        position: (
            f"its '_document' {shown(document.document_id)} holds "
            + (
                f"the record with _id {shown(stored[document.document_id])}"
                if stored[document.document_id] is not None
                else "a memory with no _id"
            )
            + ": a record replaces only its own document; give that _id, or leave '_document' out"
        )
        for position, document in placed
        if stored[document.document_id] != document.external_id
    }


def _rewrites(conn, document):
    """Whether writing `document` over the earlier version stored under its id
    would change that version: replace its memories (a chunk's text as
    embedded — title, heading path, text and context — is not one stored there,
    or one stored there is not written again), or move it in time or scope (its
    valid_from orders the versions; its scope is its record's)."""
    stored = conn.execute(
        "select content_hash, valid_from, scope from knowledge where document_id = ?", [document.document_id]
    ).fetchall()
    place = (document.fields.get("valid_from"), document.fields.get("scope") or "/")
    return sorted(h for h, *_ in stored) != sorted(
        content_hash(chunk_text(document, chunk)) for chunk in document.chunks
    ) or any((valid_from, scope) != place for _, valid_from, scope in stored)


def _stated_decision(text):
    """(relevance_tier, expires_at) as a document's record stated them (its stored
    stated_fields, `text`), or None when they were not recorded: what a review's
    decision on its memories is told from."""
    stated = stated_values(text)
    return (stated["relevance_tier"], stated["expires_at"]) if stated else None


def _line_ends_as_lf(text):
    """`text` with each CRLF or lone CR as LF: what a note's text was read as before its
    line ends were kept."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _length(text):
    """A memory's length as CARRIED_COPY_MIN_CHARS counts it: a CRLF one character,
    as a note's elsewhere (review 118, L1), the spaces around it none."""
    return len(_line_ends_as_lf(text).strip())


def _text_mark(text):
    """A chunk's text as a small key (its 64-bit hash) for _carries' set of flagged texts."""
    return xxhash.xxh3_64_intdigest(text.encode("utf-8", "surrogatepass"))


def _marks(external_id, content, scope, klass, session=None):
    """A memory's marks for carrying a flag (_carries): its text (with the session
    of a conversation turn: a "Yes." in another session is another turn), and its
    record's _id when it has one, each in its scope and class."""
    marks = {("text", _text_mark(content), scope, klass, session)}
    if external_id is not None:
        marks.add(("id", external_id, scope, klass))
    return marks


def _decision_mark(external_id, content, scope, klass, session=None, record=None):
    """What a copy of a decided memory has the same of, to take its decision: its
    record's _id (none for a note: a renamed note is its copy), its text as LF (a
    note saved again elsewhere with other line ends), its scope, class and session,
    and its record's key in its file (_record_key). An edited text is another
    memory, whether moved or not (review 111); so is a record without an _id that
    states other fields (review 127: a log's new line saying what an archived one
    said, on another day)."""
    return ("copy", external_id, _text_mark(_line_ends_as_lf(content)), scope, klass, session, record)


def _record_key(document_id, source_path):
    """A record's key in its file: its _id, or for one without, the hash of its text
    and fields (records.record_document), which its copy in another file keeps, but
    the ~2 of a turn said again (pipeline._said_again: its place among the sayings of
    one file, review 128). None for a note, whose path is its document's id."""
    prefix = f"{source_path}#" if source_path else None
    if not (prefix and document_id and document_id.startswith(prefix)):
        return None
    return _SAID_AGAIN.sub("", document_id[len(prefix) :])


_SAID_AGAIN = re.compile(r"~[0-9]+$")


def _carried_whole(mark, origins, copies, removed):
    """Whether the copies of the removed memories `mark` names are so as part of
    their documents' copies: a record's by its _id; a note's section when, for each
    of them, every section removed from its note (`origins`, the marks of each such
    removal) was written again in the run (`copies`), in one note or several (moved,
    renamed, swapped, a note split in two: review 115; a note that stays gives its
    removed sections no decision to carry, review 118). Another standup holding the
    same "No blockers" section as a removed one is not it (review 113, H3); nor is
    another folder's README.md with the same License section (review 114, H2): the
    rest of their notes was not written again. When one of them was and another was
    not, which copy is whose cannot be told: none (review 116). A section counts as
    written again when the run wrote as many copies of it as it removed (`removed`,
    their ids): another note's copy stands in for no one else's (review 117)."""
    return mark[1] is not None or all(
        all(len(copies.get(m, ())) >= len(removed[m]) for m in marks) for marks in origins
    )


def _decisions(rows):
    """(decision, id, mark, origin, document id) of each _decision_rows row: its decision
    (relevance_tier, expires_at, and those its record stated) when a review's, not
    what its record stated, else None (a document whose stated values were not
    recorded, written before m021, has none told; nor has one whose memories here
    are shorter than CARRIED_COPY_MIN_CHARS, all told: a "No blockers." is no other
    note's copy, review 111); its _decision_mark; and its origin: the marks of that
    document's memories selected (_carried_whole). And {document id: the length of
    its memories selected, as the floor counts it}."""
    rows = [row for row in rows if row[4] is None]  # a history version's decision stays its own
    length, marks = defaultdict(int), defaultdict(set)
    marked = _decision_marked([row[5:] for row in rows])
    for row, (_, mark) in zip(rows, marked):
        length[row[3]] += _length(row[7])
        marks[row[3]].add(mark)
    decided = []
    for (tier, expires, stated_text, document_id, *_), (row_id, mark) in zip(rows, marked):
        was = _stated_decision(stated_text)
        long_enough = length[document_id] >= CARRIED_COPY_MIN_CHARS
        decision = (tier, expires, *was) if was and long_enough and (tier, expires) != was else None
        decided.append((decision, row_id, mark, frozenset(marks[document_id]), document_id))
    return decided, length


def _wholes(decided, length):
    """{document id: (the marks of its memories, their length, their ids)} of the
    documents whose memories `decided` (_decisions) are, all of them."""
    ids = defaultdict(set)
    for _, row_id, _, _, document_id in decided:
        ids[document_id].add(row_id)
    return {d: (origin, length[d], frozenset(ids[d])) for _, _, _, origin, d in decided}


def _decided_texts(rows, place):
    """{text with its line ends as LF: (tier, expiry decided, tier, expiry stated)} of
    one document's removed chunks (_decision_rows) that a review decided, when no
    other of them has that text: read as LF before 7 December 2026, a note written
    with CRLF is written again with its line ends as written, and keeps the
    decisions on it (review 107). A decision stays in the scope and class (`place`)
    it was made in."""
    was = _stated_decision(rows[0][2]) if rows else None
    if was is None:
        return {}
    found = defaultdict(set)
    for tier, expires, *_, content, scope, klass, _, _, _ in rows:
        found[_line_ends_as_lf(content)].add((tier, expires) if (scope, klass) == place else None)
    return {
        text: (*decisions.pop(), *was)
        for text, decisions in found.items()
        if len(decisions) == 1 and was not in decisions and None not in decisions
    }


def _document_marks(document, chunk):
    """_marks of a chunk of `document`, as it will be stored."""
    turn = conversation.turn_of(document)
    return _marks(document.external_id, chunk.content, *_placement(document), turn and turn[1])


# what _marks reads of a stored memory, after its id (its metadata for its session: _marked)
_MARKED = "id, external_id, content, scope, class, metadata"
_UNDECIDED = ()  # a mark that memories with other decisions share: it carries none


def _marked(rows):
    """(id, external_id, content, scope, class, session) of _MARKED rows: the
    session of a turn, as turn_of reads it, else None."""
    return [(*row[:-1], conversation.stored_session(row[-1])) for row in rows]


# what _decision_mark reads of a stored memory: _MARKED's, and its document and file (_record_key)
_DECISION_MARKED = f"{_MARKED}, document_id, source_path"


def _decision_marked(rows):
    """(id, _decision_mark) of each of the _DECISION_MARKED `rows` (a list)."""
    return [
        (row_id, _decision_mark(*memory, _record_key(*row[-2:])))
        for (row_id, *memory), row in zip(_marked(row[:-2] for row in rows), rows)
    ]


def _documents_marked(conn, where, params):
    """(document id, flagged, id, external_id, content, scope, class, session) of
    the current memories `where` selects, each document's in chunk order."""
    rows = conn.execute(
        f"select document_id, flagged, {_MARKED} from knowledge where version_of is null and {where} "
        "order by document_id, chunk_index",
        params,
    ).fetchall()
    return [
        (document_id, flagged, *marked)
        for (document_id, flagged, *_), marked in zip(rows, _marked(r[2:] for r in rows))
    ]


def _by_document(rows):
    """{document id: its _documents_marked rows}."""
    documents = {}
    for row in rows:
        documents.setdefault(row[0], []).append(row)
    return documents


def _copy_key(chunks):
    """What a document's copy has the same of: its _id, and its chunks' texts, scope,
    class and session in order."""
    return chunks[0][3], tuple(tuple(row[4:]) for row in chunks)


def _placement(document):
    """(scope, class) a document's memories are stored with."""
    return document.fields.get("scope") or "/", document.fields.get("class") or "memory"


class DocumentWriter:
    """Writes documents and removes them; counts what it did in `report`."""

    def __init__(self, conn, model_id, report):
        self.conn, self.model_id, self.report = conn, model_id, report
        # rows whose context a later document's requote embedded again, with their vectors: a vector the
        # caller holds for one of them, of its text as first written, is not to be inserted (vectors_due)
        self.restated = set()
        self.last_restated = []  # the rows whose contexts the last write restated
        self.turns = conversation.SessionTurns()  # the sessions this run's rewrites requote in
        self.entity_ids = {}  # casefolded name -> id, for entities seen in this run
        self.looked_up = {}  # name -> its stored entity's id or None, as look_up_entities found them
        self.queued = {"chunk": [], "entity": []}  # mention work, queued by `queue_mentions`
        self.mentioned = None  # when a dict like `queued`: all it queued (a remember matches just that)
        # the ids this run gave, above the mark it began from, and the mark it left: while no other
        # writer raises it, an id between them that the run did not give was never given (_new_ids)
        self.floor, self.given, self.left = None, _Given(), None
        # a flagged memory this run removes and writes anew (moved to another file) stays flagged: the
        # marks of the flagged ones it removed, the chunks of documents new to the brain it wrote, and
        # those it flagged so (_carries, _carry_to_fresh)
        self.removed_marks, self.fresh, self.carried = set(), _Given(), []
        # so does a review's decision (archived, expiry extended) on a memory this run removes and writes
        # anew: the decisions of the removed ones by their marks (_carry_decisions, carry_decisions)
        self.removed_decisions, self.written = {}, _Given()  # and the chunks this run wrote, in any document
        self.removed_ids = {}  # mark -> the ids of the memories removed (a removal rolled back keeps its own)
        self.origins = {}  # mark -> the marks of the documents the decided ones were removed from (_carried_whole)
        self.replaced = set()  # the stored documents whose text the run replaced whole (carry_decisions)
        self.wholes = {}  # document -> (its memories' marks, length, ids), when the run removed them all
        self.in_place = {}  # document -> the removals of a document rewritten whole, one decided (carry_decisions)
        self.vouched = Counter()  # the copies that showed a gone note moved (written_again): each for one

    def forget_entities(self):
        """Drop the entity cache, the sessions kept and the mention work not queued
        yet: ids created inside a rolled-back savepoint are gone."""
        self.turns.clear()
        self.entity_ids.clear()
        self.looked_up = {}
        self.queued = {"chunk": [], "entity": []}

    def look_up_entities(self, documents):
        """Find in one statement the stored entities that `documents` name and this run
        has not met, for `_entity` to take instead of a statement a name (each lets the
        embedding thread take the interpreter, to wait for it back). Valid until the
        transaction ends (`done_looking`): nothing a write does removes an entity, and
        one it adds is met by `entity_ids` first (names equal but for ASCII case, as
        the name column compares them, casefold alike). A name json_each might not
        read back as Python binds it (a control character, a lone surrogate) is looked
        up alone, as before."""
        wanted = list(
            {
                name: None
                for document in documents
                for name in _named(document)
                if name.casefold() not in self.entity_ids and name.isprintable()
            }
        )
        found = dict(
            self.conn.execute(
                "select j.key, e.id from json_each(?) j join entities e on e.name = j.value collate nocase",
                [json.dumps(wanted)],
            ).fetchall()
        )
        self.looked_up = {name: found.get(index) for index, name in enumerate(wanted)}

    def done_looking(self):
        """Drop what look_up_entities found and the sessions kept: another writer may
        change them after this transaction."""
        self.looked_up = {}
        self.turns.clear()

    def queue_mentions(self):
        """Queue the mention work of the documents written since the last call, in
        the same transaction as them."""
        for kind, ids in self.queued.items():
            mentions.queue(self.conn, kind, ids)
            if self.mentioned is not None:
                self.mentioned[kind] += ids
        self.queued = {"chunk": [], "entity": []}

    def stored_hashes(self, documents):
        """{document id: stored content hash} of those `documents` already stored; None
        for one whose memories no `documents` row holds (a migrated reference file's, or
        its row deleted by plain SQL): it is rewritten over them, not stored twice."""
        ids = json.dumps([d.document_id for d in documents])
        return dict(
            self.conn.execute(
                "select value, (select content_hash from documents where document_id = value) from json_each(?) "
                "where exists (select 1 from documents where document_id = value) "
                "or exists (select 1 from knowledge where document_id = value)",
                [ids],
            ).fetchall()
        )

    def stored_form(self, document_id):
        """What a reader sees of stored document `document_id`: its memories but when
        they were last updated, its edges but their ids and times, its documents
        row but its hash and time, and its entity."""
        found = self.conn.execute("select * from knowledge where document_id = ? order by id", (document_id,))
        kept = [i for i, column in enumerate(found.description) if column[0] != "updated_at"]
        memories = [[row[i] for i in kept] for row in found.fetchall()]
        edges = sorted(  # tuples: a connection's row_factory may make rows that do not order (Datasette's)
            tuple(edge)
            for edge in self.conn.execute(
                "select from_entity_id, to_entity_id, relation_type, knowledge_id from relationships "
                "where document_id = ?",
                (document_id,),
            )
        )
        row = self.conn.execute(
            "select title, source_path, entity_id, chunks, rowid from documents where document_id = ?", (document_id,)
        ).fetchone()
        entity = row and self.conn.execute("select * from entities where id = ?", (row[2],)).fetchone()
        return memories, edges, row and tuple(row), entity and tuple(entity)

    def plan(self, document, known):
        """Match the document's chunks to its stored rows (if `known`) by content hash:
        {"kept": [(row id, index, chunk)], "new": [(hash, text, index, chunk)], "removed": [row id],
        "known": known}."""
        existing = {}
        stored_rows = (
            self.conn.execute(
                "select id, content_hash from knowledge where document_id = ? order by id", (document.document_id,)
            )
            if known
            else ()
        )
        for row_id, stored_hash in stored_rows:
            existing.setdefault(stored_hash, []).append(row_id)
        kept, new = [], []
        for index, chunk in enumerate(document.chunks):
            text = chunk_text(document, chunk)
            digest = content_hash(text)
            rows = existing.get(digest)
            if rows:
                kept.append((rows.pop(0), index, chunk))
            else:
                new.append((digest, text, index, chunk))
        removed = [row_id for rows in existing.values() for row_id in rows]
        return {"kept": kept, "new": new, "removed": removed, "known": known}

    def write(self, document, plan, vectors):
        """Write one document's rows and edges; returns (row id, int8, bit) for the
        vectors of its new chunks, which the caller inserts."""
        conn, report = self.conn, self.report
        columns = self._row_values(document)
        said, quoted, restated = conversation.entry_of(document), None, []
        moved = False
        if plan["known"]:
            columns = self._kept_times(document, columns)
        flagged = 0
        self.turns.begin(conn)
        if plan["known"]:  # its edges are stated again below; a turn quoted as before needs no restating
            # ... unless its record flags it now (an export's): no turn quotes a flagged one
            unless = None if self._flagged_now(document) else {document.document_id: said}
            quoted = conversation.requote(conn, [document.document_id], unless, known=self.turns)
            if said is not None:  # where the stored turn was, when its quote changed (requote read it)
                was = quoted.where.get(document.document_id)
                moved = was != said[0] if was is not None else self._session_left(document, said[0])
            conn.execute("delete from relationships where document_id = ?", (document.document_id,))
            # a document someone flagged stays flagged where it is rewritten: an edit
            # never brings flagged text back into recall unreviewed
            flagged = self._uncarried(document)
        unstated = self._unstated_edges(plan["removed"])
        rewritten = {}
        if plan["known"] and plan["removed"]:  # their text may be written anew in another document (a swap)
            rows = self._decision_rows("k.id in (select value from json_each(?))", plan["removed"])
            rewritten = _decided_texts(rows, _placement(document))
            decided, length = _decisions(rows)
            if plan["kept"]:  # a section removed from a note that stays: another note's copy of it is no move of it
                decided = [(None, *removal) for _, *removal in decided]  # (a template filled in, review 118)
            else:  # its text replaced whole: a swap's or a rotation's document (carry_decisions)
                self.replaced.add(document.document_id)
                self.wholes.update(_wholes(decided, length))
            if any(removal[0] is not None for removal in decided):  # rewritten whole: a swap's, or a template's
                self.in_place[document.document_id] = decided  # told at the run's end (carry_decisions)
            else:
                self._carry_decisions(decided)
        if plan["removed"]:
            conn.executemany("delete from knowledge where id = ?", [(i,) for i in plan["removed"]])
        report.chunks_removed += len(plan["removed"])
        chunk_ids = {}
        decided = self._decided(document, columns) if plan["kept"] else ()
        for row_id, index, chunk in plan["kept"]:
            kept = tuple(c for c in decided if c not in chunk.fields)  # an exported chunk's own values are stated
            values = (*_chunk_values(columns, chunk), index, chunk.line_start, chunk.line_end, chunk.context)
            conn.execute(_update_kept(kept), [v for c, v in zip(_KEPT_COLUMNS, values) if c not in kept] + [row_id])
            chunk_ids[index] = row_id
        report.chunks_updated += len(plan["kept"])
        marked = [(row_id,) for row_id, _, chunk in plan["kept"] if chunk.flagged]
        if marked:  # an exported chunk that was flagged is flagged again (a record never unflags one)
            conn.executemany("update knowledge set flagged = 1 where id = ? and flagged = 0", marked)
        stored_vectors, [added] = self._insert_chunks([(document, plan, columns, flagged)], vectors)
        chunk_ids.update(added)
        if rewritten:  # a chunk written anew whose text differs from a removed one's in its line ends alone
            texts = {index: _line_ends_as_lf(chunk.content) for _, _, index, chunk in plan["new"]}
            self._decide([(*rewritten[texts[i]], row_id) for i, row_id in added.items() if texts[i] in rewritten])
        flagged = flagged or int(any(chunk.flagged for chunk in document.chunks))
        if moved:  # placed after the turns of its new session, as its context was made (Sessions)
            conn.execute("delete from documents where document_id = ?", (document.document_id,))
        self._finish(document, chunk_ids, columns)
        if unstated and chunk_ids:  # on the chunk in the removed one's place, else the document's first
            conn.executemany(
                "insert or ignore into relationships (from_entity_id, to_entity_id, relation_type, knowledge_id) "
                "values (?, ?, ?, ?)",
                [(a, b, kind, chunk_ids.get(index, chunk_ids[min(chunk_ids)])) for a, b, kind, index in unstated],
            )
        if quoted:  # a corrected turn is quoted as it is now in the turns after it; moved elsewhere, not at all
            where = quoted.where.get(document.document_id)
            now = {document.document_id: said[1]} if said and said[0] == where and not flagged else None
            restated = rewrite_contexts(conn, quoted.contexts(now))
            self.restated.update(restated)
        self.last_restated = restated
        self.turns.written(conn, [document.document_id], restated)
        return stored_vectors

    def _decided(self, document, columns):
        """The DECIDED_COLUMNS whose values the stored `document`'s record stated as it
        states them now: a review's decision on its kept chunks stays (none for a
        document whose stated values were not recorded, written before m021)."""
        row = self.conn.execute(
            "select stated_fields from documents where document_id = ?", (document.document_id,)
        ).fetchone()
        stated, now = stated_values(row[0] if row else None), _stated_fields(columns)
        return tuple(c for c in stated if stated[c] == now.get(c, DECIDED_COLUMNS[c]))

    def _session_left(self, document, where):
        """Whether the stored `document` is no turn of `where` ((session, scope)) yet:
        a turn moved to another session or scope, or a memory that becomes a turn."""
        row = self.conn.execute(
            "select metadata, scope from knowledge where document_id = ? order by chunk_index, id limit 1",
            (document.document_id,),
        ).fetchone()
        return row is not None and (conversation.stored_session(row[0]), row[1]) != where

    def _kept_times(self, document, columns):
        """`columns` with the stored document's created_at and observed_at where the
        record gives none: a rewritten document keeps when it was first stored and
        observed, in a chunk whose text changed (a new row) as in one kept. A turn's
        observed_at is its fields' alone: its day, in its title and context, was made
        from them before it is written (conversation.said_day gave a correction the
        stored day, when the stored turn said one)."""
        stored = self.conn.execute(
            "select created_at, observed_at from knowledge where document_id = ? order by chunk_index, id limit 1",
            (document.document_id,),
        ).fetchone()
        if stored is None:
            return columns
        kept = _STORED_TIMES if conversation.turn_of(document) is None else ("created_at",)
        values = list(columns)
        for name, value in zip(_STORED_TIMES, stored):
            at = _ROW_COLUMNS.index(name)
            values[at] = value if values[at] is None and name in kept else values[at]
        return tuple(values)

    def _unstated_edges(self, removed):
        """The edges no document states (no document_id: another system's, a migrated
        reference file's, plain SQL's) bound to the chunks `removed`, as (from, to, type,
        the chunk's index): a rewrite of the document keeps them, where removing its
        chunks would take them (knowledge_vec_delete). Its own edges it states again."""
        if not removed:
            return []
        return self.conn.execute(
            "select r.from_entity_id, r.to_entity_id, r.relation_type, k.chunk_index from relationships r "
            "join knowledge k on k.id = r.knowledge_id "
            "where r.document_id is null and r.knowledge_id in (select value from json_each(?))",
            [json.dumps(removed)],
        ).fetchall()

    def write_new(self, items, vectors):
        """Write documents new to the brain, each a (document, plan): as `write`
        would one by one, with the chunks of them all inserted together."""
        if not items:
            return []
        self.turns.begin(self.conn)
        rows = [(document, plan, self._row_values(document), 0) for document, plan in items]
        stored_vectors, chunk_ids = self._insert_chunks(rows, vectors)
        for (document, _, columns, _), ids in zip(rows, chunk_ids):
            self._finish(document, ids, columns)
        self.turns.written(self.conn, [document.document_id for document, _ in items])
        return stored_vectors

    def _carries(self, document, chunk):
        """Whether a chunk of a document new to the brain is to be written flagged: a
        flagged memory this run removed (a record moved to another file, a note
        renamed) held its record's _id, or its text, in the same scope and class."""
        return bool(self.removed_marks) and not self.removed_marks.isdisjoint(_document_marks(document, chunk))

    def _flagged(self, document_ids):
        """(document id, flagged, *_marked row) of each memory of those `document_ids`
        that hold a flagged one, read before they are removed."""
        return _documents_marked(
            self.conn,
            "document_id in (select distinct document_id from knowledge where flagged != 0 "
            "and document_id in (select value from json_each(?)))",
            [json.dumps(document_ids)],
        )

    def _carry_to_fresh(self, marks):
        """The marks of flagged memories just removed, kept for the rest of the run
        (_carries), and the chunks this run already wrote anew that they mark flagged
        now, in the removal's transaction (a copy written before its original's
        removal): one pass over this run's new documents' chunks."""
        marks -= self.removed_marks
        if not marks:
            return
        self.removed_marks |= marks
        ids = []
        for first, last in zip(self.fresh.starts, self.fresh.ends):
            for row_id, *memory in _marked(
                self.conn.execute(
                    f"select {_MARKED} from knowledge where id between ? and ? and flagged = 0 and version_of is null",
                    (first, last),
                )
            ):
                if not marks.isdisjoint(_marks(*memory)):
                    ids.append(row_id)
        self._flag_carried(ids)

    def _flagged_now(self, document):
        """Whether `document`'s record flags a chunk (an export's record of a flagged
        memory) and a stored row of it is not flagged yet."""
        return any(chunk.flagged for chunk in document.chunks) and bool(
            self.conn.execute(
                "select 1 from knowledge where document_id = ? and not flagged limit 1", (document.document_id,)
            ).fetchone()
        )

    def _uncarried(self, document):
        """Whether stored `document`, about to be rewritten, is flagged; a flag this run
        carried to it as a copy of a removed memory (_carry_to_copies) is taken off
        first when its chunks' texts, scope or class change in the same run: a copy no
        more. A turn keeps it: the turns after it dropped its quote when it was flagged."""
        flags = self.conn.execute(
            "select id, flagged from knowledge where document_id = ?", (document.document_id,)
        ).fetchall()
        carried = set(self.carried) & {row_id for row_id, flag in flags if flag} if self.carried else set()
        stored = _documents_marked(self.conn, "document_id = ?", [document.document_id]) if carried else []
        if stored and all(row[7] is None for row in stored):  # stored as no turn (a turn keeps it)
            turn = conversation.turn_of(document)
            now = [(chunk.content, *_placement(document), turn and turn[1]) for chunk in document.chunks]
            if [tuple(row[4:]) for row in stored] != now:  # its texts, or where it is: no copy any more
                self.conn.execute(
                    "update knowledge set flagged = 0 where id in (select value from json_each(?))",
                    [json.dumps(sorted(carried))],
                )
                self._uncount(carried)
                flags = [(row_id, 0 if row_id in carried else flag) for row_id, flag in flags]
        return max((flag for _, flag in flags), default=0)

    def _carry_to_copies(self, removed):
        """Flag the stored copies of the flagged records just `removed` (_flagged's
        rows): a document written after one of them with its _id and the same chunks
        (texts, scope, class and session), a move over two ingests or one interrupted
        before its prune; its chunks whose text is flagged in the removed one are
        flagged. With the same _id alone it may be another file's row 1, an edited
        copy is another memory, and a short record ("Yes") may be another's too: the
        removed one's text, all its chunks, is CARRIED_COPY_MIN_CHARS long at least."""
        originals = {}  # (external_id, its chunks) -> (its first memory's id, the texts flagged in it)
        for chunks in _by_document(removed).values():
            if chunks[0][3] is not None and sum(_length(row[4]) for row in chunks) >= CARRIED_COPY_MIN_CHARS:
                first, texts = originals.get(_copy_key(chunks), (math.inf, set()))
                originals[_copy_key(chunks)] = (
                    min(first, *(r[2] for r in chunks)),
                    texts | {r[4] for r in chunks if r[1]},
                )
        if not originals:
            return
        stored = _documents_marked(
            self.conn,
            "external_id in (select value from json_each(?))",
            [json.dumps(sorted({key[0] for key in originals}))],
        )
        ids = []
        for chunks in _by_document(stored).values():
            first, texts = originals.get(_copy_key(chunks), (math.inf, ()))
            if min(row[2] for row in chunks) > first:
                ids += [row[2] for row in chunks if not row[1] and row[4] in texts]
        self._flag_carried(ids)

    def _uncount(self, ids):
        """Take the memories `ids` out of those this run carried a flag to (unflagged or removed since)."""
        self.carried = [row_id for row_id in self.carried if row_id not in ids]
        self.report.chunks_carried_flag -= len(ids)

    def _flag_carried(self, ids):
        """Flag the memories `ids` as carrying a removed one's flag (_carry_to_fresh, _carry_to_copies)."""
        if ids:
            self.conn.execute(
                "update knowledge set flagged = 1 where id in (select value from json_each(?))", [json.dumps(ids)]
            )
            self.carried += ids
            self.report.chunks_carried_flag += len(ids)
            after_flagging(self.conn, ids)

    def vectors_due(self, vectors):
        """Of (row id, int8, bit) vectors written documents gave, those still to be
        inserted: not of a row requoted since, which has its vector already."""
        due = [vector for vector in vectors if vector[0] not in self.restated]
        self.restated.clear()
        return due

    def batch_done(self, batch):
        """After a batch is written, in its transaction: no turn's context quotes a
        chunk flagged by carrying (a turn written after one was prepared with it
        unflagged); only a batch holding turns can quote one."""
        if self.carried and any(conversation.entry_of(document) for document in batch):
            after_flagging(self.conn, self.carried)

    def _insert_chunks(self, items, vectors):
        """Insert the new chunks of (document, plan, its row values, flagged) items,
        in order, a few statements for them all: FTS5 writes out its pending terms at
        the start of each statement that writes through a trigger, so a statement a
        chunk would write a segment of the index a chunk, which it then merges.
        Returns (row id, int8, bit) of the new chunks' vectors, and each item's
        {chunk index: row id}."""
        rows, placed, chunk_ids, wanted, carried, fresh = [], [], [], [], [], []
        for document, plan, columns, flagged in items:
            chunk_ids.append({})
            for digest, _, index, chunk in plan["new"]:
                if not plan["known"]:
                    fresh.append(len(rows))
                if not flagged and not chunk.flagged and not plan["known"] and self._carries(document, chunk):
                    carried.append(len(rows))
                    flagged_here = 1
                else:
                    flagged_here = flagged or int(chunk.flagged)
                rows.append(
                    (
                        document.title,
                        chunk.content,
                        digest,
                        document.document_id,
                        chunk.heading_path,
                        *_chunk_values(columns, chunk),
                        index,
                        chunk.line_start,
                        chunk.line_end,
                        chunk.context,
                        flagged_here,
                    )
                )
                placed.append((chunk_ids[-1], index, digest))
                wanted.append(chunk.memory_id)
            self.report.chunks_added += len(plan["new"])
        first = next_knowledge_id(self.conn)
        if self.left != first - 1:  # this run's first write, or another writer gave ids since its last
            self.floor, self.given = first - 1, _Given()
        ids = _new_ids(first, wanted, self.floor, self.given)  # never an id given before: none is reused
        self.given.update(ids)
        self.carried += [ids[position] for position in carried]
        self.report.chunks_carried_flag += len(carried)
        self.fresh.update(ids[position] for position in fresh)
        self.written.update(ids)
        self.left = max([first - 1, *ids])
        per_statement = min(max_variables() // len(_INSERTED), CHUNKS_PER_INSERT)
        for start in range(0, len(rows), per_statement):
            part = rows[start : start + per_statement]
            padding = _shape(len(part), per_statement) - len(part)
            self.conn.execute(
                _insert_shaped(len(part) + padding),
                [value for row_id, row in zip(ids[start:], part) for value in (row_id, *row)]
                + [None] * (padding * len(_INSERTED)),
            )
        stored_vectors = []
        for row_id, (ids_of, index, digest) in zip(ids, placed):
            ids_of[index] = row_id
            if vectors[digest]:
                stored_vectors.append((row_id, *vectors[digest]))
        return stored_vectors, chunk_ids

    def _finish(self, document, chunk_ids, columns):
        """A written document's entity, documents row (with the DECIDED_COLUMNS values
        its record states, of its _ROW_COLUMNS values `columns`) and edges; its chunks
        queued for mentions."""
        entity_id = self._entity(document.title, "document", claim=True) if document.title else None
        self.conn.execute(
            # in place when rewritten: a document keeps its row, so the order documents were first stored in
            # (a transcript's turns, conversation._sources) outlives their corrections
            "insert into documents (document_id, title, source_path, entity_id, content_hash, chunks, stated_fields) "
            "values (?, ?, ?, ?, ?, ?, ?) on conflict(document_id) do update set title = excluded.title, "
            "source_path = excluded.source_path, entity_id = excluded.entity_id, "
            "content_hash = excluded.content_hash, chunks = excluded.chunks, "
            "stated_fields = excluded.stated_fields, ingested_at = current_timestamp",
            (
                document.document_id,
                document.title,
                document.source_path,
                entity_id,
                document.digest,
                len(document.chunks),
                json.dumps(_stated_fields(columns), separators=(",", ":")),
            ),
        )
        self._write_edges(document, entity_id, chunk_ids)
        self.queued["chunk"] += chunk_ids.values()

    def remove(self, document_ids, deadline=None):
        """Delete these documents, each whole (remove_documents), counting their
        chunks, until `deadline` (time.perf_counter; None: all); returns the ids left."""
        flagged, left = [], []
        self.turns.clear()  # removing flags or carries marks to other memories (below)
        decided = []
        for start in range(0, len(document_ids), REMOVE_AT_ONCE):
            flagged += self._flagged(document_ids[start : start + REMOVE_AT_ONCE])
            found, length = _decisions(
                self._decision_rows(
                    "k.document_id in (select value from json_each(?))", document_ids[start : start + REMOVE_AT_ONCE]
                )
            )
            decided += found
            self.wholes.update(_wholes(found, length))
            self.report.chunks_removed += remove_documents(self.conn, document_ids[start : start + REMOVE_AT_ONCE])
            if deadline is not None and time.perf_counter() >= deadline:
                left = document_ids[start + REMOVE_AT_ONCE :]
                break
        if self.carried:  # a copy flagged as carrying and then removed in the same run is no longer counted
            self._uncount(set(self.carried) & {row[2] for row in flagged})
        # in the same transaction as the removals
        self._carry_to_fresh(set().union(*(_marks(*memory) for _, flag, _, *memory in flagged if flag)))
        self._carry_to_copies(flagged)
        self._carry_decisions(decided)
        return left

    def _decision_rows(self, where, ids):
        """What _decisions and _decided_texts read of the memories `where` selects
        among `ids` (documents, or memories): read once for both."""
        return self.conn.execute(
            "select k.relevance_tier, k.expires_at, d.stated_fields, k.document_id, k.version_of, k.id, "
            "k.external_id, k.content, k.scope, k.class, k.metadata, k.document_id, k.source_path "
            "from knowledge k join documents d "
            f"on d.document_id = k.document_id where {where}",
            [json.dumps(ids)],
        ).fetchall()

    def _carry_decisions(self, decided):
        """Keep the decisions of the memories just removed by their marks (None: none
        decided), for the end of the run (carry_decisions): memories alike but for
        their decisions (one archived, one not) tell a copy none."""
        for decision, row_id, mark, origin, _ in decided:
            known = self.removed_decisions.get(mark, decision)
            self.removed_decisions[mark] = decision if known == decision else _UNDECIDED
            self.removed_ids.setdefault(mark, set()).add(row_id)
            if decision is not None:
                self.origins.setdefault(mark, []).append(origin)

    def decisions_to_carry(self):
        """Whether a memory this run removed held a review's decision."""
        return bool(self.in_place) or any(d not in (None, _UNDECIDED) for d in self.removed_decisions.values())

    def carry_decisions(self):
        """At the end of a run, when every removal is known (review 108: a copy written
        between two removals took a decision the second made ambiguous): give the
        chunks the run wrote (into documents new or not: two notes swapped, review 111)
        the decision of the removed memories they are copies of (_decision_mark), when
        the run wrote as many copies as it removed memories of that mark (two copies of
        one note: neither; a section a note holds twice, renamed: both, review 115),
        none of those is still stored (a removal taken back), and each is part of its
        document's copy (_carried_whole). A document whose text was replaced whole
        where it is gives its decisions only when it lies on a cycle of such documents,
        each one's old text written whole into the next (two notes swapped, three
        rotated: _cycles), or its new text is all the text of another the run removed
        whole, 20 characters at least (`mv b c; mv a b`; one lookup a document, review
        125): a template filled in while the next note is made from it gives none
        (reviews 119 to 125)."""
        if not self.decisions_to_carry():
            return
        pending = {mark for removals in self.in_place.values() for _, _, mark, _, _ in removals}
        copies, places = defaultdict(list), defaultdict(set)
        for first, last in zip(self.written.starts, self.written.ends):
            rows = self.conn.execute(
                f"select {_DECISION_MARKED} from knowledge where id between ? and ? and version_of is null",
                (first, last),
            ).fetchall()
            for row, (row_id, mark) in zip(rows, _decision_marked(rows)):
                document_id = row[-2]
                if mark in self.removed_decisions or mark in pending:
                    copies[mark].append(row_id)
                    places[mark].add(document_id)
        written = functools.cache(self._written_marks)  # asked of a document once, for both tests below
        cycled = self._cycles(places, written) if self.in_place else set()  # every removal known: a swap's too
        texts = defaultdict(set)  # a text removed whole, long enough to be a copy's: the documents it was
        for other, (text, length, _) in self.wholes.items():
            if length >= CARRIED_COPY_MIN_CHARS:  # no "No blockers." (review 123)
                texts[text].add(other)
        for document_id, removals in self.in_place.items():
            took = texts.get(frozenset(written(document_id)), set()) - {document_id}
            given = document_id in cycled or any(not self._still_stored(self.wholes[other][2]) for other in took)
            self._carry_decisions(removals if given else [(None, *removal) for _, *removal in removals])
        self.in_place = {}
        carried = {
            mark: ids
            for mark, ids in copies.items()
            if len(ids) == len(self.removed_ids[mark]) and self.removed_decisions[mark] not in (None, _UNDECIDED)
        }
        originals = sorted(set().union(*(self.removed_ids[mark] for mark in carried)))
        kept = {  # a removal its transaction took back (a document that failed): the original is still there
            row_id
            for (row_id,) in self.conn.execute(
                "select id from knowledge where id in (select value from json_each(?))", [json.dumps(originals)]
            )
        }
        self._decide(
            [
                (*self.removed_decisions[mark], row_id)
                for mark, ids in carried.items()
                if kept.isdisjoint(self.removed_ids[mark])
                and _carried_whole(mark, self.origins[mark], copies, self.removed_ids)
                for row_id in ids
            ]
        )

    def _written_marks(self, document_id):
        """The _decision_marks of the memories the run wrote into `document_id`."""
        rows = self.conn.execute(
            f"select {_DECISION_MARKED} from knowledge where document_id = ? and version_of is null", (document_id,)
        ).fetchall()
        return {mark for row_id, mark in _decision_marked(rows) if row_id in self.written}

    def _still_stored(self, ids):
        """Whether one of these memories, removed in the run, is stored still: its
        document's write failed and was taken back (review 126)."""
        found = self.conn.execute(
            "select 1 from knowledge where id in (select value from json_each(?)) limit 1", [json.dumps(sorted(ids))]
        )
        return found.fetchone() is not None

    def _cycles(self, places, written):
        """The documents replaced whole (`replaced`) that lie on a cycle of them, each
        one's old text written whole into the next (`places`: the documents each removed
        memory's copies were written into; `written`, the marks the run wrote into a
        document): two notes swapped, three rotated. A
        template written over another note, whose old text went elsewhere or nowhere,
        closes none (review 123); nor does a text under CARRIED_COPY_MIN_CHARS, unless
        it is all the next one holds, as in a swap with a short note (review 124). The
        graph is made once a run and its cycles found in one pass (Tarjan's strongly
        connected components): a search from each note took minutes for thousands of
        notes rotated (review 124). Each old text is a node of its own, between the
        notes that held it and those it went to: thousands of notes of one placeholder
        text were an edge from each to each (review 127)."""
        following, went = {}, {}
        for document in self.replaced:
            text, length, _ = self.wholes.get(document, (frozenset(), 0, ()))
            key = ("text", text, length < CARRIED_COPY_MIN_CHARS)  # no document id is a tuple
            if key not in went:
                held = [places.get(mark, set()) for mark in text]
                into = set.intersection(*held) & self.replaced if held else set()
                went[key] = [other for other in into if not key[2] or written(other) == text]
            following[document] = [key]
        following.update(went)
        # a cycle holds two documents at least: one through its own old text alone (document, text,
        # document) is none
        return {
            node
            for component in validity.components(following)
            if sum(isinstance(node, str) for node in component) > 1
            for node in component
            if isinstance(node, str)
        }

    def written_again(self, documents):
        """Those of the stored `documents` each of whose memories this run wrote again,
        title, text, scope and class alike, in another document: moved, not lost (a
        drive unmounted, review 117, M1). A copy stored before the run is none (a
        backup folder's), and copies are counted: as many written as the documents
        hold of that memory, else none of them is (review 119), and each shows one note
        moved in the run (review 120)."""
        held = self.conn.execute(
            "select document_id, content_hash, scope, class from knowledge "
            "where version_of is null and document_id in (select value from json_each(?))",
            [json.dumps(sorted(documents))],
        ).fetchall()
        needed = Counter((digest, scope, klass) for _, digest, scope, klass in held)
        written = Counter(
            (digest, scope, klass)
            for row_id, document_id, digest, scope, klass in self.conn.execute(
                "select id, document_id, content_hash, scope, class from knowledge "
                "where version_of is null and content_hash in (select value from json_each(?))",
                [json.dumps(sorted({key[0] for key in needed}))],
            )
            if row_id in self.written and document_id not in documents
        )
        written -= self.vouched  # a copy vouches for one note, whichever PATH of the run it was under (review 120)
        short = {key for key, count in needed.items() if written[key] < count}
        moved = {row[0] for row in held} - {row[0] for row in held if tuple(row[1:]) in short}
        self.vouched.update(tuple(row[1:]) for row in held if row[0] in moved)
        return moved

    def _decide(self, changes):
        """Give rows their removed originals' decisions, (tier, expiry, stated tier,
        stated expiry, id) each: a row whose record states what the original's stated
        (a copy, not a record that now states another tier or expiry) takes them."""
        if changes:
            done = self.conn.executemany(
                "update knowledge set relevance_tier = ?, expires_at = ? "
                "where relevance_tier is ? and expires_at is ? and id = ?",
                changes,
            )
            self.report.chunks_carried_decision += done.rowcount

    def removable(self, where, params, keep=(), gone=False):
        """(the ids of the documents `where` selects, the ids of those of them to
        remove: all but those in `keep` and, with `gone`, those whose file is there;
        `gone` may be the test of that, may_exist when True)."""
        there = gone if callable(gone) else may_exist
        selected = self.conn.execute(
            "select document_id, source_path, (select k.version_of from knowledge k where k.document_id = "
            f"documents.document_id limit 1) from documents where {where}",
            params,
        ).fetchall()
        doomed = [
            document_id
            for document_id, path, version_of in selected
            # a kept record keeps its earlier versions (validity.keep_as_history)
            if document_id not in keep and version_of not in keep and not (gone and path and there(path))
        ]
        return [document_id for document_id, _, _ in selected], doomed

    def _row_values(self, document):
        """The document's values of the _ROW_COLUMNS of each of its chunks, in order."""
        values = {c: document.fields.get(c) for c in FIELD_COLUMNS}
        values["scope"], values["class"] = _placement(document)
        values["domain"] = values["domain"] or "global"
        values["relevance_tier"] = 1 if values["relevance_tier"] is None else values["relevance_tier"]
        return (
            *values.values(),
            document.external_id,
            document.source_path,
            json.dumps(document.tags) if document.tags else None,
            json.dumps(document.metadata, default=str) if document.metadata else None,
            self.model_id,
        )

    def _write_edges(self, document, entity_id, chunk_ids):
        first = chunk_ids.get(0)
        edges = []
        for tag in document.tags:
            edges.append((entity_id, self._entity(f"#{tag}", "tag"), "tagged_with", first))
        for alias in document.aliases:
            edges.append((self._entity(alias, "alias"), entity_id, "alias_of", first))
        for name, entity_type in document.entities:
            edges.append((entity_id, self._entity(name, entity_type), "mentions", first))
        for relation in document.relations:
            source = entity_id if relation.from_name is None else self._entity(relation.from_name, relation.from_type)
            target = self._entity(relation.to_name, relation.to_type)
            edges.append((source, target, relation.relation_type, chunk_ids.get(relation.chunk_index, first)))
        rows = [(a, b, t, k, document.document_id) for a, b, t, k in edges if a != b]
        if not rows:
            return
        cursor = self.conn.executemany(
            "insert or ignore into relationships "
            "(from_entity_id, to_entity_id, relation_type, knowledge_id, document_id) values (?, ?, ?, ?, ?)",
            rows,
        )
        self.report.relationships += max(cursor.rowcount, 0)

    def _entity(self, name, entity_type, claim=False):
        """The id of the entity called `name` (as fields.entity_key knows it: look-alike
        names are one entity), created when new; `claim` makes it a document node."""
        name = entity_key(name)
        key = name.casefold()
        entity_id = self.entity_ids.get(key)
        if entity_id is None:
            if name in self.looked_up:
                entity_id = self.looked_up[name]
            else:
                row = self.conn.execute("select id from entities where name = ?", (name,)).fetchone()
                entity_id = row[0] if row else None
            if entity_id is None:
                entity_id = self.conn.execute(
                    "insert into entities (name, entity_type) values (?, ?)",
                    (name, "document" if claim else entity_type),
                ).lastrowid
                self.report.entities += 1
                self.queued["entity"].append(entity_id)
                self.entity_ids[key] = entity_id
                return entity_id
            self.entity_ids[key] = entity_id
        if claim:
            self.conn.execute(
                "update entities set entity_type = 'document' where id = ? and entity_type is not 'document'",
                (entity_id,),
            )
        return entity_id


def _named(document):
    """The entity names a document's writing looks up, in the order it does (DocumentWriter._finish)."""
    if document.title:
        yield document.title
    for tag in document.tags:
        yield f"#{tag}"
    yield from document.aliases
    for name, _ in document.entities:
        yield name
    for relation in document.relations:
        if relation.from_name is not None:
            yield relation.from_name
        yield relation.to_name


def remove_documents(conn, document_ids):
    """Delete documents whole, inside the caller's transaction: their chunks (the
    triggers take each chunk's full-text row, vector and the edges it stated), the
    other edges the document stated, and its documents row. Ingest's pruning and
    forget both remove through here. A removed conversation turn leaves no quote
    of itself in the contexts of the turns after it. Returns how many chunks went."""
    removed = 0
    before = validity.touched(conn, document_ids)
    quoted = conversation.requote(conn, document_ids)
    for document_id in document_ids:
        removed += conn.execute("delete from knowledge where document_id = ?", (document_id,)).rowcount
        conn.execute("delete from relationships where document_id = ?", (document_id,))
        conn.execute("delete from documents where document_id = ?", (document_id,))
    validity.settle(conn, before)  # what they superseded is current again
    rewrite_contexts(conn, quoted.contexts())
    return removed


def after_flagging(conn, ids):
    """What follows flagging the memories `ids`, in the caller's transaction: a
    flagged memory replaces nothing (supersession derived again), and a flagged
    turn is quoted in no other turn's context."""
    documents = [
        row[0]
        for row in conn.execute(
            "select distinct document_id from knowledge "
            "where id in (select value from json_each(?)) and document_id is not null",
            [json.dumps(ids)],
        )
    ]
    validity.settle(conn, validity.touched(conn, documents))
    rewrite_contexts(conn, conversation.requote(conn, documents, unflag=True).contexts())


def restate(conn, quotes):
    """Replace stale quotes (conversation.Quote, check's, in the order a context
    holds them) in the contexts of the turns they name by what each says now
    (None: drop it), inside the caller's transaction, each context rewritten
    once: a turn plain SQL deleted, flagged or changed is not found through what
    it used to say. (The writer's own deletes, flags and corrections go through
    conversation.requote.)"""
    followers = sorted({document_id for quote in quotes for document_id in quote.followers})
    rows = conn.execute(
        "select id, context from knowledge where document_id in (select value from json_each(?)) order by id",
        [json.dumps(followers)],
    ).fetchall()
    contexts = {}
    for row_id, context in rows:
        changes = [(quote.entry, quote.now, quote.occurrence) for quote in quotes if quote.held_in(context)]
        if changes:
            contexts[row_id] = conversation.put_quotes(context, changes)
    rewrite_contexts(conn, contexts)


def rewrite_contexts(conn, contexts):
    """Store new contexts ({row id: context}), inside the caller's transaction;
    returns the row ids. Each changed one is embedded again (the vector is of the
    text with its context), in place: the memories keep their ids, and a
    document's digest leaves contexts out, so ingesting its file again keeps
    them as they are."""
    changed = []  # (row id, its text with its new context)
    for row_id, title, heading_path, content in conn.execute(
        "select id, title, heading_path, content from knowledge "
        "where id in (select value from json_each(?)) order by id",
        [json.dumps(list(contexts))],
    ).fetchall():
        text = embedded_text(title, heading_path, content, contexts[row_id])
        conn.execute(
            "update knowledge set context = ?, content_hash = ?, updated_at = current_timestamp where id = ?",
            (contexts[row_id], content_hash(text), row_id),
        )
        changed.append((row_id, text))
    if not changed:
        return []
    # one key at a time: vec0 reads every row for `in (...)`
    conn.executemany("delete from vec_knowledge where knowledge_id = ?", [(row_id,) for row_id, _ in changed])
    vectors = storage_vectors([text for _, text in changed], recorded_model(conn))
    insert_vectors(conn, [(row_id, *vector) for (row_id, _), vector in zip(changed, vectors) if vector])
    return [row_id for row_id, _ in changed]


def unlinked_contexts(conn, document):
    """{row id: context} of the stored rows of `document`, unchanged, whose
    context is not the one its input links it with now (chunk by chunk)."""
    return {
        row_id: chunk.context
        for (row_id, context), chunk in zip(
            conn.execute(
                "select id, context from knowledge where document_id = ? order by chunk_index, id",
                [document.document_id],
            ).fetchall(),
            document.chunks,
        )
        if chunk.context is not None and chunk.context != context
    }


def edited(conn, document_id):
    """Whether plain SQL changed the text of the stored document `document_id`:
    a chunk's content hash is not that of its text (what the writer, and restating
    a context, store with it)."""
    return any(
        stored != content_hash(embedded_text(title, heading_path, content, context))
        for stored, title, heading_path, content, context in conn.execute(
            "select content_hash, title, heading_path, content, context from knowledge where document_id = ?",
            [document_id],
        )
    )


def may_exist(path):
    """Whether the file (or folder) may still be there: one that cannot be looked
    at (in a folder we may not read) counts as there, so it is never pruned."""
    try:
        return Path(path).exists()
    except OSError:
        return True
