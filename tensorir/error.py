"""``tensorir.error.TVMError``: the base of tensorir's errors, as ``tvm.error.TVMError`` is TVM's.

Schedule misuse (:class:`~tensorir.schedule.ScheduleError`) and unprovable accesses
(:class:`~tensorir.analysis.OutOfBoundsError`) derive from it and from ``ValueError``, so code
catching either TVM's error or ``ValueError`` keeps working.
"""
from __future__ import annotations

import contextlib
import functools
import sys
import threading


class TVMError(RuntimeError):
    """An error raised by tensorir (TVM's ``tvm.error.TVMError``)."""


class NestingError(TVMError, ValueError):
    """An expression or loop nest deeper than tiletune's recursive passes can walk."""


#: Python's recursion limit while a guarded entry point runs: about 1,000 levels of expression nesting
#: (the passes take ~5 frames a level); 5x this still ran in a thread of 8 MiB stack here.
RECURSION_LIMIT = 10_000
_raised = {"calls": 0, "old": None}
_lock = threading.Lock()


@contextlib.contextmanager
def _deep_recursion():
    with _lock:
        if _raised["calls"] == 0 and sys.getrecursionlimit() < RECURSION_LIMIT:
            _raised["old"] = sys.getrecursionlimit()
            sys.setrecursionlimit(RECURSION_LIMIT)
        _raised["calls"] += 1
    try:
        yield
    finally:
        with _lock:
            _raised["calls"] -= 1
            if _raised["calls"] == 0 and _raised["old"] is not None:
                sys.setrecursionlimit(_raised["old"])
                _raised["old"] = None


def bounded_nesting(fn):
    """``fn`` run with room for deep expressions (:data:`RECURSION_LIMIT`), and Python's RecursionError
    past that turned into one clear :class:`NestingError` instead of a raw traceback."""
    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        try:
            with _deep_recursion():
                return fn(*args, **kwargs)
        except RecursionError:
            name = kwargs.get("name") or next((a for a in args if isinstance(a, str)), None)
            raise NestingError(
                f"{fn.__name__}{f' {name!r}' if name else ''}: an expression nests too deep for tiletune's passes "
                f"(past {RECURSION_LIMIT} Python frames); split it into several "
                "computes (te.compute of a part, read by the next)") from None
    return guarded


__all__ = ["TVMError", "NestingError", "bounded_nesting"]
