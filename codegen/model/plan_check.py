"""``check_run_list``: every buffer a run list hands a kernel is one the kernel may use in full.

isl proves each kernel's accesses inside the buffers of its own signature; this check closes the rest:
each place (:class:`~codegen.model.plan.Loc`) of a step, an index check or an output copy has a known
kind, dtype and shape, lies wholly inside the workspace / weights blob it names (aligned, at a
non-negative offset) or is the declared input / output of that number with its dtype and shape, and a
native step's arguments are exactly, in number, order, dtype and shape, the buffers its kernel was
lowered for (:attr:`~codegen.model.plan.Step.signature`).  ``build_model`` runs it on every run list
it plans; ``load_model`` on every ``graph.json`` before the first run, and checks that ``graph.json``
is the run list ``model.so``'s run entries were generated for (their places are compiled in: a
``graph.json`` edited consistently, digests included, still cannot move a buffer under them).
"""
from __future__ import annotations

import numpy as np

from tensorir.graph import GraphError

from ..memory_plan import ALIGN
from .plan import INPUT, OUTPUT, WEIGHTS, WORKSPACE, Loc, RunList, plan_digest
from .plan_control import Concurrent, IfItem, LoopItem, Steps, item_locs, walk

KINDS = (INPUT, OUTPUT, WORKSPACE, WEIGHTS)


