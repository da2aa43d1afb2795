"""The TVM-facing surface: what ``import tensorir as tvm`` ports find under TVM's names.

This package sits on top of tensorir, codegen and autotune (it may import all three; nothing below
imports it).  Its modules are also importable under TVM's paths below ``tensorir``
(``tensorir.tir``, ``tensorir.contrib.cc``, ``tensorir.runtime`` ...): :class:`AliasFinder`, installed
by ``tensorir/__init__.py``, hands out the module itself, so both names are one module object.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

#: ``tensorir.<name>`` -> the module it is (docs/porting.md lists them)
ALIASES = {
    "tir": "tensorir.compat.tir",
    "runtime": "tensorir.compat.runtime",
    "transform": "tensorir.compat.transform",
    "driver": "tensorir.compat.driver",
    "contrib": "tensorir.compat.contrib",
    "testing": "tensorir.compat.testing",
    "container": "tensorir.compat.container",
}


class AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``tensorir.<alias>[.sub]`` as the module of :data:`ALIASES` (``tensorir.contrib.cc`` is
    ``tensorir.compat.contrib.cc``)."""

    def find_spec(self, fullname: str, path=None, target=None):
        parts = fullname.split(".")
        if len(parts) < 2 or parts[0] != "tensorir" or parts[1] not in ALIASES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        _, name, *rest = spec.name.split(".")
        module = importlib.import_module(".".join([ALIASES[name], *rest]))
        spec.loader_state = module.__spec__          # put back after the import system sets __spec__
        return module

    def exec_module(self, module) -> None:
        module.__spec__ = module.__spec__.loader_state


def install() -> None:
    """Put the finder on ``sys.meta_path`` once."""
    if not any(isinstance(f, AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, AliasFinder())
