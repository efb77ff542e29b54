"""Conversation transcripts: the turns of a session as memories a question finds.

A record with a speaker (`speaker`, or `role` in chat exports) and a session
(`session_id`, `conversation_id` or `thread_id`) is a turn. A turn alone rarely
says what a question about it needs: "I went yesterday and it was so powerful"
names neither who spoke, nor when, nor what "it" was. So each turn is searched
with a context (knowledge.context, never returned as its text): its speaker, the
day it was said, its relative time phrases read against that day ("yesterday:
7 May 2023") and the turns just before it in its session and scope. In the graph
a turn is `said_by` its speaker and `in_session` its session.
"""

import bisect
import calendar
import collections
import datetime
import functools
import itertools
import json
import re
from dataclasses import dataclass

from .config import (
    CONVERSATION_CONTEXT_TURNS,
    CONVERSATION_DATES,
    CONVERSATION_NAME_CHARS,
    CONVERSATION_QUOTE_CHARS,
    MAX_TITLE_CHARS,
)
from .document import SESSION_KEYS, SPEAKER_KEYS, Document, Relation
from .temporal import day_label, resolve_relative, resolved_line


def turn_of(document):
    """(speaker, session) of a turn, or None for any other document."""
    metadata = document.metadata
    speaker = next((metadata[k] for k in SPEAKER_KEYS if _name(metadata.get(k))), None)
    session = next((metadata[k] for k in SESSION_KEYS if _name(metadata.get(k))), None)
    if speaker is None or session is None or not str(speaker).strip() or not str(session).strip():
        return None
    return str(speaker).strip(), str(session).strip()


def _name(value):
    """Whether `value` names a speaker or a session: text or a whole number (fields.name_text)."""
    return isinstance(value, (str, int)) and not isinstance(value, bool) and bool(str(value).strip())


class Sessions:
    """The last turns of each session seen so far, for the context of the next.
    A turn quotes only earlier turns in its own scope: whoever may read it may
    read them."""

    def __init__(self, earlier=None, hidden=None, placed=None, day=None):
        # earlier(session, scope): [(document id, (speaker, text) or None for a flagged one)] of the last
        # turns stored, oldest first; hidden(document id): whether the stored turn is flagged, so never
        # quoted; placed(document id, session, scope): for a stored turn written again (a correction), the
        # turns stored before its place, as earlier gives them; None for any other; day(document): the
        # day the stored turn it corrects was said (said_day), kept when it gives none; None for any other
        self.earlier, self.hidden, self.placed, self.keep = earlier, hidden, placed, CONVERSATION_CONTEXT_TURNS
        self.day = day
        self.turns = {}  # {(session, scope): [(document id, quotable)] of the last turns stored or linked}
        self.said = {}  # {document id: ((session, scope), quotable)} of the turns linked

    def add(self, document):
        """Link `document` (its fields' defaults applied) into its session if it is a turn."""
        turn = turn_of(document)
        if turn is not None:
            self._link(document, *turn)

    def _link(self, document, speaker, session):
        key = (session, scope_of(document.fields))
        placed = self.placed(document.document_id, *key) if self.placed else None
        if placed is None and key not in self.turns:
            self.turns[key] = list(self.earlier(*key)) if self.earlier else []
        turns = self._written(self.turns[key] if placed is None else placed, key)
        before = turns[-self.keep :]
        if document.fields.get("observed_at") is None and self.day:
            kept = self.day(document)
            if kept is not None:
                document.fields["observed_at"], document.said_on = kept
        said = said_at(document.fields.get("observed_at"), document.said_on)
        if not document.title:  # within the title cap, however long the names
            title = f"{speaker}, {day_label(said)}" if said else f"{speaker} in {session}"
            document.title = title if len(title) <= MAX_TITLE_CHARS else title[: MAX_TITLE_CHARS - 1] + "…"
        text = "\n".join(chunk.content for chunk in document.chunks)
        lines = own_lines(speaker, said, text) + [entry(*turn) for _, turn in before if turn is not None]
        for chunk in document.chunks:
            chunk.context = "\n".join(lines)
        document.relations = document.relations + [
            Relation("said_by", speaker, None, 0, "person"),
            Relation("in_session", session, None, 0, "session"),
        ]
        document.quoting = tuple(document_id for document_id, _ in before)
        # a flagged turn keeps its place among the turns before the next, unquoted
        hidden = any(c.flagged for c in document.chunks) or (self.hidden and self.hidden(document.document_id))
        quotable = None if hidden else (speaker, text)
        self.said[document.document_id] = key, quotable
        if placed is None:  # a correction stays at its place: the next new turn follows the latest
            self.turns[key] = (turns + [(document.document_id, quotable)])[-_KEPT_TURNS:]

    def _written(self, turns, key):
        """`turns` ([(document id, quotable)]) as this call or file has written them
        so far: a turn linked since is quoted as it is now, or left out when it left
        the session (a correction given another session or scope)."""
        now = []
        for document_id, turn in turns:
            where, turn = self.said.get(document_id, (key, turn))
            if where == key:
                now.append((document_id, turn))
        return now


# turns Sessions keeps of a session: the context's few, and as many again for turns that a call moves away
_KEPT_TURNS = 4 * CONVERSATION_CONTEXT_TURNS


def own_lines(speaker, said, text):
    """The lines a turn's context begins with: its speaker and the day it was
    `said` (a datetime, None when unknown), then its relative time phrases read
    against that day."""
    name = _cut(speaker, CONVERSATION_NAME_CHARS)
    if said is None:
        return [name]
    return [f"{name}, {day_label(said)}"] + resolve_relative(text, said, CONVERSATION_DATES)


def scope_of(fields):
    """The scope a memory with `fields` is stored under (the writer's default: /)."""
    return fields.get("scope") or "/"


def entry(speaker, text):
    """How a turn is quoted in the context of the turns after it: its speaker's
    name and its text, each cut (CONVERSATION_QUOTE_CHARS), so a context stays
    small however long the turns before it or the names in them."""
    return f"{_cut(speaker, CONVERSATION_NAME_CHARS)}: {_cut(text, CONVERSATION_QUOTE_CHARS)}"


def _cut(text, limit):
    return text if len(text) <= limit else text[:limit] + "…"


def entry_of(document):
    """((session, scope), entry) of a turn, None for any other document."""
    turn = turn_of(document)
    if turn is None:
        return None
    return (turn[1], scope_of(document.fields)), entry(turn[0], "\n".join(chunk.content for chunk in document.chunks))


def session_sql(row="knowledge"):
    """SQL for the session a stored memory's metadata names, as turn_of reads it: the
    first of its session keys that is a name, as text without the spaces around it
    (a session given as 7 or " s1 " is "7" or "s1" on both sides). A memory naming
    no speaker has one too, though it is no turn: _stored_turn tells. With `row`
    None, of the column unqualified, as an index on it is written (schema)."""
    metadata = f"{row}.metadata" if row else "metadata"
    return f"(case when json_valid({metadata}) then {_first_name_sql(metadata, SESSION_KEYS)} end)"


