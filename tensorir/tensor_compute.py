"""Tensor compute operations (TVM's ``TensorComputeOp``): a stage whose trailing dimensions are
computed by a tensor intrinsic called on tensor regions.

    vadd = te.decl_tensor_intrin(z.op, ...)                 # z[i] = x[i] + y[i], 16 elements
    C = te.compute((64, 16), lambda i: vadd(A[i, 0:16], B[i, 0:16]))

``fcompute`` takes fewer indices than the shape has dimensions and returns ``intrin(...)``, a
:class:`TensorIntrinCall`: its arguments are regions (``A[i, 0:16]``, a ``TensorSlice`` with slices, or
a load ``A[i, j]``, a region of one element) and scalars, in any order; ``reduce_axis=k`` names the
reduction the calls accumulate over.  The leading dimensions are the stage's axes (split, reorder,
parallel, compute_at as usual); the trailing ones are opaque axes computed whole by the intrinsic's
``body``, or by ``reset`` / ``update`` around the reduce loops (``lower/tensor_compute.py``).

A region keeps the loads of its first and last elements: the hull of the two corners is the box, so
bound inference, ``input_tensors``, ``cache_read`` and the dataflow graph see the region through
the loads they already know.
"""
from __future__ import annotations

from typing import Any

from .arith import simplify
from .expr import Expr, IntImm, TensorLoad, Var, _node, const, convert
from .tensor import OPAQUE, ComputeOp, IterVar, Range, Tensor
from .tensor_slice import TensorSlice


@_node
class TensorRegion(Expr):
    """A box of a tensor, given by the loads of its first and last elements."""
    dtype: str
    first: TensorLoad
    last: TensorLoad

    @property
    def tensor(self) -> Tensor:
        return self.first.tensor

    @property
    def box(self) -> list[tuple[Expr, Expr]]:
        """``(min, extent)`` per dimension."""
        return [(lo, simplify(hi - lo + 1)) for lo, hi in zip(self.first.indices, self.last.indices)]

    @property
    def region(self) -> list[Range]:
        return [Range(lo, ext) for lo, ext in self.box]

    def text(self, show) -> str:
        dims = ", ".join(show(lo) if _one(ext) else f"{show(lo)}:{show(simplify(lo + ext))}" for lo, ext in self.box)
        return f"{self.tensor.name}[{dims}]"


@_node
class TensorIntrinCall(Expr):
    """``intrin(regions..., scalars..., reduce_axis=...)`` (TVM's ``TensorIntrinCall``)."""
    dtype: str
    intrin: Any
    regions: tuple          # TensorRegion per tensor argument, in order
    axis: tuple             # the reduce axes the calls accumulate over
    scalar_inputs: tuple    # values of the intrinsic's scalar_params

    @property
    def tensors(self) -> list[Tensor]:
        return [r.tensor for r in self.regions]

    @property
    def reduce_axis(self) -> tuple:
        return self.axis

    def text(self, show) -> str:
        args = [show(r) for r in self.regions] + [show(x) for x in self.scalar_inputs]
        if self.axis:
            args.append(f"reduce_axis=[{', '.join(iv.var.name for iv in self.axis)}]")
        return f"{self.intrin.name}({', '.join(args)})"


def _one(e: Expr) -> bool:
    return isinstance(e, IntImm) and e.value == 1


def _index(x) -> Expr:
    return convert(x.var if isinstance(x, IterVar) else x)


def region_of(arg, what: str) -> TensorRegion:
    """The region an argument names: ``A[i, 0:16]`` (dimensions left out are whole) or ``A[i, j]``."""
    if isinstance(arg, TensorLoad):
        return TensorRegion(arg.dtype, arg, arg)
    t, first, last = arg.tensor, [], []
    if len(arg.indices) > len(t.shape):
        raise ValueError(f"{what}: region {arg!r} has {len(arg.indices)} indices for the {len(t.shape)} "
                         f"dimensions of tensor {t.name}")
    for d, extent in enumerate(t.shape):
        i = arg.indices[d] if d < len(arg.indices) else slice(None)
        if not isinstance(i, slice):
            first.append(_index(i))
            last.append(first[-1])
            continue
        if i.step not in (None, 1):
            raise ValueError(f"{what}: region {arg!r} of tensor {t.name}: slices with a step are not regions")
        lo = const(0, extent.dtype) if i.start is None else _index(i.start)
        hi = extent if i.stop is None else _index(i.stop)
        first.append(lo)
        last.append(simplify(hi - 1))
    return TensorRegion(t.dtype, TensorLoad(t.dtype, t, tuple(first)), TensorLoad(t.dtype, t, tuple(last)))


