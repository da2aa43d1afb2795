"""tiletune's thread pool (codegen/llvm/threadpool.py): parallel loops cut into chunks that the caller and
the pool's workers claim; results against numpy with several thread counts, several calling threads,
after ``fork``, and in an exported shared object (its own copy of the pool)."""
from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest

import tensorir as te

import codegen
from codegen.llvm import parallel, threadpool


def _kernel(rows: int = 64, cols: int = 48):
    """``B[i, j] = A[i, j] * 3 + i`` (the row index catches a chunk run with the wrong bounds), rows
    parallel, columns vectorized."""
    n = te.var("n")
    A = te.placeholder((n, cols), name="A")
    B = te.compute((n, cols), lambda i, j: A[i, j] * 3.0 + i.astype("float32"), name="B")
    s = te.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    return codegen.build(s, [A, B])


def _check(mod, rows: int, seed: int = 0) -> None:
    a = np.random.default_rng(seed).standard_normal((rows, 48)).astype("float32")
    b = np.full_like(a, np.nan)
    mod(a, b)
    np.testing.assert_array_equal(b, a * np.float32(3) + np.arange(rows, dtype="float32")[:, None])


def test_chunks_cover_every_row_for_any_thread_count():
    mod = _kernel()
    assert threadpool.LAUNCH in mod.get_source("ll") and "GOMP" not in mod.get_source("ll")
    for threads in (1, 2, 3, 8, 300):       # 300: more than MAX_WORKERS helpers are ever started
        mod.num_threads = threads
        for rows in (0, 1, 2, 7, 33, 1000):
            _check(mod, rows, seed=rows)


#: rows of 64 scalar stores each: the largest loop that runs serially (under two threads' work) and the smallest pooled
_SERIAL_ROWS = 2 * parallel.WORK_PER_THREAD // 64 - 1


def _rows_kernel(rows: int):
    A = te.placeholder((rows, 64), name="A")
    B = te.compute((rows, 64), lambda i, j: A[i, j] * 3.0 + i.astype("float32"), name="B")
    s = te.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    return codegen.build(s, [A, B])


@pytest.mark.parametrize("rows, pooled", [(4, False), (_SERIAL_ROWS, False), (_SERIAL_ROWS + 1, True)])
def test_tiny_parallel_loops_run_serially(rows, pooled):
    """A parallel loop of constant trip count doing less than two threads' share (WORK_PER_THREAD stores
    each) runs in the caller (waking a worker would cost as much); a larger one goes through the pool."""
    mod = _rows_kernel(rows)
    assert (threadpool.LAUNCH in mod.get_source("ll")) == pooled
    a = np.random.default_rng(rows).standard_normal((rows, 64)).astype("float32")
    b = np.full_like(a, np.nan)
    mod(a, b)
    np.testing.assert_array_equal(b, a * np.float32(3) + np.arange(rows, dtype="float32")[:, None])


_COUNT_WORKERS = """
import os, numpy as np, codegen, tensorir as te
from codegen.llvm import parallel
rows = {shares} * parallel.WORK_PER_THREAD // 64
A = te.placeholder((rows, 64), name="A")
B = te.compute((rows, 64), lambda i, j: A[i, j] + 1.0, name="B")
s = te.create_schedule(B.op)
s[B].parallel(B.op.axis[0])
mod = codegen.build(s, [A, B])
mod.num_threads = 8
a = np.zeros((rows, 64), "float32"); b = np.empty_like(a)
before = len(os.listdir("/proc/self/task"))
mod(a, b)
assert (b == 1).all()
print(len(os.listdir("/proc/self/task")) - before)
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
@pytest.mark.parametrize("shares, workers", [(2, 1), (3, 2), (20, 7)])
def test_threads_of_a_loop_follow_its_work(shares, workers):
    """A loop of ``shares`` times WORK_PER_THREAD stores runs on at most ``shares`` threads, whatever
    ``num_threads`` asks (8 here): the pool starts only the workers the largest loop needs (a fresh process:
    the pool is per process)."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", _COUNT_WORKERS.format(shares=shares)], capture_output=True,
                         text=True, timeout=120, env=dict(os.environ, TILETUNE_NUM_THREADS="8"))
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[-1]) == workers


def test_back_to_back_tasks_of_different_sizes():
    """Tasks follow each other while workers still look at the last one (a claim must check the bound
    of the task it claims from): thousands of short calls, each result checked."""
    mod = _kernel()
    for threads in (2, 3):
        mod.num_threads = threads
        for k in range(400):
            _check(mod, 2 + k % 29, seed=k % 7)


def test_callers_on_several_threads_share_the_pool():
    """One task at a time: a caller that finds the pool busy runs its chunks itself; every result right."""
    mod = _kernel()
    mod.num_threads = 2
    errors = []

    def call(t: int) -> None:
        try:
            for k in range(200):
                _check(mod, 1 + (t * 37 + k) % 300, seed=k)
        except AssertionError as e:
            errors.append(e)
    pool = [threading.Thread(target=call, args=(t,)) for t in range(4)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert not errors, errors[0]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_parallel_kernel_in_a_forked_child():
    """The child of a process whose pool has run has no workers: its calls take every chunk themselves
    (libgomp's team hung in the child)."""
    mod = _kernel()
    mod.num_threads = 2
    _check(mod, 500)
    pid = os.fork()
    if pid == 0:                            # the child: exit 0 only if right and in time
        signal.alarm(20)
        try:
            for rows in (500, 3, 64):
                _check(mod, rows)
        except BaseException:  # noqa: BLE001
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_exported_object_carries_its_own_pool(tmp_path):
    mod = _kernel()
    path = str(tmp_path / "k.so")
    mod.export_library(path)
    loaded = codegen.load_module(path)
    for threads in (1, 2, 4):
        loaded.num_threads = threads
        _check(loaded, 257, seed=threads)
