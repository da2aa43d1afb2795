"""The dispatch-context stack: which schedules the code inside ``with ctx:`` takes.

A context is entered with ``with``; contexts nest and the innermost answers.  The stack is per
thread: a context entered in one thread never steers a build running in another.  The tuner's contexts
(``autotune.apply_history_best(log)``: :class:`autotune.dispatch.ApplyHistoryBest`) subclass
:class:`DispatchContext`; lower layers ask it without importing the tuner: ``codegen.build_model``
takes its kernels' schedules from :func:`model_schedule` when it is given no ``schedule=``.
"""
from __future__ import annotations

import threading
from typing import Callable

_local = threading.local()


def _stack() -> list[DispatchContext]:
    """This thread's stack of entered contexts."""
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


class DispatchContext:
    """Answers "which schedule?" for the code inside ``with ctx:``; contexts nest."""

    @staticmethod
    def current() -> DispatchContext | None:
        """This thread's innermost context entered, or None outside every context."""
        stack = _stack()
        return stack[-1] if stack else None

    def model_schedule(self, target) -> Callable | None:
        """The schedule source of a model build for ``target`` (a parsed target): a hook
        ``hook(kt) -> (Schedule, origin) | None`` (optional ``reject(kt, error)``, ``warn_missing()``)
        as ``codegen.build_model``'s ``schedule=``; None: every kernel takes its default schedule."""
        return None

    def __enter__(self):
        _stack().append(self)
        return self

    def __exit__(self, *exc):
        _stack().remove(self)


def model_schedule(target) -> Callable | None:
    """The innermost context's schedule source for a model build on ``target``, or None."""
    ctx = DispatchContext.current()
    return ctx.model_schedule(target) if ctx is not None else None


__all__ = ["DispatchContext", "model_schedule"]