def in_session(session, row="knowledge"):
    """(SQL, params) selecting the memories whose session_sql is `session`. A session
    spelled in plain characters is first looked for in the metadata's text, unless it
    holds an escape: far cheaper than reading its JSON, which then reads only the rows
    that may hold it."""
    match = f"{session_sql(row)} = ?"
    if _PLAIN.fullmatch(session):  # JSON with an escape ("s\u0031" is "s1") is read whole
        return f"(instr({row}.metadata, ?) > 0 or instr({row}.metadata, '\\') > 0) and {match}", [session, session]
    return match, [session]


_PLAIN = re.compile(r"[A-Za-z0-9 _.:,;#@+=-]+")

# the characters str.strip() takes off, as SQL text for trim()
_SPACES = "char(" + ", ".join(str(c) for c in range(0x110000) if chr(c).isspace()) + ")"


def speaker_sql(row="knowledge"):
    """SQL for the speaker a stored memory's metadata names, as turn_of reads it (NULL
    for none); with `row` None, of the column unqualified, as an index on it is written."""
    metadata = f"{row}.metadata" if row else "metadata"
    return f"(case when json_valid({metadata}) then {_first_name_sql(metadata, SPEAKER_KEYS)} end)"


def _first_name_sql(metadata, keys):
    """SQL for the first of `keys` in `metadata` whose value is a name (_name): text or
    a whole number (written as JSON writes it, past 64 bits too), stripped, not empty."""
    names = []
    for key in keys:
        value = f"json_extract({metadata}, '$.{key}')"
        names.append(
            f"(case json_type({metadata}, '$.{key}') when 'text' then nullif(trim({value}, {_SPACES}), '') "
            f"when 'integer' then (case when typeof({value}) = 'integer' then cast({value} as text) "
            f"else {metadata} -> '$.{key}' end) end)"
        )
    return f"coalesce({', '.join(names)})" if len(names) > 1 else names[0]


@dataclass(frozen=True)
class Quote:
    """A stored turn as a turn after it quotes it (check's stale quotes): its
    session and scope, the quote, the document holding it, and what to quote
    instead (None: the quote goes)."""

    where: tuple
    entry: str
    followers: tuple
    now: str | None = None
    occurrence: int = 0  # the context's matches of the entry before it (a line of another quote may be one)

    def held_in(self, context):
        """Whether `context` holds this quote whole (not a longer one beginning alike)."""
        return re.search(_pattern(self.entry), context or "") is not None


@dataclass
class Requote:
    """The quotes of some stored turns in the contexts of the turns after them,
    found before the turns are deleted, flagged or corrected: `rows` maps a row
    id to (its context's own lines, its quotes, {position: the quoted turn's
    document id}), `where` each quoted turn's (session, scope)."""

    rows: dict
    where: dict

    def contexts(self, now=None):
        """{row id: context} with each found quote put as `now` says ({document id:
        entry}) or dropped."""
        now = now or {}
        found = {}
        for row_id, (head, quotes, quoted) in self.rows.items():
            kept = [now.get(quoted[at]) if at in quoted else q for at, q in enumerate(quotes)]
            found[row_id] = head + "".join("\n" + q for q in kept if q is not None)
        return found


def _pattern(said):
    """A quote of `said` whole in a context (not a longer one beginning alike)."""
    return re.escape("\n" + said) + r"(?=\n|$)"


def put_quote(context, said, new=None, occurrence=0):
    """`context` with its quote of `said` put as `new` (None: dropped): the first
    place it is found, or the one after `occurrence` others."""
    found = list(itertools.islice(re.finditer(_pattern(said), context), occurrence + 1))
    if len(found) <= occurrence:
        return context
    at = found[occurrence]
    return context[: at.start()] + ("" if new is None else "\n" + new) + context[at.end() :]


def _matches(context, said):
    """{words: the spans of its quotes in `context`, in order} for each of `said`,
    each found once (plain SQL may have written thousands of quotes into one)."""
    return {words: [m.span() for m in re.finditer(_pattern(words), context)] for words in set(said)}


def put_quotes(context, changes):
    """`context` with each of `changes` ((said, new, occurrence), as put_quote takes
    them) made: the matches of each words found once (_matches), and the context put
    together once. Changes whose matches overlap are made one at a time, last first
    (they are given in the context's order), as put_quote makes them."""
    spans = _matches(context, [said for said, _, _ in changes])
    cuts = sorted((*spans[said][occurrence], new) for said, new, occurrence in changes if occurrence < len(spans[said]))
    if any(a[1] > b[0] for a, b in zip(cuts, cuts[1:])):
        for said, new, occurrence in reversed(changes):
            context = put_quote(context, said, new, occurrence)
        return context
    parts, at = [], 0
    for start, end, new in cuts:
        parts += [context[at:start], "" if new is None else "\n" + new]
        at = end
    return "".join(parts) + context[at:]


def _occurrences(context, own, quotes):
    """For each of `quotes` (a context's quotes after its own lines, which end at
    `own`), how many matches of its words come before it there; 0 for each when
    they do not make up the context."""
    if context[:own] + "".join("\n" + quoted for quoted in quotes) != context:
        return [0] * len(quotes)
    # the matches ending by `at` are the prefix's own, unless one runs across `at`
    spans = _matches(context, quotes)
    ends = {quoted: [end for _, end in found] for quoted, found in spans.items()}
    found, at = [], own
    for quoted in quotes:
        before = bisect.bisect_right(ends[quoted], at)
        if before < len(spans[quoted]) and spans[quoted][before][0] < at:
            before = sum(1 for match in re.finditer(_pattern(quoted), context[:at]))
        found.append(before)
        at += len(quoted) + 1
    return found


def requote(conn, document_ids, unless=None, unflag=False, known=None):
    """A Requote of the stored turns among `document_ids`, but for one quoted as
    `unless` says it now is ({document id: (where, entry)}): a rewrite that leaves
    a turn's quote as it was reads nothing more of its session. A quote is of the
    turn check reads it as (_sources), so writer and check never disagree; with
    `unflag` the turns are read as before they were flagged, just now. `known`: a
    SessionTurns of the run's writes."""
    targets, where_of = {}, {}
    for document_id, metadata, scope, text, *_ in _stored_documents(
        conn, "document_id in (select value from json_each(?))", [json.dumps(list(document_ids))]
    ):
        turn = _stored_turn(metadata)
        if turn is None:
            continue
        where = (turn[1], scope)
        if unless and unless.get(document_id) == (where, entry(turn[0], text)):
            continue
        targets.setdefault(where, set()).add(document_id)
        where_of[document_id] = where
    rows = {}
    for where, mine in targets.items():
        session = _Session(conn, *where) if known is None else known.session(conn, *where)
        # its session as SQL reads it may not be turn_of's (a name SQL trims otherwise): then none quotes it
        said_by = {d: session.turns[d][0][3] for d in sorted(mine) if d in session.turns}
        alone = {w: d for d, w in said_by.items() if len(session.saying.get(w, ())) == 1}  # every quote of it is its
        shared = set(said_by.values()) - alone.keys()
        reading = None  # the whole session as check reads it, read once some quote needs it
        for row_id, document_id, context in session.quoting(conn, alone.keys() | shared):
            sharing = any(w in context for w in shared)
            held = [(w, alone[w]) for w in alone if w in context and re.search(_pattern(w), context)]
            if not sharing and not held:
                continue
            # as check finds it (_name_end), but for the names it was written for, read only when the
            # speaker's is not there: they differ only for a name of several lines renamed by plain SQL
            speaker = session.turns[document_id][1]
            named = _named(context, [speaker])
            if named is None:
                named = _name_end(context, [speaker] + _spoken(conn, [document_id]).get(document_id, []))
            own_words = session.turns[document_id][0][3]
            skip = _unquoted(own_words, len(session.saying.get(own_words, ())))
            end, quotes = _parse(context, named, session.firsts(), skip)
            head = context[:end]
            if head + "".join("\n" + q for q in quotes) != context:
                continue
            quoting = session.turns[document_id][0]
            if (
                not sharing
                and session.firsts().one_cut(context, end, quotes, skip)
                and all(n <= session.before(q, quoting) for q, n in collections.Counter(quotes).items())
            ):
                # the one way to cut it, each quote with as many turns before it saying it: one said once
                # is the only quote of its words
                at = {q: i for i, q in enumerate(quotes)}
                quoted = {at[w]: d for w, d in held if w in at}
            else:
                reading = reading or _Reading(conn, session, mine if unflag else ())
                quotes, sources = reading.attributed(quotes, document_id)
                quoted = {at: source[1] for at, source in enumerate(sources) if source and source[1] in mine}
            if quoted:
                rows[row_id] = (head, quotes, quoted)
    return Requote(rows, where_of)