def intrin_call(intrin, args: tuple, reduce_axis=None) -> TensorIntrinCall:
    """``intrin(*args, reduce_axis=...)``: regions are the slices and loads among ``args``, in order;
    everything else is a scalar input (TVM's ``TensorIntrin.__call__``)."""
    what = f"call of intrinsic {intrin.name}"
    regions, scalars = [], []
    for a in args:
        if isinstance(a, (TensorSlice, TensorLoad)):
            regions.append(region_of(a, what))
        elif isinstance(a, Tensor):
            regions.append(region_of(TensorSlice(a, ()), what))
        else:
            scalars.append(_index(a))
    axes = () if reduce_axis is None else tuple(reduce_axis) if isinstance(reduce_axis, (list, tuple)) \
        else (reduce_axis,)
    for iv in axes:
        if not isinstance(iv, IterVar) or iv.kind != "reduce":
            raise TypeError(f"{what}: reduce_axis must be te.reduce_axis axes, got {iv!r}")
    return TensorIntrinCall(intrin.output_buffer.dtype, intrin, tuple(regions), axes, tuple(scalars))


class TensorComputeOp(ComputeOp):
    """``out[axis] = intrin(regions)``: the first ``schedulable_ndim`` axes are loops, the others are
    opaque axes spanning the intrinsic's output."""

    def __init__(self, name: str, axis, call: TensorIntrinCall, schedulable_ndim: int, tag: str = "",
                 attrs=None):
        super().__init__(name, axis, call, tag, attrs)
        self.reduce_axis = tuple(call.axis)
        self.schedulable_ndim = schedulable_ndim

    @property
    def call(self) -> TensorIntrinCall:
        return self.bodies[0]

    @property
    def intrin(self):
        return self.call.intrin

    @property
    def inputs(self) -> list[Tensor]:
        return self.call.tensors

    @property
    def input_regions(self) -> list[list[Range]]:
        return [r.region for r in self.call.regions]

    @property
    def scalar_inputs(self) -> tuple:
        return self.call.scalar_inputs

    def root_iter_vars(self) -> list[IterVar]:
        """The loops its stage starts with: the schedulable axes, then the reduce axes."""
        return list(self.axis[:self.schedulable_ndim]) + list(self.reduce_axis)

    def with_bodies(self, bodies) -> "TensorComputeOp":
        (call,) = bodies
        return TensorComputeOp(self.name, self.axis, call, self.schedulable_ndim, self.tag, self.attrs)


def _fits(box_extents: list[Expr], shape: tuple) -> bool:
    """Whether a box of these extents can be bound to a buffer of ``shape`` (leading extra dimensions
    of extent one); symbolic extents are checked when the buffers are bound."""
    extra = len(box_extents) - len(shape)
    if extra < 0:
        return False
    for k, ext in enumerate(box_extents):
        want = const(1) if k < extra else shape[k - extra]
        d = simplify(ext - want)
        if isinstance(d, IntImm) and d.value != 0:
            return False
    return True


def _dims(exts) -> str:
    return f"[{', '.join(map(str, exts))}]"


def tensor_compute(name: str, tag: str, shape: tuple, axis: list[IterVar], call: TensorIntrinCall, attrs=None):
    """The operation of ``te.compute(shape, lambda i: intrin(...))``; checks that every region fits the
    intrinsic's buffer, naming the tensor and the intrinsic."""
    intrin = call.intrin
    what = f"compute {name}: intrinsic {intrin.name}"
    if len(call.regions) != len(intrin.inputs):
        raise ValueError(f"{what} takes {len(intrin.inputs)} tensor regions "
                         f"({', '.join(t.name for t in intrin.inputs)}) but is called with {len(call.regions)}"
                         f"{''.join(' ' + r.tensor.name for r in call.regions)}")
    if len(call.scalar_inputs) != len(intrin.scalar_params):
        raise ValueError(f"{what} takes {len(intrin.scalar_params)} scalar inputs but is called with "
                         f"{len(call.scalar_inputs)}")
    for k, (r, buf) in enumerate(zip(call.regions, intrin.input_buffers)):
        exts = [ext for _, ext in r.box]
        if r.dtype != buf.dtype:
            raise TypeError(f"{what}: tensor {r.tensor.name} is {r.dtype} but input {k} of the intrinsic "
                            f"({buf.name}) is {buf.dtype}")
        if not _fits(exts, buf.shape):
            raise ValueError(f"{what}: the region of tensor {r.tensor.name}, {show_region(r)} of extents "
                             f"{_dims(exts)}, does not fit the intrinsic's input {k}, buffer {buf.name} of shape "
                             f"{_dims(buf.shape)}")
    ndim = len(axis)
    axis = list(axis) + [IterVar(Var(f"ax{d}"), Range(const(0, s.dtype), s), OPAQUE)
                         for d, s in enumerate(shape[ndim:])]
    out = intrin.output_buffer
    out_exts = [const(1)] * ndim + list(shape[ndim:])
    if not _fits(out_exts, out.shape):
        raise ValueError(f"{what}: the intrinsic computes {out.name} of shape {_dims(out.shape)} but the "
                         f"trailing dimensions of {name} are {_dims(shape[ndim:])}")
    op = TensorComputeOp(name, axis, call, ndim, tag, attrs)
    return op.output(0)


