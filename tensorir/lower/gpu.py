"""GPU passes, run by the CUDA backend on each kernel of the function ``te.lower`` returns (never for
CPU targets); ``pipeline.gpu_passes`` lists them in their order:

1. ``verify_bindings``: every loop bound to one thread tag has one extent, ``threadIdx`` extents are
   constants, at most ``max_threads`` threads per block, ``blockIdx`` loops only under other block
   loops, no CPU-only loops (``parallel``), no global intermediates; else ``ScheduleError`` naming
   the stage and the axis;
2. ``auto_unroll``: the ``auto_unroll_max_step`` / ``unroll_explicit`` pragmas;
3. (``inject_virtual_threads``, gpu_vthread.py, runs before 2);
4. ``hoist_shared``: ``shared`` allocations move to the top of the kernel (static shared memory);
   ``shared_bytes`` checks them against ``max_shared_memory`` bytes; ``local`` ones stay per thread;
5. ``insert_barriers``: ``__syncthreads()`` between a shared-memory write and a later read or
   write of that buffer, in the same sequence or across iterations of an enclosing loop
   (then ``inject_double_buffer``, gpu_double_buffer.py, and ``expand_allreduce``, gpu_allreduce.py);
6. ``launch_config``: grid and block extents from the thread loops.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .. import dtype as dt
from ..arith import simplify
from ..expr import BufferLoad, Call, Expr, IntImm, StringImm, Var, structural_equal
from ..schedule import ScheduleError
from ..stmt import Allocate, BufferStore, Evaluate, For, IfThenElse, LetStmt, LoweredFunc, Seq, Stmt, seq
from ..visitor import Mutator, collect, substitute
from .gpu_vthread import is_vthread

BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
MAX_BLOCK_DIM = {"threadIdx.x": 1024, "threadIdx.y": 1024, "threadIdx.z": 64,
                 "blockIdx.x": 2 ** 31 - 1, "blockIdx.y": 65535, "blockIdx.z": 65535}


@dataclass(frozen=True)
class GPULimits:
    max_threads: int = 1024
    max_shared_memory: int = 48 * 1024
    async_copy: bool = False        # the arch has cp.async (sm_80 and newer): double_buffer(async_copy=True)


@dataclass(frozen=True)
class LaunchConfig:
    """Grid extents (Exprs over the size vars) and block extents (ints), x, y, z."""
    grid: tuple
    block: tuple
    shared_bytes: int

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


def barrier() -> Stmt:
    return Evaluate(Call("int32", "tvm_storage_sync", (StringImm("handle", "shared"),)))


def is_barrier(s) -> bool:
    return isinstance(s, Evaluate) and isinstance(s.value, Call) and s.value.name == "tvm_storage_sync"


def is_scan_loop(loop: For) -> bool:
    """The serial loop of a ``te.scan``; isl proved its steps need no synchronisation between
    threads (``poly/threads.py``)."""
    return any(k == "scan_update_scope" for k, _ in loop.annotations)


# -- 1. verification --------------------------------------------------------------------------------------
def _where(loop: For, stages: dict) -> str:
    return f"stage {stages.get(loop.loop_var, '?')}, axis {loop.loop_var.name}"


def verify_bindings(func: LoweredFunc, limits: GPULimits, stages: dict) -> None:
    extents: dict[str, For] = {}
    args = set(func.buffers)

    def walk(s, serial_above: For | None, threaded: bool):
        if isinstance(s, For):
            if s.kind == "parallel":
                raise ScheduleError(f"{_where(s, stages)}: 'parallel' is a CPU annotation; on the GPU bind the "
                                    "axis to blockIdx.* / threadIdx.*")
            if s.kind == "thread" and not is_vthread(s):
                tag = s.thread_tag
                if tag not in BLOCK_TAGS + THREAD_TAGS:
                    raise ScheduleError(f"{_where(s, stages)}: unknown thread tag {tag!r}")
                if tag in BLOCK_TAGS and serial_above is not None:
                    raise ScheduleError(f"{_where(s, stages)}: bound to {tag} inside the serial loop "
                                        f"{serial_above.loop_var.name}; block axes must be outermost")
                if tag in THREAD_TAGS and not isinstance(s.extent, IntImm):
                    raise ScheduleError(f"{_where(s, stages)}: bound to {tag} with the symbolic extent "
                                        f"{s.extent}; thread extents must be constants (split by a constant)")
                first = extents.setdefault(tag, s)
                if first is not s and not structural_equal(simplify(first.extent), simplify(s.extent)):
                    raise ScheduleError(
                        f"{_where(s, stages)}: bound to {tag} with extent {s.extent}, but {tag} already has "
                        f"extent {first.extent} ({_where(first, stages)}); all loops bound to one thread "
                        "axis in a kernel must have the same extent")
                if isinstance(s.extent, IntImm) and s.extent.value > MAX_BLOCK_DIM[tag]:
                    raise ScheduleError(f"{_where(s, stages)}: {tag} extent {s.extent.value} exceeds the "
                                        f"limit {MAX_BLOCK_DIM[tag]}")
                threaded = True
            elif s.kind != "thread" and not is_scan_loop(s):  # a scan's steps: every thread runs them
                serial_above = serial_above or s
            walk(s.body, serial_above, threaded)
        elif isinstance(s, Seq):
            for x in s.stmts:
                walk(x, serial_above, threaded)
        elif isinstance(s, Allocate):
            if s.buffer.scope not in ("shared", "local", "warp"):   # warp: tensor-core fragments
                raise ScheduleError(f"stage {s.buffer.name}: an intermediate buffer of a CUDA kernel must be "
                                    f"'shared', 'local' or 'warp' (it is {s.buffer.scope!r}); use s.cache_read / "
                                    "cache_write with that scope, set_scope, or compute_inline")
            walk(s.body, serial_above, threaded)
        elif isinstance(s, IfThenElse):
            walk(s.then_case, serial_above, threaded)
            if s.else_case is not None:
                walk(s.else_case, serial_above, threaded)
        elif isinstance(s, LetStmt):
            walk(s.body, serial_above, threaded)
        elif isinstance(s, BufferStore) and not threaded and s.buffer in args:
            raise ScheduleError(f"stage {s.buffer.name}: no loop of it is bound to a GPU thread (blockIdx.* / "
                                "threadIdx.*), so every thread would compute all of it; bind its axes")

    walk(func.body, None, False)
    threads = 1
    for tag in THREAD_TAGS:
        if tag in extents:
            threads *= extents[tag].extent.value
    if threads > limits.max_threads:
        dims = ", ".join(f"{t}={extents[t].extent.value} ({_where(extents[t], stages)})"
                         for t in THREAD_TAGS if t in extents)
        raise ScheduleError(f"{threads} threads per block exceed the limit of {limits.max_threads}: {dims}")


# -- 2. unroll pragmas ---------------------------------------------------------------------------------------
def _steps(s) -> int | None:
    """Iterations of the innermost statements of ``s`` (None if a loop extent is not constant)."""
    if isinstance(s, For):
        inner = _steps(s.body)
        return None if inner is None or not isinstance(s.extent, IntImm) else s.extent.value * inner
    if isinstance(s, Seq):
        parts = [_steps(x) for x in s.stmts]
        return None if None in parts else max(parts, default=1)
    if isinstance(s, (Allocate, LetStmt)):
        return _steps(s.body)
    if isinstance(s, IfThenElse):
        parts = [_steps(x) for x in (s.then_case, s.else_case) if x is not None]
        return None if None in parts else max(parts)
    return 1


class _AutoUnroll(Mutator):
    def __init__(self):
        self.max_step, self.explicit = 0, False

    def visit_For(self, s: For):
        ann = dict(s.annotations)
        saved = self.max_step, self.explicit
        if "auto_unroll_max_step" in ann:
            self.max_step = int(float(ann["auto_unroll_max_step"]))
        if "unroll_explicit" in ann:
            self.explicit = ann["unroll_explicit"] not in ("0", "False", "false", "None")
        s = self.generic_visit(s)
        self.max_step, self.explicit = saved
        if s.kind not in ("serial", "unrolled") or not self.max_step or not isinstance(s.extent, IntImm):
            return s
        steps = _steps(s)
        if steps is None or steps > self.max_step:
            return s
        if self.explicit:
            return seq(*[substitute(s.body, {s.loop_var: simplify(s.min + k)}) for k in range(s.extent.value)])
        return replace(s, kind="unrolled")


def auto_unroll(stmt: Stmt) -> Stmt:
    """Loops under a ``auto_unroll_max_step=N`` pragma whose nest runs at most N steps are unrolled:
    expanded in the IR with ``unroll_explicit`` (true), else marked for the compiler."""
    return _AutoUnroll().visit(stmt)


# -- 4. shared memory -------------------------------------------------------------------------------------------
def hoist_shared(stmt: Stmt) -> Stmt:
    """Every ``shared`` allocation once at the top of ``stmt`` (a buffer that explicit unrolling or
    virtual threads allocated in several copies of a body is allocated, and counted, once)."""
    found: list = []

    class Strip(Mutator):
        def visit_Allocate(self, s: Allocate):
            body = self.visit(s.body)
            if s.buffer.scope == "shared":
                if s.buffer not in found:
                    found.append(s.buffer)
                return body
            return s if body is s.body else replace(s, body=body)

    body = Strip().visit(stmt)
    for buf in reversed(found):
        body = Allocate(buf, body)
    return body


def shared_bytes(stmt: Stmt, limits: GPULimits, stages: dict) -> int:
    sizes = []
    for a in collect(stmt, Allocate):
        n = 1
        for x in a.buffer.shape:
            x = simplify(x)
            if not isinstance(x, IntImm):
                raise ScheduleError(f"stage {a.buffer.name}: {a.buffer.scope} buffer of symbolic size "
                                    f"{list(map(str, a.buffer.shape))}; GPU buffers need a constant size "
                                    "(attach it inside loops of constant extent)")
            n *= x.value
        if a.buffer.scope == "shared":     # 16-byte aligned, as a dynamic allocation lays them out
            sizes.append((a.buffer.name, (n * dt.itemsize(a.buffer.dtype) + 15) // 16 * 16))
    total = sum(b for _, b in sizes)
    if total > limits.max_shared_memory:
        parts = ", ".join(f"stage {n}: {b} bytes" for n, b in sizes)
        raise ScheduleError(f"shared memory of {total} bytes exceeds the limit of {limits.max_shared_memory} "
                            f"bytes per block ({parts}); use smaller tiles")
    return total


# -- 5. barriers -------------------------------------------------------------------------------------------------
@dataclass
class _Acc:
    """Shared buffers read / written before the first barrier (head), after the last (tail)."""
    head_r: set
    head_w: set
    tail_r: set
    tail_w: set
    synced: bool

    @staticmethod
    def leaf(r: set, w: set) -> "_Acc":
        return _Acc(set(r), set(w), set(r), set(w), False)


def _conflict(r_before: set, w_before: set, r_after: set, w_after: set) -> bool:
    """Read after write or write after read (as TVM, two writes alone need no barrier)."""
    return bool(w_before & r_after) or bool(r_before & w_after)


class _Sync:
    def __init__(self, thread_vars: set):
        self.thread_vars = thread_vars

    def accesses(self, s) -> tuple[set, set]:
        from ..buffer import AccessPtr      # addresses passed to calls (tensor intrinsics: ldmatrix, mma store)
        ptrs = [p for p in collect(s, AccessPtr) if p.buffer.scope == "shared"]
        r = {ld.buffer for ld in collect(s, BufferLoad) if ld.buffer.scope == "shared"}
        w = {st.buffer for st in collect(s, BufferStore) if st.buffer.scope == "shared"}
        return r | {p.buffer for p in ptrs if "r" in p.mask}, w | {p.buffer for p in ptrs if "w" in p.mask}

    def uniform(self, cond: Expr) -> bool:
        return not collect(cond, BufferLoad) and not any(v in self.thread_vars for v in collect(cond, Var))

    def run(self, s) -> tuple[Stmt, _Acc]:
        if isinstance(s, Seq):
            return self.sequence(list(s.stmts))
        if isinstance(s, For) and s.kind == "thread":
            body, acc = self.run(s.body)
            return replace(s, body=body), acc
        if isinstance(s, For):
            body, acc = self.run(s.body)
            once = isinstance(s.extent, IntImm) and s.extent.value <= 1
            if not once and _conflict(acc.tail_r, acc.tail_w, acc.head_r, acc.head_w):  # carried
                body = seq(body, barrier())
                acc = _Acc(acc.head_r, acc.head_w, set(), set(), True)
            return replace(s, body=body), acc
        if isinstance(s, (Allocate, LetStmt)):
            body, acc = self.run(s.body)
            return replace(s, body=body), acc
        if isinstance(s, IfThenElse):
            return self.branch(s)
        return s, _Acc.leaf(*self.accesses(s))

    def branch(self, s: IfThenElse) -> tuple[Stmt, _Acc]:
        then, a = self.run(s.then_case)
        other, b = (None, None) if s.else_case is None else self.run(s.else_case)
        inner = collect(then, is_barrier) + ([] if other is None else collect(other, is_barrier))
        if not self.uniform(s.condition):
            if inner:
                raise ScheduleError(f"shared memory needs a barrier inside 'if ({s.condition})', which not all "
                                    "threads of a block take; choose tile sizes that divide the extents")
            return s, _Acc.leaf(*self.accesses(s))
        new = IfThenElse(s.condition, then, other)
        if b is None:
            b = _Acc(set(), set(), set(), set(), False)
        if a.synced and b.synced:
            return new, _Acc(a.head_r | b.head_r, a.head_w | b.head_w, a.tail_r | b.tail_r, a.tail_w | b.tail_w, True)
        return new, _Acc.leaf(*self.accesses(new))

    def sequence(self, stmts: list) -> tuple[Stmt, _Acc]:
        out: list = []
        pend_r, pend_w = set(), set()
        head = None
        for s in stmts:
            s2, acc = self.run(s)
            if _conflict(pend_r, pend_w, acc.head_r, acc.head_w):
                out.append(barrier())
                if head is None:
                    head = (pend_r, pend_w)
                pend_r, pend_w = set(), set()
            if acc.synced:
                if head is None:
                    head = (pend_r | acc.head_r, pend_w | acc.head_w)
                pend_r, pend_w = set(acc.tail_r), set(acc.tail_w)
            else:
                pend_r, pend_w = pend_r | acc.head_r, pend_w | acc.head_w
            out.append(s2)
        if head is None:
            return seq(*out), _Acc.leaf(pend_r, pend_w)
        return seq(*out), _Acc(head[0], head[1], pend_r, pend_w, True)


def insert_barriers(stmt: Stmt) -> Stmt:
    """Barriers where threads could see shared memory another thread has not finished with."""
    thread_vars = {f.loop_var for f in collect(stmt, For) if f.kind == "thread" and f.thread_tag in THREAD_TAGS}
    return _Sync(thread_vars).run(stmt)[0]


# -- 6. launch configuration ------------------------------------------------------------------------------------
#: pragma of a loop that whole warps run, every lane alike (``threadIdx.x`` 32 lanes, bound by no loop): its
#: tensor intrinsics divide the work among the lanes themselves (the wgmma GEMM, ``cuda_wgmma.py``)
WARP_LANES = "warp_lanes"


def launch_config(stmt: Stmt, shared: int = 0) -> LaunchConfig:
    ext: dict[str, Expr] = {}
    for f in collect(stmt, For):
        if f.kind == "thread" and f.thread_tag in BLOCK_TAGS + THREAD_TAGS:
            ext.setdefault(f.thread_tag, simplify(f.extent))
    grid = tuple(ext.get(t, IntImm("int32", 1)) for t in BLOCK_TAGS)
    block = tuple(ext[t].value if t in ext else 1 for t in THREAD_TAGS)
    if "threadIdx.x" not in ext and any(k == WARP_LANES for f in collect(stmt, For) for k, _ in f.annotations):
        block = (32,) + block[1:]      # whole warps run the pragma's loop: lane-level work is the intrinsics'
    return LaunchConfig(grid, block, shared)


__all__ = ["WARP_LANES", "GPULimits", "LaunchConfig", "verify_bindings", "auto_unroll", "hoist_shared",
           "shared_bytes", "insert_barriers", "launch_config", "barrier", "is_barrier"]
