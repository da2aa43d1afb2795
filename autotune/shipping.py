"""How a worker process gets the template of a task.

Workers are fresh interpreters (never forks: an OpenMP runtime does not survive a fork), so they
cannot inherit the tuner's registry of templates.  A task's payload tells a worker where to find its
template:

* a template of an importable module, or of a file loaded by path (``tiletune tune-op FILE.py:NAME``),
  is imported by the worker, under :class:`~autotune.template.importing_template`: the module's
  top-level tuning code, if any, does not tune there;
* a template the worker cannot import -- defined in ``__main__`` (``python script.py``, ``python -c``,
  a notebook) or inside a function -- travels by value: cloudpickle serializes the function, its
  reference function and the globals they use (modules by name), so the worker runs none of the
  script.  If a global cannot be pickled (a lock, an open file), the worker imports the module or
  loads the script's file instead (guarded as above); with neither, tuning stops at once with an
  error naming the template.
"""
from __future__ import annotations

import base64
import functools
import os

from .template import _TEMPLATES, TemplateInfo, lookup


def needs_value(info: TemplateInfo) -> bool:
    """Whether a worker cannot import ``info``'s function by its module and name."""
    return info.module == "__main__" or "<locals>" in getattr(info.func, "__qualname__", "")


def pack(info: TemplateInfo) -> str:
    """``info`` serialized by value (base64 text, so the payload stays JSON)."""
    import cloudpickle
    try:
        blob = cloudpickle.dumps((info.name, info.func, info.reference, info.rtol, info.atol, info.file))
    except Exception as e:  # whatever pickling raised, say which template and why
        raise RuntimeError(f"template {info.name!r} is defined in {info.module} and cannot be sent to the "
                           f"measurement workers ({type(e).__name__}: {e}); move it to a module the workers can "
                           "import, or keep globals it uses picklable") from e
    return base64.b64encode(blob).decode("ascii")


@functools.lru_cache(maxsize=16)
def unpack(text: str) -> TemplateInfo:
    """The template sent by :func:`pack` (unpickled once per distinct text in this process)."""
    import pickle
    name, func, reference, rtol, atol, file = pickle.loads(base64.b64decode(text))
    info = TemplateInfo(name, func, reference, rtol, atol, "__main__", file)
    _TEMPLATES[name] = info           # so lookups by name in this worker find it too
    return info


def describe(info: TemplateInfo) -> dict:
    """Payload fields that let a worker find ``info``: ``module`` and ``file``, or ``pickled``.  A
    template that cannot be pickled is imported or loaded from its file instead, if it has one."""
    if needs_value(info):
        try:
            return {"module": "", "file": "", "pickled": pack(info)}
        except RuntimeError:
            if info.module == "__main__" and not os.path.isfile(info.file):
                raise
    return {"module": info.module, "file": info.file}


def find(name: str, module: str = "", file: str = "", pickled: str = "") -> TemplateInfo:
    """In a worker: the template a payload describes."""
    return unpack(pickled) if pickled else lookup(name, module, file)


__all__ = ["describe", "find", "pack", "unpack", "needs_value"]
