"""Templates and the dispatch context: which config a template runs with.

``@autotune.template("name")`` registers a function ``f(*args) -> (schedule, tensors)`` that reads
its knobs from :func:`get_config`.  Who decides the config:

* a task collecting its space or instantiating a config (``Task.instantiate``) sets it directly;
* a plain call ``f(*args)`` asks the innermost dispatch context: ``autotune.apply_history_best(log)``
  answers with the best record for the workload and target; with no context, or no record, the
  template gets its :class:`~tensorir.schedule.space.FallbackConfig` and a warning naming the workload is
  issued and counted in :func:`dispatch_stats` -- a fallback is never silent.

The registry of templates and the context stack are the only global state of the autotuner.
"""
from __future__ import annotations

import contextvars
import functools
import importlib
import importlib.util
import inspect
import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from tensorir.schedule.dispatch import DispatchContext as _BaseContext
from tensorir.schedule.space import ConfigEntity, FallbackConfig

_current_config: contextvars.ContextVar = contextvars.ContextVar("tiletune_config", default=None)


@dataclass
class TemplateInfo:
    name: str
    func: Callable
    reference: Callable | None = None     # reference(*inputs) -> output array(s)
    rtol: float = 1e-3
    atol: float = 1e-3                    # relative to the largest |reference| value
    module: str = ""
    file: str = ""


_TEMPLATES: dict[str, TemplateInfo] = {}


def template(name: str, func: Callable | None = None, *, reference: Callable | None = None,
             rtol: float = 1e-3, atol: float = 1e-3):
    """Register a schedule template under ``name`` (decorator).

    ``reference(*input_arrays)`` returns the expected output(s), used to check every candidate on
    its first run; without it the check compares with the template's fallback config built in the
    measuring process.  Tolerance: ``|out - ref| <= atol * max|ref| + rtol * |ref|``."""
    def register(f: Callable):
        try:
            file = os.path.abspath(inspect.getfile(f))
        except (TypeError, OSError):
            file = ""
        _TEMPLATES[name] = TemplateInfo(name, f, reference, rtol, atol, f.__module__, file)

        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            if kwargs:
                raise TypeError(f"template {name}: pass arguments positionally (they form the workload)")
            if _current_config.get() is not None:
                return f(*args)
            cfg = DispatchContext.current().query(workload_of(name, args))
            with using_config(cfg):
                return f(*args)

        wrapper.template_name = name
        return wrapper

    return register(func) if func is not None else register


def lookup(name: str, module: str = "", file: str = "") -> TemplateInfo:
    """The template registered as ``name``, importing ``module`` (without one, a built-in template's
    ``autotune/templates/NAME.py``) or loading ``file`` if needed (under :class:`importing_template`:
    top-level tuning code of that module does not tune)."""
    if name not in _TEMPLATES and not module and name.isidentifier() \
            and importlib.util.find_spec(f"{__package__}.templates.{name}") is not None:
        module = f"{__package__}.templates.{name}"      # a built-in template (autotune/templates/NAME.py)
    if name not in _TEMPLATES and module and module != "__main__":
        with importing_template(name):
            try:
                importlib.import_module(module)
            except ImportError:
                pass
    if name not in _TEMPLATES and file and os.path.exists(file):
        load_file(file, template=name)
    if name not in _TEMPLATES:
        known = ", ".join(sorted(_TEMPLATES)) or "none"
        raise KeyError(f"no template named {name!r} is registered (known: {known}); import the module "
                       "that defines it first")
    return _TEMPLATES[name]


# -- importing a module to find a template ---------------------------------------------------------------
class _TemplateFound(BaseException):
    """Stops the top-level code of a module imported to find a template, once the template is there."""


_wanted: list[str] = []        # templates that imports in progress look for


