"""TVM v0.18 TE code that tiletune refused or mishandled, written as a port would (``import tensorir as
tvm``): the reduction tutorial's cross-thread reduction with a store predicate, isl names, 0-d arrays,
per-thread local allocations (TVM's ``test_local_stage_predicate2``) and what they must not allow.
CUDA kernels run on the CPU through tests/cuda_sim.py."""
from __future__ import annotations

import numpy as np
import pytest

import codegen
import cuda_sim
import tensorir as tvm
from tensorir import te
from tensorir.stmt import Allocate, IfThenElse
from tensorir.visitor import collect


# -- the reduction tutorial's cross-thread reduction --------------------------------------------
def _row_sum_over_threads():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    xo, xi = s[B].split(s[B].op.axis[0], factor=32)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.y"))
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.reduce_axis[0], tx)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    s[B].set_store_predicate(tx.var.equal(0))
    return s, A, B


@pytest.mark.cuda_sim
@pytest.mark.parametrize("shape", [(7, 2501), (33, 5), (64, 16), (1, 1)])
def test_cross_thread_reduction_with_store_predicate_builds_and_runs(shape):
    s, A, B = _row_sum_over_threads()
    fcuda = tvm.build(s, [A, B], "cuda")
    source = fcuda.imported_modules[0].get_source()
    assert "__shfl_xor_sync" in source and "threadIdx.x) == 0" in source
    a = np.random.default_rng(1).standard_normal(shape).astype("float32")
    tol = 1e-6 * shape[1] * float(np.abs(a).max())
    cuda_sim.check(fcuda, [a], [np.empty(shape[0], "float32")], lambda x: x.sum(1), rtol=1e-5, atol=tol)


def test_store_predicate_on_the_thread_axis_stays_inside_its_loop():
    """The predicate's variable is the thread loop's: the store follows the allreduce in that loop."""
    s, A, B = _row_sum_over_threads()
    text = str(tvm.lower(s, [A, B]))
    loop = text.index("[threadIdx.x]")
    assert text.index("k.inner.v == 0") > loop and text.index("tvm_thread_allreduce") < text.index("k.inner.v == 0")


# -- isl names ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["2n", "α", "", "n m", "exists", "x'"])
def test_any_variable_name_builds(name):
    n = te.var(name)
    A = te.placeholder((n,), name=name or "A")
    B = te.compute((n,), lambda i: A[i] * 2, name="B" + name)
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=4)
    f = tvm.build(s, [A, B])
    a = np.random.default_rng(0).standard_normal(10).astype("float32")
    b = np.full(10, np.nan, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a * 2)


# -- 0-d arrays --------------------------------------------------------------------------------
def test_zero_dim_arrays_stay_zero_dim():
    assert tvm.nd.array(np.float32(3)).shape == ()
    assert tvm.nd.empty(()).shape == ()
    assert tvm.nd.empty((), "int32", device=tvm.cpu(0)).shape == ()


def test_zero_dim_placeholder_compute_and_reduction_run():
    A = te.placeholder((), name="A")
    B = te.compute((), lambda: A() + 1, name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], "llvm")
    b = tvm.nd.empty(())
    f(tvm.nd.array(np.float32(3)), b)
    assert b.numpy() == 4.0
    X = te.placeholder((5, 3), name="X")
    i, j = te.reduce_axis((0, 5), "i"), te.reduce_axis((0, 3), "j")
    S = te.compute((), lambda: te.sum(X[i, j], axis=[i, j]), name="S")
    Y = te.compute((4,), lambda r: X[r, 0] * S(), name="Y")
    f = tvm.build(te.create_schedule(Y.op), [X, S, Y])
    x = tvm.nd.array(np.random.default_rng(2).standard_normal((5, 3)).astype("float32"))
    s, y = tvm.nd.empty(()), tvm.nd.empty((4,))
    f(x, s, y)
    total = x.numpy().sum()
    np.testing.assert_allclose(s.numpy(), total, rtol=1e-6, atol=1e-6 * 15 * float(np.abs(x.numpy()).max()))
    np.testing.assert_allclose(y.numpy(), x.numpy()[:4, 0] * total, rtol=1e-5, atol=1e-5 * abs(total))


# -- local stages: per-thread allocations --------------------------------------------------------
def _cached_local(producer_binding: str):
    A = te.placeholder((128,), name="A")
    B = te.compute((128,), lambda bi: A[bi] + 1, name="B")
    C = te.compute((128,), lambda ci: B[ci] + 2, name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", [B])
    s[B].set_scope("shared")
    block_x, thread_x = te.thread_axis("blockIdx.x"), te.thread_axis((0, 32), "threadIdx.x")
    oc, ic = s[C].split(s[C].op.axis[0], factor=64)
    ooc, ioc = s[C].split(oc, factor=2)
    oic, iic = s[C].split(ic, factor=32)
    s[C].bind(ooc, block_x)
    s[C].bind(iic, thread_x)
    s[B].compute_at(s[C], ioc)
    ob, ib = s[B].split(s[B].op.axis[0], factor=32)
    s[B].bind(ib, thread_x)
    s[AA].compute_at(s[C], ooc)
    if producer_binding == "inner":   # each thread loads the elements it reads (TVM's test)
        oaa, iaa = s[AA].split(s[AA].op.axis[0], factor=32)
        s[AA].bind(iaa, thread_x)
    else:                             # thread t loads 4t .. 4t+3, but reads t, t+32, ...
        oaa, iaa = s[AA].split(s[AA].op.axis[0], nparts=32)
        s[AA].bind(oaa, thread_x)
    return s, [A, C]


def test_local_stage_gets_a_per_thread_allocation():
    s, args = _cached_local("inner")
    body = tvm.lower(s, args).body
    assert not collect(body, IfThenElse)
    assert {a.buffer.name: a.buffer.shape[0].value for a in collect(body, Allocate)}["A.local"] == 97


@pytest.mark.cuda_sim
def test_per_thread_local_allocation_runs():
    s, args = _cached_local("inner")
    mod = codegen.build(s, args, target="cuda")
    assert "float A_local[97]" in mod.get_source("cuda")
    a = np.random.default_rng(3).standard_normal(128).astype("float32")
    cuda_sim.check(mod, [a], [np.empty(128, "float32")], lambda x: x + 3, rtol=1e-6, atol=1e-6)


def test_local_values_computed_by_another_thread_are_refused():
    """Each thread has its own copy of a local buffer: reading what another thread loaded was a wrong
    answer (unwritten memory); it is refused naming the buffer."""
    s, args = _cached_local("outer")
    with pytest.raises(te.ScheduleError, match=r"reads A\.local, a local buffer .* its own thread has not computed"):
        codegen.build(s, args, target="cuda")
