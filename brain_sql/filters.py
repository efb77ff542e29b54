"""Which memories a request may see: the recall filters, defined once as clauses
on vec_knowledge's filter columns and applied with one meaning everywhere — as
vec0 metadata constraints inside the KNN, as SQL on `knowledge` for the lexical
leg, as a numpy mask over the graph's chunks, and as the clauses of the SQL recall
(recall.sql), which read their bounds from brain_filters()."""

import calendar
import json
import time
from dataclasses import dataclass

import numpy as np

from .fields import scope_ancestors
from .vectors import VEC_METADATA

# (bound, column, operator): every leg applies every clause whose bound is set.
CLAUSES = (
    ("flagged", "flagged", "="),  # flagged rows are never visible
    ("min_relevance", "relevance_tier", ">="),
    ("now", "expires_at", ">"),  # unset with include_decayed
    ("scopes", "scope", "in"),
    ("classes", "class", "in"),
    ("sources", "source", "in"),
    ("domains", "domain", "in"),
    ("since", "observed_at", ">="),
    ("until", "observed_at", "<"),
    # valid at `as_of` (default: now): begun, not ended, not superseded
    ("valid_at", "valid_from", "<="),
    ("valid_at", "valid_until", ">"),
)
# what an unset bound is in SQL, where every clause is always written
_OPEN_BOUNDS = {">=": -(2**62), ">": -(2**62), "<": 2**62, "<=": 2**62}


@dataclass(frozen=True)
class Filters:
    now: str  # SQLite UTC text; rows with expires_at <= now are expired
    scopes: tuple | None = None  # allowed scopes (a scope and its ancestors); None: all
    classes: tuple | None = None
    sources: tuple | None = None
    domains: tuple | None = None
    since: str | None = None  # on observed_at
    until: str | None = None
    min_relevance: int = 1
    include_decayed: bool = False
    as_of: str | None = None  # memories valid at this time; None: at `now`

    @classmethod
    def from_querydoc(cls, doc, since=None, until=None):
        """The filters of a QueryDoc; `since` / `until` are a window read from the
        query's text, used where the request names none."""
        return cls(
            now=doc.now,
            scopes=tuple(scope_ancestors(doc.scope)) if doc.scope else None,
            classes=doc.classes,
            sources=doc.sources,
            domains=(doc.domain,) if doc.domain is not None else None,
            since=doc.since or since,
            until=doc.until or until,
            min_relevance=doc.min_relevance if doc.min_relevance is not None else (0 if doc.include_decayed else 1),
            include_decayed=doc.include_decayed,
            as_of=doc.as_of,
        )

    def bounds(self):
        """{bound: value} of the clauses that restrict anything; times in Unix seconds."""
        values = {
            "flagged": 0,
            "min_relevance": self.min_relevance,
            "now": None if self.include_decayed else _epoch(self.now),
            "scopes": self.scopes,
            "classes": self.classes,
            "sources": self.sources,
            "domains": self.domains,
            "since": _epoch(self.since) if self.since else None,
            "until": _epoch(self.until) if self.until else None,
            "valid_at": _epoch(self.as_of or self.now),
        }
        return {name: value for name, value in values.items() if value is not None}

    def every_bound(self, values_of):
        """Every clause's bound, an unset one admitting everything: a list filter
        takes `values_of(column)` (all values the brain holds), a time an open end."""
        bounds = self.bounds()
        for name, column, operator in CLAUSES:
            if name not in bounds:
                bounds[name] = list(values_of(column)) if operator == "in" else _OPEN_BOUNDS[operator]
        return {name: list(value) if isinstance(value, tuple) else value for name, value in bounds.items()}

    def clauses(self, columns=None):
        """(column, operator, value) of each clause that restricts anything (on
        `columns` only, when given)."""
        bounds = self.bounds()
        return [
            (column, operator, bounds[name])
            for name, column, operator in CLAUSES
            if name in bounds and (columns is None or column in columns)
        ]

    def sql(self, row=None):
        """(SQL condition, params) on vec_knowledge's columns, or with `row` on the
        knowledge row of that alias. Values are always bound, never formatted in."""
        parts, params = [], []
        for column, operator, value in self.clauses():
            expression = column_sql(column, row)
            if operator == "in":
                parts.append(f"{expression} in (select value from json_each(?))")
                params.append(json.dumps(list(value)))
            else:
                parts.append(f"{expression} {operator} ?")
                params.append(value)
        return " and ".join(parts), params

    def mask(self, columns, codes=None):
        """Boolean numpy mask over rows whose VEC_METADATA columns are the arrays in
        `columns` (the clauses on the columns given); a text column may hold
        integer codes, given by `codes[column]` ({value: code})."""
        visible = np.ones(len(next(iter(columns.values()))), dtype=bool)
        for column, operator, value in self.clauses(columns):
            values = columns[column]
            if operator == "in":
                if codes and column in codes:
                    value = [codes[column][v] for v in value if v in codes[column]]
                # no dtype forced: a fixed-width cast would truncate longer values
                visible &= np.isin(values, np.array(value)) if value else False
            elif operator == "=":
                visible &= values == value
            elif operator == ">=":
                visible &= values >= value
            elif operator == "<=":
                visible &= values <= value
            elif operator == ">":
                visible &= values > value
            elif operator == "<":
                visible &= values < value
        return visible


def column_sql(column, row=None):
    """A filter column: vec_knowledge's own, or computed from knowledge row `row`."""
    return VEC_METADATA[column][1].format(row=row) if row else column


def template(bounds, row=None, indent=4):
    """Every clause as SQL reading its bound from `bounds`, an SQL expression for a
    JSON object of every bound (Filters.every_bound): the filters of recall.sql."""
    parts = []
    for name, column, operator in CLAUSES:
        expression = column_sql(column, row)
        if operator == "in":
            parts.append(f"{expression} in (select value from json_each({bounds}, '$.{name}'))")
        else:
            parts.append(f"{expression} {operator} ({bounds} ->> '$.{name}')")
    return f"\n{' ' * indent}and ".join(parts)


def _epoch(text):
    """SQLite UTC time text as Unix seconds, as the vec0 time columns hold them."""
    return calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M:%S"))
