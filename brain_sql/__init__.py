"""datasette-brain's SQLite layer: a long-term memory in one SQLite file.

Importable without Datasette. `connect()` opens a brain with sqlite-vec loaded
and the brain_* SQL functions registered; `ingest()` adds notes and records,
`recall()` answers queries. Everything public is defined in `brain_sql.api`.

The public face loads on first use (PEP 562), but for the light names below:
`sqlite-utils` imports the brain's commands for every command it runs, and until
one runs they name only these, so its help and other commands never load the engines.
"""

import importlib
import importlib.util
import typing

from .config import CLASSES as CLASSES
from .config import DEFAULT_MODEL as DEFAULT_MODEL
from .config import MINILM_MODEL as MINILM_MODEL
from .querydoc import FIELDS as QUERY_FIELDS  # noqa: F401  (a light public name, as above)

if typing.TYPE_CHECKING:  # what a type checker reads: the face, as __getattr__ gives it at run time
    from .api import *  # noqa: F403


def __getattr__(name):
    """Any other public name (or `__all__`), from brain_sql.api, loaded now. Not a
    submodule not imported yet (`from . import x` asks for x before importing it), nor
    a dunder other tools probe for."""
    if name.startswith("__") and name != "__all__" or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    api = importlib.import_module(".api", __name__)  # not `from . import api`: it asks this module first
    for public in ("__all__", *api.__all__):
        globals().setdefault(public, getattr(api, public))
    try:
        return globals()[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__():
    public = __getattr__("__all__")  # first: loading the public face adds names
    return sorted({*globals(), *public})
