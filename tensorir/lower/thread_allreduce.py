"""Cross-thread reductions: the loop nest of a reduction whose axis is bound to ``threadIdx.*``.

TVM's ``MakeCrossThreadReduction``: every thread of the bound axis reduces its share (the reduction
axes left serial, and its guards) into a private accumulator that starts at the reducer's identity,
so threads beyond the extent contribute the identity; one ``tvm_thread_allreduce`` then combines the
accumulators of all threads of the axis, and every thread receives the result in a ``local``
buffer, which it stores (under the stage's data guards) into the output::

    for i (blockIdx.x):                       // data axes, outermost
      allocate B.red[1] local
      for k.inner (threadIdx.x):              // the reduction axis bound to threads
        allocate B.acc[1] local
        B.acc[0] = identity
        for k.outer: if (guards) B.acc[0] = B.acc[0] + A[...]
        B.red[0] = tvm_thread_allreduce(0, B.acc[0])
      B[i] = B.red[0]

The GPU passes expand the intrinsic into warp shuffles and shared memory
(``tensorir/lower/gpu_allreduce.py``); the isl analysis sees a write of a per-thread buffer.
"""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

from ..expr import BufferLoad, Call, Expr, IntImm, Reduce, Var, as_bool
from ..schedule import ScheduleError, Stage
from ..stmt import Allocate, Buffer, BufferStore, IfThenElse, Stmt, seq
from ..visitor import collect
from .relations import derived_from

THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
ALLREDUCE = "tvm_thread_allreduce"


@dataclass(frozen=True)
class AllReduce:
    """What the GPU expansion of one cross-thread reduction needs (``func.attrs['thread_allreduce']``,
    keyed by the uid of its first result buffer)."""
    stage: str
    axis: str
    tag: str
    combiner: object
    results: tuple          # the local result buffers, one per output
    identity: tuple         # the reducer's identity, one per output


def thread_reduce_leaves(st: Stage, reduce_ivs: set) -> list:
    """Leaf axes of ``st`` that are reduction axes bound to ``threadIdx.*``."""
    return [iv for iv in st.leaf_iter_vars
            if iv in reduce_ivs and iv in st.bindings and st.bindings[iv].thread_tag in THREAD_TAGS]


def cross_thread_nest(b, st: Stage, red: Reduce, reduce_ivs: set, conds: list, update: Callable,
                      stores: Callable) -> Stmt:
    """The nest of ``st`` with its thread-bound reduction axis lowered as a cross-thread reduction.

    ``update(bufs, idx)`` is one reduction step into ``bufs``; ``stores(values)`` the guarded stores
    of the outputs."""
    leaves = st.leaf_iter_vars
    threaded = thread_reduce_leaves(st, reduce_ivs)
    where = f"stage {st.op.name}"
    if len(threaded) > 1:
        names = ", ".join(f"{iv.var.name} ({st.bindings[iv].thread_tag})" for iv in threaded)
        raise ScheduleError(f"{where}: several reduction axes are bound to threads ({names}); a cross-thread "
                            "reduction runs over one thread axis: fuse them first")
    tx = threaded[0]
    first = next(k for k, iv in enumerate(leaves) if iv in reduce_ivs)
    data_ivs = set().union(*(derived_from(st, iv) for iv in st.op.axis))
    for iv in leaves[first:]:
        if iv in data_ivs:
            raise ScheduleError(f"{where}: axis {iv.var.name} is a data axis inside the reduction axes; a "
                                f"cross-thread reduction over {tx.var.name} ({st.bindings[tx].thread_tag}) "
                                "needs every data axis outside them: reorder")
        if iv is not tx and iv in st.bindings:
            raise ScheduleError(f"{where}: reduction axis {iv.var.name} is bound to "
                                f"{st.bindings[iv].thread_tag}; only one reduction axis, bound to threadIdx.*, "
                                "is reduced across threads")
    if red.init is not None:
        raise ScheduleError(f"{where}: a reduction with init= cannot be reduced across threads "
                            f"({tx.var.name} is bound to {st.bindings[tx].thread_tag}); add the initial value after it")
    serial = [iv for iv in leaves[first:] if iv is not tx]
    if isinstance(red.source, tuple):
        init_values = red.combiner.identity_tuple([x.dtype for x in red.source])
    else:
        init_values = (red.combiner.identity(red.dtype),)
    outs = [t.name for t in st.op._outputs]
    dtypes = [v.dtype for v in init_values]
    accs = [Buffer(f"{n}.acc", d, (IntImm("int32", 1),), "local") for n, d in zip(outs, dtypes)]
    reds = [Buffer(f"{n}.red", d, (IntImm("int32", 1),), "local") for n, d in zip(outs, dtypes)]
    zero = (IntImm("int32", 0),)
    init = seq(*[BufferStore(a, v, zero) for a, v in zip(accs, init_values)])
    step = update(accs, zero)
    for c in reversed(_conjuncts(as_bool(red.condition))):
        step = IfThenElse(c, step)
    accumulate = b.nest(st, serial, step, conds)
    acc_values = tuple(BufferLoad(a.dtype, a, zero) for a in accs)
    combine = seq(*[BufferStore(r, Call(r.dtype, ALLREDUCE, (IntImm("int32", k),) + acc_values), zero)
                    for k, r in enumerate(reds)])
    reduce_vars = {iv.var for iv in leaves[first:]}
    data_conds = [c for c in conds if not any(v in reduce_vars for v in collect(c, Var))]
    out = stores(tuple(BufferLoad(r.dtype, r, zero) for r in reds))
    for c in data_conds:
        out = IfThenElse(c, out)
    # a store predicate on the thread axis (TVM's ``set_store_predicate(tx.var.equal(0))``) needs its
    # variable: the stores then follow the allreduce inside the thread loop (TVM's own structure)
    inside = tx.var in collect(out, Var)
    per_thread = seq(init, accumulate, combine, out) if inside else seq(init, accumulate, combine)
    for a in reversed(accs):
        per_thread = Allocate(a, per_thread)
    across = b.nest(st, [tx], per_thread, [])
    body = across if inside else seq(across, out)
    for r in reversed(reds):
        body = Allocate(r, body)
    b.allreduce[reds[0].uid] = AllReduce(st.op.name, tx.var.name, st.bindings[tx].thread_tag, red.combiner,
                                         tuple(reds), tuple(init_values))
    return b.nest(st, leaves[:first], body, [])


def _conjuncts(cond: Expr) -> list:
    from .schedule_ops import _conjuncts as conjuncts   # (schedule_ops imports this module)
    return conjuncts(cond)


__all__ = ["AllReduce", "ALLREDUCE", "thread_reduce_leaves", "cross_thread_nest"]
