"""datasette-brain's SQLite layer: a long-term memory in one SQLite file.

Importable without Datasette. `connect()` opens a brain with sqlite-vec loaded
and the brain_* SQL functions registered; `ingest()` adds notes and records,
`recall()` answers queries. Everything public is defined in `brain_sql.api`.
"""

from .api import *  # noqa: F403
from .api import __all__  # noqa: F401
