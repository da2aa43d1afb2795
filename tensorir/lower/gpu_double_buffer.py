"""Double-buffered shared memory (TVM's ``s[T].double_buffer()``), with register prefetch.

Run by ``lower_gpu`` after the barriers are in place.  A loop whose body starts with the cooperative
fetch of a double-buffered shared stage (stores into shared memory that read no shared memory), then a
barrier, then the computation that reads the tile::

    for ko:  fetch(ko) -> S;  sync;  compute(S);  sync

becomes a software pipeline over two halves of ``S`` with one barrier per iteration, the global loads
of the next slice in registers while this one is computed::

    fetch(ko=min) -> S[half 0];  sync
    for ko:
        if ko + 1 < end: regs = global slice ko + 1     (loads in flight during compute)
        compute(S[half ko % 2])
        if ko + 1 < end: S[half (ko + 1) % 2] = regs
        sync

Iteration ko writes the half that iteration ko - 1 read, after the barrier that ended it; it reads
the half written before that barrier.  A stage whose loop does not have this shape (or whose
buffer is touched outside the loop) is left single-buffered: the request is a hint, as in TVM.

With ``double_buffer(async_copy=True, stages=S)`` on every tile of the fetch, and a target with
``cp.async`` (sm_80+), the tile gets ``S`` slots (``S >= 2``) filled from global memory without registers
(``CP_ASYNC`` calls: a float or a contiguous vector of 8 or 16 bytes per copy, a scattered vector lane
by lane), one commit group per slice, slice k in slot k % S::

    for i < S - 1:  async fetch(min + i) -> S[slot];  commit
    for ko:
        wait until at most S - 2 groups are pending (slice ko landed);  sync
        if ko + S - 1 < end: async fetch(ko + S - 1) -> S[slot (ko + S - 1) % S]
        commit;  compute(S[slot ko % S])
    sync

The barrier at the top of iteration ko also ends every read of slot (ko - 1) % S, which that iteration
refills.  A padding select ``S[i] = c ? G[j] : 0`` whose condition is one for the copy's lanes is a
zero-filling copy (``CP_ASYNC``'s predicate: nothing read where it is false, zeros written); another
fetch that is not a plain copy (a cast) keeps the register pipeline.
"""
from __future__ import annotations

from dataclasses import replace

from .. import dtype as dt
from ..arith import simplify
from ..buffer import HANDLE, AccessPtr
from ..expr import BinaryOp, Broadcast, BufferLoad, Call, FloatImm, IntImm, Not, Ramp, Select, convert
from ..stmt import Allocate, Buffer, BufferStore, Evaluate, For, IfThenElse, LetStmt, Seq, Stmt, seq
from ..visitor import Mutator, collect, substitute


CP_ASYNC = "tt.cp_async"                 # (AccessPtr to shared "w", AccessPtr to global "r", bytes[, predicate])
CP_ASYNC_COMMIT = "tt.cp_async_commit"   # the copies issued since the last commit form a group
CP_ASYNC_WAIT = "tt.cp_async_wait"       # (n): wait until at most n groups of this thread are pending


class _NoMatch(Exception):
    """The loop is not a fetch-sync-compute pipeline of a double-buffered tile."""


def inject_double_buffer(stmt: Stmt, names, async_stages=()) -> Stmt:
    """Double-buffer the shared buffers named in ``names`` where their loop allows; ``async_stages``:
    ``(name, stages)`` of buffers filled with ``cp.async`` (where all of a fetch's buffers are; see the
    module doc)."""
    from .gpu import barrier, is_barrier
    shared = {a.buffer for a in collect(stmt, Allocate) if a.buffer.scope == "shared" and a.buffer.name in set(names)}
    if not shared:
        return stmt
    counts = {b: _accesses(stmt, b) for b in shared}
    doubled: dict = {}

    class Pipeline(Mutator):
        def visit_For(self, loop: For):
            loop = self.generic_visit(loop)
            if loop.kind == "thread":
                return loop
            try:
                return _pipeline(loop, shared, counts, doubled, barrier, is_barrier, dict(async_stages))
            except _NoMatch:
                return loop

    stmt = Pipeline().visit(stmt)
    return _Rebuffer(doubled).visit(stmt) if doubled else stmt


