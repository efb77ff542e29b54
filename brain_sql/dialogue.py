"""Dialogue rescoring: a conversation turn ranked with its session and speaker.

A question about a long conversation names a person far more often than the
words of the turn that answers it: "What activities does Melanie partake in?" is
answered by Melanie's turns, and her name, in half the conversation's contexts,
is as common as a common word to the legs. A question asking when is answered by
a turn that says when ("we went camping two weekends ago"): of the turns that
answer the "when" questions of locomo-dev, 90% state a time, of all its turns 14%.
And the turns of one session are about one thing. So, after fusion, a turn that
meets what the question asks of a turn counts 1 + DIALOGUE_MATCH times (double) for
each thing it meets: said by a speaker the question names; stating a time
(temporal.states_time) when the question asks for one (temporal.asks_when). Then
every turn is raised by DIALOGUE_SESSION of the best score among the candidates of
its session. Only the candidates are read: the turns no leg found stay out. Letting
them in with their session's share, as once, read every turn of every candidate's
session (0.4 s a query in sessions of 2,500 turns) and gave locomo-dev's top 10 a
session neighbour or three on 6 of 149 questions, never one holding evidence (the
same Recall@10; at 100 hits, Recall@30 and @100 are a little higher without them).
Session diversity (a session's n-th turn in the ranking counting 0.8^n) lost
Recall@10 (0.805 to 0.762): the turn answering a question is more often a weaker
turn of the best session than the best turn of another. (Raising a turn by its neighbours' scores, the
turns just before and after it, lost Recall@10 on locomo-dev: 0.798 to 0.795 at
0.1, 0.785 at 0.2; the turns before are in its context already.)

Only turns count: memories naming a speaker, `in_session` of a session (conversation.py);
every other memory keeps its fused score. Turns are read with the request's
filters, so a turn the caller cannot see neither counts in its session nor
names a speaker: the answer is the one a brain without it would give. The API
(hybrid.finish) and the SQL recall (brain_dialogue in recall.sql) both rank
through `rescored`.
"""

import json
import re

from .config import DIALOGUE_MATCH, DIALOGUE_SESSION
from .conversation import in_session, session_sql, speaker_sql
from .lexical import STOPWORDS, asked
from .proper_names import escaped, unaccented
from .schema import page_index_current
from .temporal import asks_when, states_time

# the given memories that are visible turns: (session, scope, id, speaker). A session is the target
# of its turns' in_session edges, whatever the type of the entity (a memory titled as the session, in
# any scope, may have claimed it as a document); a turn is a memory naming a speaker, read from its own
# metadata: an entity's name is written as the first memory naming it wrote it
_SPEAKER = speaker_sql("k")
_SESSION_TURNS = f"""
with mine(id) as (select value from json_each(?))
select r.to_entity_id, k.scope, k.id, {_SPEAKER} as speaker
from mine join knowledge k on k.id = mine.id
join relationships r on r.document_id = k.document_id and r.relation_type = 'in_session'
where {{condition}} and speaker is not null
group by 1, 2, 3
order by 1, 2, 3
"""


def session_turns(conn, ids, filters):
    """{(session entity id, scope): [(memory id, speaker), ...]} of the memories
    `ids` that are turns `filters` admit, by session (a session is read in one
    scope, as its turns quote each other). Only these are read: the work grows with
    the candidates, not with their sessions (a channel's export may be one session
    of a million turns; session_speakers reads one session)."""
    if not ids:
        return {}
    condition, params = filters.sql("k")
    sessions = {}
    for session, scope, item, speaker in conn.execute(
        _SESSION_TURNS.format(condition=condition), [json.dumps(ids), *params]
    ):
        sessions.setdefault((session, scope), []).append((item, speaker))
    return sessions


def session_speakers(conn, sessions, top, filters):
    """The speakers of the visible turns of the session the memory `top` is a turn
    of (of `sessions`, session_turns'), empty when it is none. Through the index of
    the turns by their session, scope and speaker (m019), a seek for each, the next
    speaker after the last: a session of 20,000 turns and two speakers reads a few
    index entries, where reading its turns took 36 ms. Without that index (a brain
    served read-only before it migrated, or a tool dropped it; check recreates it)
    each seek would read the whole session, so its turns are read once instead:
    slower, not wrong."""
    if not any(item == top for turns in sessions.values() for item, _ in turns):
        return set()
    session, scope = conn.execute(
        f"select {session_sql('k')}, k.scope from knowledge k where k.id = ?", [top]
    ).fetchone()
    if session is None:
        return set()
    match, params = in_session(session, "k")
    condition, filtered = filters.sql("k")
    turns = f"from knowledge k where {match} and k.scope = ? and {condition} and {_SPEAKER}"
    args = [*params, scope, *filtered]
    if page_index_current(conn, "idx_knowledge_session"):  # m019's, which holds each turn's speaker
        sql = (
            f"with recursive speakers(speaker) as (select (select {_SPEAKER} {turns} is not null order by 1 limit 1) "
            f"union all select (select {_SPEAKER} {turns} > speakers.speaker order by 1 limit 1) from speakers "
            "where speakers.speaker is not null) select speaker from speakers where speaker is not null"
        )
        args *= 2
    else:
        sql = f"select distinct {_SPEAKER} {turns} is not null"
    return {speaker for (speaker,) in conn.execute(sql, args)}


