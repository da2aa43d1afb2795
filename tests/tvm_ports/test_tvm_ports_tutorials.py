"""TVM v0.18's TE tutorials (reduction, scan, tuple inputs, getting started), their schedules written
as a port spells them (``import tensorir as tvm``), checked against numpy on fresh data; CUDA builds
run on the CPU through tests/cuda_sim.py."""
from __future__ import annotations

import numpy as np
import pytest

import cuda_sim
import tensorir as tvm
from tensorir import te

rng = np.random.default_rng(7)


def _row_sum():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    return A, te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")


def _check_row_sum(f, n=37, m=70):
    a = tvm.nd.array(rng.standard_normal((n, m)).astype("float32"))
    b = tvm.nd.empty((n,))
    f(a, b)
    tvm.testing.assert_allclose(b.numpy(), a.numpy().sum(1), rtol=1e-5, atol=1e-6 * m * float(np.abs(a.numpy()).max()))


@pytest.mark.parametrize("schedule", ["split_reduce", "split_data_parallel", "rfactor", "rfactor_parallel"])
def test_reduction_tutorial_cpu_schedules(schedule):
    A, B = _row_sum()
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    if schedule == "split_data_parallel":
        xo, xi = s[B].split(B.op.axis[0], factor=32)
        s[B].reorder(xo, ko, xi, ki)
    if schedule.startswith("rfactor"):
        BF = s.rfactor(B, ki)
        assert BF.shape[0].value == 16 and BF.shape[1] is B.shape[0]
        if schedule == "rfactor_parallel":
            s[BF].parallel(BF.op.axis[0])
    _check_row_sum(tvm.build(s, [A, B], "llvm"))


@pytest.mark.cuda_sim
def test_reduction_tutorial_cross_thread_on_the_simulator():
    A, B = _row_sum()
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
    fcuda = tvm.build(s, [A, B], "cuda")
    _check_row_sum(lambda a, b: cuda_sim.run(fcuda, np.asarray(a), np.asarray(b)), n=128, m=128)


@pytest.mark.cuda_sim
def test_scan_tutorial_cumsum_on_the_simulator():
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: X[0, i])
    s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
    s_scan = tvm.te.scan(s_init, s_update, s_state, inputs=[X])
    s = te.create_schedule(s_scan.op)
    num_thread = 256
    block_x, thread_x = te.thread_axis("blockIdx.x"), te.thread_axis("threadIdx.x")
    for stage in (s_init, s_update):
        xo, xi = s[stage].split(stage.op.axis[1], factor=num_thread)
        s[stage].bind(xo, block_x)
        s[stage].bind(xi, thread_x)
    fscan = tvm.build(s, [X, s_scan], "cuda", name="myscan")
    x = rng.standard_normal((10, 300)).astype("float32")
    tol = 1e-5 * 10 * float(np.abs(x).max())
    cuda_sim.check(fscan, [x], [np.empty((10, 300), "float32")], lambda a: np.cumsum(a, axis=0), rtol=1e-5, atol=tol)


def test_tuple_inputs_tutorial_argmax():
    def fcombine(x, y):
        lhs = tvm.tir.Select((x[1] >= y[1]), x[0], y[0])
        rhs = tvm.tir.Select((x[1] >= y[1]), x[1], y[1])
        return lhs, rhs

    def fidentity(t0, t1):
        return tvm.tir.const(-1, t0), tvm.te.min_value(t1)

    argmax = te.comm_reducer(fcombine, fidentity, name="argmax")
    m, n = te.var("m"), te.var("n")
    idx = te.placeholder((m, n), name="idx", dtype="int32")
    val = te.placeholder((m, n), name="val", dtype="int32")
    k = te.reduce_axis((0, n), "k")
    T0, T1 = te.compute((m,), lambda i: argmax((idx[i, k], val[i, k]), axis=k), name="T")
    s = te.create_schedule(T0.op)
    f = tvm.build(s, [idx, val, T0, T1])
    v = rng.integers(-50, 50, (9, 13)).astype("int32")
    ix = np.tile(np.arange(13, dtype="int32"), (9, 1))
    t0, t1 = tvm.nd.empty((9,), "int32"), tvm.nd.empty((9,), "int32")
    f(tvm.nd.array(ix), tvm.nd.array(v), t0, t1)
    np.testing.assert_array_equal(t1.numpy(), v.max(1))
    np.testing.assert_array_equal(v[np.arange(9), t0.numpy()], v.max(1))  # ties: any maximal index


def test_getting_started_vector_add_with_symbolic_size():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    outer, inner = s[C].split(C.op.axis[0], factor=4)
    s[C].parallel(outer)
    s[C].vectorize(inner)
    fadd = tvm.build(s, [A, B, C], tvm.target.Target(target="llvm", host="llvm"), name="myadd")
    dev = tvm.device("llvm", 0)
    a, b = (tvm.nd.array(rng.standard_normal(1023).astype("float32"), dev) for _ in range(2))
    c = tvm.nd.array(np.zeros(1023, dtype=C.dtype), dev)
    fadd(a, b, c)
    tvm.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
    assert fadd.imported_modules == []
