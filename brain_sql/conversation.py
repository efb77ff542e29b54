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

import datetime
import json
import re
from dataclasses import dataclass

from .config import (
    CONVERSATION_CONTEXT_TURNS, CONVERSATION_DATES, CONVERSATION_NAME_CHARS, CONVERSATION_QUOTE_CHARS, MAX_TITLE_CHARS,
)
from .document import Document, Relation
from .temporal import RELATIVE, day_label, resolve_relative

SPEAKER_KEYS = ("speaker", "role")
SESSION_KEYS = ("session_id", "conversation_id", "thread_id")


def turn_of(document):
    """(speaker, session) of a turn, or None for any other document."""
    metadata = document.metadata
    speaker = next((metadata[k] for k in SPEAKER_KEYS if _name(metadata.get(k))), None)
    session = next((metadata[k] for k in SESSION_KEYS if _name(metadata.get(k))), None)
    if speaker is None or session is None or not str(speaker).strip() or not str(session).strip():
        return None
    return str(speaker).strip(), str(session).strip()


def _name(value):
    """Whether `value` names a speaker or a session: text or a number, never true/false."""
    return isinstance(value, (str, int, float)) and not isinstance(value, bool) and bool(str(value).strip())


class Sessions:
    """The last turns of each session seen so far, for the context of the next.
    A turn quotes only earlier turns in its own scope: whoever may read it may
    read them."""

    def __init__(self, earlier=None, hidden=None):
        # earlier(session, scope): [(speaker, text) or None for a flagged one] stored before, oldest first;
        # hidden(document id): whether the stored turn is flagged, so never quoted
        self.earlier, self.hidden, self.keep = earlier, hidden, CONVERSATION_CONTEXT_TURNS
        self.turns = {}

    def add(self, document):
        """Link `document` (its fields' defaults applied) into its session if it is a turn."""
        turn = turn_of(document)
        if turn is not None:
            self._link(document, *turn)

    def _link(self, document, speaker, session):
        key = (session, scope_of(document.fields))
        if key not in self.turns:
            self.turns[key] = list(self.earlier(*key))[-self.keep :] if self.earlier else []
        before = self.turns[key]
        said = _said_at(document.fields.get("observed_at"))
        if not document.title:  # within the title cap, however long the names
            title = f"{speaker}, {day_label(said)}" if said else f"{speaker} in {session}"
            document.title = title if len(title) <= MAX_TITLE_CHARS else title[: MAX_TITLE_CHARS - 1] + "…"
        text = "\n".join(chunk.content for chunk in document.chunks)
        name = _cut(speaker, CONVERSATION_NAME_CHARS)
        lines = [f"{name}, {day_label(said)}" if said else name]
        if said:
            lines += resolve_relative(text, said, CONVERSATION_DATES)
        lines += [entry(*turn) for turn in before if turn is not None]
        for chunk in document.chunks:
            chunk.context = "\n".join(lines)
        document.relations = document.relations + [
            Relation("said_by", speaker, None, 0, "person"),
            Relation("in_session", session, None, 0, "session"),
        ]
        # a flagged turn keeps its place among the turns before the next, unquoted
        hidden = any(c.flagged for c in document.chunks) or (self.hidden and self.hidden(document.document_id))
        quotable = None if hidden else (speaker, text)
        self.turns[key] = (before + [quotable])[-self.keep :]


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
    """SQL for the session a stored memory's metadata names (NULL for no turn)."""
    keys = ", ".join(f"json_extract({row}.metadata, '$.{key}')" for key in SESSION_KEYS)
    return f"(case when json_valid({row}.metadata) then coalesce({keys}) end)"


@dataclass(frozen=True)
class Quote:
    """A stored turn as the turns after it quote it: its session and scope, the
    quote, and the documents that may hold it — every other turn of its session
    and scope (only the turns just after it quote it, and the quote names it),
    or, when another turn there says exactly the same, only the next
    CONVERSATION_CONTEXT_TURNS stored after it."""

    where: tuple
    entry: str
    followers: tuple

    def held_in(self, context):
        """Whether `context` holds this quote whole (not a longer one beginning alike)."""
        return re.search(self.pattern(), context or "") is not None

    def pattern(self):
        return re.escape("\n" + self.entry) + r"(?=\n|$)"


