"""The plugin manager: the built-in formats, extractors and models, plus any
package that declares a `brain` entry point."""

import itertools

import pluggy

from . import extract, hookspecs, markdown, models, records

pm = pluggy.PluginManager("brain")
pm.add_hookspecs(hookspecs)
for _builtin in (models, extract, markdown, records):
    pm.register(_builtin)
pm.load_setuptools_entrypoints("brain")


def collect(hook_name):
    """Flatten the lists every plugin returned for `hook_name`."""
    results = getattr(pm.hook, hook_name)()
    return list(itertools.chain.from_iterable(r for r in results if r))
