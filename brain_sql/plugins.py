"""The plugin manager: the built-in formats, extractors and models, plus any
package that declares a `brain` entry point.

Made on first use: finding the entry points reads every installed package's
metadata (a tenth of a second), which a server's start (it loads its model on a
thread of its own) and the commands that ask no plugin need not wait for."""

import functools
import itertools
import threading

import pluggy

from . import extract, hookspecs, markdown, models, records

_lock = threading.Lock()


@functools.cache
def _made():
    pm = pluggy.PluginManager("brain")
    pm.add_hookspecs(hookspecs)
    for builtin in (models, extract, markdown, records):
        pm.register(builtin)
    pm.load_setuptools_entrypoints("brain")
    return pm


def manager():
    """The plugin manager, made once (threads asking at once wait for the one making it)."""
    with _lock:
        return _made()


def collect(hook_name):
    """Flatten the lists every plugin returned for `hook_name`."""
    results = getattr(manager().hook, hook_name)()
    return list(itertools.chain.from_iterable(r for r in results if r))
