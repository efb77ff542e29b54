"""The Datasette plugin. Its hooks are in plugin.py, loaded when Datasette reads this
package's names (PEP 562): `sqlite-utils` imports datasette_brain.cli, and with it this
package, for every command it runs, and should not load Datasette, the MCP SDK and the
pages along."""

import importlib
import importlib.util


def _plugin():
    return importlib.import_module(".plugin", __name__)  # not `from . import plugin`: that asks this module first


def __getattr__(name):
    """A name plugin.py defines (a hook, say). Neither a dunder nor a submodule not
    imported yet (`from . import x` asks for x before importing it) loads plugin.py."""
    if name.startswith("__") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(_plugin(), name)


def __dir__():
    """The package's names and plugin.py's. Datasette's plugin manager lists a plugin's
    names with dir() and, from pluggy 1.7, reads each without __getattr__
    (inspect.getattr_static): the hooks are made this module's own names here."""
    plugin = _plugin()
    hooks = {name: value for name, value in vars(plugin).items() if hasattr(value, "datasette_impl")}
    globals().update(hooks)
    return sorted({*globals(), *(name for name in dir(plugin) if not name.startswith("__"))})
