"""The brain_* SQL functions, registered on any sqlite3 connection, and the SQL
recall they make possible (recall.sql, whose filter clauses are written from
filters.CLAUSES, so the SQL and the API filter alike)."""

import functools
import inspect
import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path

from . import bm25, claims, config, dialogue, graph, lexical, querydoc, values
from .connection import in_statement, sqlite3
from .embed import embed
from .errors import InputError, ModelError, QueryError
from .fields import loads_json, normalize_fields, parse_datetime, parse_time, query_text, utcnow
from .filters import Filters, column_sql, template
from .fusion import LEGS, boosted, graph_leads, leg_weights, method, rrf
from .schema import is_brain, recorded_model
from .vectors import quantize_int8
from .wording import shown

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


# What each brain_* function takes, in order, and the most characters (bytes, for a
# BLOB) a value of each may hold: what its HTTP route allows, so that no SQL call
# does more work than a request may ask for. Datasette's SQL time limit stops a query
# only between SQLite's steps, never inside a Python function: a call is bounded by
# its input, or by nothing.
QUERY = config.MAX_QUERY_CHARS  # a query's text, or a claim: as recall and /-/verify take them
TEXT = config.MAX_CONTENT_BYTES  # a text (a memory's content at most), or JSON (filters, passages, fused)
SHORT = 500  # a name, a format, a date or a number, as QueryDoc's text fields are bounded
MAX_ITEMS = 10_000  # the items of a JSON list (brain_ppr's passages, brain_dialogue's fused)
PARAMETERS = {
    "brain_embed": (("text", TEXT), ("format", SHORT)),
    "brain_verify": (("claim", QUERY), ("text", TEXT)),
    "brain_fts_query": (("text", QUERY), ("filters", TEXT)),
    "brain_query_text": (("q", QUERY),),
    "brain_fts": (("q", QUERY), ("filters", TEXT)),
    "brain_leg_weight": (("leg", SHORT), ("q", QUERY), ("filters", TEXT)),
    "brain_fusion": (("q", QUERY), ("filters", TEXT)),
    "brain_ppr": (("q", QUERY), ("passages", TEXT), ("filters", TEXT)),
    "brain_dialogue": (("q", QUERY), ("fused", TEXT), ("filters", TEXT)),
    "brain_rrf": (("rank", SHORT), ("weight", SHORT), ("k", SHORT)),
    "brain_boost": (("score", SHORT), ("observed_at", SHORT), ("confidence", SHORT), ("now", SHORT)),
    "brain_k": (("k", SHORT),),
    "brain_setting": (("name", SHORT),),
    "brain_filters": (("filters", TEXT),),
    "brain_allowed": (("column", SHORT), ("value", TEXT)),
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
    values = json_argument("filters", request) if request else {}
    if not isinstance(values, dict):
        raise InputError('filters must be a JSON object of QueryDoc fields, such as {"scope": "/acme"}')
    others = sorted(set(values) - set(FILTER_FIELDS))
    if others:
        raise InputError(f"filters take {', '.join(FILTER_FIELDS)}; not {', '.join(others)}")
    return Filters.from_querydoc(querydoc.from_strings(values, need_q=False))


def json_argument(name, text):
    """A function's argument that holds JSON, read; an InputError naming it when it does not."""
    if not isinstance(text, str):
        raise InputError(f"{name} must be JSON text, not {shown(text)}")
    try:
        return loads_json(text)
    except (ValueError, RecursionError):
        raise InputError(f"{name} is not JSON: {shown(text)}") from None


def number_argument(name, value, low, low_included=True):
    """A function's numeric argument, finite and at least (or above) `low`."""
    if isinstance(value, (int, float)) and math.isfinite(value) and (value >= low if low_included else value > low):
        return value
    bound = f"{'at least' if low_included else 'greater than'} {low}"
    raise InputError(f"{name} must be a number {bound}, not {shown(value)}")


def text_argument(name, value):
    """A function's text argument (NULL: none)."""
    if value is not None and not isinstance(value, str):
        raise InputError(f"{name} must be text, not {shown(value)}")
    return value


def _sql_function(conn, name, function):
    """`function` as SQLite calls it. SQLite says only "user-defined function raised
    exception" whatever Python raised (sqlite3 gives a function no way to set the
    message), so an InputError is marked as the caller's (`brain_sql_function`, and
    its message starts with the function's name) for the traceback hooks below;
    anything else raised on a database that is not a brain is that, said as such."""

    parameters = PARAMETERS[name]
    required = sum(p.default is p.empty for p in inspect.signature(function).parameters.values())

    @functools.wraps(function)
    def call(*args):
        try:
            _check_arguments(name, parameters, required, args)
            with in_statement(conn):
                return function(*args)
        except (InputError, ModelError) as ex:  # a model not installed here: what to run, one line
            _failed()
            _mark(ex, name)
            raise
        except Exception as ex:
            if _interrupted(conn):  # a time limit, not the brain: said so in the one line logged
                global _interruptions
                _interruptions += 1
                error = sqlite3.OperationalError("interrupted: a time limit stopped the statement calling it")
                _mark(error, name)
                raise error from ex
            _failed()
            if _not_a_brain(conn):
                error = InputError(f"{name} needs a brain, and this database is not one (it has no brain_meta model)")
                _mark(error, name)
                raise error from ex
            # values plain SQL wrote of the wrong kind (a BLOB title): SQLite tells the caller
            # only that the function failed, so the one line logged says to run check (a full
            # scan, so only for the failures such values cause: not an interrupt, a busy lock)
            fault = values.fault(conn) if isinstance(ex, values.VALUE_FAILURES) else None
            if fault is not None:
                _mark(fault, name)
                raise fault from ex
            raise

    return call


def _check_arguments(name, parameters, required, args):
    """Refuse a call with too few or too many arguments, or one holding more than
    its parameter's bound (PARAMETERS), before any work is done on it."""
    if not required <= len(args) <= len(parameters):
        names = ", ".join(parameter for parameter, _ in parameters)
        counts = f"{required} to {len(parameters)}" if required < len(parameters) else str(required)
        raise InputError(f"{name} takes {counts} arguments ({names}), not {len(args)}")
    for (parameter, limit), value in zip(parameters, args):
        if isinstance(value, (str, bytes)) and len(value) > limit:
            unit = "characters" if isinstance(value, str) else "bytes"
            raise InputError(f"{parameter} is {len(value):,} {unit}; the limit is {limit:,}")


def _mark(error, name):
    message = str(error)
    if not message.startswith(name):
        error.args = (f"{name}: {message}",)
    error.brain_sql_function = name


_interruptions = 0  # brain_* function calls a time limit stopped in this process (interruptions)
_failures = 0  # and those that failed otherwise (failures)


def interruptions() -> int:
    """How many brain_* function calls a time limit (an interrupt) has stopped in this
    process so far: SQLite tells the statement calling one only that it failed, so a
    server tells a time limit from a brain that needs check by this count's change."""
    return _interruptions


def failures() -> int:
    """How many brain_* function calls have failed in this process otherwise than cut
    by a time limit: a server tells a brain that could not answer (its log line says
    why) from SQL that failed elsewhere by this count's change."""
    return _failures


def _failed():
    global _failures
    _failures += 1


_STEPS = "with recursive n(i) as (select 1 union all select i + 1 from n where i < 1000) select count(*) from n"


def _interrupted(conn):
    """Whether `conn` is interrupted (by sqlite3_interrupt, or a progress handler as
    Datasette's SQL time limit is): a function's own queries then fail in ways that
    name something else, and the one line logged said the brain was no brain (review
    106). Datasette's handler is called every 1,000 steps of SQLite's: a statement of a
    few thousand meets it. (SQLite tells the calling statement only that the function
    failed: sqlite3 gives a function no way to fail as interrupted.)"""
    try:
        conn.execute(_STEPS).fetchone()
    except sqlite3.OperationalError as ex:
        return "interrupted" in str(ex)
    return False


def _not_a_brain(conn):
    try:
        return not is_brain(conn)
    except sqlite3.DatabaseError:
        return True


def _quiet(error):
    """Whether `error` is a caller's input error raised in a brain_* function: then
    its message is written, one line, on stderr instead of a traceback."""
    if getattr(error, "brain_sql_function", None):
        sys.stderr.write(f"brain_sql: {error}\n")
        return True
    return False


def say_input_errors() -> None:
    """Turn sqlite3's callback tracebacks on, so that a brain_* function refusing a
    caller's argument says why on stderr, in one line (quiet_input_errors), where
    SQLite says only "user-defined function raised exception"; any other exception
    in a function prints its traceback."""
    sqlite3.enable_callback_tracebacks(True)


def quiet_input_errors():
    """With sqlite3's callback tracebacks on (Datasette turns them on), a brain_*
    function refusing a caller's bad argument logs one line, not a traceback; every
    other exception keeps its traceback. sqlite3 prints them through
    sys.unraisablehook, pysqlite3 through sys.excepthook: each is wrapped once."""
    if not getattr(sys.excepthook, "brain_sql_quiet", False):
        excepthook = sys.excepthook

        def quiet_excepthook(kind, value, traceback):
            if not _quiet(value):
                excepthook(kind, value, traceback)

        quiet_excepthook.brain_sql_quiet = True
        sys.excepthook = quiet_excepthook
    if not getattr(sys.unraisablehook, "brain_sql_quiet", False):
        unraisablehook = sys.unraisablehook

        def quiet_unraisablehook(unraisable):
            if not _quiet(unraisable.exc_value):
                unraisablehook(unraisable)

        quiet_unraisablehook.brain_sql_quiet = True
        sys.unraisablehook = quiet_unraisablehook


def _create(conn, name, arguments, function, **options):
    conn.create_function(name, arguments, _sql_function(conn, name, function), **options)


def register_functions(conn, model_id=None):
    """Register the brain_* functions on `conn`.

    brain_embed uses `model_id`, or else the model the database records at the time
    of each call, so a server notices `reindex` without a restart; the model
    itself is loaded on the first call, not here.
    """

    quiet_input_errors()
    _register_search(conn, model_id)
    _create(conn, "brain_query_text", 1, brain_query_text, deterministic=True)
    _register_filters(conn)


def brain_query_text(text):
    """brain_query_text(q): q as recall embeds it (fields.query_text): composed,
    without invisible marks, each run of spaces one space, without its exclusions
    (lexical.asked: -word and -"phrase" are the lexical leg's alone)."""
    return None if text is None else lexical.asked(query_argument(text))


def query_argument(value, name="q"):
    """A function's query as recall reads it (fields.query_text), as every function
    reading one does, so the SQL recall reads what the API reads: NULL is no query, a
    number its digits; a BLOB is refused (its Python form is no query)."""
    if isinstance(value, bytes):
        raise InputError(f"{name} must be text, not a BLOB")
    text = query_text("" if value is None else str(value))
    if len(text) > QUERY:  # composed, a text may grow (U+0958 is two characters): as querydoc bounds it
        raise InputError(f"{name} is {len(text):,} characters composed; the limit is {QUERY:,}")
    return text


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
        return json.dumps(claims.verify(text_argument("claim", claim), text_argument("text", text)))

    def term_stats(filters):
        return bm25.for_request(conn, request_filters(filters))

    def brain_fts_query(text, filters=None):
        """brain_fts_query(text [, filters]): a safe FTS5 MATCH expression; in a brain,
        words most chunks reachable under `filters` contain are left out while
        rarer ones remain."""
        text = query_argument(text, "text")
        try:
            terms = term_stats(filters)
            common, rows = terms.common_words(text), terms.documents
        except sqlite3.OperationalError:  # not a brain: no term frequencies
            common, rows = frozenset(), 0
        return lexical.fts_query(text, common, rows)

    def brain_fts(text, filters=None):
        """brain_fts(q [, filters]): the lexical leg as a JSON array of {id, bm25},
        best first: FTS5's bm25 with its statistics taken over the rows `filters`
        admit, so rows the request cannot see change no score."""
        terms = term_stats(filters)
        text = query_argument(text)
        hits = bm25.search(terms, lexical.plan(text, terms.common_words(text), terms.documents))
        return json.dumps([{"id": item, "bm25": score} for item, score in hits])

    def brain_leg_weight(leg, text, filters=None):
        """brain_leg_weight(leg, q [, filters]): a leg's fusion weight for query q, in
        the fusion brain_fusion names (filters: a JSON object of QueryDoc filter
        fields)."""
        if leg not in LEGS:
            raise InputError(f"brain_leg_weight: leg must be one of {', '.join(LEGS)}")
        return leg_weights(_leads(conn, text, filters), model_id or recorded_model(conn)).get(leg, 0.0)

    def brain_fusion(text, filters=None):
        """brain_fusion(q [, filters]): how recall fuses the legs for query q, 'rrf'
        when the graph walk leads (q names entities that memories visible under
        `filters` tie into the graph, and their words hold enough of q), else
        'convex'."""
        return method(_leads(conn, text, filters))

    def brain_ppr(text, passages=None, filters=None):
        """brain_ppr(q [, passages [, filters]]): the graph leg as a JSON array of
        {id, score}, best first. passages: JSON [{leg, id, score}] from the other
        legs, best first per leg; filters: a JSON object of QueryDoc filter fields."""
        seeds = _passages(json_argument("passages", passages) if passages else [])
        hits, _ = graph.walk(conn, query_argument(text), seeds, request_filters(filters))
        return json.dumps([{"id": item, "score": score} for item, score in hits])

    def brain_dialogue(text, fused, filters=None):
        """brain_dialogue(q, fused [, filters]): fused is JSON [[id, score], ...] best
        first; returns JSON [{id, score}] best first as the API ranks them: a
        conversation turn raised when q names its speaker, when q asks when and it
        states a time, and by the best of its session's candidates `filters` admit
        (dialogue.py)."""
        pairs = _fused(json_argument("fused", fused) if fused else [])
        return dialogue.rescored_json(conn, query_argument(text), pairs, request_filters(filters))

    _create(conn, "brain_dialogue", -1, brain_dialogue)
    _create(conn, "brain_leg_weight", -1, brain_leg_weight)
    _create(conn, "brain_fusion", -1, brain_fusion)
    _create(conn, "brain_ppr", -1, brain_ppr)
    _create(conn, "brain_embed", 1, brain_embed, deterministic=True)
    _create(conn, "brain_embed", 2, brain_embed, deterministic=True)
    _create(conn, "brain_verify", 2, brain_verify, deterministic=True)
    _create(conn, "brain_fts_query", -1, brain_fts_query)
    _create(conn, "brain_fts", -1, brain_fts)


def _count(name, items):
    if len(items) > MAX_ITEMS:
        raise InputError(f"{name} holds {len(items):,} items; the limit is {MAX_ITEMS:,}")


def _leads(conn, text, filters):
    """Whether the graph walk leads the fusion for q (fusion.graph_leads): q names
    entities that memories visible under `filters` tie into the graph, and the
    words naming them hold enough of q."""
    text = query_argument(text)
    named = graph.named_in(conn, text, request_filters(filters))
    if not named.ids:
        return False
    terms = bm25.for_request(conn, request_filters(filters))
    return graph_leads(terms.share(text, lexical.indexed_terms(named.words)))


def _fused(fused):
    """brain_dialogue's fused list, [(id, score)], from its JSON [[id, score], ...]."""
    shape = "fused must be a JSON array of [id, score] pairs (id a whole number, score a finite number)"
    if not isinstance(fused, list):
        raise InputError(shape)
    _count("fused", fused)
    pairs = []
    for pair in fused:
        ok = isinstance(pair, list) and len(pair) == 2
        item, score = pair if ok else (None, None)
        if not ok or not isinstance(item, int) or isinstance(item, bool) or isinstance(score, bool):
            raise InputError(f"{shape}, not {shown(pair)}")
        if not isinstance(score, (int, float)) or not math.isfinite(score):
            raise InputError(f"{shape}, not {shown(pair)}")
        pairs.append((item, score))
    return pairs


def _passages(passages):
    """brain_ppr's passages, [(leg, id, score)], from its JSON [{leg, id, score}]."""
    shape = 'passages must be a JSON array of {"leg", "id", "score"} (id a whole number, score a number or null)'
    if not isinstance(passages, list):
        raise InputError(shape)
    _count("passages", passages)
    seeds = []
    for passage in passages:
        if not isinstance(passage, dict) or set(passage) - {"leg", "id", "score"}:
            raise InputError(f"{shape}, not {shown(passage)}")
        leg, item, score = passage.get("leg"), passage.get("id"), passage.get("score")
        if not isinstance(leg, str) or not isinstance(item, int) or isinstance(item, bool):
            raise InputError(f"{shape}, not {shown(passage)}")
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
            raise InputError(f"{shape}, not {shown(passage)}")
        seeds.append((leg, item, score))
    return seeds


def _register_filters(conn):
    """The request's functions: its filters, k, settings, RRF terms and the boost."""

    def values_of(column):
        return [row[0] for row in conn.execute(f"select distinct {column_sql(column, 'knowledge')} from knowledge")]

    def brain_rrf(rank, weight=1.0, k=config.RRF_K):
        """brain_rrf(rank [, weight [, k]]): one leg's RRF term, weight / (k + rank):
        rank 1-based, weight at least 0 (a leg's), k above 0 (recall's is 60)."""
        if rank is None:
            return None
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise InputError(f"rank must be a whole number from 1 (the best), not {shown(rank)}")
        return rrf(rank, number_argument("k", k, 0, low_included=False), number_argument("weight", weight, 0))

    def brain_boost(score, observed_at, confidence, now=None):
        """brain_boost(score, observed_at, confidence [, now]): a fused score nudged by
        recency and confidence (at most ±0.5%: it breaks near-ties), as recall does;
        a date that is none, or a confidence outside 0 to 1, is refused as ingest refuses it."""
        if score is None:
            return None
        score = number_argument("score", score, -math.inf)
        moment = parse_datetime(now, "now") if now else utcnow()
        try:
            observed = parse_time(observed_at, name="observed_at") if observed_at else None
            if confidence is not None:
                confidence = normalize_fields({"confidence": confidence}).get("confidence")
        except InputError as ex:  # the recall query passes knowledge's own: a value plain SQL wrote?
            raise InputError(f"{ex} (a memory's own? run sqlite-utils brain check, which names such values)") from ex
        return boosted(score, observed, confidence, moment)

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

    _create(conn, "brain_rrf", -1, brain_rrf, deterministic=True)
    _create(conn, "brain_boost", -1, brain_boost)
    _create(conn, "brain_setting", 1, brain_setting, deterministic=True)
    _create(conn, "brain_k", 1, brain_k, deterministic=True)
    _create(conn, "brain_filters", 1, brain_filters)
    _create(conn, "brain_allowed", 2, brain_allowed)