def stored_quotes(conn, document_ids, unless=None):
    """{document id: Quote} of the stored turns among `document_ids`, but for one
    quoted as `unless` says it now is ({document id: (where, entry)}): a rewrite
    that leaves a turn's quote as it was reads nothing more of its session."""
    found, sessions = {}, {}
    for document_id, metadata, scope, text, *_ in _stored_documents(
        conn, "document_id in (select value from json_each(?))", [json.dumps(list(document_ids))]
    ):
        turn = _stored_turn(metadata)
        if turn is None:
            continue
        where = (turn[1], scope)
        if unless and unless.get(document_id) == (where, entry(turn[0], text)):
            continue
        if where not in sessions:
            sessions[where] = [
                (other, entry(said[0], text), first)
                for other, meta, _, text, first, _ in _stored_documents(conn, f"{session_sql()} = ? and scope = ?", list(where))
                if (said := _stored_turn(meta)) is not None
            ]  # fmt: skip
        turns = sessions[where]
        mine = next((said, first) for other, said, first in turns if other == document_id)
        others = [(other, first) for other, said, first in turns if other != document_id]
        if any(said == mine[0] for other, said, first in turns if other != document_id):
            others = sorted((first, other) for other, first in others if first > mine[1])[:CONVERSATION_CONTEXT_TURNS]
            others = [(other, first) for first, other in others]
        found[document_id] = Quote(where, mine[0], tuple(other for other, _ in others))
    return found


def _stored_documents(conn, where, params, last=None):
    """(document id, metadata, scope, text, first row id, flagged) of the documents
    whose rows `where` selects, each one's chunks joined in order; with `last`,
    only the last that many stored, newest first."""
    return conn.execute(
        "select document_id, metadata, scope, group_concat(content, char(10)), min(id) as first, max(flagged) from "
        f"(select document_id, metadata, scope, content, id, flagged from knowledge where {where} "
        "and document_id is not null order by document_id, chunk_index) group by document_id"
        + (" order by first desc limit ?" if last else ""),
        [*params, last] if last else params,
    ).fetchall()


def _stored_turn(metadata):
    """(speaker, session) of a stored memory's metadata (JSON text), or None."""
    try:
        values = json.loads(metadata) if metadata else None
    except ValueError:
        return None
    return turn_of(Document("", None, [], metadata=values)) if isinstance(values, dict) else None


def stale_quotes(conn):
    """{document id: [Quote]} of the quotes in stored contexts whose turn is no
    longer what the quote says, there: gone, flagged, its words changed, or moved
    to another session or scope (plain SQL does all of these): for check, whose
    repair restates each. A quote's turn is the one of the quoting turn's session
    and scope that says it, other than itself; of several saying the same, those
    stored last before the quoting turn, in order. A document is named once per
    quote its contexts hold, however many of its chunks hold it."""
    said, own = {}, {}  # (session, scope) -> {entry: [(first id, document id, flagged)]}; document -> (speaker, where, first)
    for document_id, metadata, scope, text, first, hidden in _stored_documents(conn, f"{session_sql()} is not null", []):
        turn = _stored_turn(metadata)
        if turn is not None:
            said.setdefault((turn[1], scope), {}).setdefault(entry(turn[0], text), []).append((first, document_id, hidden))
            own[document_id] = (turn[0], (turn[1], scope), first)
    lines = {}  # (session, scope) -> {an entry's first line: [entries]}
    stale = {}  # document id -> {quote: how many times}, the most any of its chunks holds
    for document_id, context in conn.execute(
        "select document_id, context from knowledge where context is not null and document_id is not null order by id"
    ):
        speaker, where, first = own.get(document_id, (None, None, None))
        if where not in lines:
            lines[where] = {}
            for quoted in said.get(where, {}):
                lines[where].setdefault(quoted.split("\n", 1)[0], []).append(quoted)
        quotes = _quotes(context, speaker, lines[where])
        for quoted in dict.fromkeys(quotes):
            holders = sorted(h for h in said.get(where, {}).get(quoted, ()) if h[1] != document_id)
            unsourced = _unsourced(holders, first, quotes.count(quoted))
            if unsourced:
                counts = stale.setdefault(document_id, {})
                counts[quoted] = max(counts.get(quoted, 0), unsourced)
    return {
        document_id: [Quote(own.get(document_id, (None, None))[1], quoted, (document_id,))
                      for quoted, times in counts.items() for _ in range(times)]
        for document_id, counts in stale.items()
    }  # fmt: skip


