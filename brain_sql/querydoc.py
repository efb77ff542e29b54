"""The QueryDoc: a recall request, checked field by field. Any problem is a
QueryError naming the field, which the HTTP API turns into a 400.

Each field is defined once, in QueryDoc: its name, type and default, and in its
metadata its help, its bounds and what else the doors need to offer it. FIELDS
is that table, and the doors are built from it: the MCP tool's arguments, the
CLI's recall options, the recall page's form (tests hold docs/recall.md to it).

A request arrives as a JSON object (`parse`) or as text values — query-string
parameters, CLI options, SQL function arguments — which `from_strings` coerces by
each field's type before the same checks.
"""

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .config import CLASSES, MAX_FILTER_CHARS, MAX_QUERY_CHARS, MMR_LAMBDA, graph_enabled
from .errors import FieldError, QueryError
from .fields import (
    NEVER,
    given_once,
    grouping_name,
    normalize_scope,
    parse_time,
    query_text,
    read_digits,
    sqlite_time,
    stated_zone,
    time_zone,
    unencodable,
    utcnow,
)
from .wording import shown


@dataclass(frozen=True)
class Field:
    """One field of a request, as every door offers it."""

    name: str
    type: type  # str, int, float, bool, or tuple (of strings)
    default: object  # None: absent unless given (q, which has none, is required)
    help: str  # what it does, in a sentence: the CLI's help, the MCP argument's description, the page's tooltip
    label: str = ""  # a person's short name for it: the recall page's label (default: the name, spaced)
    bounds: tuple | None = None  # (lowest, highest) of a number
    choices: tuple | None = None  # the values a list's items are among
    # of a text: "time" (ISO, or relative such as -30d), "zone" (a time zone), "path" (a scope) or
    # "name" (a source or domain: refused as a stored one would be, fields.grouping_name)
    shape: str | None = None
    one: str | None = None  # a list's name for one item: a repeatable CLI option's

    @property
    def description(self):
        """The help, with the default when the field has one."""
        if self.default is None:
            return self.help
        default = str(self.default).lower() if isinstance(self.default, bool) else self.default
        return f"{self.help} (default {default})"


def _about(help, label="", default=None, **details):
    """A QueryDoc field's default, with the rest of its Field in its metadata."""
    return dataclasses.field(default=default, metadata={"help": help, "label": label, **details})


@dataclass(frozen=True)
class QueryDoc:
    """A recall request. Each field carries what every door needs to offer it:
    read as a table, FIELDS."""

    q: str = _about("the question or words to recall memories for", "query", default=dataclasses.MISSING)
    k: int = _about("how many hits, 1 to 100", "hits (k)", default=10, bounds=(1, 100))
    sources: tuple | None = _about("only these sources", one="source", shape="name")
    classes: tuple | None = _about(f"only these classes: {', '.join(CLASSES)}", choices=CLASSES, one="class")
    scope: str | None = _about("a scope path: it and its parents are read, never a sibling", shape="path")
    domain: str | None = _about("only this domain", shape="name")
    since: str | None = _about("observed at or after: an ISO time, or relative such as -30d", shape="time")
    until: str | None = _about("observed before: an ISO time, or relative such as -1w", shape="time")
    now: str | None = _about("a fixed evaluation time (ISO): same inputs and now, same answer", shape="time")
    timezone: str | None = _about(
        "the asker's time zone, an IANA name such as Europe/Paris or an offset such as -08:00: the days "
        '"yesterday", "this week" or "in May" name in q are its days; default the offset now is given with, else UTC',
        "time zone",
        shape="zone",
    )
    as_of: str | None = _about(
        "what was true then: memories valid at this time and not yet superseded (an ISO time, "
        "or relative such as -30d); default now",
        "valid as of",
        shape="time",
    )
    min_relevance: int | None = _about(
        "the lowest relevance tier, 0 (archived) to 3 (pinned); default 1, or 0 when decayed memories are included",
        "lowest relevance tier",
        bounds=(0, 3),
    )
    include_decayed: bool = _about(
        "include expired and archived memories", "include expired and archived memories", default=False
    )
    graph: bool = _about("follow the entity graph: the graph leg", "follow the entity graph", default=True)
    provenance: bool = _about(
        "give each hit's provenance: where it came from and how each search found it",
        "show where each hit came from",
        default=True,
    )
    prf: bool = _about(
        "expand the query with words from its top hits when that may find more",
        "expand the query with related words",
        default=True,
    )
    mmr: bool = _about("diversify the hits with MMR", "diversify the hits", default=False)
    mmr_lambda: float = _about(
        "MMR's balance of relevance (1) and diversity (0), 0 to 1",
        "diversity weight",
        default=MMR_LAMBDA,
        bounds=(0, 1),
    )
    max_tokens: int | None = _about(
        "pack hits, in rank order, into this many tokens", "token budget", bounds=(1, 1_000_000)
    )
    # leave out hits with no evidence for the query (config.EVIDENCE_CUTOFF)
    cutoff: bool = _about(
        "leave out hits with no evidence for the query; false returns all k hits",
        "leave out hits with no evidence",
        default=True,
    )


