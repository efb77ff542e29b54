"""datasette-brain's SQLite layer: a long-term memory in one SQLite file.

Importable without Datasette. `connect()` opens a brain with sqlite-vec loaded
and the brain_* SQL functions registered; `ingest()` adds notes and records.
"""

from pathlib import Path

from .connection import BrainError, connect, prepare_connection
from .fields import FieldError
from .ingest import ingest
from .querydoc import QueryError
from .recall import recall
from .schema import migrate

# Hybrid recall as one plain SQL query (the canned query Datasette offers).
RECALL_SQL = (Path(__file__).parent / "recall.sql").read_text()

__all__ = [
    "RECALL_SQL", "BrainError", "FieldError", "QueryError", "connect", "ingest", "migrate",
    "prepare_connection", "recall",
]  # fmt: skip
