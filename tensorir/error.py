"""``tensorir.error.TVMError``: the base of tensorir's errors, as ``tvm.error.TVMError`` is TVM's.

Schedule misuse (:class:`~tensorir.schedule.ScheduleError`) and unprovable accesses
(:class:`~tensorir.analysis.OutOfBoundsError`) derive from it and from ``ValueError``, so code
catching either TVM's error or ``ValueError`` keeps working.
"""
from __future__ import annotations


class TVMError(RuntimeError):
    """An error raised by tensorir (TVM's ``tvm.error.TVMError``)."""


__all__ = ["TVMError"]
