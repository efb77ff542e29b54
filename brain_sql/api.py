"""The public face of brain_sql: what Python users, the Datasette plugin and the
`sqlite-utils brain` commands do with a brain, each name in docs/python.md and
annotated (a type checker holds them to it: tests/test_face.py). What only the
plugin needs is in brain_sql.for_plugin; datasette_brain imports nothing else of
brain_sql, so everything below this floor can change freely."""

import os
import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from . import (
    browse,
    consistency,
    copies,
    evaluation,
    exporting,
    forgetting,
    hybrid,
    inventory,
    listing,
    pipeline,
    replicas,
    review,
    schema,
)
from .browse import memory_content
from .claims import verify
from .config import CLASSES, DEFAULT_MODEL, busy_timeout_ms, server_blas_threads
from .connection import Connection, faults_named, load_sqlite_vec, main_file, open_connection, sqlite3, write_failures
from .copies import ReplicaNotReady, is_copy
from .document import IngestError
from .embed import count_tokens, embed, unread
from .errors import (
    BrainBusy,
    BrainError,
    FieldError,
    InputError,
    ModelError,
    ModelRefused,
    PruneRefused,
    QueryError,
    ReadOnlyBrain,
    WriteError,
    WrongKind,
)
from .evaluation import load_qrels
from .faults import NOT_MIGRATED, blame_values, named, outdated
from .functions import RECALL_SQL, register_functions
from .listing import FIELDS as LISTING_FIELDS
from .listing import Listing, listing_from_strings, parse_listing
from .minilm import MODEL_ID as MINILM_MODEL
from .minilm import limit_threads as limit_model_threads
from .pipeline import IngestReport, discover
from .querydoc import FIELDS as QUERY_FIELDS
from .querydoc import QueryDoc, from_strings, parse
from .replicas import ReplicaError, follow, replicate
from .schema import pending_migrations
from .state import current as current_state
from .state import prepare_for_writes
from .values import VALUE_FAILURES

# each name is in docs/python.md (tests/test_face.py compares); what only
# datasette_brain needs is in brain_sql.for_plugin
__all__ = [
    "CLASSES",
    "DEFAULT_MODEL",
    "LISTING_FIELDS",
    "MINILM_MODEL",
    "QUERY_FIELDS",
    "RECALL_SQL",
    "BrainBusy",
    "BrainError",
    "FieldError",
    "IngestError",
    "IngestReport",
    "Listing",
    "ModelError",
    "ModelRefused",
    "PruneRefused",
    "InputError",
    "QueryDoc",
    "QueryError",
    "ReadOnlyBrain",
    "ReplicaError",
    "ReplicaNotReady",
    "WriteError",
    "WrongKind",
    "archive",
    "check",
    "connect",
    "decayed",
    "discover",
    "embed_with_usage",
    "entities",
    "entity",
    "evaluate",
    "export",
    "extend_expiry",
    "flag",
    "follow",
    "forget",
    "info",
    "ingest",
    "is_brain",
    "listing_from_strings",
    "load_qrels",
    "memories",
    "memory",
    "migrate",
    "parse_listing",
    "parse_querydoc",
    "pending_migrations",
    "prepare_connection",
    "querydoc_from_strings",
    "recall",
    "reindex",
    "remember",
    "replica_status",
    "replicate",
    "restore",
    "serve_many",
    "stats",
    "verify",
    "verify_memory",
    "warm",
]


def prepare_connection(conn: Connection, model_id: str | None = None) -> None:
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


def connect(path: str | os.PathLike[str], model_id: str | None = None, read_only: bool = False) -> Connection:
    """Open a brain file for reading and writing (`read_only`: for reading only,
    changing nothing about the file), ready for every brain_* function."""
    conn = open_connection(path, read_only=read_only)
    prepare_connection(conn, model_id)
    return conn


# the operations on a brain's rows
is_brain = named(schema.is_brain)
info = named(schema.info)
recall = named(hybrid.recall)
evaluate = named(evaluation.evaluate)
reindex = named(schema.reindex)
ingest = named(pipeline.ingest)
remember = named(pipeline.remember)
forget = named(forgetting.forget)
stats = named(inventory.stats)
check = named(consistency.check)
memory = named(browse.memory)
entity = named(browse.entity)
entities = named(browse.entities)
decayed = named(browse.decayed)
memories = named(listing.memories)
# decisions about decayed memories: one transaction each
extend_expiry = named(review.extend_expiry)
archive = named(review.archive)
restore = named(review.restore)
flag = named(review.flag)


