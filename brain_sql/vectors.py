"""The vec0 table: its filter columns, int8 and bit quantisation, and writing
vectors for memories.

Every recall filter acts inside the KNN, so each filtered column of a memory is
mirrored into vec_knowledge as a vec0 metadata column, computed from the
knowledge row by the same SQL expression everywhere (VEC_METADATA).
"""

import calendar
import itertools
import json
import re
import time

import numpy as np

from .embed import embed
from .errors import BrainError
from .fields import NEVER

# name -> (vec0 type, value computed from a knowledge row called {row}). Times are
# Unix seconds: vec0 compares integers far faster than text.
NEVER_EXPIRES_EPOCH = calendar.timegm(time.strptime(NEVER, "%Y-%m-%d %H:%M:%S"))  # 253402300799
# where vec0 keeps a vector: the order it reads a table in without a KNN constraint;
# check names its index so when it is missing (it may be named otherwise)
PLACE_COLUMNS = ["chunk_id", "chunk_offset"]
PLACES_INDEX = "vec_knowledge_rowids_place"
ALWAYS_VALID_EPOCH = -62135596800  # 0001-01-01 00:00:00 UTC: a memory without valid_from
VEC_METADATA = {
    "class": ("text", "{row}.class"),
    "scope": ("text", "{row}.scope"),
    "source": ("text", "coalesce({row}.source, '')"),
    "domain": ("text", "coalesce({row}.domain, 'global')"),
    "created_at": ("integer", "coalesce(unixepoch({row}.created_at), 0)"),
    "observed_at": ("integer", "coalesce(unixepoch({row}.observed_at), unixepoch({row}.created_at), 0)"),
    "expires_at": ("integer", f"coalesce(unixepoch({{row}}.expires_at), {NEVER_EXPIRES_EPOCH})"),
    "relevance_tier": ("integer", "{row}.relevance_tier"),
    "flagged": ("integer", "{row}.flagged"),
    # validity in time: from valid_from, until valid_to or until a newer memory
    # superseded it (superseded_at), whichever is first
    "valid_from": ("integer", f"coalesce(unixepoch({{row}}.valid_from), {ALWAYS_VALID_EPOCH})"),
    "valid_until": (
        "integer",
        f"min(coalesce(unixepoch({{row}}.valid_to), {NEVER_EXPIRES_EPOCH}), "
        f"coalesce(unixepoch({{row}}.superseded_at), {NEVER_EXPIRES_EPOCH}))",
    ),
}
# the knowledge columns the filter columns are computed from, in order of first use
VEC_SOURCE_COLUMNS = tuple(
    dict.fromkeys(
        column for _, expression in VEC_METADATA.values() for column in re.findall(r"\{row\}\.(\w+)", expression)
    )
)


def vector_rows(conn, select, ids, params=()):
    """(knowledge_id, *`select`) of the vec_knowledge rows of `ids`, read one key at
    a time: vec0 finds a row by its key at once, but reads every row for a
    `knowledge_id in (...)`. `params` fill `select`'s placeholders."""
    rows = []
    for knowledge_id in ids:
        rows += conn.execute(
            f"select knowledge_id, {select} from vec_knowledge where knowledge_id = ?", [*params, knowledge_id]
        ).fetchall()
    return rows


def vec_metadata_values(row):
    """SQL expressions for the vec_knowledge metadata columns of knowledge row `row`."""
    return ", ".join(expression.format(row=row) for _, expression in VEC_METADATA.values())


def create_vector_table(conn, dimension, table="vec_knowledge"):
    """(Re)create vec_knowledge (or `table`, laid out as it is) for vectors of `dimension`; it starts empty."""
    conn.execute(f"DROP TABLE IF EXISTS [{table}]")
    metadata = ",\n  ".join(f"{name} {kind}" for name, (kind, _) in VEC_METADATA.items())
    conn.execute(
        f"""CREATE VIRTUAL TABLE [{table}] USING vec0(
          knowledge_id INTEGER PRIMARY KEY,
          embedding_int8 INT8[{dimension}] distance_metric=cosine,
          embedding_bit BIT[{dimension}],
          {metadata}
        )"""
    )
    index_vector_places(conn, table)


def index_vector_places(conn, table="vec_knowledge"):
    """Index where vec0 keeps each vector of `table` (its rowids table's chunk and
    offset), unless one does already or the table is gone; whether it made one.
    vec0 reads a table without a KNN constraint (a plain select, Datasette's page
    of the table) in that order, and without the index sorts every row before the
    first: 0.6 s at a million, past the page's time limit. A rename keeps an index's
    name (a reindex renames its staged table vec_knowledge), so the name is the
    first one free."""
    rowids = f"{table}_rowids"
    if places_index(conn, table) or not conn.execute("select 1 from pragma_table_info(?)", [rowids]).fetchone():
        return False
    taken = {name.lower() for (name,) in conn.execute("select name from sqlite_master")}  # one namespace
    name = next(
        f"{rowids}_place{n or ''}" for n in itertools.count() if f"{rowids}_place{n or ''}".lower() not in taken
    )
    conn.execute(f"CREATE INDEX [{name}] ON [{rowids}]({', '.join(PLACE_COLUMNS)})")
    return True


def places_index(conn, table="vec_knowledge"):
    """The name of the index_vector_places index of `table` (one on its columns, of
    every row), or None without one."""
    rowids = f"{table}_rowids"
    for (name,) in conn.execute("select name from pragma_index_list(?) where not partial", [rowids]).fetchall():
        if [c for (c,) in conn.execute("select name from pragma_index_info(?)", [name])] == PLACE_COLUMNS:
            return name
    return None


