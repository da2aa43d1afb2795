"""Expand ``tvm_thread_allreduce`` (thread_allreduce.py) into warp shuffles and shared memory.

The threads of a block that differ only in the reduced thread index (``R`` of them, the block's
extent on that axis) form a group; every thread of the group ends with the combined value of all
their accumulators.  By the shape of the group (TVM's ``lower_thread_allreduce`` makes the same
choices):

* ``threadIdx.x`` and ``R`` a power of two up to 32: a butterfly of ``__shfl_xor_sync`` within
  segments of ``R`` lanes;
* ``threadIdx.x`` and ``R`` a multiple of 32: a butterfly in each warp, lane 0 of each warp writes
  its value to shared memory, and each warp combines those ``R / 32`` values in a second butterfly
  (lanes beyond them hold the reducer's identity);
* otherwise (``R`` = 100, or a reduction over ``threadIdx.y``): a tree in shared memory, halving
  the active threads between barriers.

Every thread of the block must reach the expansion (shuffles and barriers): one inside an ``if``
that depends on the thread index is refused.
"""
from __future__ import annotations

from ..expr import And, BufferLoad, Call, EQ, Expr, IntImm, LT, Min, Select, StringImm, Var, binary
from ..schedule import ScheduleError
from ..stmt import Allocate, Buffer, BufferStore, IfThenElse, LetStmt, Stmt, seq
from ..visitor import Mutator, collect
from .thread_allreduce import ALLREDUCE, AllReduce

SHUFFLE = "tvm_warp_shuffle_xor"     # (value, lane mask, width, active-lane mask) -> value
THREAD_INDEX = "tt_thread_index"     # ("threadIdx.x") -> int32
_AXES = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


def _i(v: int) -> IntImm:
    return IntImm("int32", v)


def thread_index(tag: str) -> Expr:
    return Call("int32", THREAD_INDEX, (StringImm("handle", tag),))


def expand_allreduce(stmt: Stmt, table: dict, block: tuple) -> Stmt:
    """``stmt`` with each cross-thread reduction expanded for a block of extents ``block`` (x, y, z)."""
    if not table:
        return stmt
    return _Expand(table, block).visit(stmt)


class _Expand(Mutator):
    def __init__(self, table: dict, block: tuple):
        self.table, self.block = table, block
        self.divergent: list[Expr] = []
        self.thread_vars: set = set()
        self.enclosing: dict = {}            # thread tag -> the variable of an enclosing loop bound to it

    def visit_IfThenElse(self, s: IfThenElse):
        thread_dependent = bool(collect(s.condition, BufferLoad)) or any(
            isinstance(c, Call) and c.name == THREAD_INDEX for c in collect(s.condition, Call)) or any(
            v in self.thread_vars for v in collect(s.condition, Var))
        self.divergent.append(s.condition if thread_dependent else None)
        try:
            return self.generic_visit(s)
        finally:
            self.divergent.pop()

    def visit_For(self, s):
        if s.kind != "thread" or s.thread_tag not in _AXES:
            return self.generic_visit(s)
        self.thread_vars.add(s.loop_var)
        saved = dict(self.enclosing)
        self.enclosing.setdefault(s.thread_tag, s.loop_var)
        try:
            return self.generic_visit(s)
        finally:
            self.enclosing = saved

    def visit_BufferStore(self, s: BufferStore):
        if not (isinstance(s.value, Call) and s.value.name == ALLREDUCE):
            return self.generic_visit(s)
        if s.value.args[0].value:            # a tuple's later components: expanded with the first
            return seq()
        red: AllReduce = self.table[s.buffer.uid]
        cond = next((c for c in self.divergent if c is not None), None)
        if cond is not None:
            raise ScheduleError(f"stage {red.stage}: the cross-thread reduction over axis {red.axis} ({red.tag}) "
                                f"is inside 'if ({cond})', which not all threads of a block take; every thread "
                                "must join it: choose extents that divide, or guard only the reduced values")
        accs = [ld.buffer for ld in s.value.args[1:]]
        return _AllReduceCode(red, accs, self.block, self.enclosing).code()


