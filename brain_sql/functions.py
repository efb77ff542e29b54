"""The brain_* SQL functions, registered on any sqlite3 connection.

Together they make recall plain SQL: see recall.sql, the canned recall query.
"""

import json

from . import config, embed, lexical, verify
from .fields import scope_ancestors
from .schema import VEC_METADATA

EMBED_FORMATS = ("float32", "int8")
SETTINGS = {
    "candidates": config.RECALL_CANDIDATES,
    "rrf_k": config.RRF_K,
    "passage_seeds": config.PASSAGE_SEEDS,
    "fts_title_weight": config.FTS_COLUMN_WEIGHTS[0],
    "fts_content_weight": config.FTS_COLUMN_WEIGHTS[1],
}
FILTER_COLUMNS = ("scope", "class", "source", "domain")


def _split(value):
    """'a, b' -> ['a', 'b']; '' or NULL -> None (no filter)."""
    if value is None or not str(value).strip():
        return None
    return [part.strip() for part in str(value).split(",") if part.strip()]


def ppr_filters(raw):
    """QueryDoc filter fields from brain_ppr's JSON argument; lists may be comma strings."""
    filters = json.loads(raw) if raw else {}
    if not isinstance(filters, dict):
        raise ValueError("brain_ppr filters must be a JSON object of QueryDoc fields")
    filters = {k: v for k, v in filters.items() if v not in (None, "")}
    for name in ("classes", "sources"):
        if isinstance(filters.get(name), str):
            filters[name] = _split(filters[name])
    return filters


def register_functions(conn, model_id):
    """Register the brain_* functions on `conn`.

    brain_embed uses `model_id`, the model the database was built with; the
    model itself is loaded on the first call, not here.
    """

    def brain_embed(text, fmt="float32"):
        """brain_embed(text [, 'float32' | 'int8']): the text's L2-normalised vector as a
        BLOB; 'int8' gives the quantised form stored in vec_knowledge.embedding_int8
        (wrap it in vec_int8() to match against that column)."""
        if text is None:
            return None
        if fmt not in EMBED_FORMATS:
            raise ValueError(f"brain_embed format must be one of {EMBED_FORMATS}, not {fmt!r}")
        vectors = embed.embed([str(text)], model_id)
        if fmt == "int8":
            vectors = embed.quantize_int8(vectors)
        return vectors[0].tobytes()

    def brain_verify(claim, text):
        return json.dumps(verify.verify(claim, text))

    def brain_fts_query(text):
        """brain_fts_query(text): a safe FTS5 MATCH expression; in a brain, words most
        chunks contain are left out while rarer ones remain."""
        from .connection import sqlite3
        from .quality import common_words

        text = "" if text is None else str(text)
        try:
            common = common_words(conn, text)
        except sqlite3.OperationalError:  # not a brain: no term frequencies
            common = frozenset()
        return lexical.fts_query(text, common)

    def brain_rrf(rank, weight=1.0, k=config.RRF_K):
        """brain_rrf(rank [, weight [, k]]): one leg's RRF term, weight / (k + rank)."""
        from .fusion import rrf

        return None if rank is None else rrf(rank, k, weight)

    def brain_leg_weight(leg, text):
        """brain_leg_weight(leg, q): the configured fusion weight of a leg for query q
        (the graph leads when q names a known entity)."""
        from . import graph

        seeded = bool(graph.load(conn).seeds_in(text or ""))
        weights = config.LEG_WEIGHTS_WITH_ENTITIES if seeded else config.LEG_WEIGHTS_WITHOUT_ENTITIES
        if leg not in weights:
            raise ValueError(f"brain_leg_weight: leg must be one of {', '.join(weights)}")
        return weights[leg]

    def brain_setting(name):
        if name not in SETTINGS:
            raise ValueError(f"brain_setting: name must be one of {', '.join(SETTINGS)}")
        return SETTINGS[name]

    def brain_allowed(column, value):
        """brain_allowed(column, value): JSON list of the values a filter admits for
        scope / class / source / domain: a scope and its ancestors, a comma-separated
        list, or, when value is empty, every value the brain holds."""
        if column not in FILTER_COLUMNS:
            raise ValueError(f"brain_allowed: column must be one of {', '.join(FILTER_COLUMNS)}")
        values = _split(value)
        if values is None:
            expression = VEC_METADATA[column][1].format(row="knowledge")
            values = [row[0] for row in conn.execute(f"select distinct {expression} from knowledge")]
        elif column == "scope":
            values = scope_ancestors(values[0])
        return json.dumps(values)

    def brain_ppr(text, passages=None, filters=None):
        """brain_ppr(q [, passages [, filters]]): the graph leg as a JSON array of
        {id, score}, best first. passages: JSON [{leg, id, score}] from the other
        legs, best first per leg; filters: a JSON object of QueryDoc filter fields."""
        from . import graph
        from .querydoc import parse
        from .recall import build_filters

        doc = parse({"q": "filters only", **ppr_filters(filters)})  # q plays no part in filters
        seeds = [(p["leg"], p["id"], p["score"]) for p in json.loads(passages or "[]")]
        hits, _ = graph.walk(conn, text or "", seeds, build_filters(doc, None, None))
        return json.dumps([{"id": item, "score": score} for item, score in hits])

    conn.create_function("brain_rrf", -1, brain_rrf, deterministic=True)
    conn.create_function("brain_leg_weight", 2, brain_leg_weight)
    conn.create_function("brain_setting", 1, brain_setting, deterministic=True)
    conn.create_function("brain_allowed", 2, brain_allowed)
    conn.create_function("brain_ppr", -1, brain_ppr)
    conn.create_function("brain_embed", 1, brain_embed, deterministic=True)
    conn.create_function("brain_embed", 2, brain_embed, deterministic=True)
    conn.create_function("brain_verify", 2, brain_verify, deterministic=True)
    conn.create_function("brain_fts_query", 1, brain_fts_query)