def vector_dimension(conn):
    """The dimension vec_knowledge was made for (its vectors'), or None without one."""
    row = conn.execute("select sql from sqlite_master where name = 'vec_knowledge'").fetchone()
    return dimension_of(row[0] if row else None)


def dimension_of(sql):
    """The dimension in vec_knowledge's CREATE statement `sql`, or None."""
    found = re.search(r"embedding_int8\s+INT8\[(\d+)\]", sql or "", re.I)
    return int(found.group(1)) if found else None


def rebuild_vector_table(conn, dimension):
    """Recreate vec_knowledge with the filter columns VEC_METADATA names now,
    keeping every stored vector (nothing is embedded again); False when it has
    them already."""
    present = {column[0] for column in conn.execute("select * from vec_knowledge limit 0").description}
    if set(VEC_METADATA) <= present:
        return False
    conn.execute(
        "CREATE TEMP TABLE brain_vectors_kept AS SELECT knowledge_id, embedding_int8, embedding_bit FROM vec_knowledge "
        "ORDER BY knowledge_id"
    )
    create_vector_table(conn, dimension)
    # no ORDER BY here: SQLite's sorter would drop the vectors' int8 and bit subtypes
    conn.execute(
        "insert into vec_knowledge select v.knowledge_id, vec_int8(v.embedding_int8), vec_bit(v.embedding_bit), "
        f"{vec_metadata_values('k')} from temp.brain_vectors_kept v join knowledge k on k.id = v.knowledge_id"
    )
    conn.execute("DROP TABLE temp.brain_vectors_kept")
    return True


def quantize_int8(vectors):
    """int8 rows scaled so each row's largest component is ±127.

    Cosine distance ignores a row's scale, so this keeps far more precision than
    mapping [-1, 1] to int8: a unit vector of 256 dimensions has components near
    ±0.06, which a fixed [-1, 1] scale would round to a handful of levels.
    """
    peak = np.abs(vectors).max(axis=1, keepdims=True)
    scale = np.divide(127.0, peak, out=np.zeros_like(peak), where=peak > 0)
    return np.rint(vectors * scale).astype(np.int8)


def storage_vectors(texts, model_id):
    """(int8 bytes, bit bytes) per text, None for a text with no known token."""
    if not texts:
        return []
    vectors = embed(texts, model_id)
    quantized = quantize_int8(vectors)
    bits = np.packbits(vectors > 0, axis=1, bitorder="little")
    zero = ~vectors.any(axis=1)
    return [None if z else (q.tobytes(), b.tobytes()) for q, b, z in zip(quantized, bits, zero)]


def insert_vectors(conn, rows, table="vec_knowledge"):
    """rows: (knowledge_id, int8 bytes, bit bytes) into vec_knowledge (or `table`);
    filter columns copied from knowledge."""
    conn.executemany(
        f"insert into [{table}] select ?, vec_int8(?), vec_bit(?), "
        f"{vec_metadata_values('k')} from knowledge k where k.id = ?",
        [(kid, q, b, kid) for kid, q, b in rows],
    )


def stored_vector(conn, content_hash, model_id):
    """(int8, bit) of a stored chunk with the same text and model, or None."""
    row = conn.execute(
        "select v.embedding_int8, v.embedding_bit from knowledge k "
        "join vec_knowledge v on v.knowledge_id = k.id "
        "where k.content_hash = ? and k.embedding_model = ? limit 1",
        (content_hash, model_id),
    ).fetchone()
    return tuple(row) if row else None


def vectored(conn, content_hashes, model_id):
    """Those of `content_hashes` that a stored chunk of `model_id` has a vector for
    (stored_vector is not None), in one statement."""
    return {
        digest
        for (digest,) in conn.execute(
            "select distinct k.content_hash from knowledge k join vec_knowledge v on v.knowledge_id = k.id "
            "where k.content_hash in (select value from json_each(?)) and k.embedding_model = ?",
            (json.dumps(list(content_hashes)), model_id),
        )
    }


def embedded_text(title, heading_path, content, context=None):
    """The text a chunk is embedded (and content-hashed) as: its context too, so
    the dense leg, like the lexical one, finds a turn by what surrounds it."""
    return "\n".join(p for p in (title, heading_path, content, context) if p)


EMBEDDED = ("title", "heading_path", "content", "context")  # the columns a chunk's vector is made from


def backfill_vectors(conn, model_id, batch=512):
    """Embed every knowledge row that has no vector yet; returns how many were added."""
    missing = conn.execute(
        f"select id, {', '.join(EMBEDDED)} from knowledge "
        "where id not in (select knowledge_id from vec_knowledge) order by id"
    ).fetchall()
    wrong = next(
        (
            (row[0], column)
            for row in missing
            for column, value in zip(EMBEDDED, row[1:])
            if not isinstance(value, str | None)
        ),
        None,
    )
    if wrong:  # a BLOB or a number plain SQL wrote where text belongs: no text to embed
        raise BrainError(
            f"knowledge {wrong[0]} {wrong[1]} is no text: set it with SQL (to text, or NULL), then run this again"
        )
    added = 0
    for start in range(0, len(missing), batch):
        rows = missing[start : start + batch]
        vectors = storage_vectors([embedded_text(*row[1:]) for row in rows], model_id)
        insert_vectors(conn, [(r[0], *v) for r, v in zip(rows, vectors) if v])
        conn.execute(
            "update knowledge set embedding_model = ? where id in (select value from json_each(?))",
            [model_id, json.dumps([r[0] for r in rows])],
        )
        added += sum(1 for v in vectors if v)
    return added
