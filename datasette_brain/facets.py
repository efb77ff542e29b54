"""Datasette's facet suggestions on a brain's tables, from their first rows.

Datasette 0.65 tries every column of a table page for a column, a date and an
array facet, each query over all the rows with a 50 ms limit: on a million
memories each one runs out of time, one after another, and the knowledge
table's 40 columns cost seconds before the page answers. Datasette 1.0 considers
the first 1,000 rows; these classes do that for a brain's tables, the first by
key (every other table keeps Datasette's own). A brain's internals get no
suggestion, and a facet of theirs past its time limit shows as timed out.
"""

import copy
import json
import time
import weakref

from datasette.database import QueryInterrupted
from datasette.facets import ArrayFacet, ColumnFacet, DateFacet
from datasette.utils import escape_sqlite, sqlite3

from . import links, tools

SUGGEST_ROWS = 1_000  # the rows of a brain's table a facet suggestion considers, as Datasette 1.0
# how vec0 reports a read a time limit interrupted: its own message, or SQLite's for an error without one
VEC0_INTERRUPTED = ("Could not extract metadata value", "SQL logic error")


_first = weakref.WeakKeyDictionary()  # a request -> {(database, sql, params): its first rows' SQL}


async def first_rows(facet):
    """SQL for the first SUGGEST_ROWS rows `facet` counts, in key order (unordered,
    SQLite may read them along the suggested column's index: its smallest values
    alone), or None when even finding them takes longer than a facet may. Found
    once a request, by key: each of the suggestions then reads just those rows,
    not every row the page's filters look at."""
    key = (facet.database, facet.sql, json.dumps(facet.params, sort_keys=True, default=repr))
    return await tools.once_for(facet.request, _first, key, lambda: _first_rows(facet))


async def _first_rows(facet):
    db = facet.ds.get_database(facet.database)
    keys = None if facet.table in await db.view_names() else await db.primary_keys(facet.table)
    if keys is None or len(keys) > 1:  # a view, or a key of several columns: the rows as they come, or by key
        order = f" order by {', '.join(escape_sqlite(k) for k in keys)}" if keys else ""
        return f"select * from ({facet.sql}{order} limit {SUGGEST_ROWS})"
    column = escape_sqlite(keys[0]) if keys else "rowid"
    try:
        rows = await db.execute(
            f"select {column} from ({facet.sql} order by {column} limit {SUGGEST_ROWS})",
            facet.params,
            custom_time_limit=facet.ds.setting("facet_time_limit_ms"),
        )
    except QueryInterrupted:
        return None
    values = [row[0] for row in rows.rows]
    if any(isinstance(value, bytes) for value in values):
        return f"select * from ({facet.sql} order by {column} limit {SUGGEST_ROWS})"
    listed = json.dumps(values).replace("'", "''")
    return (
        f"select {'*' if keys else 'rowid, *'} from {escape_sqlite(facet.table)} "
        f"where {column} in (select value from json_each('{listed}'))"
    )


def _sampled(facet_class):
    class Sampled(facet_class):  # type: ignore[misc, valid-type]  # Datasette's facet class, given at run time
        async def suggest(self):
            if self.table is None or not links.is_brain(self.ds, self.database):
                return await super().suggest()
            if links.is_hidden_table(self.table):
                # an internal's columns say nothing to facet by, and vec0 reports a suggestion
                # that ran out of time as its own error (a 400 page), not as a time-out
                return []
            sql = await first_rows(self)
            if sql is None:
                return []
            first = facet_class(
                self.ds,
                self.request,
                self.database,
                sql=sql,
                table=self.table,
                params=self.params,
                metadata=self.metadata,
                row_count=self.row_count,
            )
            return await facet_class.suggest(first)

        async def facet_results(self):
            if (
                self.table is None
                or not links.is_hidden_table(self.table)
                or not links.is_brain(self.ds, self.database)
            ):
                return await super().facet_results()
            # vec0 reports a query interrupted while it reads a metadata column as its own error:
            # each facet asked is counted on its own, and that error past its time limit is a time-out
            results, timed_out = [], []
            for config in self.get_configs():
                one = copy.copy(self)
                one.get_configs = lambda config=config: [config]
                started = time.monotonic()
                try:
                    counted, late = await facet_class.facet_results(one)
                except sqlite3.OperationalError as ex:
                    ran_out = time.monotonic() - started >= self.ds.setting("facet_time_limit_ms") / 1000
                    if not (ran_out and str(ex).startswith(VEC0_INTERRUPTED)):
                        raise
                    counted, late = [], [config["config"].get("column") or config["config"]["simple"]]
                results += counted
                timed_out += late
            return results, timed_out

    Sampled.__name__ = Sampled.__qualname__ = facet_class.__name__
    return Sampled


SAMPLED = {facet_class: _sampled(facet_class) for facet_class in (ColumnFacet, DateFacet, ArrayFacet)}


def sampled(facet_classes):
    """`facet_classes` with Datasette's own replaced by ones that suggest from a brain table's first rows."""
    return [SAMPLED.get(facet_class, facet_class) for facet_class in facet_classes]
