"""The public face of brain_sql: the operations the Datasette plugin, the
`sqlite-utils brain` commands and Python users need. datasette_brain imports
nothing else of brain_sql, so everything below this floor can change freely."""

import functools
import threading

from threadpoolctl import threadpool_limits

from . import browse, consistency, copies, evaluation, exporting, forgetting, hybrid, inventory, listing
from . import pipeline, replicas, review
from . import schema, values
from .browse import DECAY_BUCKETS, decay_bucket_sql, decay_counts_sql, decay_filter_sql, decayed_selection
from .browse import memory_content, page_numbers
from .claims import verify
from .config import CLASSES, DEFAULT_MODEL, ENTITY_PAGE_ROWS, EXPORTS_AT_ONCE, LIST_PAGE_ROWS, MAX_CONTENT_BYTES
from .config import MAX_EXTEND_DAYS, MAX_PAGE_ROWS
from .config import FOLLOW_INTERVAL_SECONDS, FOLLOW_STALL_SECONDS, REPLICA_SYNC_INTERVAL
from .config import MAX_QUERY_CHARS, busy_timeout_ms, configured_model, server_blas_threads
from .connection import faults_named, load_sqlite_vec, main_file, open_connection, sqlite3
from .copies import ReplicaNotReady, ensure_ready, is_copy
from .document import IngestError
from .embed import count_tokens, embed
from .errors import BrainBusy, BrainError, FieldError, ModelError, PruneRefused, QueryError, ReadOnlyBrain, WriteError
from .evaluation import load_qrels
from .extract import entity_links
from .listing import Listing, listing_from_strings, parse_listing
from .fields import loads_json, unencodable, whole_number
from .functions import RECALL_SQL, recall_params_error, register_functions
from .minilm import MODEL_ID as MINILM_MODEL
from .minilm import limit_threads as limit_model_threads
from .pipeline import IngestReport, discover
from .querydoc import QueryDoc, from_strings, parse
from .replicas import ReplicaError, follow, replicate
from .schema import derived_from_knowledge, info, migrate, pending_migrations
from .state import current as current_state
from .wording import counted, section, shown

__all__ = [
    "CLASSES", "DECAY_BUCKETS", "DEFAULT_MODEL", "ENTITY_PAGE_ROWS", "EXPORTS_AT_ONCE", "LIST_PAGE_ROWS",
    "MAX_CONTENT_BYTES", "MAX_EXTEND_DAYS",
    "MAX_PAGE_ROWS", "MINILM_MODEL", "MAX_QUERY_CHARS", "RECALL_SQL", "FOLLOW_INTERVAL_SECONDS", "FOLLOW_STALL_SECONDS",
    "REPLICA_SYNC_INTERVAL",
    "BrainBusy", "BrainError", "FieldError", "IngestError", "IngestReport", "Listing", "ModelError", "PruneRefused",
    "QueryDoc",
    "QueryError", "ReadOnlyBrain", "ReplicaError", "ReplicaNotReady", "WriteError",
    "check", "configured_model", "connect", "counted", "derived_from_knowledge", "decay_bucket_sql", "decay_counts_sql",
    "decay_filter_sql", "decayed", "decayed_selection",
    "decayed_facets", "archive", "examples", "extend_expiry", "flag", "restore",
    "discover", "embed_with_usage", "entity_links", "entities", "entity", "evaluate", "export", "forget", "info",
    "ingest", "is_brain", "listing_from_strings", "load_qrels", "loads_json", "memories", "memory", "migrate",
    "page_numbers", "parse_listing", "parse_querydoc", "pending_migrations", "prepare_connection", "querydoc_from_strings",
    "recall", "recall_params_error", "reindex", "remember", "serve_many", "ensure_ready", "follow", "is_copy", "replica_status", "replicate",
    "section", "shown", "stats", "unencodable", "verify", "verify_memory", "warm", "whole_number",
]  # fmt: skip


def prepare_connection(conn, model_id=None):
    """Load sqlite-vec and register the brain_* SQL functions on `conn`; on a brain,
    writers also wait as long for the write lock as brain_sql's own connections.

    `model_id` defaults to the model the database records (or the configured
    default for a database that is not a brain yet). A connection to a copy
    Litestream follows never writes it, and sees every change it is sent.
    """
    if copies.is_copy(main_file(conn)):
        copies.prepare_reader(conn)  # first: nothing is read before it
    load_sqlite_vec(conn)
    register_functions(conn, model_id)
    try:
        if schema.is_brain(conn):
            conn.execute(f"pragma busy_timeout = {busy_timeout_ms()}")
    except sqlite3.DatabaseError:  # damaged: whatever is done with it next says so
        pass


def connect(path, model_id=None, read_only=False):
    """Open a brain file for reading and writing (`read_only`: for reading only,
    changing nothing about the file), ready for every brain_* function."""
    conn = open_connection(path, read_only=read_only)
    prepare_connection(conn, model_id)
    return conn