def _unsourced(holders, first, times):
    """How many of the `times` quotes of the same words in the context of a turn
    stored first as `first` no unflagged turn says: `holders`, the (first id,
    document id, flagged) of the other turns there that say them, are their
    sources — those stored last before it, in order, then those after it."""
    before = [h for h in holders if h[0] < first]
    sources = before[-times:] + [h for h in holders if h[0] > first][: max(times - len(before), 0)]
    return times - sum(1 for source in sources if not source[2])


def _quotes(context, speaker, lines):
    """The quotes in a turn's context, in order: what follows its own lines (its
    speaker and day, then its resolved time phrases), cut into the entries of
    `lines` ({first line: [entries]}); a run of lines that is none of them is one quote."""
    name = _cut(speaker, CONVERSATION_NAME_CHARS) if speaker is not None else ""
    start = context.find("\n", len(name) if context.startswith(name) else 0)
    quotes, run = [], None
    while start != -1:
        at = start + 1
        end = context.find("\n", at)
        line = context[at:] if end == -1 else context[at:end]
        match = max((e for e in lines.get(line, ()) if context.startswith(e, at)
                     and context[at + len(e) : at + len(e) + 1] in ("", "\n")), key=len, default=None)  # fmt: skip
        if match is None:
            if run is None and not quotes and _time_line(line):
                start = end  # one of its own resolved time phrases
                continue
            run, start = line if run is None else run + "\n" + line, end
            continue
        quotes += [run, match] if run is not None else [match]
        run, start = None, (at + len(match) if at + len(match) < len(context) else -1)
    return quotes + ([run] if run is not None else [])


def _time_line(line):
    """Whether `line` reads as a resolved time phrase ('yesterday: 7 May 2023')."""
    phrase, colon, _ = line.partition(": ")
    return bool(colon) and RELATIVE.fullmatch(phrase) is not None


def flagged(conn, document_id):
    """Whether the stored document `document_id` is flagged: a flagged turn is
    quoted by no other, whatever writes it again."""
    return bool(conn.execute("select 1 from knowledge where document_id = ? and flagged limit 1", [document_id]).fetchone())


def stored_turns(conn, session, scope, before_ids=()):
    """[(speaker, text)] of the session's stored turns in `scope`, oldest first,
    the last CONVERSATION_CONTEXT_TURNS of them, None for a flagged one (it keeps
    its place, unquoted): an agent remembers a conversation a turn at a time, and
    each turn's context comes from those stored before it. Turns whose `_id` is
    in `before_ids` (being written again) are left out."""
    rows = _stored_documents(
        conn, f"{session_sql()} = ? and scope = ? and coalesce(external_id, '') not in (select value from json_each(?))",
        [session, scope, json.dumps([str(i) for i in before_ids])], last=CONVERSATION_CONTEXT_TURNS,
    )  # fmt: skip
    turns = []
    for _, metadata, _, text, _, hidden in reversed(rows):
        turn = _stored_turn(metadata)
        if turn is not None:
            turns.append(None if hidden else (turn[0], text))
    return turns


def _said_at(value):
    """The observed time of a turn as a datetime, None when it has none."""
    try:
        return datetime.datetime.fromisoformat(value) if value else None
    except (TypeError, ValueError):
        return None
