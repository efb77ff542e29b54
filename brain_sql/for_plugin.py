"""brain_sql's second face: what datasette_brain (the Datasette plugin, its pages
and MCP tools, and the `sqlite-utils brain` commands) needs beyond the public one
in brain_sql.api — the bounds it holds requests to, the SQL of its decay facet,
the wording of its messages. Python users need none of it, and it may change
with the plugin; datasette_brain imports nothing of brain_sql but the two faces
(the import-linter contract in pyproject.toml)."""

from . import browse
from .browse import DECAY_BUCKETS, decay_counts_sql, decay_filter_sql, decayed_selection, page_numbers
from .config import ENTITY_PAGE_ROWS, EXPORTS_AT_ONCE, MAX_CONTENT_BYTES, MAX_EXTEND_DAYS, MAX_PAGE_ROWS
from .config import FOLLOW_INTERVAL_SECONDS, FOLLOW_STALL_SECONDS, MAX_QUERY_CHARS, REPLICA_SYNC_INTERVAL
from .config import configured_model
from .copies import ensure_ready, is_copy
from .extract import entity_links
from .faults import named
from .fields import loads_json, unencodable, whole_number
from .functions import recall_params_error
from .schema import derived_from_knowledge
from .wording import counted, section, shown

__all__ = [
    # bounds: request bodies and queries, pages of rows, exports at once, days a decayed memory is extended by
    "MAX_CONTENT_BYTES", "MAX_QUERY_CHARS", "ENTITY_PAGE_ROWS", "MAX_PAGE_ROWS", "EXPORTS_AT_ONCE", "MAX_EXTEND_DAYS",
    "page_numbers", "whole_number",
    # the defaults of `brain replicate` and `brain follow`; the model a new brain gets ($BRAIN_MODEL)
    "REPLICA_SYNC_INTERVAL", "FOLLOW_INTERVAL_SECONDS", "FOLLOW_STALL_SECONDS", "configured_model",
    # the decayed-memory page and the decay facet of Datasette's table pages
    "DECAY_BUCKETS", "decay_counts_sql", "decay_filter_sql", "decayed_selection", "decayed_facets",
    # the recall page's example queries: titles of the documents with the most sections
    "examples",
    # permissions: the tables whoever may not read `knowledge` may not read either
    "derived_from_knowledge",
    # a copy Litestream follows: telling one, and whether it may be read yet
    "is_copy", "ensure_ready",
    # JSON as the brain reads it; entity links in a memory's text; the canned recall query's parameters
    "loads_json", "unencodable", "entity_links", "recall_params_error",
    # the wording of messages and pages
    "counted", "section", "shown",
]  # fmt: skip

# operations on a brain's rows, their faults named as the public face's are (brain_sql.faults)
decayed_facets = named(browse.decayed_facets)
examples = named(browse.examples)