def _stored_documents(conn, where, params, last=None, below=None):
    """(document id, metadata, scope, text, place, flagged, source path) of the
    documents whose rows `where` selects, each one's chunks joined in order; its
    place is where it was first stored (its documents row, which a rewrite keeps;
    its first row id when it has none); with `last`, only the last that many
    stored, newest first; with `below`, only those placed before it."""
    place = "coalesce((select d.rowid from documents d where d.document_id = g.document_id), min(id)) as first"
    if last:  # which they are, read from the rows' ids alone: the texts of a long session are not all read
        last_ids = conn.execute(
            f"select document_id, {place} from (select document_id, id from knowledge where {where} "
            "and document_id is not null) g group by document_id"
            + (" having first < ?" if below is not None else "")
            + " order by first desc, document_id desc limit ?",
            [*params, *([below] if below is not None else []), last],
        )
        where, params = _among([document_id for document_id, _ in last_ids], where, params)
    return conn.execute(
        f"select document_id, metadata, scope, group_concat(content, char(10)), {place}, "
        "max(flagged), max(source_path) from "
        f"(select document_id, metadata, scope, content, id, flagged, source_path from knowledge where {where} "
        "and document_id is not null order by document_id, chunk_index) g group by document_id"
        + (" order by first desc, document_id desc" if last else ""),
        params,
    ).fetchall()


def _among(document_ids, where, params):
    """(SQL, params) selecting the rows `where` selects of these documents, found by
    their ids: as a function's argument, `where` leaves any other index unread."""
    return f"document_id in (select value from json_each(?)) and coalesce(({where}), 0)", [
        json.dumps(document_ids),
        *params,
    ]


def stored_session(metadata):
    """The session of a stored memory's metadata (JSON text) when it is a turn, else None."""
    turn = _stored_turn(metadata)
    return turn and turn[1]


def _stored_turn(metadata):
    """(speaker, session) of a stored memory's metadata (JSON text), or None. The
    turns of a session mostly share a few short metadata texts: those are read once."""
    return _short_turn(metadata) if metadata is None or len(metadata) <= _SHORT_METADATA else _read_turn(metadata)


_SHORT_METADATA = 512  # characters: the metadata texts _short_turn keeps, 4,096 of them at most (2 MB)


@functools.lru_cache(maxsize=4096)
def _short_turn(metadata):
    return _read_turn(metadata)


def _read_turn(metadata):
    try:
        values = json.loads(metadata) if metadata else None
    except ValueError:
        return None
    return turn_of(Document("", None, [], metadata=values)) if isinstance(values, dict) else None


def stale_quotes(conn, edited=None):
    """{document id: [Quote]} of the quotes in stored contexts whose turn is no
    longer what the quote says, there: gone, flagged, its words changed, or moved
    to another session or scope (plain SQL does all of these): for check, whose
    repair restates each. A quote's turn is the one of the quoting turn's session
    and scope that says it, other than itself; of several saying the same, as
    _sources reads them (the writer's requote too). A document is named once per
    quote its contexts hold, however many of its chunks hold it.

    With `edited` (document id -> whether its words were changed where the writer
    did not see it, by plain SQL), a quote whose turn is still at its place — between
    the turns quoted before and after it, which still say what they are quoted as —
    with other words, or another speaker, is given them to quote (Quote.now), as
    correcting the turn through remember would; a quote of a flagged, moved or
    deleted turn goes."""
    turns, own = _stored_turns(conn)
    spoken = _spoken(conn)
    if edited:
        renamed, words = _renamed(conn, own), edited

        def edited(document_id):
            return document_id in renamed or words(document_id)

        def could_be(quoted, turn, path):
            """Whether `quoted` may be an old quote of `turn` (an edited one), quoted by a
            turn of file `path`: said by its speaker, as it is named now or was (its
            said_by edges); of the same file, unless either came from none (ingest
            quotes a file's turns alone)."""
            same_file = path is None or turn[4] is None or turn[4] == path
            names = [own[turn[1]][0]] + spoken.get(turn[1], [])
            said = " ".join(quoted.split())  # an edge names a speaker of several lines on one
            return same_file and any(said.startswith(" ".join(entry(name, "").split())) for name in names)

    said = {where: _Said(stored) for where, stored in turns.items()}  # (session, scope) -> its turns
    speakers = {}  # (session, scope) -> how its quotes begin: each speaker's name, as named now or was
    for document_id, (name, where, *_) in own.items():
        speakers.setdefault(where, set()).update(entry(n, "") for n in [name] + spoken.get(document_id, []))
    stale = {}  # document id -> [Quote], of the chunk holding most
    for document_id, context in conn.execute(
        "select document_id, context from knowledge where context is not null and document_id is not null order by id"
    ):
        speaker, where, first, text, path = own.get(document_id, (None, None, None, None, None))
        named = _name_end(context, [speaker] + spoken.get(document_id, []))
        own_words = None if speaker is None else entry(speaker, text)
        skip = _unquoted(own_words, len(said.get(where, _NO_TURNS).entries.get(own_words, ())))
        own_end, quotes = _parse(context, named, said.get(where, _NO_TURNS).firsts, skip)
        quotes, sources = _attributed(
            quotes, said.get(where, _NO_TURNS), (first, document_id, None, None, path), speakers.get(where, ())
        )
        if all(source is not None and not source[2] for source in sources):
            continue
        if edited:
            fits = functools.partial(could_be, path=path)
            window = sorted(said.get(where, _NO_TURNS).window.get(document_id, []))
            now = _requoted(quotes, sources, window, (document_id, first), edited, fits)
        else:
            now = {}
        before = _occurrences(context, own_end, quotes)
        found = [
            Quote(where, quoted, (document_id,), now.get(at), before[at])
            for at, (quoted, source) in enumerate(zip(quotes, sources))
            if source is None or source[2]
        ]
        if len(found) > len(stale.get(document_id, ())):
            stale[document_id] = found
    return stale


