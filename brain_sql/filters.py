"""Who may see which memories: the recall filters, defined once and applied three
ways with one meaning — as vec0 metadata constraints inside the KNN, as SQL on
`knowledge` for the lexical leg, and as a numpy mask over the graph's chunks.

The columns filtered are exactly vec_knowledge's metadata columns (schema.VEC_METADATA),
computed from a knowledge row by the same expressions everywhere.
"""

import calendar
import time
from dataclasses import dataclass

import numpy as np

from .schema import VEC_METADATA


@dataclass(frozen=True)
class Filters:
    now: str  # SQLite UTC text; rows with expires_at <= now are expired
    scopes: tuple | None = None  # allowed scopes (a scope and its ancestors); None: all
    classes: tuple | None = None
    sources: tuple | None = None
    domain: str | None = None
    since: str | None = None  # on observed_at
    until: str | None = None
    min_relevance: int = 1
    include_decayed: bool = False

    def _clauses(self):
        """(column, operator, value) triples; flagged rows are never visible."""
        clauses = [("flagged", "=", 0), ("relevance_tier", ">=", self.min_relevance)]
        if not self.include_decayed:
            clauses.append(("expires_at", ">", _epoch(self.now)))
        for column, values in (("scope", self.scopes), ("class", self.classes), ("source", self.sources)):
            if values is not None:
                clauses.append((column, "in", tuple(values)))
        if self.domain is not None:
            clauses.append(("domain", "=", self.domain))
        if self.since is not None:
            clauses.append(("observed_at", ">=", _epoch(self.since)))
        if self.until is not None:
            clauses.append(("observed_at", "<", _epoch(self.until)))
        return clauses

    def sql(self, row=None):
        """(SQL condition, params) on vec_knowledge's columns, or with `row` on the
        knowledge row of that alias. Values are always bound, never formatted in."""
        parts, params = [], []
        for column, operator, value in self._clauses():
            expression = VEC_METADATA[column][1].format(row=row) if row else column
            if operator == "in":
                parts.append(f"{expression} in (select value from json_each(?))")
                params.append(_json_list(value))
            else:
                parts.append(f"{expression} {operator} ?")
                params.append(value)
        return " and ".join(parts), params

    def mask(self, columns):
        """Boolean numpy mask over rows whose VEC_METADATA columns are the arrays in `columns`."""
        visible = np.ones(len(columns["flagged"]), dtype=bool)
        for column, operator, value in self._clauses():
            values = columns[column]
            if operator == "in":
                # no dtype forced: a fixed-width cast would truncate longer values
                visible &= np.isin(values, np.array(value)) if value else False
            elif operator == "=":
                visible &= values == value
            elif operator == ">=":
                visible &= values >= value
            elif operator == ">":
                visible &= values > value
            elif operator == "<":
                visible &= values < value
        return visible


def _epoch(text):
    """SQLite UTC time text as Unix seconds, as the vec0 time columns hold them."""
    return calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M:%S"))


def _json_list(values):
    import json

    return json.dumps(list(values))
