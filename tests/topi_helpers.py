"""Shared by the topi tests: check a topi output with the default schedule and with topi.generic's."""
from __future__ import annotations

import tensorir as te
from tensorir import topi

from conftest import check


def check_op(out, ins, reference, schedule=None, **kw):
    """``out`` (a tensor or a list) over ``ins`` against ``reference(*arrays)``, built twice: with
    ``te.create_schedule`` and with ``schedule`` (default ``topi.generic.schedule_injective``)."""
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    args = list(ins) + outs
    check(te.create_schedule([t.op for t in outs]), args, reference, **kw)
    check((schedule or topi.generic.schedule_injective)(outs), args, reference, **kw)