class _AllReduceCode:
    """The statements of one all-reduce: ``accs`` (local, one element each) in, ``red.results`` out."""

    def __init__(self, red: AllReduce, accs: list, block: tuple, enclosing: dict):
        self.red, self.accs, self.block = red, accs, block
        self.index = lambda tag: enclosing[tag] if tag in enclosing else thread_index(tag)  # a loop var: >= 0
        axis = _AXES.index(red.tag)
        self.R = block[axis]
        self.threads = block[0] * block[1] * block[2]
        self.groups = self.threads // self.R
        self.lane = self.index(red.tag)
        group, stride = _i(0), 1
        for k, tag in enumerate(_AXES):
            if k != axis and block[k] > 1:
                group = group + self.index(tag) * _i(stride)
                stride *= block[k]
        self.group = group
        self.zero = (_i(0),)

    # -- pieces ---------------------------------------------------------------------------------------
    def combine(self, lhs: tuple, rhs: tuple) -> tuple:
        c = self.red.combiner
        return (c.combine(lhs[0], rhs[0]),) if len(lhs) == 1 else tuple(c.combine_tuple(lhs, rhs))

    def values(self) -> tuple:
        return tuple(BufferLoad(a.dtype, a, self.zero) for a in self.accs)

    def assign(self, new: tuple, target=None) -> Stmt:
        """``accs`` (or ``target(k)`` stores) = ``new``, all computed before any is stored."""
        temps = [Var(f"{a.name}.next", a.dtype) for a in self.accs]
        store = target or (lambda k, v: BufferStore(self.accs[k], v, self.zero))
        body = seq(*[store(k, t) for k, t in enumerate(temps)])
        for t, v in reversed(list(zip(temps, new))):
            body = LetStmt(t, v, body)
        return body

    def lane_mask(self) -> Expr:
        """The lanes present in this thread's warp (all 32 but in a last, partial warp)."""
        if self.threads % 32 == 0:
            return _i(-1)
        bx, by, _ = self.block
        tid = self.index("threadIdx.x") + self.index("threadIdx.y") * _i(bx) + self.index("threadIdx.z") * _i(bx * by)
        partial = (1 << (self.threads % 32)) - 1
        return Select("int32", binary(EQ, tid // _i(32), _i(self.threads // 32)), _i(partial), _i(-1))

    def butterfly(self, width: int, steps: int) -> list:
        """``steps`` xor-shuffle rounds within segments of ``width`` lanes, offsets halving."""
        out, mask = [], self.lane_mask()
        off = 1 << (steps - 1)
        while off >= 1:
            # every lane shuffles every component before combining (a Select may skip an operand)
            shuffled = tuple(Var(f"{a.name}.other", a.dtype) for a in self.accs)
            step = self.assign(self.combine(self.values(), shuffled))
            for t, a in reversed(list(zip(shuffled, self.accs))):
                step = LetStmt(t, Call(a.dtype, SHUFFLE, (BufferLoad(a.dtype, a, self.zero), _i(off), _i(width), mask)),
                               step)
            out.append(step)
            off //= 2
        return out

    def shared(self, n: int) -> list:
        return [Buffer(f"{r.name}_buf", r.dtype, (_i(n),), "shared") for r in self.red.results]

    # -- the three shapes --------------------------------------------------------------------------------
    def code(self) -> Stmt:
        R = self.R
        if R == 1:
            body, bufs = [], []
        elif self.red.tag == "threadIdx.x" and R <= 32 and R & (R - 1) == 0:
            body, bufs = self.butterfly(R, R.bit_length() - 1), []
        elif self.red.tag == "threadIdx.x" and R % 32 == 0:
            body, bufs = self.warps_then_shared()
        else:
            body, bufs = self.tree()
        if not bufs:
            body += [BufferStore(r, v, self.zero) for r, v in zip(self.red.results, self.values())]
        stmt = seq(*body)
        for b in reversed(bufs):
            stmt = Allocate(b, stmt)
        return stmt

    def warps_then_shared(self) -> tuple[list, list]:
        from .gpu import barrier
        W = self.R // 32
        bufs = self.shared(self.groups * W)
        warp, lane32 = self.lane // _i(32), self.lane % _i(32)
        body = self.butterfly(32, 5)
        body.append(IfThenElse(binary(EQ, lane32, _i(0)), seq(*[BufferStore(b, v, (self.group * _i(W) + warp,))
                                                        for b, v in zip(bufs, self.values())])))
        body.append(barrier())
        first = self.group * _i(W) + binary(Min, lane32, _i(W - 1))   # in bounds for every lane
        body += [BufferStore(a, Select(a.dtype, binary(LT, lane32, _i(W)), BufferLoad(a.dtype, b, (first,)), e),
                             self.zero) for a, b, e in zip(self.accs, bufs, self.red.identity)]
        body += self.butterfly(32, 5)
        body += [BufferStore(r, v, self.zero) for r, v in zip(self.red.results, self.values())]
        body.append(barrier())               # the buffers are free again for the next execution
        return body, bufs

    def tree(self) -> tuple[list, list]:
        from .gpu import barrier
        R = self.R
        bufs = self.shared(self.groups * R)
        mine = self.group * _i(R) + self.lane
        body = [BufferStore(b, v, (mine,)) for b, v in zip(bufs, self.values())]
        body.append(barrier())
        half = 1 << ((R - 1).bit_length() - 1)
        while half >= 1:
            lhs = tuple(BufferLoad(b.dtype, b, (mine,)) for b in bufs)
            rhs = tuple(BufferLoad(b.dtype, b, (mine + _i(half),)) for b in bufs)
            step = self.assign(self.combine(lhs, rhs), lambda k, v: BufferStore(bufs[k], v, (mine,)))
            active = binary(And, binary(LT, self.lane, _i(half)), binary(LT, self.lane + _i(half), _i(R)))
            body.append(IfThenElse(active, step))
            body.append(barrier())
            half //= 2
        body += [BufferStore(r, BufferLoad(b.dtype, b, (self.group * _i(R),)), self.zero)
                 for r, b in zip(self.red.results, bufs)]
        body.append(barrier())
        return body, bufs


__all__ = ["expand_allreduce", "thread_index", "SHUFFLE", "THREAD_INDEX"]
