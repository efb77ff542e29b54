"""The brain_* SQL functions, registered on any sqlite3 connection, and the SQL
recall they make possible (recall.sql, whose filter clauses are written from
filters.CLAUSES, so the SQL and the API filter alike)."""

import json
from collections.abc import Mapping
from pathlib import Path

from . import bm25, claims, config, dialogue, graph, lexical, querydoc
from .connection import sqlite3
from .embed import embed
from .errors import InputError, QueryError
from .fields import parse_datetime, utcnow
from .filters import Filters, column_sql, template
from .fusion import LEGS, boosted, leg_weights, method, rrf
from .schema import recorded_model
from .vectors import quantize_int8

EMBED_FORMATS = ("float32", "int8")
SETTINGS = {
    "candidates": config.RECALL_CANDIDATES,
    "rrf_k": config.RRF_K,
    "passage_seeds": config.PASSAGE_SEEDS,
    "fts_title_weight": config.FTS_COLUMN_WEIGHTS[0],
    "fts_content_weight": config.FTS_COLUMN_WEIGHTS[1],
    "fts_context_weight": config.FTS_COLUMN_WEIGHTS[2],
}
# brain_allowed's columns: the QueryDoc field that sets each, and its bound
ALLOWED = {
    "scope": ("scope", "scopes"),
    "class": ("classes", "classes"),
    "source": ("sources", "sources"),
    "domain": ("domain", "domains"),
}


def _recall_sql():
    text = (Path(__file__).parent / "recall.sql").read_text()
    bounds = "(select bounds from visible)"
    return text.replace("{vector_filters}", template(bounds, indent=4))


# Hybrid recall as one plain SQL query (the canned query Datasette offers).
RECALL_SQL = _recall_sql()


FILTER_FIELDS = (
    "scope",
    "classes",
    "sources",
    "source",
    "domain",
    "since",
    "until",
    "as_of",
    "now",
    "min_relevance",
    "include_decayed",
)
# the parameters of RECALL_SQL
RECALL_PARAMS = ("q", "k", "scope", "classes", "sources", "domain", "since", "until", "as_of")


def recall_params_error(params: Mapping[str, str | None]) -> str | None:
    """What is wrong with RECALL_SQL's parameters ({name: text}), read as the JSON
    API reads them; None when nothing is. SQLite tells a brain_* function's error
    only as "user-defined function raised exception": this names it."""
    try:
        querydoc.from_strings({name: params.get(name) for name in RECALL_PARAMS}, need_q=False)
    except QueryError as ex:
        return str(ex)
    return None


def request_filters(request):
    """Filters from a JSON object of QueryDoc filter fields (values as text, lists
    as comma-separated text or JSON arrays), as the SQL functions receive them."""
    values = json.loads(request) if request else {}
    if not isinstance(values, dict):
        raise InputError('filters must be a JSON object of QueryDoc fields, such as {"scope": "/acme"}')
    others = sorted(set(values) - set(FILTER_FIELDS))
    if others:
        raise InputError(f"filters take {', '.join(FILTER_FIELDS)}; not {', '.join(others)}")
    return Filters.from_querydoc(querydoc.from_strings(values, need_q=False))


def register_functions(conn, model_id=None):
    """Register the brain_* functions on `conn`.

    brain_embed uses `model_id`, or else the model the database records at the time
    of each call, so a server notices `reindex` without a restart; the model
    itself is loaded on the first call, not here.
    """

    _register_search(conn, model_id)
    _register_filters(conn)


