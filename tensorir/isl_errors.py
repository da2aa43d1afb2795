"""The one boundary between isl's failures and tiletune's errors.

isl answers tiletune's questions about a loop nest (regions, guards, bounds, races, reads before
writes).  When it fails instead of answering (``islpy.Error``: an unbounded optimum, a malformed
set, an operation isl does not support on that input), no raw isl error escapes:

* where the answer proves a schedule safe (the analysis), :func:`isl_boundary` raises an
  :class:`IslAnalysisError` (a ``ScheduleError``) naming the stage and what was being checked: a
  schedule that cannot be proven safe is refused;
* where the answer only sharpens something that has a sound fallback (a redundant guard, an exact
  region), :func:`isl_or` returns the caller's "cannot tell" value instead.
"""
from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Callable, Iterator

import islpy as isl

from .schedule import ScheduleError

#: Every exception islpy raises for a failed isl operation.
ISL_ERRORS: tuple = (isl.Error,)


class IslAnalysisError(ScheduleError):
    """isl failed on a question about a stage; the message names the stage and the check, and
    ``isl_message`` keeps isl's own words."""

    def __init__(self, message: str, isl_message: str = ""):
        super().__init__(message)
        self.isl_message = isl_message


def isl_message(e: BaseException) -> str:
    """isl's message, on one line."""
    return " ".join(str(e).split()) or type(e).__name__


@contextmanager
def isl_boundary(what: str, stage: str | Callable[[], str], message: Callable[[str], str | None] | None = None) -> Iterator[None]:
    """Turn an isl failure inside the block into an :class:`IslAnalysisError` saying that the isl
    analysis failed on ``stage`` while ``what``; ``message(isl_text)``, when given and not None,
    words it instead (a known cause)."""
    try:
        yield
    except ISL_ERRORS as e:
        text = isl_message(e)
        msg = message(text) if message is not None else None
        if msg is None:
            name = stage() if callable(stage) else stage
            msg = (f"{'stages' if ', ' in name else 'stage'} {name}: the isl analysis failed while {what} "
                   f"(isl: {text}); the schedule cannot be proven safe, so it is refused")
        raise IslAnalysisError(msg, text) from None


def isl_or(default):
    """Decorator: the function's result, or ``default`` when isl fails inside it (for questions whose
    callers have a sound answer without isl)."""
    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except ISL_ERRORS:
                return default
        return inner
    return wrap


__all__ = ["ISL_ERRORS", "IslAnalysisError", "isl_boundary", "isl_or"]