def _accesses(stmt, buf: Buffer) -> int:
    return len(collect(stmt, lambda n: isinstance(n, (BufferLoad, BufferStore)) and n.buffer is buf))


def _size(buf: Buffer) -> int:
    n = 1
    for x in buf.shape:
        x = simplify(convert(x))
        if not isinstance(x, IntImm):
            raise _NoMatch
        n *= x.value
    return n


def _reads_shared(s) -> bool:
    return any(ld.buffer.scope == "shared" for ld in collect(s, BufferLoad))


def _writes(s) -> set:
    return {st.buffer for st in collect(s, BufferStore)}


def _pipeline(loop: For, shared: set, counts: dict, doubled: dict, barrier, is_barrier, async_stages: dict) -> Stmt:
    stmts = list(loop.body.stmts) if isinstance(loop.body, Seq) else [loop.body]
    first = next((k for k, s in enumerate(stmts) if is_barrier(s)), None)
    if not first:
        raise _NoMatch
    head, rest = stmts[:first], stmts[first + 1:]
    fetch = [s for s in head if _writes(s) and _writes(s) <= shared]
    others = [s for s in head if s not in fetch]
    bufs = set().union(*(_writes(s) for s in fetch)) if fetch else set()
    if (not fetch or any(_reads_shared(s) or collect(s, is_barrier) for s in head)
            or any(_writes(s) & bufs for s in rest) or bufs & set(doubled)
            or any(_accesses(loop, b) != counts[b] for b in bufs)
            or (isinstance(loop.extent, IntImm) and loop.extent.value < 2)):
        raise _NoMatch
    sizes = {b: _size(b) for b in bufs}
    ko, end = loop.loop_var, loop.min + loop.extent
    sync_others = [*others, barrier()] if others else []
    rest = _strip_trailing_barrier(seq(*rest), is_barrier)
    if all(b.name in async_stages for b in bufs):
        try:
            return _async_pipeline(loop, fetch, sync_others, rest, bufs, sizes, doubled, barrier,
                                   min(async_stages[b.name] for b in bufs))
        except _NoMatch:
            pass
    nxt = substitute(seq(*fetch), {ko: ko + 1})
    compute = _Offset({b: (ko % 2) * sizes[b] for b in bufs}).visit(rest)
    more = ko + 1 < end
    regs = _Registers(bufs, f"{ko.name}.prefetch")
    load = regs.split(nxt, into_registers=True)
    store = regs.split(nxt, into_registers=False, half={b: ((ko + 1) % 2) * sizes[b] for b in bufs})
    body = seq(IfThenElse(more, load), *sync_others, compute, IfThenElse(more, store), barrier())
    _double(bufs, sizes, doubled, 2)
    return Allocate(regs.reg, seq(substitute(seq(*fetch), {ko: loop.min}), barrier(), replace(loop, body=body)))


def _async_pipeline(loop: For, fetch: list, sync_others: list, rest: Stmt, bufs: set, sizes: dict, doubled: dict,
                    barrier, stages: int) -> Stmt:
    """The loop as a ``stages``-slot cp.async pipeline (module doc); _NoMatch if a fetch is not plain copies."""
    ko, end = loop.loop_var, loop.min + loop.extent
    stages = max(2, int(stages))

    def copies(k):
        return _AsyncCopies({b: simplify(k % stages) * sizes[b] for b in bufs}).visit(
            substitute(seq(*fetch), {ko: k}))

    prologue = []
    for i in range(stages - 1):
        k = simplify(loop.min + i)
        fill = copies(k)
        known = isinstance(loop.extent, IntImm)
        if known and i >= loop.extent.value:
            fill = None
        elif not known:
            fill = IfThenElse(k < end, fill)
        prologue += [fill, cp_async_commit()]
    nxt = ko + (stages - 1)
    compute = _Offset({b: (ko % stages) * sizes[b] for b in bufs}).visit(rest)
    body = seq(cp_async_wait(stages - 2), barrier(), IfThenElse(nxt < end, copies(nxt)), cp_async_commit(),
               *sync_others, compute)
    _double(bufs, sizes, doubled, stages)
    return seq(*prologue, replace(loop, body=body), cp_async_wait(0), barrier())


def _double(bufs: set, sizes: dict, doubled: dict, slots: int) -> None:
    for b in bufs:
        doubled[b] = Buffer(b.name, b.dtype, (IntImm("int32", slots * sizes[b]),), b.scope)