class importing_template:
    """Context manager: import a module (or load a file) to register template ``name`` without running
    the module's tuning.  Scripts tune at top level, with no ``__main__`` guard, as AutoTVM's tutorials
    do; inside this context :func:`tuning_allowed` makes ``Tuner.tune`` stop the import once ``name``
    is registered (everything the template uses is defined by then: the tuner ran it to collect its
    space) or return at once before that.  The module's printed output is discarded; an exception in
    its code is raised only if the template did not get registered before it."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        import contextlib
        _wanted.append(self.name)
        self._quiet = contextlib.ExitStack()
        null = self._quiet.enter_context(open(os.devnull, "w"))
        self._quiet.enter_context(contextlib.redirect_stdout(null))
        return self

    def __exit__(self, kind, exc, tb):
        self._quiet.close()
        _wanted.pop()
        if kind is _TemplateFound:
            return True
        return kind is not None and issubclass(kind, Exception) and self.name in _TEMPLATES


def tuning_allowed() -> bool:
    """Whether ``Tuner.tune`` may tune now: False while a module is imported to find a template (the
    call returns at once); once that template is registered the import stops here instead."""
    if not _wanted:
        return True
    if _wanted[-1] in _TEMPLATES:
        raise _TemplateFound(_wanted[-1])
    return False


def load_file(path: str, template: str | None = None):
    """Import a Python file by path (its templates register themselves); returns the module.  A file
    inside an importable package (``autotune/templates/gemm_cpu.py``) is imported by its module name.
    With ``template``, the file is imported under :class:`importing_template` (its tuning code does
    not tune)."""
    if template is not None:
        with importing_template(template):
            return _load_file(path)
    return _load_file(path)


def _load_file(path: str):
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    dotted = _package_module(path)
    if dotted is not None:
        try:
            mod = importlib.import_module(dotted)
            if os.path.samefile(getattr(mod, "__file__", "") or "/", path):
                return mod
        except (ImportError, OSError):
            pass
    modname = "tiletune_user_" + "".join(c if c.isalnum() else "_" for c in path)
    if modname in sys.modules:
        return sys.modules[modname]
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    try:
        spec.loader.exec_module(mod)
    except _TemplateFound:
        pass                  # the template is registered: the rest of the file is its tuning code
    except BaseException:
        del sys.modules[modname]
        raise
    return mod


def _package_module(path: str) -> str | None:
    """``a.b.c`` when ``path`` is ``.../a/b/c.py`` and a, a/b are packages (have ``__init__.py``)."""
    parts = [os.path.splitext(os.path.basename(path))[0]]
    d = os.path.dirname(path)
    while os.path.exists(os.path.join(d, "__init__.py")):
        parts.insert(0, os.path.basename(d))
        d = os.path.dirname(d)
    return ".".join(parts) if len(parts) > 1 else None


def get_config():
    """The config of the template being instantiated (call inside a template)."""
    cfg = _current_config.get()
    if cfg is None:
        raise RuntimeError("autotune.get_config() is only available inside a template function "
                           "registered with @autotune.template")
    return cfg


class using_config:
    """Context manager: templates instantiated inside see ``cfg`` from :func:`get_config`."""

    def __init__(self, cfg):
        self.cfg = cfg

    def __enter__(self):
        self._token = _current_config.set(self.cfg)
        return self.cfg

    def __exit__(self, *exc):
        _current_config.reset(self._token)


# -- workloads -----------------------------------------------------------------------------------------
def canonical_arg(a):
    """A template argument as a JSON value: numbers, strings, booleans, None, lists; a tensor becomes
    ``["TENSOR", shape, dtype]``."""
    if a is None or isinstance(a, (bool, str)):
        return a
    if isinstance(a, (int, np.integer)):
        return int(a)
    if isinstance(a, (float, np.floating)):
        return float(a)
    if isinstance(a, (tuple, list)):
        return [canonical_arg(x) for x in a]
    shape, dtype = getattr(a, "shape", None), getattr(a, "dtype", None)
    if shape is not None and isinstance(dtype, str):
        dims = [getattr(d, "value", d) for d in shape]
        if all(isinstance(d, int) for d in dims):
            return ["TENSOR", dims, dtype]
    raise TypeError(f"template argument {a!r} ({type(a).__name__}) cannot be part of a workload: use "
                    "numbers, strings, booleans, None, lists or tensors of constant shape")


def workload_of(name: str, args) -> tuple:
    """``(template name, canonical args)``, hashable: lists become tuples."""
    return (name, _freeze(canonical_arg(list(args))))


def _freeze(v):
    return tuple(_freeze(x) for x in v) if isinstance(v, list) else v


def thaw(v):
    """A frozen workload part back to JSON lists."""
    return [thaw(x) for x in v] if isinstance(v, tuple) else v


def safe_name(name: str) -> str:
    """A template name as a file-name and C-symbol stem: every character other than letters, digits
    and ``_`` becomes ``_`` (``"tutorial/matmul"`` -> ``"tutorial_matmul"``).  Only paths and kernel
    symbols use it; workloads, records and studies keep the name as given."""
    return "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in name) or "template"


def workload_str(workload) -> str:
    name, args = workload
    return f"{name}({', '.join(map(repr, thaw(args)))})"


# -- dispatch --------------------------------------------------------------------------------------------
@dataclass
class _Stats:
    queries: int = 0
    hits: int = 0
    fallbacks: int = 0
    fallback_workloads: dict = field(default_factory=dict)


_stats = _Stats()


def dispatch_stats() -> dict:
    """How template calls were served: ``queries``, ``hits`` (a tuned record), ``fallbacks`` and
    ``fallback_workloads`` (``{workload string: count}``)."""
    return {"queries": _stats.queries, "hits": _stats.hits, "fallbacks": _stats.fallbacks,
            "fallback_workloads": dict(_stats.fallback_workloads)}


def reset_dispatch_stats() -> None:
    global _stats
    _stats = _Stats()


class DispatchContext(_BaseContext):
    """Answers "which config for this workload?"; contexts nest (``with ctx:``).  The stack is
    :class:`tensorir.schedule.dispatch.DispatchContext`'s (so ``codegen.build_model`` sees these
    contexts); outside every context :meth:`current` is the root context (fallback configs)."""

    @staticmethod
    def current() -> "DispatchContext":
        ctx = _BaseContext.current()
        return ctx if ctx is not None else _ROOT

    def _query(self, workload) -> ConfigEntity | None:
        return None

    def query(self, workload):
        _stats.queries += 1
        cfg = self._query(workload)
        if cfg is not None:
            _stats.hits += 1
            return cfg
        key = workload_str(workload)
        _stats.fallbacks += 1
        _stats.fallback_workloads[key] = _stats.fallback_workloads.get(key, 0) + 1
        warnings.warn(f"tiletune: no tuned config for workload {key} {self._where()}; using the fallback "
                      "(default) config", FallbackWarning, stacklevel=4)
        return FallbackConfig()

    def _where(self) -> str:
        return "(no apply_history_best context)"


class FallbackWarning(UserWarning):
    """A template ran with its fallback config because no tuned record matched."""


_ROOT = DispatchContext()

__all__ = ["template", "get_config", "lookup", "load_file", "importing_template", "tuning_allowed", "using_config",
           "TemplateInfo", "workload_of", "workload_str", "safe_name", "canonical_arg", "thaw", "DispatchContext",
           "dispatch_stats", "reset_dispatch_stats", "FallbackWarning"]