def _is_count(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 0


def _dims(shape, what: str) -> tuple[int, ...]:
    if not isinstance(shape, (tuple, list)) or not all(_is_count(d) for d in shape):
        raise ValueError(f"{what}: shape {shape!r} is not a list of non-negative integers")
    return tuple(shape)


def _dtype(dtype, what: str) -> np.dtype:
    try:
        t = np.dtype(dtype) if isinstance(dtype, str) else None
    except TypeError:
        t = None
    if t is None or (t.kind not in "biuf" and t.name != "bfloat16"):
        raise ValueError(f"{what}: dtype {dtype!r} is not a numeric dtype")
    return t


def _count(x, what: str) -> int:
    if not _is_count(x):
        raise ValueError(f"{what} is {x!r}, not a non-negative integer")
    return x


def _check_loc(run: RunList, loc: Loc, what: str) -> None:
    if loc.kind not in KINDS:
        raise ValueError(f"{what}: kind {loc.kind!r} is not one of {', '.join(KINDS)}")
    _dtype(loc.dtype, what)
    _dims(loc.shape, what)
    desc = f"{loc.dtype}{list(loc.shape)}"
    if loc.kind in (INPUT, OUTPUT):
        table = run.inputs if loc.kind == INPUT else run.outputs
        if not _is_count(loc.index) or loc.index >= len(table):
            raise ValueError(f"{what}: {loc.kind} {loc.index!r} does not exist (the model has {len(table)})")
        name, dtype, shape = table[loc.index]
        if np.dtype(dtype) != np.dtype(loc.dtype) or tuple(shape) != tuple(loc.shape):
            raise ValueError(f"{what}: {desc} does not match {loc.kind} {name!r} ({dtype}{list(shape)})")
        return
    size = run.memory.peak if loc.kind == WORKSPACE else run.weights_bytes
    off = loc.offset
    if not _is_count(off) or off % ALIGN:
        raise ValueError(f"{what}: {loc.kind} offset {off!r} is not a non-negative multiple of {ALIGN}")
    if off + loc.nbytes > size:
        raise ValueError(f"{what}: {desc} at {loc.kind} offset {off} ends at byte {off + loc.nbytes}, past the "
                         f"{loc.kind} of {size} bytes")


def _check_step(run: RunList, i: int, where: str) -> None:
    step = run.steps[i]
    at = f"{where}: step {i} (kernel {step.kernel})"
    places = step.call_args

    def label(k: int) -> str:
        n = len(step.args)
        return f"argument {k}" if k < n else "output" if k == n else f"scratch {k - n - 1}"
    for k, loc in enumerate(places):
        _check_loc(run, loc, f"{at}: {label(k)}")
    if step.out.kind in (INPUT, WEIGHTS):
        raise ValueError(f"{at}: writes its result into the {step.out.kind}s")
    for c in step.checks:
        if not _is_count(c.arg) or c.arg >= len(step.args):
            raise ValueError(f"{at}: index check of node {c.node} names argument {c.arg!r} of {len(step.args)}")
    if not step.native:
        return
    if step.signature is None:
        raise ValueError(f"{at}: no kernel signature to check its buffers against (re-export the model)")
    if len(step.signature) != len(places):
        raise ValueError(f"{at}: {len(places)} buffers passed, the kernel was lowered for {len(step.signature)}")
    for k, (loc, (dtype, shape)) in enumerate(zip(places, step.signature)):
        name = label(k)
        _dims(shape, f"{at}: signature of {name}")
        if np.dtype(loc.dtype) != _dtype(dtype, f"{at}: signature of {name}") or tuple(loc.shape) != tuple(shape):
            raise ValueError(f"{at}: {name} is {loc.kind} {loc.dtype}{list(loc.shape)}, the kernel was lowered "
                             f"for {dtype}{list(shape)}")


def check_compiled_for(run: RunList, address) -> None:
    """The run entries at ``address(symbol)`` were generated for ``run`` (their places are compiled in)."""
    import ctypes
    from .entries import PLAN_DIGEST
    compiled = ctypes.string_at(address(PLAN_DIGEST), 64).decode("ascii", "replace")
    if compiled != plan_digest(run):
        raise ValueError("the run list differs from the one the model's native code was generated for "
                         f"({PLAN_DIGEST} {compiled[:12]}..., the run list's {plan_digest(run)[:12]}...)")


def _same(dst: Loc, src: Loc, what: str) -> None:
    if np.dtype(dst.dtype) != np.dtype(src.dtype) or dst.nbytes != src.nbytes:
        raise ValueError(f"{what}: {src.kind} {src.dtype}{list(src.shape)} copied into {dst.kind} "
                         f"{dst.dtype}{list(dst.shape)}")


def _scalar(loc: Loc, kinds: str, what: str) -> None:
    if np.dtype(loc.dtype).kind not in kinds or loc.nbytes == 0:
        raise ValueError(f"{what}: {loc.dtype}{list(loc.shape)} is not a non-empty {'/'.join(kinds)} tensor")


def _check_copies(item, what: str) -> None:
    """The copies an item makes are between buffers of one dtype and size (the run entry copies bytes);
    a condition is bool or integer, a trip count an integer, the iteration number int64."""
    if isinstance(item, IfItem):
        _scalar(item.cond, "biu", f"{what}: the condition")
        for outs in (item.then_out, item.else_out):
            if len(outs) != len(item.out):
                raise ValueError(f"{what}: {len(outs)} branch results for {len(item.out)} results")
            for k, (dst, src) in enumerate(zip(item.out, outs)):
                if dst is not None:
                    _same(dst, src, f"{what}: result {k}")
    elif isinstance(item, LoopItem):
        nc = len(item.carried)
        _scalar(item.trip, "iu", f"{what}: the trip count")
        for loc, name in ((item.cond, "the condition"), (item.cond_in, "the body's condition"),
                          (item.cond_out, "the body's condition result")):
            _scalar(loc, "biu", f"{what}: {name}")
        if item.iteration.dtype != "int64" or item.iteration.nbytes != 8:
            raise ValueError(f"{what}: the iteration number is {item.iteration.dtype}{list(item.iteration.shape)}")
        if not len(item.init) == len(item.carried_out) == nc or len(item.out) != nc + len(item.scan_out):
            raise ValueError(f"{what}: {len(item.init)} initial values, {nc} carried, {len(item.carried_out)} "
                             f"results, {len(item.out)} outputs for {len(item.scan_out)} scanned")
        for k, dst in enumerate(item.carried):
            _same(dst, item.init[k], f"{what}: carried value {k}")
            _same(dst, item.carried_out[k], f"{what}: carried value {k}")
            if item.out[k] is not None:
                _same(item.out[k], dst, f"{what}: result {k}")
        rows = {dst.shape[0] for dst in item.out[nc:] if dst is not None and dst.shape}
        for k, (dst, src) in enumerate(zip(item.out[nc:], item.scan_out)):
            if dst is not None:
                _same(Loc(dst.kind, dst.dtype, tuple(dst.shape[1:])), src, f"{what}: scan output {k}")
        if len(rows) > 1 or any(dst is not None and not dst.shape for dst in item.out[nc:]):
            raise ValueError(f"{what}: scan outputs of different lengths")
        need = sum(item.carried[k].nbytes for k in item.swapped())
        if need and (item.swap is None or item.swap.nbytes < need):
            raise ValueError(f"{what}: no swap buffer of {need} bytes for the carried values passed on swapped")


def _disjoint(a: Loc, b: Loc) -> bool:
    """Whether places ``a`` and ``b`` share no byte."""
    if a.kind != b.kind:
        return True
    if a.kind in (INPUT, OUTPUT):
        return a.index != b.index
    return a.offset + a.nbytes <= b.offset or b.offset + b.nbytes <= a.offset or not (a.nbytes and b.nbytes)


def _check_concurrent(run: RunList, item: Concurrent, what: str) -> None:
    """Steps that run at once are native, check no indices (a failing check returns from the run entry) and
    write no byte another of them reads or writes."""
    steps = range(item.first, item.end)
    for i in steps:
        step = run.steps[i]
        if not step.native or step.checks:
            raise ValueError(f"{what}: step {i} (kernel {step.kernel}) runs concurrently but "
                             f"{'has index checks' if step.native else 'is a reference fallback'}")
        for j in steps:
            other = run.steps[j]
            if j != i and any(not _disjoint(w, loc) for w in [step.out, *step.scratch] for loc in other.call_args):
                raise ValueError(f"{what}: step {i} (kernel {step.kernel}) writes a buffer that step {j} (kernel "
                                 f"{other.kernel}), run at the same time, uses")


def _check_program(run: RunList, where: str) -> None:
    """Every place the control flow names lies inside its blob, its copies agree in size, and the
    program runs each step once."""
    seen: list[int] = []
    for k, item in enumerate(walk(run.block)):
        if isinstance(item, Steps):
            if not 0 <= item.first <= item.end <= len(run.steps):
                raise ValueError(f"{where}: program item {k}: steps {item.first}..{item.end} outside the run list")
            seen += range(item.first, item.end)
        what = f"{where}: program item {k} ({getattr(item, 'node', 'steps')})"
        if isinstance(item, Concurrent):
            _check_concurrent(run, item, what)
        for loc in item_locs(item):
            _check_loc(run, loc, what)
        _check_copies(item, what)
    if sorted(seen) != list(range(len(run.steps))):
        raise ValueError(f"{where}: the program does not run every step exactly once")


def check_run_list(run: RunList, where: str = "build_model", error: type[Exception] = GraphError,
                   compiled=None) -> None:
    """Refuse (``error``, naming the step, kernel and argument) a run list that would hand a kernel a
    buffer it could touch outside of: see the module docstring.  ``compiled`` (a symbol -> address
    function of a loaded model library): also refuse a run list other than the one it was built for."""
    try:
        _count(run.memory.peak, "the memory plan's workspace_bytes")
        _count(run.weights_bytes, "the weights' bytes")
        for kind, table in (("input", run.inputs), ("output", run.outputs)):
            for name, dtype, shape in table:
                _dtype(dtype, f"{kind} {name!r}")
                _dims(shape, f"{kind} {name!r}")
        for name, off, nbytes in run.weights:
            end = _count(off, f"constant {name!r}: offset") + _count(nbytes, f"constant {name!r}: bytes")
            if end > run.weights_bytes:
                raise ValueError(f"constant {name!r} at offset {off} ({nbytes} bytes) ends past the weights of "
                                 f"{run.weights_bytes} bytes")
        for i in range(len(run.steps)):
            _check_step(run, i, where)
        for k, (dst, src) in enumerate(run.copies):
            _check_loc(run, dst, f"{where}: output copy {k}: destination")
            _check_loc(run, src, f"{where}: output copy {k}: source")
            if dst.kind != OUTPUT or dst.nbytes != src.nbytes:
                raise ValueError(f"{where}: output copy {k}: {src.kind} {src.dtype}{list(src.shape)} into "
                                 f"{dst.kind} {dst.dtype}{list(dst.shape)}")
        _check_program(run, where)
        if compiled is not None:
            check_compiled_for(run, compiled)
    except ValueError as e:
        msg = str(e) if str(e).startswith(where) else f"{where}: {e}"
        raise error(msg) from None
