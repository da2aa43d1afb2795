"""The one boundary between isl's failures and tiletune's errors.

isl answers tiletune's questions about a loop nest (regions, guards, bounds, races, reads before
writes).  When it fails instead of answering (``islpy.Error``: an unbounded optimum, a malformed
set, an operation isl does not support on that input), no raw isl error escapes:

* where the answer proves a schedule safe (the analysis), :func:`isl_boundary` raises a
  ``ScheduleError`` naming the stage and what was being checked (isl's words in its
  ``isl_message``): a schedule that cannot be proven safe is refused;
* where the answer only sharpens something that has a sound fallback (a redundant guard, an exact
  region), :func:`isl_or` returns the caller's "cannot tell" value instead.
"""
from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Callable, Iterator

import islpy as isl

from ..schedule import ScheduleError

#: Every exception islpy raises for a failed isl operation.
ISL_ERRORS: tuple = (isl.Error,)


def isl_refusal(message: str, isl_text: str) -> ScheduleError:
    """The ``ScheduleError`` for an isl failure (a refusal like any other, so tuners count it as
    one); ``isl_message`` keeps isl's own words."""
    err = ScheduleError(message)
    err.isl_message = isl_text
    return err


def isl_message(e: BaseException) -> str:
    """isl's message, on one line."""
    return " ".join(str(e).split()) or type(e).__name__


@contextmanager
def isl_boundary(what: str, stage: str | Callable[[], str], message: Callable[[str], str | None] | None = None) -> Iterator[None]:
    """Turn an isl failure inside the block into a ``ScheduleError`` saying that the isl
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
        raise isl_refusal(msg, text) from None


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


__all__ = ["ISL_ERRORS", "isl_boundary", "isl_or", "isl_refusal"]