def _fields(doc_class=QueryDoc):
    """QueryDoc's fields as the table of Fields the doors are built from."""
    hints, table = typing.get_type_hints(doc_class), []
    for field in dataclasses.fields(doc_class):
        if "help" not in field.metadata:
            raise TypeError(f"QueryDoc's field {field.name} needs its help and bounds: declare it with _about()")
        kind = hints[field.name]
        if isinstance(kind, types.UnionType):
            kind = next(arg for arg in typing.get_args(kind) if arg is not type(None))
        default = None if field.default is dataclasses.MISSING else field.default
        about = {**field.metadata, "label": field.metadata["label"] or field.name.replace("_", " ")}
        table.append(Field(field.name, kind, default, **about))
    return tuple(table)


FIELDS = _fields()
BY_NAME = {field.name: field for field in FIELDS}
ALSO = {"source": "sources"}  # another name a request may give a field by
NAMES = set(BY_NAME) | set(ALSO)
GIVEN_AS = {name: (name, *(also for also, field in ALSO.items() if field == name)) for name in BY_NAME}
# names other tools give these fields, suggested when a request uses them
ALIASES = {
    "query": "q",
    "question": "q",
    "text": "q",
    "prompt": "q",
    "search": "q",
    "limit": "k",
    "top_k": "k",
    "topk": "k",
    "top_n": "k",
    "n": "k",
    "class": "classes",
    "kind": "classes",
    "namespace": "scope",
    "from": "since",
    "after": "since",
    "to": "until",
    "before": "until",
    "at": "as_of",
    "asof": "as_of",
    "valid_at": "as_of",
    "point_in_time": "as_of",
    "token_budget": "max_tokens",
    "budget": "max_tokens",
    "tz": "timezone",
    "time_zone": "timezone",
    "zone": "timezone",
    "diversity": "mmr",
    "expand": "prf",
    "threshold": "cutoff",
    "min_score": "cutoff",
}
TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
FIELD_TYPES = {name: BY_NAME[ALSO.get(name, name)].type for name in NAMES}


def from_strings(values: Mapping[str, Any], need_q: bool = True, comma_lists: bool = True) -> QueryDoc:
    """A QueryDoc from {field: text or [texts]}: whole numbers, true/false words,
    numbers and lists are read by the field's type; a single-valued field given
    more than once is refused by name. With `comma_lists` (query strings, SQL arguments) list
    items may also be comma-separated and an empty value is absent; without it
    (repeatable CLI options) each text is one item and only None is absent."""
    raw: dict[str, Any] = {}
    for name, value in values.items():
        texts = value if isinstance(value, (list, tuple)) else [value]
        texts = [str(t) for t in texts if t is not None and (str(t) != "" or not comma_lists)]
        if not texts:
            continue
        kind, text = FIELD_TYPES.get(name), texts[-1].strip()
        if kind is not tuple:
            try:
                given_once(name, texts)
            except FieldError as ex:
                raise QueryError(str(ex), name) from None
        if kind is tuple:
            parts = [part for t in texts for part in (t.split(",") if comma_lists else [t])]
            raw[name] = [part.strip() for part in parts if part.strip() or not comma_lists]
        elif kind is int:
            number = read_digits(text)
            if number is None:
                raise QueryError(f"{name} must be a whole number", name)
            raw[name] = number  # out of its field's range: parse names the range
        elif kind is bool:
            if text.lower() not in TRUE_WORDS + FALSE_WORDS:
                raise QueryError(f"{name} must be true or false", name)
            raw[name] = text.lower() in TRUE_WORDS
        elif kind is float:
            try:
                raw[name] = float(text)
            except ValueError:
                raise QueryError(f"{name} must be a number", name) from None
        else:  # text, or a name parse() will report as unknown
            raw[name] = texts[-1]
    return parse(raw, need_q=need_q)


def _text(name, value, limit=MAX_FILTER_CHARS):
    if not isinstance(value, str):
        raise QueryError(f"{name} must be a string", name)
    if unencodable(value) is not None:
        raise QueryError(f"{name} is not valid Unicode (it has a lone surrogate)", name)
    if len(value) > limit:
        raise QueryError(f"{name} is {len(value)} characters; the limit is {limit}", name)
    return value


def _strings(name, value):
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) and v for v in values):
        raise QueryError(f"{name} must be a non-empty string or list of non-empty strings", name)
    return tuple(values)


def _integer(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, int):
        raise QueryError(f"{name} must be a whole number from {low} to {high}", name)
    if not low <= value <= high:
        raise QueryError(f"{name} must be from {low} to {high}, not {value}", name)
    return value


