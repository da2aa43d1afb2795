"""Storage primitives of a stage: store predicates and padded (aligned) allocations.

``set_store_predicate(pred)``: the stage's stores (a reduction's initialisation and updates too)
happen only where ``pred`` holds; ``pred`` may use the stage's axes and the loops around it.
``storage_align(axis, factor, offset)``: the intermediate buffer is padded so that the stride of
``axis``'s dimension is ``k * factor + offset`` (TVM's rule, used against bank conflicts); an
argument's buffer keeps its caller's layout, so aligning it is refused.
"""
from __future__ import annotations

from .. import dtype as dt
from ..expr import IntImm, as_bool, const
from . import ScheduleError, Stage
from ..tensor import IterVar, PlaceholderOp


def set_store_predicate(st: Stage, predicate) -> None:
    pred = as_bool(predicate)
    if not dt.is_int(pred.dtype) and pred.dtype != "bool":
        raise st._err(f"set_store_predicate: expected a boolean expression, got {predicate!r}")
    st.store_predicate = pred if st.store_predicate is None else st.store_predicate & pred


def storage_align(st: Stage, axis: IterVar, factor: int, offset: int) -> None:
    if isinstance(st.op, PlaceholderOp):
        raise st._err("storage_align: a placeholder's layout is its caller's")
    if not isinstance(axis, IterVar) or axis not in st.op.axis:
        name = axis.var.name if isinstance(axis, IterVar) else repr(axis)
        raise st._err(f"storage_align: axis {name} is not a data axis of the stage's tensor "
                      f"({', '.join(iv.var.name for iv in st.op.axis)})")
    if not isinstance(factor, int) or factor <= 0 or not isinstance(offset, int):
        raise st._err(f"storage_align of axis {axis.var.name}: factor must be a positive int and "
                      f"offset an int, got {factor!r}, {offset!r}")
    st.storage_aligns[st.op.axis.index(axis)] = (factor, offset % factor)


def aligned_shape(st: Stage, shape: tuple) -> tuple:
    """``shape`` with dimensions padded so that every aligned dimension's stride fits its rule."""
    shape = list(shape)
    for d in sorted(st.storage_aligns, reverse=True):  # inner first: outer padding keeps inner strides
        factor, offset = st.storage_aligns[d]
        name = st.op.axis[d].var.name
        if d == len(shape) - 1:
            if 1 % factor != offset:
                raise ScheduleError(f"stage {st.op.name}: storage_align of axis {name}: the innermost "
                                    f"dimension has stride 1, which cannot be {offset} modulo {factor}")
            continue
        inner = 1
        for e in shape[d + 2:]:
            if not isinstance(e, IntImm):
                raise ScheduleError(f"stage {st.op.name}: storage_align of axis {name} needs constant "
                                    f"extents for the dimensions inside it")
            inner *= e.value
        ext = shape[d + 1]
        if not isinstance(ext, IntImm):
            raise ScheduleError(f"stage {st.op.name}: storage_align of axis {name} needs a constant "
                                f"extent for the dimension inside it, got {ext}")
        for pad in range(factor):
            if (ext.value + pad) * inner % factor == offset:
                shape[d + 1] = const(ext.value + pad, ext.dtype)
                break
        else:
            raise ScheduleError(f"stage {st.op.name}: storage_align of axis {name}: no padding of the "
                                f"next dimension makes the stride {offset} modulo {factor}")
    return tuple(shape)


def guarded_store(st: Stage, store, mapping: dict):
    """``store`` under the stage's store predicate (its axes replaced through ``mapping``)."""
    if st.store_predicate is None:
        return store
    from ..stmt import IfThenElse
    from ..visitor import substitute
    threads, cur = {}, st  # a thread axis' variable (tx.var) is the loop bound to it
    while cur is not None:
        threads.update({t.var: iv.var for iv, t in cur.bindings.items() if t.var not in threads})
        cur = cur.attach_stage
    return IfThenElse(substitute(substitute(st.store_predicate, threads), mapping), store)


__all__ = ["set_store_predicate", "storage_align", "aligned_shape", "guarded_store"]