def _faults_named(operation):
    """`operation`, with a damaged file, tables a tool rebuilt without their
    columns, or values of the wrong kind written with plain SQL (a failure they
    caused, or a BLOB read where text belongs), a BrainError that says to run
    check instead of SQLite's or Python's own error."""

    @functools.wraps(operation)
    def named(conn, *args, **kwargs):
        try:
            with faults_named():
                result = operation(conn, *args, **kwargs)
        except BrainError as ex:
            if type(ex) is BrainError and _outdated(conn):
                raise BrainError(
                    "this brain was written by an older datasette-brain and its schema is not migrated yet "
                    "(a server migrates a brain it may write when it starts): run sqlite-utils brain init DB"
                ) from ex
            if isinstance(ex.__cause__, sqlite3.DatabaseError):  # SQLite's own, on a BLOB that is no UTF-8 text, say
                _blame_values(conn, ex)
            raise
        except (TypeError, ValueError, AttributeError) as ex:
            if not isinstance(ex, (QueryError, FieldError)):  # those are the caller's mistake
                _blame_values(conn, ex)
            raise  # a bug: as it is
        if values.holds_bytes(result):  # a BLOB read where text belongs
            _blame_values(conn)
        return result

    return named


def _blame_values(conn, cause=None):
    """Raise check's BrainError when the brain holds values of the wrong kind:
    what went wrong (`cause`) is theirs to answer for."""
    fault = values.fault(conn)
    if fault is not None:
        raise fault from cause


def _outdated(conn):
    """Whether `conn` holds a brain with migrations still to apply (False for a
    file that is no brain, or when even that cannot be read)."""
    try:
        return schema.is_brain(conn) and bool(pending_migrations(conn))
    except sqlite3.DatabaseError:
        return False


# the operations on a brain's rows
is_brain = _faults_named(schema.is_brain)
recall = _faults_named(hybrid.recall)
evaluate = _faults_named(evaluation.evaluate)
reindex = _faults_named(schema.reindex)
ingest = _faults_named(pipeline.ingest)
remember = _faults_named(pipeline.remember)
forget = _faults_named(forgetting.forget)
stats = _faults_named(inventory.stats)
check = _faults_named(consistency.check)
memory = _faults_named(browse.memory)
entity = _faults_named(browse.entity)
entities = _faults_named(browse.entities)
decayed = _faults_named(browse.decayed)
decayed_facets = _faults_named(browse.decayed_facets)
memories = _faults_named(listing.memories)
examples = _faults_named(browse.examples)
# decisions about decayed memories: one transaction each
extend_expiry = _faults_named(review.extend_expiry)
archive = _faults_named(review.archive)
restore = _faults_named(review.restore)
flag = _faults_named(review.flag)


def export(conn, progress=None):
    """Every memory of the brain on `conn`, a document a JSON line, in the record
    format ingest reads back (export.export), read in one transaction, ended when
    this generator is closed or done. A damaged or outdated file is a BrainError."""
    lines = exporting.export(conn, progress)
    try:
        while True:
            try:
                with faults_named():
                    line = next(lines)
            except StopIteration:
                return
            except BrainError as ex:
                if type(ex) is BrainError and _outdated(conn):
                    raise BrainError("this brain was written by an older datasette-brain and its schema is not "
                                     "migrated yet: run sqlite-utils brain init DB") from ex
                raise
            yield line
    finally:
        lines.close()


def parse_querydoc(raw):
    """A QueryDoc from a JSON object, or a QueryError naming the problem."""
    return parse(raw)


def querydoc_from_strings(values, comma_lists=True):
    """A QueryDoc from text values (query-string parameters, CLI options): each is
    read by its field's type; a QueryError names any problem and its `field`.
    Query strings may give lists comma-separated (`comma_lists`); repeatable CLI
    options give one item each."""
    return from_strings(values, comma_lists=comma_lists)


@_faults_named
def verify_memory(conn, claim, memory_id):
    """brain_verify's result for `claim` against a stored memory, or None when there
    is no such visible memory."""
    text = memory_content(conn, memory_id)
    return None if text is None else verify(claim, text)


def replica_status(path, conn=None):
    """What the replica at `path` follows, its last change applied and its lag
    (replicas.replica_status); None for a file that is no replica."""
    return replicas.replica_status(path, conn)


def embed_with_usage(texts, model_id):
    """(vectors, tokens): the texts' L2-normalised vectors and how many tokens they took."""
    return embed(texts, model_id), sum(count_tokens(texts, model_id))


def warm(path, migrate_it=True):
    """Load the brain's model and build its read state, side by side, then answer one
    recall (what a recall loads on first use: numpy's parts, say), so the first recall
    after a server starts is as fast as the rest; opens the file read-only, unless it
    has schema migrations to apply and `migrate_it` (a file served immutable is never
    written, nor is a replica: its primary migrates)."""
    conn = open_connection(path, read_only=True)
    try:
        if migrate_it and not is_copy(path) and is_brain(conn) and pending_migrations(conn):
            conn.close()
            # a brain an older version wrote: migrated before its first recall needs it
            conn = connect(path)
            migrate(conn)
        if is_brain(conn):
            found = info(conn)
            model = threading.Thread(target=embed, args=(["warm"], found["model"]), name="brain-warm-model")
            model.start()
            current_state(conn, found["dimension"])
            model.join()
            recall(conn, {"q": "warm"})
    finally:
        conn.close()


def serve_many():
    """Set the process up for serving recall to several clients at once: BLAS, and
    the onnxruntime of models loaded from now on, limited to `$BRAIN_BLAS_THREADS`
    threads (default 1) for the whole process."""
    threadpool_limits(limits=server_blas_threads(), user_api="blas")
    limit_model_threads(server_blas_threads())
