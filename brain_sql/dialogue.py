"""Dialogue rescoring: a conversation turn ranked with its neighbourhood.

A question about a conversation is often answered by a turn that shares none of
its words: "what did the counsellor say?" matches the question turn, and the
answer is the turn after it, which the earlier turns' context (conversation.py)
cannot reach. So, after fusion, each turn's fused score is raised by the best
score of the turns just before and after it in its session (DIALOGUE_NEIGHBOUR
of it), and by the best score in its session (DIALOGUE_SESSION of it), and the
other turns of the candidates' sessions come in with what that gives them.

Only turns count: memories `in_session` of a session entity (conversation.py);
every other memory keeps its fused score. Neighbours are read with the
request's filters, so a turn the caller cannot see is no one's neighbour: the
answer is the one a brain without it would give. The API (hybrid.finish) and
the SQL recall (brain_dialogue in recall.sql) both rank through `rescored`.
"""

import json

from .config import DIALOGUE_NEIGHBOUR, DIALOGUE_SESSION

# the visible turns of the sessions that any of the given memories is in: (session, scope, id)
_SESSION_TURNS = """
with mine(id) as (select value from json_each(?)),
sessions as (
  select distinct r.to_entity_id as session
  from mine join knowledge k on k.id = mine.id
  join relationships r on r.document_id = k.document_id and r.relation_type = 'in_session'
  join entities e on e.id = r.to_entity_id and e.entity_type = 'session'
)
select distinct r.to_entity_id, k.scope, k.id
from sessions s join relationships r on r.to_entity_id = s.session and r.relation_type = 'in_session'
join knowledge k on k.document_id = r.document_id
where {condition}
order by 1, 2, 3
"""


def session_turns(conn, ids, filters):
    """{(session entity id, scope): [memory id, ...] in the order said} of the
    sessions the memories `ids` are turns of, each holding only the turns
    `filters` admit (a turn and its neighbours are of one scope)."""
    if not ids:
        return {}
    condition, params = filters.sql("k")
    sessions = {}
    for session, scope, item in conn.execute(_SESSION_TURNS.format(condition=condition), [json.dumps(ids), *params]):
        sessions.setdefault((session, scope), []).append(item)
    return sessions


def rescored(conn, fused, filters):
    """`fused` ([(id, score, {leg: rank})] best first) with every turn's score
    raised by its neighbours' and its session's best, the turns of the
    candidates' sessions that no leg found added, best first, ties by id."""
    sessions = session_turns(conn, [item for item, _, _ in fused], filters)
    if not sessions:
        return fused
    score = {item: value for item, value, _ in fused}
    ranks = {item: legs for item, _, legs in fused}
    new = dict(score)
    for turns in sessions.values():
        own = [score.get(item, 0.0) for item in turns]
        best = max(own)
        for at, item in enumerate(turns):
            near = max(own[at - 1] if at else 0.0, own[at + 1] if at + 1 < len(own) else 0.0)
            new[item] = own[at] + DIALOGUE_NEIGHBOUR * near + DIALOGUE_SESSION * best
    ordered = sorted(new, key=lambda item: (-new[item], item))
    return [(item, new[item], ranks.get(item, {})) for item in ordered if new[item] > 0 or item in score]


def rescored_json(conn, fused, filters):
    """brain_dialogue's work: `fused` as JSON [[id, score], ...] best first in,
    [{id, score}] best first out."""
    pairs = [(int(item), float(value), {}) for item, value in json.loads(fused or "[]")]
    return json.dumps([{"id": item, "score": value} for item, value, _ in rescored(conn, pairs, filters)])
