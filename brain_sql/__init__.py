"""datasette-brain's SQLite layer: a long-term memory in one SQLite file.

Importable without Datasette. `connect()` opens a brain with sqlite-vec loaded
and the brain_* SQL functions registered; `ingest()` adds notes and records.
"""

from .connection import BrainError, connect, prepare_connection
from .fields import FieldError
from .ingest import ingest
from .schema import migrate

__all__ = ["BrainError", "FieldError", "connect", "ingest", "migrate", "prepare_connection"]