def stale_own_lines(conn):
    """{document id: {row id: context}} of the turns whose contexts begin with
    other lines than their speaker, day and words now give (own_lines: plain SQL
    changed the observed_at, the speaker or the words), each context with its own
    lines made again. A context without a day stays without one: its record named
    none (the observed_at it holds is when it was stored)."""
    turns, own = _stored_turns(conn)
    spoken = _spoken(conn)
    lines = {where: _Entries(turn[3] for turn in stored) for where, stored in turns.items()}
    saying = {where: collections.Counter(turn[3] for turn in stored) for where, stored in turns.items()}
    stale = {}
    for row_id, document_id, context, observed_at in conn.execute(
        "select id, document_id, context, observed_at from knowledge "
        "where context is not null and document_id is not null order by id"
    ):
        if document_id not in own:
            continue
        speaker, where, _, text, _ = own[document_id]
        named = _name_end(context, [speaker] + spoken.get(document_id, []))
        own_words = entry(speaker, text)
        end = _parse(context, named, lines[where], _unquoted(own_words, saying[where][own_words]))[0]
        line = context[named:end].split("\n", 1)[0]
        said = said_at(observed_at, _stated_day(line)) if _DAY.match(line) else None  # a day no calendar has: UTC's
        header = "\n".join(own_lines(speaker, said, text))
        if context[:end] != header:
            stale.setdefault(document_id, {})[row_id] = header + context[end:]
    return stale


# what follows the speaker's name on a context's first line that names a day ("Caroline, 8 May 2023")
_DAY = re.compile(r", \d{1,2} [A-Z][a-z]+ \d{1,4}$")


def _spoken(conn, document_ids=None):
    """{document id: [speaker]} as the turns' said_by edges name them (of
    `document_ids`, or of every turn): who a turn's context was written for,
    should plain SQL have given it another speaker since."""
    spoken = {}
    among = "" if document_ids is None else "and r.document_id in (select value from json_each(?)) "
    for document_id, name in conn.execute(
        "select distinct r.document_id, e.name from relationships r join entities e on e.id = r.to_entity_id "
        f"where r.relation_type = 'said_by' and r.document_id is not null {among}and typeof(e.name) = 'text'",
        [] if document_ids is None else [json.dumps(document_ids)],
    ):
        spoken.setdefault(document_id, []).append(name)
    return spoken


def _name_end(context, speakers):
    """Where the speaker's name ends in a turn's context: after the longest of
    `speakers` (its speaker now, and as written) that it begins with; a name it
    begins with that none of them is (plain SQL changed the speaker) is its first
    line, but for the day that ends it."""
    named = _named(context, speakers)
    if named is not None:
        return named
    line = context.split("\n", 1)[0]
    day = _DAY.search(line)
    return day.start() if day else len(line)


def _named(context, speakers):
    """Where the longest of `speakers` that `context` begins with, as its own lines
    name it, ends; None when it begins with none of them. A speaker's said_by entity
    has its name with whitespace collapsed (fields.entity_key): any run of whitespace
    in the context matches one of its spaces."""
    ends = []
    for speaker in speakers:
        if speaker is None:
            continue
        name = _cut(speaker, CONVERSATION_NAME_CHARS)
        words = name.split()
        if words and name == " ".join(words) and context.startswith(name):
            found = len(name)  # as written: where the pattern below would end
            if context[found : found + 2] in ("", "\n", ", "):
                ends.append(found)
            continue
        found = re.match(r"\s*" + r"\s+".join(map(re.escape, words)), context) if words else None
        if found and context[found.end() : found.end() + 2] in ("", "\n", ", "):
            ends.append(found.end())
    return max(ends, default=None)


def _renamed(conn, own):
    """The stored turns (`own`: _stored_turns's) whose contexts name another speaker
    than theirs: plain SQL changed it."""
    return {
        document_id
        for document_id, context in conn.execute(
            "select document_id, context from knowledge where context is not null and document_id is not null"
        )
        if document_id in own and _named(context, [own[document_id][0]]) is None
    }


def _stored_turns(conn):
    """({(session, scope): [(first row id, document id, flagged, entry, source
    path)], in the order stored}, {document id: (speaker, (session, scope), first
    row id, text, source path)}) of every stored turn."""
    turns, own = {}, {}
    stored = _stored_documents(conn, f"{session_sql()} is not null", [])
    for document_id, metadata, scope, text, first, hidden, path in stored:
        turn = _stored_turn(metadata)
        if turn is not None:
            turns.setdefault((turn[1], scope), []).append((first, document_id, hidden, entry(turn[0], text), path))
            own[document_id] = (turn[0], (turn[1], scope), first, text, path)
    for stored in turns.values():
        stored.sort()
    return turns, own


class _Entries:
    """A session's entries (how its turns are quoted) as _parse finds them in a
    context: by their first line, the lengths of those that begin with it, so a
    line shared by many turns ("Sure!") costs a few lookups, not one per turn."""

    def __init__(self, entries=()):
        self.said, self.lengths = set(entries), {}  # {entry}, {first line: {length: how many}}
        for said in self.said:
            self._tally(said, 1)

    def add(self, said):
        if said not in self.said:
            self.said.add(said)
            self._tally(said, 1)

    def discard(self, said):
        if said in self.said:
            self.said.discard(said)
            self._tally(said, -1)

    def _tally(self, said, change):
        lengths = self.lengths.setdefault(said.partition("\n")[0], {})
        lengths[len(said)] = lengths.get(len(said), 0) + change
        if not lengths[len(said)]:
            del lengths[len(said)]

    def fitting(self, context, at, line, skip=None):
        """The entries that are whole lines of `context` from `at` (whose first line is
        `line`), longest first, but `skip` (the quoting turn's own, said by no other)."""
        for length in sorted(self.lengths.get(line, ()), reverse=True):
            end = at + length
            if (end == len(context) or context[end : end + 1] == "\n") and context[at:end] in self.said:
                if context[at:end] != skip:
                    yield context[at:end]

    def one_cut(self, context, own, quotes, skip=None):
        """Whether `quotes` (_parse's, after own lines ending at `own`) are the only way
        to cut the context into entries: at each of them no shorter entry fits."""
        at = own + 1
        for quoted in quotes:
            if len(list(itertools.islice(self.fitting(context, at, quoted.partition("\n")[0], skip), 2))) > 1:
                return False
            at += len(quoted) + 1
        return True


