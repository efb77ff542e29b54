"""brain_sql's second face: what datasette_brain (the Datasette plugin, its pages
and MCP tools, and the `sqlite-utils brain` commands) needs beyond the public one
in brain_sql.api — the bounds it holds requests to, the SQL of its decay facet,
the wording of its messages. Python users need none of it, and it may change
with the plugin; datasette_brain imports nothing of brain_sql but the two faces
(the import-linter contract in pyproject.toml)."""

import importlib
from typing import Any

from .config import (
    ENTITY_PAGE_ROWS,
    EXPORTS_AT_ONCE,
    FOLLOW_INTERVAL_SECONDS,
    FOLLOW_STALL_SECONDS,
    MAX_CONTENT_BYTES,
    MAX_EXTEND_DAYS,
    MAX_ID,
    MAX_PAGE_ROWS,
    MAX_QUERY_CHARS,
    REPLICA_SYNC_INTERVAL,
    busy_timeout_ms,
    check_settings,
    configured_model,
    export_idle_seconds,
)
from .wording import cited, counted, lines_of_file, section, shown

# the names that need the engines, loaded on first use (PEP 562): sqlite-utils imports
# the brain's commands for every command it runs, and they name only the light ones above
_MODULE_OF = {
    "page_numbers": ".browse",
    "DECAY_BUCKETS": ".browse",
    "decay_counts_sql": ".browse",
    "decay_filter_sql": ".browse",
    "decayed_selection": ".browse",
    "ensure_ready": ".copies",
    "served_model": ".values",
    "model_ready": ".hybrid",
    "damage_advice": ".copies",
    "is_copy": ".copies",
    "entity_links": ".extract",
    "read_input": ".document",
    "check_options": ".pipeline",
    "check_records": ".pipeline",
    "wall_time": ".fields",
    "loads_json": ".fields",
    "too_many_digits": ".fields",
    "said": ".fields",
    "unencodable": ".fields",
    "whole_number": ".fields",
    "read_digits": ".fields",
    "given_once": ".fields",
    "unknown_parameters": ".fields",
    "recall_params_error": ".functions",
    "interruptions": ".functions",
    "failures": ".functions",
    "say_input_errors": ".functions",
    "derived_from_knowledge": ".schema",
    "derived_from_every_table": ".schema",
    "stored_for": ".schema",
    "opening_fault": ".connection",
    "ENTITY_DERIVED_TABLES": ".schema",
    "brain_table": ".schema",
    "shown_by_added": ".schema",
    "own_name": ".schema",
    "EVERY_TABLE": ".lineage",
    "BRAIN_TABLES": ".schema",
    "GRAPH_TABLES": ".schema",
    "VIRTUAL_TABLES": ".schema",
}
# operations on a brain's rows, their faults named as the public face's are (brain_sql.faults)
_OPERATIONS = {
    "decayed_facets": ".browse",
    "examples": ".browse",
    "prepare_remember": ".pipeline",
    "write_remember": ".pipeline",
    "finish_remember": ".pipeline",
}

__all__ = [
    # bounds: request bodies and queries, pages of rows, exports at once and how long one waits on its client
    # ($BRAIN_EXPORT_IDLE_SECONDS), days a decayed memory is extended by, memory ids
    "MAX_CONTENT_BYTES",
    "MAX_QUERY_CHARS",
    "ENTITY_PAGE_ROWS",
    "MAX_PAGE_ROWS",
    "EXPORTS_AT_ONCE",
    "export_idle_seconds",
    # how long a write waits for its turn ($BRAIN_BUSY_TIMEOUT_MS): for the write lock, and in Datasette's write queue
    "busy_timeout_ms",
    "MAX_EXTEND_DAYS",
    "MAX_ID",
    "page_numbers",
    "whole_number",
    "read_digits",
    # the defaults of `brain replicate` and `brain follow`; the model a new brain gets ($BRAIN_MODEL)
    "REPLICA_SYNC_INTERVAL",
    "FOLLOW_INTERVAL_SECONDS",
    "FOLLOW_STALL_SECONDS",
    "configured_model",
    # every $BRAIN_ setting read once, as a server starts: a SettingError names one it cannot use
    "check_settings",
    # the decayed-memory page and the decay facet of Datasette's table pages
    "DECAY_BUCKETS",
    "decay_counts_sql",
    "decay_filter_sql",
    "decayed_selection",
    "decayed_facets",
    # the recall page's example queries: titles of the documents with the most sections
    "examples",
    # remember in two steps: the records read, checked and embedded on a read connection, then written
    # on the write connection, so that the write holds the write lock (Datasette's write thread) only to write
    "prepare_remember",
    "write_remember",
    # the edges its text's names make that the write's transaction left, in transactions of their own
    "finish_remember",
    # what `brain remember` reads from its file or stdin, bounded; options checked before a file is made
    "read_input",
    "check_options",
    "check_records",
    # why the recall canned query stopped, when its brain's model cannot be used
    "model_ready",
    # the recall page's window read from the query, on the asker's clock
    "wall_time",
    # permissions: the tables whoever may not read `knowledge` may not read either; a brain's
    # tables (any one denied closes its SQL); the entity graph's (one denied: recall without the graph);
    # the tables derived from `entities` too, and those recording rows of every table (the change log);
    # a virtual table's shadow tables, which are it
    "derived_from_knowledge",
    "derived_from_every_table",
    "stored_for",
    # what an error opening a brain means (a lock, a full disk: try again; else damage)
    "opening_fault",
    "ENTITY_DERIVED_TABLES",
    "brain_table",
    "shown_by_added",
    "own_name",
    "EVERY_TABLE",
    "BRAIN_TABLES",
    "GRAPH_TABLES",
    # the full-text and vector indexes recall's legs read: one denied, no recall
    "VIRTUAL_TABLES",
    # a copy Litestream follows: telling one, and whether it may be read yet
    "is_copy",
    "ensure_ready",
    # the model and width /-/brain/v1 serves for a brain, or why check would name them
    "served_model",
    "damage_advice",
    # JSON as the brain reads it; entity links in a memory's text; the canned recall query's parameters
    "loads_json",
    "too_many_digits",
    "said",
    "unencodable",
    "entity_links",
    # a page's query parameters: each given once, and only those it takes
    "given_once",
    "unknown_parameters",
    "recall_params_error",
    "interruptions",
    "failures",
    # `sqlite-utils query`: a brain_* function's refusal said in one line on stderr, as Datasette logs it
    "say_input_errors",
    # the wording of messages and pages
    "counted",
    "section",
    "cited",
    "lines_of_file",
    "shown",
]


def __getattr__(name: str) -> Any:
    if name in _MODULE_OF:
        value = getattr(importlib.import_module(_MODULE_OF[name], __package__), name)
    elif name in _OPERATIONS:
        faults, module = (importlib.import_module(m, __package__) for m in (".faults", _OPERATIONS[name]))
        value = faults.named(getattr(module, name))
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