def _register_search(conn, model_id):
    """The legs' functions: embedding, full text, the graph walk and how they fuse."""

    def brain_embed(text, fmt="float32"):
        """brain_embed(text [, 'float32' | 'int8']): the text's L2-normalised vector as a
        BLOB; 'int8' gives the quantised form stored in vec_knowledge.embedding_int8
        (wrap it in vec_int8() to match against that column)."""
        if text is None:
            return None
        if fmt not in EMBED_FORMATS:
            raise InputError(f"brain_embed format must be one of {EMBED_FORMATS}, not {fmt!r}")
        vectors = embed([str(text)], model_id or recorded_model(conn))
        if fmt == "int8":
            vectors = quantize_int8(vectors)
        return vectors[0].tobytes()

    def brain_verify(claim, text):
        return json.dumps(claims.verify(claim, text))

    def term_stats(filters):
        return bm25.for_request(conn, request_filters(filters))

    def brain_fts_query(text, filters=None):
        """brain_fts_query(text [, filters]): a safe FTS5 MATCH expression; in a brain,
        words most chunks reachable under `filters` contain are left out while
        rarer ones remain."""
        text = "" if text is None else str(text)
        try:
            common = term_stats(filters).common_words(text)
        except sqlite3.OperationalError:  # not a brain: no term frequencies
            common = frozenset()
        return lexical.fts_query(text, common)

    def brain_fts(text, filters=None):
        """brain_fts(q [, filters]): the lexical leg as a JSON array of {id, bm25},
        best first: FTS5's bm25 with its statistics taken over the rows `filters`
        admit, so rows the request cannot see change no score."""
        terms = term_stats(filters)
        text = "" if text is None else str(text)
        hits = bm25.search(terms, lexical.plan(text, terms.common_words(text)))
        return json.dumps([{"id": item, "bm25": score} for item, score in hits])

    def brain_leg_weight(leg, text, filters=None):
        """brain_leg_weight(leg, q [, filters]): a leg's fusion weight for query q, in
        the fusion brain_fusion names: the graph leads when q names an entity that
        memories visible under `filters` (a JSON object of QueryDoc filter fields)
        tie into the graph."""
        if leg not in LEGS:
            raise InputError(f"brain_leg_weight: leg must be one of {', '.join(LEGS)}")
        named = graph.named_in(conn, text or "", request_filters(filters))
        return leg_weights(bool(named), model_id or recorded_model(conn)).get(leg, 0.0)

    def brain_fusion(text, filters=None):
        """brain_fusion(q [, filters]): how recall fuses the legs for query q, 'rrf'
        when q names an entity that memories visible under `filters` tie into the
        graph (the graph leads), else 'convex'."""
        return method(bool(graph.named_in(conn, text or "", request_filters(filters))))

    def brain_ppr(text, passages=None, filters=None):
        """brain_ppr(q [, passages [, filters]]): the graph leg as a JSON array of
        {id, score}, best first. passages: JSON [{leg, id, score}] from the other
        legs, best first per leg; filters: a JSON object of QueryDoc filter fields."""
        seeds = [(p["leg"], p["id"], p["score"]) for p in json.loads(passages or "[]")]
        hits, _ = graph.walk(conn, text or "", seeds, request_filters(filters))
        return json.dumps([{"id": item, "score": score} for item, score in hits])

    def brain_dialogue(text, fused, filters=None):
        """brain_dialogue(q, fused [, filters]): fused is JSON [[id, score], ...] best
        first; returns JSON [{id, score}] best first as the API ranks them: a
        conversation turn raised when q names its speaker and by its session's best
        (dialogue.py), the candidates' sessions' other turns `filters` admit added."""
        return dialogue.rescored_json(conn, text, fused, request_filters(filters))

    conn.create_function("brain_dialogue", -1, brain_dialogue)
    conn.create_function("brain_leg_weight", -1, brain_leg_weight)
    conn.create_function("brain_fusion", -1, brain_fusion)
    conn.create_function("brain_ppr", -1, brain_ppr)
    conn.create_function("brain_embed", 1, brain_embed, deterministic=True)
    conn.create_function("brain_embed", 2, brain_embed, deterministic=True)
    conn.create_function("brain_verify", 2, brain_verify, deterministic=True)
    conn.create_function("brain_fts_query", -1, brain_fts_query)
    conn.create_function("brain_fts", -1, brain_fts)


def _register_filters(conn):
    """The request's functions: its filters, k, settings, RRF terms and the boost."""

    def values_of(column):
        return [row[0] for row in conn.execute(f"select distinct {column_sql(column, 'knowledge')} from knowledge")]

    def brain_rrf(rank, weight=1.0, k=config.RRF_K):
        """brain_rrf(rank [, weight [, k]]): one leg's RRF term, weight / (k + rank)."""
        return None if rank is None else rrf(rank, k, weight)

    def brain_boost(score, observed_at, confidence, now=None):
        """brain_boost(score, observed_at, confidence [, now]): a fused score nudged by
        recency and confidence (at most ±0.5%: it breaks near-ties), as recall does."""
        if score is None:
            return None
        moment = parse_datetime(now, "now") if now else utcnow()
        return boosted(score, observed_at, confidence, moment)

    def brain_k(k):
        """brain_k(k): how many hits recall returns for `k` (text or a number; empty:
        the default), read as the JSON API reads it; an error for any other."""
        return querydoc.from_strings({"k": k}, need_q=False).k

    def brain_setting(name):
        if name not in SETTINGS:
            raise InputError(f"brain_setting: name must be one of {', '.join(SETTINGS)}")
        return SETTINGS[name]

    def brain_filters(filters):
        """brain_filters(filters): JSON object of every filter bound for a JSON object
        of QueryDoc filter fields, an unset one admitting everything; recall.sql
        filters each leg with it."""
        return json.dumps(request_filters(filters).every_bound(values_of))

    def brain_allowed(column, value):
        """brain_allowed(column, value): JSON list of the values a filter admits for
        scope / class / source / domain: a scope and its ancestors, a comma-separated
        list of classes or sources, a domain, or, when value is empty, every value
        the brain holds."""
        if column not in ALLOWED:
            raise InputError(f"brain_allowed: column must be one of {', '.join(ALLOWED)}")
        field, bound = ALLOWED[column]
        filters = Filters.from_querydoc(querydoc.from_strings({field: value}, need_q=False))
        return json.dumps(filters.every_bound(values_of)[bound])

    conn.create_function("brain_rrf", -1, brain_rrf, deterministic=True)
    conn.create_function("brain_boost", -1, brain_boost)
    conn.create_function("brain_setting", 1, brain_setting, deterministic=True)
    conn.create_function("brain_k", 1, brain_k, deterministic=True)
    conn.create_function("brain_filters", 1, brain_filters)
    conn.create_function("brain_allowed", 2, brain_allowed)