class _Said:
    """A session's stored turns ((place, document id, flagged, entry, source path),
    in order) indexed for _sources: by entry, by entry within a file, and each
    turn's window (the CONVERSATION_CONTEXT_TURNS before it in its file, or in the
    session when it came from none or its file holds no other turn before it)."""

    def __init__(self, turns):
        self.entries, self.window, self.in_file, self._again = {}, {}, {}, {}
        last, files = [], {}
        for turn in turns:
            self.entries.setdefault(turn[3], []).append(turn)
            if turn[4] is not None:
                self.entries.setdefault((turn[3], turn[4]), []).append(turn)
            own = files.get(turn[4]) if turn[4] is not None else None
            self.window[turn[1]] = list(own or last)
            if own:
                self.in_file[turn[1]] = list(last)  # its session's last turns, as an export's copy quotes
            last = (last + [turn])[-CONVERSATION_CONTEXT_TURNS:]
            if turn[4] is not None:
                files[turn[4]] = (files.get(turn[4], []) + [turn])[-CONVERSATION_CONTEXT_TURNS:]
        self.places = {key: [t[0] for t in turns] for key, turns in self.entries.items()}
        self.firsts = _Entries(turn[3] for turn in turns)  # its entries by their first lines, for _parse

    def holders(self, quoted, quoting):
        """The turns saying `quoted` that `quoting` (a turn) may quote, and their places:
        of its file when it has any; else, where its window is its file's, that file's
        turns remembered again (_of_file) and the session's turns just before it (an
        export's copy, one file, quotes those), no other (review 82: a remembered turn
        pasting the window's words is not what a file's turn quotes); else all."""
        path = quoting[4]
        if path is not None and (quoted, path) in self.entries:
            key = (quoted, path)
        elif quoting[1] in self.in_file:
            named = quoting[1].rpartition("#")[0] or path  # the file its document id names (review 85)
            if (quoted, path, named) not in self._again:
                self._again[quoted, path, named] = [
                    turn for turn in self.entries.get(quoted, []) if _of_file(turn, path) or _of_file(turn, named)
                ]
            again = self._again[quoted, path, named]
            last = [turn for turn in self.in_file[quoting[1]] if turn[3] == quoted and turn not in again]
            turns = sorted(again + last) if last else again
            return turns, [turn[0] for turn in turns]
        else:
            key = quoted
        return self.entries.get(key, []), self.places.get(key, [])


_NO_TURNS = _Said([])


def _sources(quotes, said, quoting):
    """The turn each of a context's `quotes` quotes ((place, document id, flagged,
    entry, source path), None when no turn says it), the quoting turn being
    `quoting` (such a tuple) in its session (`said`, a _Said): of the other turns
    there that say the same words, and that it may quote (_Said.holders: ingest
    quotes a file's turns alone, a copy the session's last turns), those of its window,
    unflagged first (a flagged one keeps its place, unquoted), then the others
    before it, latest first, then those after it (a remembered correction quotes
    the latest stored), unflagged first, latest first. A quote of a flagged turn
    is stale."""
    place, document_id = quoting[0], quoting[1]
    window = said.window.get(document_id, [])[::-1]
    sources = [None] * len(quotes)
    for quoted in dict.fromkeys(quotes):
        at = [i for i, q in enumerate(quotes) if q == quoted]
        holders, places = said.holders(quoted, quoting)
        cut = bisect.bisect_left(places, place) if place is not None else 0
        near = [t for t in window if t[3] == quoted]
        before = (holders[i] for i in range(cut - 1, -1, -1))
        after = holders[cut:][::-1]
        pools = ([h for h in near if not h[2]], near, before, (h for h in after if not h[2]), after)
        found, taken = [], {document_id}
        for pool in pools:
            for h in pool:
                if len(found) == len(at):
                    break
                if h[1] not in taken:
                    found.append(h)
                    taken.add(h[1])
        found.sort()
        for i, source in zip(at[len(at) - len(found) :], found):
            sources[i] = source
    return sources


def _by_speaker(quoted, source, beginnings):
    """A run of context lines no turn says (`source` None) cut where a line begins as
    a speaker's quote does (`beginnings`, a name of several lines included): one
    line a turn deleted, the next one whose words changed, are two quotes, not one.
    _requoted joins parts again where a quote's own lines begin like another's."""
    if source is not None:
        return [quoted]
    cuts, covered = [0], 0
    for at in (i + 1 for i, c in enumerate(quoted) if c == "\n"):
        begun = next((b for b in beginnings if quoted.startswith(b, at)), None) if at >= covered else None
        if begun is not None:
            cuts.append(at)
            covered = at + len(begun)
    if len(cuts) == 1:
        return [quoted]
    return [quoted[a : b - 1] for a, b in zip(cuts, cuts[1:])] + [quoted[cuts[-1] :]]


def _attributed(quotes, said, quoting, beginnings):
    """(quotes, the turn each is of, by _sources) as check reads a context's `quotes`
    (_parse's): as its window's turns when they are those turns' words and the cut
    given could not be the window of its turn (_a_window), unless they hold a
    flagged turn, which none quotes, and the cut given is of a turn inserted
    later (_inserted_later; review 78), not flagged; a run of lines no turn says is
    read again as turns inserted later (_cut_again), else cut where a speaker's
    quote begins (_by_speaker)."""
    sources = _sources(quotes, said, quoting)
    window = [turn[3] for turn in said.window.get(quoting[1], [])]
    if window and quotes != window and "\n".join(quotes) == "\n".join(window):
        read = _sources(window, said, quoting)
        flagged = any(source is not None and source[2] for source in read)  # a flagged turn is quoted by none
        pasted = flagged and _inserted_later(sources, quoting) and not any(source[2] for source in sources)
        if not _a_window(sources, window, quoting) and not pasted:
            quotes, sources = window, read
    if any(source is None for source in sources):
        quotes, sources = _cut_again(quotes, sources, said, quoting)
    if any(source is None for source in sources):
        cut = [q for quoted, source in zip(quotes, sources) for q in _others(quoted, source, said.firsts)]
        if cut != quotes:
            quotes, sources = cut, _sources(cut, said, quoting)
        quotes = [q for quoted, source in zip(quotes, sources) for q in _by_speaker(quoted, source, beginnings)]
        sources = _sources(quotes, said, quoting)
    return quotes, sources


def _others(quoted, source, firsts):
    """A quote (of `source`, _sources's) that is the words of a turn the quoting
    one may not quote (a remembered turn pasting its file's turns' words, review
    82) cut into the other entries of `firsts` (_Entries) it holds, longest first,
    the lines none of them says a run: plain SQL deleting or changing one of
    those turns leaves its quote alone stale."""
    if source is not None or quoted not in firsts.said:
        return [quoted]
    cut, run, at = [], None, 0
    while at <= len(quoted):
        end = quoted.find("\n", at)
        line = quoted[at:] if end == -1 else quoted[at:end]
        match = next(firsts.fitting(quoted, at, line, quoted), None)
        if match is None:
            run = line if run is None else run + "\n" + line
            at += len(line) + 1
            continue
        cut += [run, match] if run is not None else [match]
        run, at = None, at + len(match) + 1
    return cut + ([run] if run is not None else [])


# the most a writer quotes in one context: longer ones plain SQL wrote are not cut again
_QUOTED_AT_MOST = CONVERSATION_CONTEXT_TURNS * (CONVERSATION_QUOTE_CHARS + CONVERSATION_NAME_CHARS + 3)


def _cut_again(quotes, sources, said, quoting):
    """(quotes, sources) of a context whose longest cut leaves lines no turn says:
    its lines cut whole into turns' words, longest first, where each is said and
    one of those turns of the quoting turn's file was stored after it (a turn
    inserted later, review 82: T then X inserted later, whose lines the longest
    cut read as an earlier turn saying T's words and X's first line, then a run);
    else as given, the run a stale quote."""
    text = "\n".join(quotes)
    if len(text) > _QUOTED_AT_MOST:
        return quotes, sources
    whole = {}  # _whole's memo
    if not _whole(text, 0, said.firsts, None, whole):
        return quotes, sources
    cut, at = [], 0
    while at <= len(text):  # at each line, the longest of its turns' words leaving the rest whole
        end = text.find("\n", at)
        line = text[at:] if end == -1 else text[at:end]
        fits = said.firsts.fitting(text, at, line)
        cut.append(next(m for m in fits if _whole(text, at + len(m) + 1, said.firsts, None, whole)))
        at += len(cut[-1]) + 1
    if cut == quotes:
        return quotes, sources
    again = _sources(cut, said, quoting)
    if all(source is not None for source in again) and _inserted_later(again, quoting):
        return cut, again
    return quotes, sources


