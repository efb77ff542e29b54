"""The QueryDoc: a recall request, checked field by field. Any problem is a
QueryError naming the field, which the HTTP API turns into a 400.

A request arrives as a JSON object (`parse`) or as text values — query-string
parameters, CLI options, SQL function arguments — which `from_strings` coerces by
each field's type before the same checks.
"""

import difflib
import re
import types
import typing
from dataclasses import dataclass

from .config import CLASSES, MAX_QUERY_CHARS, MMR_LAMBDA, graph_enabled
from .errors import FieldError, QueryError
from .fields import normalize_scope, parse_time, sqlite_time, unencodable, utcnow


@dataclass(frozen=True)
class QueryDoc:
    q: str
    k: int = 10
    sources: tuple | None = None
    classes: tuple | None = None
    scope: str | None = None
    domain: str | None = None
    since: str | None = None
    until: str | None = None
    now: str | None = None
    as_of: str | None = None  # what was true then: validity and supersession read at this time (parse: now)
    min_relevance: int | None = None
    include_decayed: bool = False
    graph: bool = True
    provenance: bool = True
    prf: bool = True
    mmr: bool = False
    mmr_lambda: float = MMR_LAMBDA
    max_tokens: int | None = None
    cutoff: bool = True  # leave out hits with no evidence for the query (config.EVIDENCE_CUTOFF)


FIELDS = set(QueryDoc.__dataclass_fields__) | {"source"}
# names other tools give these fields, suggested when a request uses them
ALIASES = {
    "query": "q", "question": "q", "text": "q", "prompt": "q", "search": "q",
    "limit": "k", "top_k": "k", "topk": "k", "top_n": "k", "n": "k",
    "class": "classes", "kind": "classes", "namespace": "scope",
    "from": "since", "after": "since", "to": "until", "before": "until",
    "at": "as_of", "asof": "as_of", "valid_at": "as_of", "point_in_time": "as_of",
    "token_budget": "max_tokens", "budget": "max_tokens", "diversity": "mmr", "expand": "prf",
    "threshold": "cutoff", "min_score": "cutoff",
}  # fmt: skip
TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _field_types():
    """{field: int | float | bool | str | tuple}, read from QueryDoc's annotations."""
    kinds = {}
    for name, hint in typing.get_type_hints(QueryDoc).items():
        if isinstance(hint, types.UnionType):
            hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
        kinds[name] = hint
    kinds["source"] = kinds["sources"]
    return kinds


FIELD_TYPES = _field_types()


def from_strings(values, need_q=True, comma_lists=True):
    """A QueryDoc from {field: text or [texts]}: whole numbers, true/false words,
    numbers and lists are read by the field's type; a repeated single-valued field
    takes its last value. With `comma_lists` (query strings, SQL arguments) list
    items may also be comma-separated and an empty value is absent; without it
    (repeatable CLI options) each text is one item and only None is absent."""
    raw = {}
    for name, value in values.items():
        texts = value if isinstance(value, (list, tuple)) else [value]
        texts = [str(t) for t in texts if t is not None and (str(t) != "" or not comma_lists)]
        if not texts:
            continue
        kind, text = FIELD_TYPES.get(name), texts[-1].strip()
        if kind is tuple:
            parts = [part for t in texts for part in (t.split(",") if comma_lists else [t])]
            raw[name] = [part.strip() for part in parts if part.strip() or not comma_lists]
        elif kind is int:
            if not re.fullmatch(r"-?[0-9]{1,9}", text):
                raise QueryError(f"{name} must be a whole number", name)
            raw[name] = int(text)
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


def _text(name, value, limit=500):
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
    if key in FIELDS:
        return key
    close = difflib.get_close_matches(key, sorted(FIELDS), n=1, cutoff=0.6)
    return close[0] if close else None


def parse(raw, need_q=True):
    """A QueryDoc from a JSON object (dict), or a QueryError naming the problem.
    Without `need_q` the request may be filters only (q is then empty)."""
    if isinstance(raw, QueryDoc):
        return raw
    if not isinstance(raw, dict):
        raise QueryError("the query must be a JSON object with at least 'q'")
    unknown = sorted(set(raw) - FIELDS, key=str)
    if unknown:
        named = ", ".join(f"{name} (did you mean {near}?)" if (near := nearest_field(name)) else str(name) for name in unknown)
        raise QueryError(f"unknown field{'s' if len(unknown) > 1 else ''}: {named}")
    if "q" not in raw and need_q:
        raise QueryError("q is required: the text to recall memories for", "q")
    q = _text("q", raw.get("q", ""), MAX_QUERY_CHARS)
    if not q.strip() and need_q:
        raise QueryError("q must not be empty", "q")
    values = {"q": q}
    if "k" in raw:
        values["k"] = _integer("k", raw["k"], 1, 100)
    if "sources" in raw and "source" in raw:
        raise QueryError("give sources or source, not both", "sources")
    for name in ("sources", "source"):
        if raw.get(name) is not None:
            values["sources"] = _strings(name, raw[name])
    if raw.get("classes") is not None:
        classes = _strings("classes", raw["classes"])
        bad = [c for c in classes if c not in CLASSES]
        if bad:
            raise QueryError(f"classes must be among {', '.join(CLASSES)}, not {', '.join(bad)}", "classes")
        values["classes"] = classes
    name = "scope"
    try:
        if raw.get("scope") is not None:
            values["scope"] = normalize_scope(_text("scope", raw["scope"]))
        name = "now"
        now = parse_time(_text("now", raw["now"]), name="now") if raw.get("now") is not None else None
        if now:
            values["now"] = now
        for name in ("since", "until", "as_of"):
            if raw.get(name) is not None:
                values[name] = parse_time(_text(name, raw[name]), now=now, name=name)
    except FieldError as ex:
        raise QueryError(str(ex), name) from None
    if raw.get("domain") is not None:
        values["domain"] = _text("domain", raw["domain"])
    if raw.get("min_relevance") is not None:
        values["min_relevance"] = _integer("min_relevance", raw["min_relevance"], 0, 3)
    for name in ("include_decayed", "graph", "provenance", "prf", "mmr", "cutoff"):
        if raw.get(name) is not None:
            values[name] = _flag(name, raw[name])
    if raw.get("mmr_lambda") is not None:
        value = raw["mmr_lambda"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise QueryError("mmr_lambda must be a number from 0 to 1", "mmr_lambda")
        values["mmr_lambda"] = float(value)
    if raw.get("max_tokens") is not None:
        values["max_tokens"] = _integer("max_tokens", raw["max_tokens"], 1, 1_000_000)
    if not graph_enabled():
        values["graph"] = False
    values.setdefault("now", sqlite_time(utcnow()))
    values.setdefault("as_of", values["now"])  # without as_of, what is true now
    return QueryDoc(**values)