def _flag(name, value):
    if isinstance(value, str):  # "false" in quotes is text, and any text would be true
        raise QueryError(
            f"{name} must be true or false, a JSON boolean without quotes: not the string {shown(value)}", name
        )
    if not isinstance(value, bool):
        raise QueryError(f"{name} must be true or false", name)
    return value


def nearest_field(name):
    """The known field an unknown `name` most likely meant: an alias other tools
    use (query -> q, limit -> k), else the closest spelling; None when nothing is close."""
    if not isinstance(name, str):
        return None
    key = name.strip().lower().replace("-", "_")
    if key in ALIASES:
        return ALIASES[key]
    if key in NAMES:
        return key
    close = difflib.get_close_matches(key, sorted(NAMES), n=1, cutoff=0.6)
    return close[0] if close else None


def parse(raw: QueryDoc | dict[str, Any], need_q: bool = True) -> QueryDoc:
    """A QueryDoc from a JSON object (dict), or a QueryError naming the problem.
    Without `need_q` the request may be filters only (q is then empty)."""
    if isinstance(raw, QueryDoc):
        return raw
    if not isinstance(raw, dict):
        raise QueryError("the query must be a JSON object with at least 'q'")
    unknown = sorted(set(raw) - NAMES, key=str)
    if unknown:
        named = ", ".join(
            f"{name} (did you mean {near}?)" if (near := nearest_field(name)) else str(name) for name in unknown
        )
        raise QueryError(f"unknown field{'s' if len(unknown) > 1 else ''}: {named}")
    if "q" not in raw and need_q:
        raise QueryError("q is required: the text to recall memories for", "q")
    # composed, a text may grow (U+0958 is two characters composed): bounded again
    q = _text("q", query_text(_text("q", raw.get("q", ""), MAX_QUERY_CHARS)), MAX_QUERY_CHARS)
    if not q.strip() and need_q:
        raise QueryError("q must not be empty", "q")
    if "\x00" in q:  # SQLite would read q only up to it (brain_sql.RECALL_SQL does)
        raise QueryError("q must not hold a NUL character (U+0000)", "q")
    values: dict[str, Any] = {"q": q}
    for also, name in ALSO.items():
        if name in raw and also in raw:
            raise QueryError(f"give {name} or {also}, not both", name)
    # now first: the other times may be relative to it
    for field in sorted(FIELDS[1:], key=lambda field: field.name != "now"):
        given = [name for name in GIVEN_AS[field.name] if name in raw]
        # null is absent, but for k, which was always refused
        if given and (raw[given[0]] is not None or field.name == "k"):
            values[field.name] = _checked(field, given[0], raw[given[0]], values.get("now"))
    _window(values)
    if not graph_enabled():
        values["graph"] = False
    if "timezone" not in values and (given := [name for name in GIVEN_AS["now"] if raw.get(name) is not None]):
        values["timezone"] = stated_zone(raw[given[0]])  # "now": "2026-12-05T20:00-08:00" is said at -08:00
    values.setdefault("now", sqlite_time(utcnow()))
    values.setdefault("as_of", values["now"])  # without as_of, what is true now
    return QueryDoc(**values)


def _window(values):
    """A QueryError naming both when until is not later than since: the window
    would hold no time, as a memory whose valid_to is not later than its valid_from."""
    since, until = values.get("since"), values.get("until")
    if since and until and until <= since:
        raise QueryError(
            f"until ({until}) must be later than since ({since}): no time is at or after since and before until",
            "until",
        )


def _checked(field, name, value, now):
    """`value`, given for `field` by `name`, checked by the field's type, bounds and
    shape (times read relative to `now`, None: the clock's)."""
    if field.type is int:
        return _integer(name, value, *field.bounds)
    if field.type is bool:
        return _flag(name, value)
    if field.type is float:
        low, high = field.bounds
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            raise QueryError(f"{name} must be a number from {low} to {high}", name)
        return float(value)
    if field.type is tuple:
        items = _strings(name, value)
        bad = [item for item in items if field.choices and item not in field.choices]
        if bad:
            raise QueryError(f"{name} must be among {', '.join(field.choices)}, not {', '.join(bad)}", name)
        if field.shape == "name":  # as a stored memory's may be: a filter on one that cannot be finds nothing, unsaid
            try:
                return tuple(grouping_name(item, field.one or name) for item in items)
            except FieldError as ex:
                raise QueryError(str(ex), name) from None
        return items
    text = _text(name, value)
    try:
        if field.shape == "name":
            return grouping_name(text, name)
        if field.shape == "path":
            return normalize_scope(text)
        if field.shape == "zone":
            return time_zone(text, name)[0]
        if field.shape == "time":
            moment = parse_time(text, now=now, name=name)
            if name in ("as_of", "now") and moment >= NEVER:  # no memory is valid or unexpired then
                raise QueryError(f"{name} must be before {NEVER}, the time that stands for never", name)
            return moment
    except FieldError as ex:
        raise QueryError(str(ex), name) from None
    return text