def _inserted_later(sources, quoting):
    """Whether each of a context's quotes (of these turns, _sources) is of a turn said,
    of the quoting turn's (`quoting`) file, and one stored after it: only a turn
    inserted into its file later is quoted so (review 77). One of no file counts
    only as a turn of its file remembered again since (review 79; _of_file): any
    other remembered turn pasting the window's words is not of it (review 81)."""
    return (
        quoting[4] is not None
        and all(source is not None and _of_file(source, quoting[4]) for source in sources)
        and any(source[0] > quoting[0] for source in sources)
    )


def _of_file(turn, path):
    """Whether `turn` (_sources's tuple) came from the file `path`: its source path
    is, or its document id still is the file's (one of its turns remembered again
    since, of no file; or one plain SQL gave another path, review 85)."""
    return turn[4] == path or turn[1].startswith(path + "#")


def _a_window(sources, window, quoting):
    """Whether a context's quotes, of these turns (_sources), could be its turn's
    (`quoting`) window as its file holds it, where its `window` as stored says the same
    words: as many turns, in the order stored, one inserted later (_inserted_later)
    making the window its file gives differ from the one stored. A cut of fewer quotes
    is a turn pasting the window's words as its own, before or after them, and one of
    another file is never quoted by a turn of a file (reviews 74 and 78). A turn of no
    file (remembered) quotes the turns stored before it: its window as stored is the
    one."""
    return (
        len(sources) == len(window)
        and _inserted_later(sources, quoting)
        and all(a[0] < b[0] for a, b in zip(sources, sources[1:]))
    )


class _Reading:
    """A session (_Session) as check reads its quotes: its turns (_Said) and how a
    speaker's quote begins, by the names they are said by now and were written
    for; `unflagged` are read as not flagged (requote's unflag)."""

    def __init__(self, conn, session, unflagged=()):
        ordered = sorted(session.turns.items())  # in document id order, as SQL reads them
        turns = [(f, d, 0 if d in unflagged else h, w, p) for d, ((f, _, h, w, p), _) in ordered]
        self.own = {turn[1]: turn for turn in turns}
        self.said, spoken = _Said(sorted(turns)), _spoken(conn, list(self.own))
        self.beginnings = {entry(name, "") for d, (_, speaker) in ordered for name in [speaker] + spoken.get(d, [])}

    def attributed(self, quotes, document_id):
        return _attributed(quotes, self.said, self.own[document_id], self.beginnings)


def _requoted(quotes, sources, window, quoting, edited, fits):
    """{position: what to quote} for the `quotes` no turn says (`sources` None)
    whose turn is still at its place with other words: each run of them is
    paired, from its end, with the turns `edited` between the turns quoted
    around the run among the quoting turn's `window` now (its stored turns, in
    order; `quoting`: its document id and place), latest first, while each pair
    `fits` (quote, turn); the quotes before the first that does not go (a deleted
    turn's quote goes, and the turn before it, edited, was never quoted there).
    Only the window is read: repair stays linear in a session's turns."""
    document_id, first = quoting
    now, at = {}, 0
    taken = {source[1] for source in sources if source is not None}
    while at < len(sources):
        if sources[at] is not None:
            at += 1
            continue
        end = next((i for i in range(at, len(sources)) if sources[i] is not None), len(sources))
        low = sources[at - 1][0] if at else None
        high = sources[end][0] if end < len(sources) else first
        places = [
            turn
            for turn in window
            if (low is None or turn[0] > low)
            and turn[0] < high
            and turn[1] != document_id
            and turn[1] not in taken
            and edited(turn[1])
        ]
        i = end - 1
        for turn in reversed(places):
            # the part that fits, or it with the parts before it: a quote's own lines may begin like another's
            j = next((j for j in range(i, at - 1, -1) if fits("\n".join(quotes[j : i + 1]), turn)), None)
            if j is None:
                break
            if not turn[2]:  # a flagged turn is quoted by none; the parts after the first go
                now[j] = turn[3]
            i = j - 1
            if i < at:
                break
        at = end
    return now


def _parse(context, named, lines, skip=None):
    """(where a turn's own lines end in its context, the quotes after them in
    order): its own lines are its speaker (whose name ends at `named`) and day,
    then its resolved time phrases; what follows is cut into the entries of
    `lines` (_Entries) but `skip`, the turn's own (a turn never quotes itself), each
    the longest, or a shorter one where the longest leaves lines cut only with the
    turn's own words (_fit); a run of lines that is none of them is one quote."""
    start = context.find("\n", named)
    own, quotes, run, whole = (len(context) if start == -1 else start), [], None, ({}, {})
    while start != -1:
        at = start + 1
        end = context.find("\n", at)
        line = context[at:] if end == -1 else context[at:end]
        match = _fit(context, at, line, lines, skip, whole)
        if match is None:
            if run is None and not quotes and resolved_line(line):
                start = end  # one of its own resolved time phrases
                own = len(context) if end == -1 else end
                continue
            run, start = line if run is None else run + "\n" + line, end
            continue
        quotes += [run, match] if run is not None else [match]
        run, start = None, (at + len(match) if at + len(match) < len(context) else -1)
    return own, quotes + ([run] if run is not None else [])


def _fit(context, at, line, lines, skip, whole):
    """The entry of `lines` (_Entries) but `skip` that the context's lines from `at`
    (`line` the first) are read as: the longest that fits, unless what follows it is
    cut into entries only with the quoting turn's own words (`skip`) and what follows
    a shorter one is cut without them (memos `whole`: {line start: whether the context
    is cut into entries from there}, without `skip` and with it). A turn inserted
    later may quote "a / Bob: b" and then "a / Bob: b / Ann: a", whose lines the
    longest cut reads as the second and then as the inserted turn's own words. Lines
    no turn says stay a run (a stale quote), however else the lines before read."""
    fits = list(lines.fitting(context, at, line, skip))
    if len(fits) > 1 and skip is not None:
        after = at + len(fits[0]) + 1
        if not _whole(context, after, lines, skip, whole[0]) and _whole(context, after, lines, None, whole[1]):
            for match in fits[1:]:
                if _whole(context, at + len(match) + 1, lines, skip, whole[0]):
                    return match
    return fits[0] if fits else None


def _whole(context, at, lines, skip, whole):
    """Whether the context from `at` (a line's start, or past its end) is cut into
    entries of `lines` but `skip` (memo `whole`, one for each `skip`), found for each line from
    the last back: a context plain SQL wrote may hold any number of lines."""
    if at > len(context):
        return True
    if at not in whole:
        starts = [at] + [i + 1 for i in range(at, len(context)) if context[i] == "\n"]
        for start in reversed(starts):
            if start not in whole:
                end = context.find("\n", start)
                line = context[start:] if end == -1 else context[start:end]
                whole[start] = any(
                    start + len(match) >= len(context) or whole[start + len(match) + 1]
                    for match in lines.fitting(context, start, line, skip)
                )
    return whole[at]


