"""The plugin manager: built-in formats, extractors and models, plus any package
that declares a `brain` entry point."""

import itertools

import pluggy

from . import hookspecs

pm = pluggy.PluginManager("brain")
pm.add_hookspecs(hookspecs)
pm.load_setuptools_entrypoints("brain")


def _register_builtins():
    from . import embed, extract, markdown, records

    for module in (embed, extract, markdown, records):
        if not pm.is_registered(module):
            pm.register(module)


def collect(hook_name):
    """Flatten the lists every plugin returned for `hook_name`."""
    _register_builtins()
    results = getattr(pm.hook, hook_name)()
    return list(itertools.chain.from_iterable(r for r in results if r))
