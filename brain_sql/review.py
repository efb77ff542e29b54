"""Deciding about decayed memories: extend a memory's expiry, archive it
(relevance tier 0), restore it, or flag it. Each is one transaction over a list
of memory ids (knowledge rows), and the triggers carry the change to the vectors'
filter columns and the change log, so recall sees it at once.

Only visible memories are acted on: flagged ones are never shown, so an id of a
flagged memory is reported as not found, like one that does not exist. A memory
ingested from a file, or remembered, keeps the decision when its document is
written again with its text unchanged (another section edited), unless the record
now states another tier or expiry than it did (documents.stated_fields).
"""

import json
from collections.abc import Iterable
from typing import Any

from .config import CHANGE_LOG_KEEP, MAX_EXTEND_DAYS, MAX_FORGET_ITEMS
from .connection import Connection, atomic, write_failures
from .errors import BrainError, FieldError
from .fields import parse_time, sqlite_time, utcnow
from .schema import is_brain, prune_changes
from .wording import shown
from .writer import after_flagging

ACTIONS = ("extend", "archive", "restore", "flag")

# each action's change to the visible rows it names; :now is the evaluation time
_UPDATES = {
    # expiry `days` after the later of the current expiry and now: an expired
    # memory extended by 30 days is live for 30 days from now; at most the last second
    # a time holds (past it SQLite's datetime() is NULL: never expiring, which restore is)
    "extend": (
        "expires_at = datetime(min(max(unixepoch(coalesce(expires_at, :now)), unixepoch(:now)) + :seconds, "
        "unixepoch('9999-12-31 23:59:59')), 'unixepoch')"
    ),
    "archive": "relevance_tier = 0",
    # back in recall for good: at least the default tier, and no expiry
    "restore": "relevance_tier = max(relevance_tier, 1), expires_at = null",
    "flag": "flagged = 1",
}


def extend_expiry(conn: Connection, ids: Iterable[int], days: int, now: str | None = None) -> dict[str, Any]:
    """Move the expiry of the memories `ids` to `days` days after the later of
    their expiry and `now` (a memory without one gets one)."""
    if isinstance(days, bool) or not isinstance(days, int) or not 0 < days <= MAX_EXTEND_DAYS:
        raise FieldError(f"days must be a whole number from 1 to {MAX_EXTEND_DAYS:,}")
    return _act(conn, "extend", ids, now, days * 86_400)


def archive(conn: Connection, ids: Iterable[int]) -> dict[str, Any]:
    """Archive the memories `ids`: relevance tier 0, which recall leaves out
    (unless asked for min_relevance 0 or include_decayed)."""
    return _act(conn, "archive", ids)


def restore(conn: Connection, ids: Iterable[int]) -> dict[str, Any]:
    """Bring the memories `ids` back into recall: relevance tier at least 1 (a
    higher tier is kept) and no expiry."""
    return _act(conn, "restore", ids)


def flag(conn: Connection, ids: Iterable[int]) -> dict[str, Any]:
    """Flag the memories `ids`: recall, the pages and the graph stop showing them."""
    return _act(conn, "flag", ids)


def _act(conn, action, ids, now=None, seconds=0):
    """{"action", "changed": [ids], "not_found": [ids]}: `action` applied to the
    visible memories among `ids`, in one transaction; nothing when it fails
    (WriteError, BrainBusy when the write lock was not had in time)."""
    ids = _memory_ids(ids)
    now = parse_time(now, name="now") if now is not None else sqlite_time(utcnow())
    if not is_brain(conn):
        raise BrainError("this file is not a brain: there is nothing to change")
    with write_failures("nothing was changed"):
        with atomic(conn):
            found = [
                row[0]
                for row in conn.execute(
                    "select id from knowledge where flagged = 0 and id in (select value from json_each(?)) order by id",
                    (json.dumps(ids),),
                )
            ]
            conn.execute(
                f"update knowledge set {_UPDATES[action]} where id in (select value from json_each(:ids))",
                {"ids": json.dumps(found), "now": now, "seconds": seconds},
            )
            if action == "flag":  # a flagged memory replaces nothing, and a flagged turn is quoted nowhere
                after_flagging(conn, found)
            prune_changes(conn, CHANGE_LOG_KEEP)
    return {"action": action, "changed": found, "not_found": sorted(set(ids) - set(found))}


def _memory_ids(ids):
    """The distinct memory ids of a non-empty list, in order."""
    if isinstance(ids, (str, bytes, dict)) or not hasattr(ids, "__iter__"):
        raise FieldError("ids must be a list of memory ids")
    ids = list(ids)
    for value in ids:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**63:
            raise FieldError(f"ids must be memory ids (positive whole numbers), not {shown(value)}")
    if not ids:
        raise FieldError("give the ids of the memories to change")
    if len(ids) > MAX_FORGET_ITEMS:
        raise FieldError(f"{len(ids):,} ids: at most {MAX_FORGET_ITEMS:,} in one request")
    return list(dict.fromkeys(ids))