def cp_async_wait(pending: int) -> Stmt:
    return Evaluate(Call("int32", CP_ASYNC_WAIT, (IntImm("int32", pending),)))


def cp_async_commit() -> Stmt:
    return Evaluate(Call("int32", CP_ASYNC_COMMIT, ()))


def _cp_async(dst: Buffer, dst_index, src: Buffer, src_index, nbytes: int, pred=None) -> Stmt:
    args = (AccessPtr(HANDLE, dst, (), "w", simplify(dst_index)), AccessPtr(HANDLE, src, (), "r", simplify(src_index)),
            IntImm("int32", nbytes))
    return Evaluate(Call("int32", CP_ASYNC, args + ((simplify(pred),) if pred is not None else ())))


def _zero_fill(v):
    """``(load, predicate)`` of a padding select ``c ? load : 0`` whose condition is one for all lanes;
    ``(v, None)`` for anything else."""
    if not (isinstance(v, Select) and isinstance(v.true_value, BufferLoad)):
        return v, None
    zero = v.false_value.value if isinstance(v.false_value, Broadcast) else v.false_value
    cond = _uniform(v.cond)
    if not (isinstance(zero, (IntImm, FloatImm)) and zero.value == 0 and cond is not None):
        return v, None
    return v.true_value, cond


def _uniform(e):
    """The scalar value of a condition that is one for every lane (built from broadcasts), else None."""
    if dt.lanes(e.dtype) == 1:
        return e
    if isinstance(e, Broadcast):
        return e.value if dt.lanes(e.value.dtype) == 1 else None
    if isinstance(e, BinaryOp):
        a, b = _uniform(e.a), _uniform(e.b)
        return None if a is None or b is None else replace(e, dtype=dt.element(e.dtype), a=a, b=b)
    if isinstance(e, Not):
        a = _uniform(e.a)
        return None if a is None else replace(e, dtype=dt.element(e.dtype), a=a)
    return None


def _ramp(index) -> tuple:
    """``(base, stride)`` of a vector index with a constant stride."""
    if not (isinstance(index, Ramp) and isinstance(index.stride, IntImm)):
        raise _NoMatch
    return index.base, index.stride.value


class _AsyncCopies(Mutator):
    """Each store ``S[i] = G[j]`` of a fetch nest as cp.async copies into ``S``'s half (``half``: the
    offset per buffer): one copy of a float or of a contiguous 8- or 16-byte vector, else lane by lane."""

    def __init__(self, half: dict):
        self.half = half

    def visit_BufferStore(self, s: BufferStore):
        v, pred = _zero_fill(s.value)
        if not (isinstance(v, BufferLoad) and v.buffer.scope == "global" and len(v.indices) == 1
                and len(s.indices) == 1 and dt.element(v.dtype) == dt.element(s.buffer.dtype)):
            raise _NoMatch
        item, lanes = dt.itemsize(dt.element(v.dtype)), dt.lanes(v.dtype)
        dst = _shift(s.indices[0], self.half[s.buffer])
        if lanes == 1 and item in (4, 8, 16):
            return _cp_async(s.buffer, dst, v.buffer, v.indices[0], item, pred)
        if lanes == 1:
            raise _NoMatch
        (d, ds), (g, gs) = _ramp(dst), _ramp(v.indices[0])
        if ds == 1 and gs == 1 and lanes * item in (8, 16):     # 16-bit elements too, 4 or 8 at a time
            return _cp_async(s.buffer, d, v.buffer, g, lanes * item, pred)
        if item not in (4, 8, 16):
            raise _NoMatch
        return seq(*(_cp_async(s.buffer, d + i * ds, v.buffer, g + i * gs, item, pred) for i in range(lanes)))