def _unquoted(own_words, said_by):
    """A turn's own entry (`own_words`) when no other turn says it (`said_by`: how
    many turns of its session do): _parse never reads it as a quote in the turn's
    own context, where check, its repair and the writer all read it so."""
    return own_words if said_by == 1 else None


def flagged(conn, document_id):
    """Whether the stored document `document_id` is flagged: a flagged turn is
    quoted by no other, whatever writes it again."""
    return bool(
        conn.execute("select 1 from knowledge where document_id = ? and flagged limit 1", [document_id]).fetchone()
    )


def said_once(conn, document_ids):
    """Those of the stored turns `document_ids` whose words (their entry) no other
    turn of their session and scope says, of their file when they came from one
    (_sources reads a file's quotes as of its own turns)."""
    if not document_ids:
        return set()
    targets = {}
    for document_id, metadata, scope, text, _, _, path in _stored_documents(
        conn, "document_id in (select value from json_each(?))", [json.dumps(sorted(document_ids))]
    ):
        turn = _stored_turn(metadata)
        if turn is not None:
            targets.setdefault((turn[1], scope), {})[document_id] = (entry(turn[0], text), path)
    once = set()
    for (session, scope), mine in targets.items():
        counts = collections.Counter()
        for (_, _, _, said, path), _ in _session_turns(conn, session, scope):
            counts[said] += 1
            counts[said, path] += 1
        once |= {d for d, (said, path) in mine.items() if counts[said if path is None else (said, path)] == 1}
    return once


def _session_turns(conn, session, scope, among=None):
    """((place, document id, flagged, entry, source path), speaker) of each stored
    turn of `session` (as SQL reads it) in `scope`, in document id order: what
    requote and said_once count and attribute quotes by; with `among`, only those
    of these document ids."""
    match, params = in_session(session)
    match, params = f"{match} and scope = ?", [*params, scope]
    if among is not None:
        match, params = _among(among, match, params)
    for document_id, metadata, _, text, place, hidden, path in _stored_documents(conn, match, params):
        turn = _stored_turn(metadata)
        if turn is not None:
            yield (place, document_id, hidden, entry(turn[0], text), path), turn[0]


class _Session:
    """A session's stored turns in a scope, as requote reads them: `turns`
    ({document id: _session_turns's item}) and which say each entry
    (`saying`); `quoting` finds the contexts that may quote some."""

    def __init__(self, conn, session, scope, kept=False):
        self.where, self.kept = (session, scope), kept
        self.turns = {turn[0][1]: turn for turn in _session_turns(conn, session, scope)}
        # {entry: [place]} of the turns saying each, in order; once read, its _Entries and {(entry, source
        # path): [place]}
        self.saying, self._firsts, self._in_file = {}, None, None
        for (place, _, _, said, _), _ in sorted(self.turns.values()):
            self.saying.setdefault(said, []).append(place)
        # when indexed (_keep): {a line of a context after its first: {row id}}, {row id: (document id,
        # context)} and {document id: {row id}}
        self.lines, self.rows, self.held = None, {}, {}

    def firsts(self):
        """Its turns' entries (_Entries) for _parse: read once, then kept as the session is written."""
        if self._firsts is None:
            self._firsts = _Entries(self.saying)
        return self._firsts

    def before(self, said, quoting):
        """How many turns say `said` before `quoting` (a turn's (place, document id,
        ...)): of its file, when it came from one (_sources reads a file's quotes as
        of its own turns where it can; too few only sends requote to read the quote
        as check does)."""
        if self._in_file is None:
            self._in_file = {}
            for place, _, _, words, path in sorted(turn for turn, _ in self.turns.values()):
                if path is not None:
                    self._in_file.setdefault((words, path), []).append(place)
        places = self._in_file.get((said, quoting[4])) if quoting[4] is not None else self.saying.get(said)
        return bisect.bisect_left(places or [], quoting[0])

    def _count(self, turn, change):
        """Count `turn` (place, document id, flagged, entry, source path) in (1) or
        out (-1) of those saying its entry, and of the entries' first lines."""
        place, said, path = turn[0], turn[3], turn[4]
        held = [self.saying.setdefault(said, [])]
        if self._in_file is not None and path is not None:
            held.append(self._in_file.setdefault((said, path), []))
        for places in held:
            if change > 0:
                bisect.insort(places, place)
            elif place in places:
                places.remove(place)
        if not self.saying[said]:
            del self.saying[said]
        if self._firsts is not None:
            if said in self.saying:
                self._firsts.add(said)
            else:
                self._firsts.discard(said)

    def quoting(self, conn, said):
        """(row id, document id, context) of the session's rows whose contexts
        hold one of the entries `said`, by row id; more are harmless (the caller
        reads each quote). A session `kept` (SessionTurns: requoted in before) is
        indexed by line, to be searched again."""
        if self.lines is None and self.kept:
            self._keep(conn)
        if self.lines is None:
            return conn.execute(  # the contexts that may quote one of them, read in C
                "select id, document_id, context from knowledge where document_id in (select value from json_each(?)) "
                "and context is not null and exists (select 1 from json_each(?) where instr(context, value) > 0) "
                "order by id",
                [json.dumps(list(self.turns)), json.dumps(sorted(said))],
            ).fetchall()
        # a quote is whole lines after the context's first (_pattern): each of its lines is one of
        # them, so the rows holding its least common line hold every quote of it
        found = set().union(*(min((self.lines.get(line, ()) for line in w.split("\n")), key=len) for w in said))
        return [(row_id, *self.rows[row_id]) for row_id in sorted(found)]

    def _keep(self, conn):
        """Index the session's contexts by line, to be kept up to date (SessionTurns)."""
        self.lines = {}
        self._index(conn, list(self.turns), [])

    def _index(self, conn, document_ids, row_ids):
        for row_id, document_id, context in conn.execute(
            "select id, document_id, context from knowledge where context is not null and "
            "(document_id in (select value from json_each(?)) or id in (select value from json_each(?)))",
            [json.dumps(document_ids), json.dumps(row_ids)],
        ):
            if document_id in self.turns:
                self.rows[row_id] = (document_id, context)
                self.held.setdefault(document_id, set()).add(row_id)
                for line in context.split("\n")[1:]:
                    self.lines.setdefault(line, set()).add(row_id)

    def update(self, conn, document_ids, row_ids):
        """These documents and rows were written since the session was read."""
        for document_id in document_ids:
            turn = self.turns.pop(document_id, None)
            if turn is not None:
                self._count(turn[0], -1)
        for turn in _session_turns(conn, *self.where, among=document_ids):
            self.turns[turn[0][1]] = turn
            self._count(turn[0], 1)
        if self.lines is not None:
            gone = set(row_ids).union(*(self.held.pop(d, ()) for d in document_ids))
            for row_id in sorted(gone & self.rows.keys()):
                document_id, context = self.rows.pop(row_id)
                self.held.get(document_id, set()).discard(row_id)
                for line in context.split("\n")[1:]:
                    self.lines[line].discard(row_id)
            self._index(conn, document_ids, sorted(gone))


