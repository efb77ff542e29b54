"""Datasette's facet suggestions on a brain's tables, from their first rows.

Datasette 0.65 tries every column of a table page for a column, a date and an
array facet, each query over all the rows with a 50 ms limit: on a million
memories each one runs out of time, one after another, and the knowledge
table's 40 columns cost seconds before the page answers. Datasette 1.0 considers
the first 1,000 rows; these classes do that for a brain's tables, the first by
key (every other table keeps Datasette's own).
"""

from datasette.facets import ArrayFacet, ColumnFacet, DateFacet
from datasette.utils import escape_sqlite

from . import links

SUGGEST_ROWS = 1_000  # the rows of a brain's table a facet suggestion considers, as Datasette 1.0


async def first_rows(facet):
    """SQL for the first SUGGEST_ROWS rows `facet` counts, in key order: without an
    order, SQLite may read them along the suggested column's index, its smallest
    values alone."""
    db = facet.ds.get_database(facet.database)
    if facet.table in await db.view_names():
        return f"select * from ({facet.sql}) limit {SUGGEST_ROWS}"
    order = ", ".join(escape_sqlite(key) for key in await db.primary_keys(facet.table)) or "rowid"
    return f"select * from ({facet.sql} order by {order} limit {SUGGEST_ROWS})"


def _sampled(facet_class):
    class Sampled(facet_class):
        async def suggest(self):
            if self.table is None or not links.is_brain(self.ds, self.database):
                return await super().suggest()
            first = facet_class(self.ds, self.request, self.database, sql=await first_rows(self), table=self.table,
                                params=self.params, metadata=self.metadata, row_count=self.row_count)  # fmt: skip
            return await facet_class.suggest(first)

    Sampled.__name__ = Sampled.__qualname__ = facet_class.__name__
    return Sampled


SAMPLED = {facet_class: _sampled(facet_class) for facet_class in (ColumnFacet, DateFacet, ArrayFacet)}


def sampled(facet_classes):
    """`facet_classes` with Datasette's own replaced by ones that suggest from a brain table's first rows."""
    return [SAMPLED.get(facet_class, facet_class) for facet_class in facet_classes]