def export(
    conn: Connection, progress: Callable[[int, int], object] | None = None, snapshot: bool = True
) -> Generator[str, None, None]:
    """Every memory of the brain on `conn`, a document a JSON line, in the record
    format ingest reads back (export.export), read in one transaction, ended when
    this generator is closed or done (snapshot=False: a short one a page, for a
    reader that may be slow). A damaged or outdated file is a BrainError."""
    lines = exporting.export(conn, progress, snapshot)
    try:
        while True:
            try:
                with faults_named():
                    line = next(lines)
            except StopIteration:
                return
            except BrainError as ex:
                if type(ex) is BrainError and outdated(conn):
                    raise BrainError(f"{NOT_MIGRATED}: run sqlite-utils brain init DB") from ex
                raise
            except VALUE_FAILURES as ex:  # a BLOB where an id belongs, say: check names it
                blame_values(conn, ex)
                raise
            yield line
    finally:
        lines.close()


def parse_querydoc(raw: QueryDoc | dict[str, Any]) -> QueryDoc:
    """A QueryDoc from a JSON object, or a QueryError naming the problem."""
    return parse(raw)


def querydoc_from_strings(values: Mapping[str, str | Sequence[str] | None], comma_lists: bool = True) -> QueryDoc:
    """A QueryDoc from text values (query-string parameters, CLI options): each is
    read by its field's type; a QueryError names any problem and its `field`.
    Query strings may give lists comma-separated (`comma_lists`); repeatable CLI
    options give one item each."""
    return from_strings(values, comma_lists=comma_lists)


@named
def verify_memory(conn: Connection, claim: str, memory_id: int) -> dict[str, Any] | None:
    """brain_verify's result for `claim` against a stored memory, or None when there
    is no such visible memory."""
    text = memory_content(conn, memory_id)
    return None if text is None else verify(claim, text)


def replica_status(path: str | os.PathLike[str], conn: Connection | None = None) -> dict[str, Any] | None:
    """What the replica at `path` follows, its last change applied and its lag
    (replicas.replica_status); None for a file that is no replica."""
    return replicas.replica_status(path, conn)


def embed_with_usage(texts: Sequence[str], model_id: str) -> tuple[np.ndarray, int]:
    """(vectors, tokens): the texts' L2-normalised vectors and how many tokens they
    took. A text longer than the model reads is a FieldError naming it: its vector
    would be of its start alone, where an embeddings client expects the whole text's."""
    for at, why in unread(texts, model_id)[:1]:
        raise FieldError(f"input[{at}] is {why}: split the text, and embed each part")
    return embed(texts, model_id), sum(count_tokens(texts, model_id))


def migrate(conn: Connection, model_id: str | None = None) -> None:
    """Create or upgrade the brain schema on `conn` (schema.migrate), its SQLite failures
    named: a full or failing disk is a WriteError to try again (review 88: a traceback)."""
    with write_failures("the brain's schema was not made or migrated"):
        schema.migrate(conn, model_id)


def warm(path: str | os.PathLike[str], migrate_it: bool = True) -> None:
    """Load the brain's model and build its read state, side by side, then answer one
    recall (what a recall loads on first use: numpy's parts, say), so the first recall
    after a server starts is as fast as the rest; then, with `migrate_it`, ready the
    state for its first write (state.prepare_for_writes). Opens the file read-only,
    unless it has schema migrations to apply and `migrate_it` (a file served immutable
    is never written, nor is a replica: its primary migrates)."""
    conn = open_connection(path, read_only=True)
    try:
        if migrate_it and not is_copy(path) and is_brain(conn) and pending_migrations(conn):
            conn.close()
            # a brain an older version wrote: migrated before its first recall needs it
            conn = connect(path)
            migrate(conn)
        if is_brain(conn):
            found = info(conn)
            model = threading.Thread(target=_warm_model, args=(found["model"],), name="brain-warm-model")
            model.start()
            current_state(conn, found["dimension"])
            model.join()
            recall(conn, {"q": "warm"})
            if migrate_it:  # a file this server may see written: its first write then costs what the write holds
                prepare_for_writes(conn, found["dimension"])
    finally:
        conn.close()


def _warm_model(model_id: str) -> None:
    """Load the model, on a thread of its own: one that cannot be loaded (not
    installed here) is the first recall's to report, not the thread's to print."""
    try:
        embed(["warm"], model_id)
    except BrainError:
        pass


def serve_many() -> None:
    """Set the process up for serving recall to several clients at once: BLAS, and
    the onnxruntime of models loaded from now on, limited to `$BRAIN_BLAS_THREADS`
    threads (default 1) for the whole process."""
    threadpool_limits(limits=server_blas_threads(), user_api="blas")
    limit_model_threads(server_blas_threads())