class SessionTurns:
    """The sessions a run of writes requotes in, read from the brain once and
    then kept as the run writes them: a file rewriting every turn of a long
    session read the whole session for each turn (quadratic in its size). What
    it holds is what a fresh read would give, or it reads again: it is read at
    the connection's count of changed rows (total_changes) and then only brought
    up to date by `written`, so a change made any other way (SQL, another path of
    the run) makes the next read a whole one."""

    def __init__(self):
        self.sessions, self.stamp = {}, None  # (session, scope) -> _Session
        self.seen = set()  # the sessions read once: one turn corrected keeps nothing

    def session(self, conn, session, scope):
        self.begin(conn)
        key = (session, scope)
        if key not in self.sessions:
            if key not in self.seen:
                self.seen.add(key)
                return _Session(conn, session, scope)
            self.sessions[key] = _Session(conn, session, scope, kept=True)
        self.stamp = conn.total_changes
        return self.sessions[key]

    def begin(self, conn):
        """Before a write: keep what is held only while the brain is as it was read."""
        if self.stamp != conn.total_changes:
            self.sessions, self.stamp = {}, None

    def written(self, conn, document_ids, row_ids=()):
        """After a write `begin` began: it changed these documents' rows (added,
        changed or removed them) and the contexts of `row_ids`, and nothing else
        a session holds."""
        if not self.sessions:
            return
        ids, rows = sorted(set(document_ids)), set(row_ids)
        now = set(  # the sessions they are turns of now; which held them is read from what is held
            conn.execute(
                f"select distinct {session_sql()}, scope from knowledge "
                "where document_id in (select value from json_each(?))",
                [json.dumps(ids)],
            ).fetchall()
        )
        for key, held in self.sessions.items():
            if key in now or any(d in held.turns for d in ids) or not rows.isdisjoint(held.rows):
                held.update(conn, ids, sorted(rows))
        self.stamp = conn.total_changes

    def clear(self):
        """Drop what is held; which sessions were seen is kept, so a run's next
        transaction keeps a long session from its first rewrite, not its second
        (`seen` says only what to keep, never what a session holds)."""
        self.sessions, self.stamp = {}, None


def stored_turns(conn, session, scope):
    """[(document id, (speaker, text))] of the session's last stored turns in
    `scope` (those of a context and as many again), oldest first, None for a
    flagged one's (it keeps its place, unquoted): an agent remembers a
    conversation a turn at a time, and each turn's context comes from those
    stored before it, as the call has written them (Sessions)."""
    return _last_turns(conn, session, scope, _KEPT_TURNS)


def said_day(conn, document_id):
    """(observed_at, the day its context says) of the stored turn `document_id` when
    its context says the day it was said (its record gave one, or plain SQL changed it
    since: stale_own_lines reads a context so), else None: a correction that gives no
    observed_at is still said that day, in its title, its context and its observed_at
    alike."""
    row = conn.execute(
        "select metadata, context, observed_at from knowledge where document_id = ? order by chunk_index, id limit 1",
        [document_id],
    ).fetchone()
    turn = _stored_turn(row[0]) if row and row[1] and row[2] else None
    if turn is None:
        return None
    name = own_lines(turn[0], None, "")[0]
    said = row[1][len(name) :].split("\n", 1)[0] if row[1].startswith(name) else ""
    return (row[2], _stated_day(said)) if _DAY.match(said) and _said_at(row[2]) else None


def stored_without_day(metadata, context):
    """Whether a stored turn (its row's metadata and context) was stored without the
    day it was said: its context's first line is its speaker's name alone, or ends
    with no day (plain SQL may have renamed the speaker since: "Caroline Smith, 8 May
    2023" is said on a day whoever the metadata names now). Its observed_at is only
    when it was stored: an export leaves it out, as its record did, or the export
    ingested would say the turn that day (review 152)."""
    turn = _stored_turn(metadata) if context else None
    if turn is None:
        return False
    first = context.split("\n", 1)[0]
    return first == own_lines(turn[0], None, "")[0] or _DAY.search(first) is None


def turns_before(conn, document_id, session, scope):
    """stored_turns of those placed before the stored turn `document_id` when it is
    a turn of `session` in `scope`: written again (a correction), it keeps the
    context of where it was said, not the latest turns'; None for any other."""
    for _, metadata, stored_scope, _, place, _, _ in _stored_documents(conn, "document_id = ?", [document_id]):
        turn = _stored_turn(metadata)
        if turn is not None and turn[1] == session and stored_scope == scope:
            return _last_turns(conn, session, scope, _KEPT_TURNS, below=place)
    return None


def _last_turns(conn, session, scope, last, below=None):
    """stored_turns' `last`, of those placed before `below` when given."""
    match, params = in_session(session)
    rows = _stored_documents(
        conn, f"{match} and scope = ? and {speaker_sql()} is not null", [*params, scope], last=last, below=below
    )
    turns = []
    for document_id, metadata, _, text, _, hidden, _ in reversed(rows):
        turn = _stored_turn(metadata)
        if turn is not None:
            turns.append((document_id, None if hidden else (turn[0], text)))
    return turns


def _said_at(value):
    """The observed time of a turn as a datetime, None when it has none."""
    try:
        return datetime.datetime.fromisoformat(value) if value else None
    except (TypeError, ValueError):
        return None


def said_at(observed_at, day=None):
    """The day a turn was said, as a datetime: `day` (the day its record's observed_at
    named with its offset, or its context says) where observed_at can be that day in
    some time zone, else observed_at (UTC); None when it has none. So a turn said at
    20:00 in California is said on its own day, not on the next, as UTC has it."""
    at = _said_at(observed_at)
    if at is None or day is None or offset_to(day, at) is None:
        return at
    return datetime.datetime(day.year, day.month, day.day)


def offset_to(day, at):
    """The offset in whole hours, the least in size, at which UTC time `at` is on `day`,
    among the time zones there are (UTC-12 to UTC+14); None when none is. So plain SQL
    moving a turn's observed_at by a day is found (check), and a wider offset, which
    Python takes, dates a turn by the UTC day."""
    for hours in _OFFSETS:
        try:
            if (at + datetime.timedelta(hours=hours)).date() == day:
                return hours
        except OverflowError:  # past year 9999 or before year 1: no such day
            continue
    return None


_OFFSETS = sorted(range(-12, 15), key=abs)


def observed_as_said(observed_at, context):
    """A turn's stored observed_at (UTC) written for an export: the same instant, with
    the offset at which it is on the day its context says it was said, so the turn is
    said that day again when the export is ingested; as it is for any other."""
    at, day = _said_at(observed_at), _stated_day((context or "").split("\n", 1)[0])
    hours = offset_to(day, at) if at is not None and day is not None else None
    if not hours:
        return observed_at
    zone = datetime.timezone(datetime.timedelta(hours=hours))
    try:
        return at.replace(tzinfo=datetime.timezone.utc).astimezone(zone).isoformat()
    except OverflowError:  # offset_to found it, so it is not reached: kept as stored all the same
        return observed_at


def _stated_day(line):
    """The day a context's first line ends with ("Caroline, 8 May 2023"), None for none."""
    found = _DAY.search(line)
    if found is None:
        return None
    day, month, year = found.group()[2:].split(" ")
    try:
        return datetime.date(int(year), _MONTHS[month], int(day))
    except (KeyError, ValueError):
        return None


_MONTHS = {name: number for number, name in enumerate(calendar.month_name) if name}