def show_region(r: TensorRegion) -> str:
    from .printer import expr_text
    return expr_text(r)


__all__ = ["TensorRegion", "TensorIntrinCall", "TensorComputeOp", "intrin_call", "region_of", "tensor_compute"]


def cache_write_tensor_compute(sch, st, scope: str, tensor):
    """``s.cache_write(C, scope)`` of a tensor compute stage (TVM's ``CacheWriteWithReLayoutTensor``):
    the cache is a tensor compute over the stage's data-parallel leaf loops (``i.c``, ...) and its
    opaque axes, with the same intrinsic and reduce axes; the stage then copies it out."""
    from .lower.relations import derived_from, leaf_ranges, root_values
    from .schedule import ScheduleError, Stage
    from .schedule.dataflow import _leaf_indices, _set_op
    old: TensorComputeOp = st.op
    for iv in old.reduce_axis:
        if derived_from(st, iv) != {iv}:
            raise ScheduleError(f"stage {old.name}: cache_write after splitting or fusing reduce axis {iv.var.name} "
                                "is not supported; split it on the cache stage")
    data_leaves = [iv for iv in st.leaf_iter_vars if iv not in old.reduce_axis]
    rng = leaf_ranges(st, {iv: iv.dom for iv in old.root_iter_vars()})
    vals, conds = root_values(st, rng)
    if conds:
        raise ScheduleError(f"stage {old.name}: cache_write after a split with a tail is not supported for a "
                            "tensor compute stage (the intrinsic cannot be guarded element by element)")
    new = [IterVar(Var(iv.var.name + ".c", iv.var.dtype), Range(const(0, rng[iv].extent.dtype), rng[iv].extent))
           for iv in data_leaves]
    opaque = [IterVar(Var(iv.var.name + ".c", iv.var.dtype), iv.dom, OPAQUE) for iv in old.axis[old.schedulable_ndim:]]
    leaf_map = {iv.var: a.var for iv, a in zip(data_leaves, new)}
    from .visitor import substitute
    call = substitute(old.call, {iv.var: substitute(vals[iv], leaf_map) for iv in old.axis[:old.schedulable_ndim]})
    cache_op = TensorComputeOp(f"{old.name}.{scope}", new + opaque, call, len(new), old.tag, old.attrs)
    cache = cache_op.output(0)
    stage = Stage(cache_op, sch)
    stage.scope = scope
    sch._insert_stage(stage, sch.stages.index(st))
    axes = list(old.axis[:old.schedulable_ndim]) + [IterVar(iv.var, iv.dom) for iv in old.axis[old.schedulable_ndim:]]
    index = _leaf_indices(st, rng, {iv: iv.var for iv in old.axis[:old.schedulable_ndim]})
    idx = tuple(index[iv] for iv in data_leaves) + tuple(iv.var for iv in axes[old.schedulable_ndim:])
    _set_op(sch, st, ComputeOp(old.name, axes, TensorLoad(cache.dtype, cache, idx), old.tag, old.attrs))
    st.pragmas = {iv: p for iv, p in st.pragmas.items() if iv in st.leaf_iter_vars}
    st.bindings = {iv: t for iv, t in st.bindings.items() if iv in st.leaf_iter_vars}
    return [cache] if isinstance(tensor, (list, tuple)) else cache


__all__ += ["cache_write_tensor_compute"]