def named(text, speakers):
    """The `speakers` `text` names, by their whole name or its first word (people
    are asked about by their first name), as whole words, in any case; not those it
    excludes ("-Caroline")."""
    text = asked(text)
    found = set()
    for speaker in speakers:
        if speaker and any(_written(name, text, re.IGNORECASE) for name in {speaker, speaker.split()[0]}):
            found.add(speaker)
    return found


def speakers_named(text, sessions):
    """The speakers of `sessions` (session_turns') that `text` names."""
    return named(text or "", {speaker for turns in sessions.values() for _, speaker in turns})


def speakers_asked(text, speakers):
    """The `speakers` (session_speakers': those of the session the best candidate is a
    turn of) that `text` names as a name is written: in its case, as whole words, a
    first name of one letter or a stop word ("The Doctor", "Will" as "will") not by
    itself. What quality reads as `speaker`: a question about a person of the
    conversation its best candidate comes from."""
    text = asked(text or "")
    found = set()
    for speaker in speakers:
        names = {speaker, speaker.split()[0]}
        if any(_written(name, text) for name in names if len(name) > 1 and name.lower() not in STOPWORDS):
            found.add(speaker)
    return found


def _written(name, text, flags=0):
    """Whether `text` holds `name` as whole words, with or without its accents ("Zoe"
    names Zoë: a speaker is asked about as people type)."""
    return re.search(rf"(?<!\w){escaped(unaccented(name))}(?!\w)", unaccented(text), flags) is not None


def contents(conn, ids):
    """{id: content} of the memories among `ids`."""
    rows = conn.execute(
        "select id, content from knowledge where id in (select value from json_each(?))", [json.dumps(ids)]
    )
    return {item: content or "" for item, content in rows}


def rescored(conn, text, fused, filters, sessions=None):
    """`fused` ([(id, score, {leg: rank})] best first) for the query `text`, with
    each turn's score multiplied by 1 + DIALOGUE_MATCH for a speaker the query names
    and again, when the query asks when, for a time it states (any other memory's
    when it names that speaker, or states a time; divided by it when it does not name
    the speaker the query names); then every turn is
    drawn towards the best of its session's candidates, by DIALOGUE_SESSION of it
    against 1 of its own: the best turn of a session keeps its score, as a memory that
    is no turn does, so a note every leg ranks first stays above turns no more asked
    for than it. Best first, ties by id.
    `sessions`: session_turns of `fused`'s ids, when the caller read them already."""
    if sessions is None:
        sessions = session_turns(conn, [item for item, _, _ in fused], filters)
    if not sessions:
        return fused
    speakers = speakers_named(text, sessions)
    score = {item: value for item, value, _ in fused}
    ranks = {item: legs for item, _, legs in fused}
    # the candidates that are turns `filters` admit
    found = [item for turns in sessions.values() for item, _ in turns if item in score]
    in_turns = set(found)
    others = [item for item in score if item not in in_turns]
    asks = asks_when(text or "")
    texts = contents(conn, (found if asks else []) + others) if asks or speakers else {}
    when = {item for item, content in texts.items() if asks and states_time(content)}
    # a memory that is no turn meets what the question asks as a turn does: it names the
    # speaker the question names (one that does not is about someone else: a turn of the
    # conversation is nearer), it states a time when the question asks when
    new = {
        item: score[item]
        * (1 + DIALOGUE_MATCH)
        ** ((1 if named(texts.get(item, ""), speakers) else -1 if speakers else 0) + (item in when))
        for item in others
    }
    for turns in sessions.values():
        own = [
            score.get(item, 0.0) * (1 + DIALOGUE_MATCH) ** ((speaker in speakers) + (item in when))
            for item, speaker in turns
        ]
        best = max(own)
        for (item, _), value in zip(turns, own):
            new[item] = (value + DIALOGUE_SESSION * best) / (1 + DIALOGUE_SESSION)
    ordered = sorted(new, key=lambda item: (-new[item], item))
    return [(item, new[item], ranks.get(item, {})) for item in ordered if new[item] > 0 or item in score]


def rescored_json(conn, text, fused, filters):
    """brain_dialogue's work: `fused` as [(id, score), ...] best first in, JSON
    [{id, score}] best first out."""
    pairs = [(item, float(value), {}) for item, value in fused]
    return json.dumps([{"id": item, "score": value} for item, value, _ in rescored(conn, text, pairs, filters)])