class _Registers:
    """Split a fetch nest into 'global -> registers' and 'registers -> shared': each store gets its
    slots in one local buffer, indexed by the nest's own (constant-extent, non-thread) loops."""

    def __init__(self, bufs: set, name: str):
        self.bufs, self.name, self.dtype = bufs, name, None
        self.reg = None

    def split(self, nest: Stmt, into_registers: bool, half: dict | None = None) -> Stmt:
        if self.reg is None:
            self._plan(nest)
        slots = iter(self.slots)
        regs = self

        class Split(Mutator):
            def visit_BufferStore(self, s: BufferStore):
                base, lanes = next(slots)
                index = Ramp(dt.with_lanes("int32", lanes), base, IntImm("int32", 1), lanes) if lanes > 1 else base
                if into_registers:
                    return BufferStore(regs.reg, s.value, (index,))
                value = BufferLoad(s.value.dtype, regs.reg, (index,))
                return BufferStore(s.buffer, value, (_shift(s.indices[0], half[s.buffer]),))

        return Split().visit(nest)

    def _plan(self, nest: Stmt) -> None:
        self.slots, offset = [], 0

        def walk(s, loops):
            nonlocal offset
            if isinstance(s, For):
                if s.kind != "thread":
                    if not (isinstance(s.extent, IntImm) and isinstance(s.min, IntImm)):
                        raise _NoMatch
                    loops = loops + [s]
                walk(s.body, loops)
            elif isinstance(s, Seq):
                for x in s.stmts:
                    walk(x, loops)
            elif isinstance(s, (IfThenElse,)):
                if s.else_case is not None:
                    raise _NoMatch
                walk(s.then_case, loops)
            elif isinstance(s, LetStmt):
                walk(s.body, loops)
            elif isinstance(s, BufferStore):
                if s.buffer not in self.bufs or len(s.indices) != 1:
                    raise _NoMatch
                lanes = dt.lanes(s.value.dtype)
                flat, stride = IntImm("int32", 0), 1
                for f in reversed(loops):
                    flat = flat + (f.loop_var - f.min) * stride
                    stride *= f.extent.value
                self.slots.append((simplify((offset + flat) * lanes) if lanes > 1 else simplify(offset + flat), lanes))
                offset += stride
                self.dtype = dt.element(s.value.dtype)
            else:
                raise _NoMatch

        walk(nest, [])
        lanes = {n for _, n in self.slots}
        if len(lanes) != 1:
            raise _NoMatch
        lanes = lanes.pop()
        self.reg = Buffer(self.name, self.dtype, (IntImm("int32", offset * lanes),), "local")


def _shift(index, offset):
    if isinstance(index, Ramp):
        return replace(index, base=simplify(index.base + offset))
    return simplify(index + offset)


class _Offset(Mutator):
    """Add each buffer's half offset to the (flat) index of its loads and addresses."""

    def __init__(self, offsets: dict):
        self.offsets = offsets

    def visit_BufferLoad(self, e: BufferLoad):
        e = self.generic_visit(e)
        if e.buffer in self.offsets:
            return replace(e, indices=(_shift(e.indices[0], self.offsets[e.buffer]),))
        return e

    def visit_AccessPtr(self, e):
        """An address passed to a call (a tensor intrinsic reading the tile: ``ldmatrix``)."""
        if e.buffer in self.offsets:
            return replace(e, offset=simplify(e.offset + self.offsets[e.buffer]))
        return e


class _Rebuffer(Mutator):
    """Every use of a doubled buffer now names its twice-as-large replacement."""

    def __init__(self, doubled: dict):
        self.doubled = doubled

    def visit_BufferLoad(self, e):
        e = self.generic_visit(e)
        return replace(e, buffer=self.doubled[e.buffer]) if e.buffer in self.doubled else e

    def visit_BufferStore(self, s):
        s = self.generic_visit(s)
        return replace(s, buffer=self.doubled[s.buffer]) if s.buffer in self.doubled else s

    def visit_Allocate(self, s):
        s = self.generic_visit(s)
        return replace(s, buffer=self.doubled[s.buffer]) if s.buffer in self.doubled else s

    def visit_AccessPtr(self, e):
        return replace(e, buffer=self.doubled[e.buffer]) if e.buffer in self.doubled else e


def _strip_trailing_barrier(s: Stmt, is_barrier) -> Stmt:
    if isinstance(s, Seq) and s.stmts:
        *init, last = s.stmts
        return seq(*init) if is_barrier(last) else seq(*init, _strip_trailing_barrier(last, is_barrier))
    if isinstance(s, (Allocate, LetStmt)):
        return replace(s, body=_strip_trailing_barrier(s.body, is_barrier))
    return s


__all__ = ["CP_ASYNC", "CP_ASYNC_COMMIT", "CP_ASYNC_WAIT", "cp_async_commit", "cp_async_wait", "inject_double_buffer"]
