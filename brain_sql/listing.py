"""Listing what was stored: the memories a reader may see, newest first (by
observed_at, then id), a page at a time, with recall's filters read recall's way
— a scope is itself and its parents, never a sibling or a child; classes,
sources, domain; since / until on observed_at — and no flagged memory. Decayed,
ended and superseded memories are listed (what was stored, not what is true now):
each row says so in its own columns. A page says whether there is a next one,
never how many memories there are.
"""

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .browse import page_numbers
from .config import LIST_PAGE_ROWS, MAX_PAGE, MAX_PAGE_ROWS
from .connection import Connection
from .errors import FieldError, QueryError
from .fields import given_once, scope_ancestors
from .hybrid import HIT_COLUMNS
from .querydoc import BY_NAME, GIVEN_AS, Field, from_strings, nearest_field, parse

# the listing's request: recall's filters, as recall defines them, and paging
FIELDS = (
    *(BY_NAME[name] for name in ("scope", "classes", "sources", "domain", "since", "until", "now")),
    Field("page", int, 1, f"the page, 1 to {MAX_PAGE:,}", bounds=(1, MAX_PAGE)),
    Field("size", int, LIST_PAGE_ROWS, f"memories a page, 1 to {MAX_PAGE_ROWS:,}", bounds=(1, MAX_PAGE_ROWS)),
)
FILTERS = tuple(name for field in FIELDS[:-2] for name in GIVEN_AS[field.name])  # and the names they go by
NAMES = (*FILTERS, "page", "size")


@dataclass(frozen=True)
class Listing:
    scope: str | None = None
    classes: tuple | None = None
    sources: tuple | None = None
    domain: str | None = None
    since: str | None = None
    until: str | None = None
    page: int = 1
    size: int = LIST_PAGE_ROWS


def parse_listing(raw: Listing | dict[str, Any] | None) -> Listing:
    """A Listing from a JSON object ({} or None: the first page of everything); a
    QueryError names the field at fault, as recall's do."""
    if isinstance(raw, Listing):
        return raw
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise QueryError("the listing's request must be a JSON object of filters and paging")
    for name in ("page", "size"):
        value = raw.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise QueryError(f"{name} must be a whole number", name)
    return _listing(raw, lambda filters: parse(filters, need_q=False))


def listing_from_strings(values: Mapping[str, str | list[str] | None]) -> Listing:
    """A Listing from text values ({name: [texts]}, as a query string gives them):
    lists comma-separated, as recall's query strings take them."""
    values = {name: given for name, given in values.items() if given not in (None, "", [], [""])}
    raw = {name: _once(name, given) if name in ("page", "size") else given for name, given in values.items()}
    return _listing(raw, lambda filters: from_strings(filters, need_q=False))


def _once(name, given):
    """A paging field's one text (given_once), the QueryError naming it otherwise."""
    try:
        return given_once(name, given) if isinstance(given, list) else given
    except FieldError as ex:
        raise QueryError(str(ex), name) from None


def _listing(raw, read_filters):
    unknown = sorted((name for name in raw if name not in NAMES), key=str)
    if unknown:
        named = ", ".join(
            f"{str(n)[:40]} (did you mean {near}?)" if (near := _nearest(n)) else str(n)[:40] for n in unknown
        )
        raise QueryError(f"unknown field{'s' if len(unknown) > 1 else ''}: {named}; a listing takes {', '.join(NAMES)}")
    doc = read_filters({name: value for name, value in raw.items() if name in FILTERS})
    paging = {"page": 1, "size": LIST_PAGE_ROWS}
    for name in paging:
        if raw.get(name) is not None:
            try:  # page_numbers' bounds, the one asked for checked alone
                paging[name] = page_numbers(**{name: raw[name]})[0 if name == "page" else 1]
            except FieldError as ex:
                raise QueryError(str(ex), name) from None
    return Listing(doc.scope, doc.classes, doc.sources, doc.domain, doc.since, doc.until, **paging)


# names other tools give the paging fields
_ALIASES = {"limit": "size", "k": "size", "per_page": "size", "page_size": "size", "offset": "page"}


def _nearest(name):
    """The field an unknown `name` most likely meant, or None."""
    key = str(name).strip().lower().replace("-", "_")
    near = _ALIASES.get(key) or nearest_field(name)
    if near in NAMES:
        return near
    close = difflib.get_close_matches(key, NAMES, n=1, cutoff=0.6)
    return close[0] if close else None


def memories(conn: Connection, listing: Listing | dict[str, Any] | None = None) -> dict[str, Any]:
    """{"memories": rows (recall's hit fields), "page", "size", "more": whether a
    next page holds any, "query": the filters applied}, newest first."""
    listing = parse_listing(listing)
    where, params = ["flagged = 0"], {}
    for name, column in (("scope", "scope"), ("classes", "class"), ("sources", "source")):
        value = getattr(listing, name)
        if value is not None:
            where.append(f"[{column}] in (select value from json_each(:{name}))")
            params[name] = json.dumps(scope_ancestors(value) if name == "scope" else list(value))
    for name, condition in (
        ("domain", "domain = :domain"),
        ("since", "observed_at >= :since"),
        ("until", "observed_at < :until"),
    ):
        if getattr(listing, name) is not None:
            where.append(condition)
            params[name] = getattr(listing, name)
    rows = conn.execute(
        f"select {', '.join(HIT_COLUMNS)} from knowledge where {' and '.join(where)} "
        "order by observed_at desc, id desc limit :limit offset :offset",
        {**params, "limit": listing.size + 1, "offset": (listing.page - 1) * listing.size},
    ).fetchall()
    query = {
        name: list(value) if isinstance(value, tuple) else value
        for name, value in vars(listing).items()
        if value is not None and name not in ("page", "size")
    }
    return {
        "memories": [dict(zip(HIT_COLUMNS, row)) for row in rows[: listing.size]],
        "page": listing.page,
        "size": listing.size,
        "more": len(rows) > listing.size,
        "query": query,
    }
