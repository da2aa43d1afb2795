"""te.scan: recurrences, their schedules (body inside the scan loop), the isl checks, LLVM and CUDA."""
from __future__ import annotations


import numpy as np
import pytest

import codegen
import cuda_sim
import tensorir as te
from conftest import assert_raises_naming, build, check, run_check
from tensorir.schedule import SCAN_UPDATE, ScheduleError


def cumsum(m=None, n=None, name="scan"):
    """TVM's tutorial: ``te.scan`` equivalent to ``numpy.cumsum(X, axis=0)``."""
    m = te.var("m") if m is None else m
    n = te.var("n") if n is None else n
    X = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n), name="state")
    s_init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i], name="update")
    s_scan = te.scan(s_init, s_update, s_state, inputs=[X], name=name)
    return X, s_state, s_init, s_update, s_scan


def numpy_cumsum(x):
    return np.cumsum(x.astype("float64"), axis=0)


# -- definition ---------------------------------------------------------------------------------------------
def test_scan_axis_shape_and_stages():
    X, s_state, s_init, s_update, s_scan = cumsum()
    m, n = X.shape
    axis = s_scan.op.scan_axis
    assert axis.var.name == "scan.idx"
    assert str(axis.dom.min) == "1" and te.structural_equal(axis.dom.extent, m - 1)
    assert len(s_scan.shape) == 2 and s_scan.shape[0] is m and s_scan.shape[1] is n
    assert s_scan.dtype == "float32" and s_scan.op.num_outputs == 1
    assert [iv.var.name for iv in s_scan.op.spatial_axis_] == ["scan.out0.i1"]
    s = te.create_schedule(s_scan.op)
    assert s[s_scan].leaf_iter_vars == [axis]
    assert s[s_update].attach_type == SCAN_UPDATE and s[s_update].attach_stage is s[s_scan]
    assert s[s_init].attach_type == te.schedule.ROOT


def test_scan_get_body_and_fix_point():
    m, n = te.var("m"), te.var("n")
    x = te.compute((m, n), lambda i, j: te.const(1, "float32"), name="x")
    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: x[0, i], name="s_init")
    x_trans = te.compute((m, n), lambda i, j: x[i, j] + 1, name="x_trans")
    up1 = te.compute((m, n), lambda t, i: s_state[t - 1, i] + 1, name="up1")
    update = te.compute((m, n), lambda t, i: up1[t, i] + x_trans[t, i], name="update")
    s_scan = te.scan(s_init, update, s_state)
    assert set(te.schedule.ScanGetBody(s_scan.op)) == {update.op, up1.op}
    fx = te.schedule.ScanFixPointAnalysis(s_scan.op)
    assert fx[s_scan.op.spatial_axis_[0]].value == 1
    # a transposed read of the state: no dimension maps onto itself
    st2 = te.placeholder((m, m))
    flip = te.compute((m, m), lambda t, i: st2[t - 1, i] + st2[t - 1, 0], name="flip")
    r = te.scan(te.compute((1, m), lambda _, i: 0.0), flip, st2)
    assert te.schedule.ScanFixPointAnalysis(r.op)[r.op.spatial_axis_[0]].value == 0


# -- LLVM ------------------------------------------------------------------------------------------------------
def test_cumsum_matches_numpy():
    X, _, _, _, s_scan = cumsum(13, 37)
    s = te.create_schedule(s_scan.op)
    text = str(te.lower(s, [X, s_scan]))
    assert "for (scan.idx, 12)" in text and "scan[" in text and "state" not in text
    check(s, [X, s_scan], numpy_cumsum)


def test_cumsum_symbolic_sizes():
    X, _, _, _, s_scan = cumsum()
    m, n = X.shape
    s = te.create_schedule(s_scan.op)
    mod = build(s, [X, s_scan])
    for sizes in ({m: 1, n: 3}, {m: 2, n: 1}, {m: 17, n: 40}):
        run_check(mod, [X, s_scan], numpy_cumsum, sizes=sizes, seed=sizes[m])


def test_init_of_two_steps_fibonacci():
    m, n = 12, te.var("n")  # with a symbolic m, isl finds m = 1 < 2 init rows: out of bounds
    X = te.placeholder((2, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((2, n), lambda t, i: X[t, i], name="init")
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + state[t - 2, i], name="update")
    fib = te.scan(init, update, state, name="fib")
    assert str(fib.op.scan_axis.dom.min) == "2"
    s = te.create_schedule(fib.op)

    def ref(x):
        out = np.zeros((12, x.shape[1]))
        out[:2] = x
        for t in range(2, 12):
            out[t] = out[t - 1] + out[t - 2]
        return out
    check(s, [X, fib], ref, sizes={n: 5}, rtol=1e-4, atol=1e-4)


def test_split_and_parallel_update_axis():
    X, _, _, s_update, s_scan = cumsum()
    s = te.create_schedule(s_scan.op)
    xo, xi = s[s_update].split(s_update.op.axis[1], factor=8)
    s[s_update].parallel(xo)
    s[s_update].vectorize(xi)
    assert "parallel for (i.outer" in str(te.lower(s, [X, s_scan], expand=False))
    check(s, [X, s_scan], numpy_cumsum, sizes={X.shape[0]: 9, X.shape[1]: 67})


def test_parallel_scan_axis_is_refused():
    X, _, _, _, s_scan = cumsum()
    s = te.create_schedule(s_scan.op)
    s[s_scan].parallel(s_scan.op.scan_axis)
    assert_raises_naming(ScheduleError, lambda: te.lower(s, [X, s_scan]), "scan", "scan.idx", "read-after-write")


def test_multi_stage_cell_with_compute_at():
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    s1 = te.compute((m, n), lambda t, i: state[t - 1, i] * 0.5, name="s1")
    s2 = te.compute((m, n), lambda t, i: s1[t, i] + X[t, i], name="s2")
    res = te.scan(init, s2, state, inputs=[X])

    def ref(x):
        out = x.astype("float64").copy()
        for t in range(1, len(x)):
            out[t] = out[t - 1] * 0.5 + x[t]
        return out
    sizes = {m: 11, n: 70}
    s = te.create_schedule(res.op)  # s1 computed whole at each step
    assert s[s1].attach_type == SCAN_UPDATE
    check(s, [X, res], ref, sizes=sizes)
    s = te.create_schedule(res.op)  # the tutorial: s1 computed per tile of s2
    xo, xi = s[s2].split(s2.op.axis[1], factor=32)
    s[s1].compute_at(s[s2], xo)
    text = str(te.lower(s, [X, res]))
    assert "allocate s1[float32 * 1 * 32]" in text
    check(s, [X, res], ref, sizes=sizes)
    s = te.create_schedule(res.op)  # or inlined
    s[s1].compute_inline()
    assert "s1" not in str(te.lower(s, [X, res]))
    check(s, [X, res], ref, sizes=sizes)


def test_multiple_states():
    m, n, l = te.var("m"), te.var("n"), te.var("l")
    X = te.placeholder((m, n), name="X")
    st1, st2 = te.placeholder((m, n), name="st1"), te.placeholder((m, l), name="st2")
    init1 = te.compute((1, n), lambda _, i: X[0, i], name="init1")
    init2 = te.compute((1, l), lambda _, i: 0.0, name="init2")
    up1 = te.compute((m, n), lambda t, i: st1[t - 1, i] + X[t, i], name="up1")
    up2 = te.compute((m, l), lambda t, i: st2[t - 1, i] + st1[t - 1, 0], name="up2")
    r1, r2 = te.scan([init1, init2], [up1, up2], [st1, st2], inputs=[X])
    assert r1.op is r2.op and (r1.value_index, r2.value_index) == (0, 1)
    assert tuple(r2.shape) == (m, l)
    s = te.create_schedule(r1.op)
    text = str(te.lower(s, [X, r1, r2]))
    assert "scan.v0: float32[m, n], scan.v1: float32[m, l]" in text

    def ref(x):
        c = numpy_cumsum(x)
        out2 = np.zeros((len(x), 6))
        for t in range(1, len(x)):
            out2[t] = out2[t - 1] + c[t - 1, 0]
        return c, out2
    check(s, [X, r1, r2], ref, sizes={m: 9, n: 4, l: 6})


def test_rnn_cell_with_reduction_over_the_state():
    T, H = 8, 16
    X = te.placeholder((T, H), name="X")
    W = te.placeholder((H, H), name="W")
    state = te.placeholder((T, H), name="h")
    init = te.compute((1, H), lambda _, i: te.tanh(X[0, i]), name="init")
    k = te.reduce_axis((0, H), name="k")
    mv = te.compute((T, H), lambda t, i: te.sum(state[t - 1, k] * W[k, i], axis=k), name="mv")
    update = te.compute((T, H), lambda t, i: te.tanh(mv[t, i] + X[t, i]), name="update")
    h = te.scan(init, update, state, inputs=[X], name="rnn")
    s = te.create_schedule(h.op)
    s[mv].compute_at(s[update], update.op.axis[1])

    def ref(x, w):
        out = np.zeros((T, H))
        out[0] = np.tanh(x[0])
        for t in range(1, T):
            out[t] = np.tanh(out[t - 1] @ w + x[t])
        return out
    check(s, [X, W, h], ref, low=-0.5, high=0.5, rtol=1e-4, atol=1e-4)


def test_stage_outside_the_body_computed_at_the_update():
    """TVM's attach path test: x_trans (not reading the state) computed per step inside the update,
    and a local cache of X per tile (TVM's bound test: 4 wide)."""
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    x_trans = te.compute((m, n), lambda i, j: X[i, j] + 1, name="x_trans")
    init = te.compute((1, n), lambda _, i: x_trans[0, i], name="init")
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + x_trans[t, i] * X[t, i], name="update")
    res = te.scan(init, update, state)
    s = te.create_schedule(res.op)
    XX = s.cache_read(X, "local", [update])
    xo, xi = s[update].split(update.op.axis[1], factor=4)
    s[XX].compute_at(s[update], xo)
    s[x_trans].compute_root()
    text = str(te.lower(s, [X, res]))
    assert "allocate X.local[float32 * 1 * 4]" in text

    def ref(x):
        out = (x[:1] + 1).astype("float64")
        rows = [out[0]]
        for t in range(1, len(x)):
            rows.append(rows[-1] + (x[t] + 1.0) * x[t])
        return np.array(rows)
    check(s, [X, res], ref, sizes={m: 7, n: 10}, rtol=1e-4, atol=1e-4)


def test_scan_output_read_by_a_later_stage():
    X, _, _, _, s_scan = cumsum()
    Y = te.compute(X.shape, lambda t, i: s_scan[t, i] * 2.0, name="Y")
    s = te.create_schedule(Y.op)
    text = str(te.lower(s, [X, Y]))
    assert "allocate scan[float32 * m * n]" in text
    check(s, [X, Y], lambda x: numpy_cumsum(x) * 2, sizes={X.shape[0]: 6, X.shape[1]: 9})


# -- misuse ---------------------------------------------------------------------------------------------------
def test_bad_scan_definitions_name_the_tensors():
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="update")
    wide = te.compute((1, n + 1), lambda _, i: 0.0, name="wide")
    assert_raises_naming(ValueError, lambda: te.scan(wide, update, state), "wide", "state")
    tall = te.compute((m, n + 1), lambda t, i: state[t - 1, 0], name="tall")
    assert_raises_naming(ValueError, lambda: te.scan(init, tall, state), "tall", "state")
    no_state = te.compute((m, n), lambda t, i: X[t, i] * 2.0, name="no_state")
    assert_raises_naming(ValueError, lambda: te.scan(init, no_state, state, inputs=[X]), "no_state", "state")
    other = te.placeholder((m, n), name="other")
    assert_raises_naming(ValueError, lambda: te.scan([init, init], [update, update], [state, other]), "other")
    bad_init = te.compute((1, n), lambda _, i: state[0, i], name="bad_init")
    assert_raises_naming(ValueError, lambda: te.scan(bad_init, update, state), "bad_init", "state")
    assert_raises_naming(ValueError, lambda: te.scan([init], [update, update], [state]), "scan")
    ints = te.compute((1, n), lambda _, i: te.const(0, "int32"), name="ints")
    assert_raises_naming(ValueError, lambda: te.scan(ints, update, state), "ints", "int32")


def test_read_of_the_current_step_is_refused():
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    update = te.compute((m, n), lambda t, i: state[t, i] + X[t, i], name="update")
    res = te.scan(init, update, state)
    s = te.create_schedule(res.op)
    assert_raises_naming(ScheduleError, lambda: te.lower(s, [X, res]), "update", "scan")


def test_read_before_the_first_step_is_out_of_bounds():
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    update = te.compute((m, n), lambda t, i: state[t - 2, i] + X[t, i], name="update")
    res = te.scan(init, update, state)
    s = te.create_schedule(res.op)
    assert_raises_naming(te.OutOfBoundsError, lambda: te.lower(s, [X, res]), "update", "scan")


def test_misplaced_scan_stages_are_refused():
    X, state, init, update, s_scan = cumsum()
    s = te.create_schedule(s_scan.op)
    assert_raises_naming(ScheduleError, lambda: s[update].compute_inline(), "update", "scan")
    assert_raises_naming(ScheduleError, lambda: s[init].compute_inline(), "init", "scan")
    assert_raises_naming(ScheduleError, lambda: s[init].compute_at(s[s_scan], s_scan.op.scan_axis), "init")
    Y = te.compute(X.shape, lambda t, i: s_scan[t, i] * 2.0, name="Y")
    s = te.create_schedule(Y.op)
    assert_raises_naming(ScheduleError, lambda: s[s_scan].compute_at(s[Y], Y.op.axis[0]), "scan")
    # a body stage computed outside the scan loop
    m, n = X.shape
    s1 = te.compute((m, n), lambda t, i: state[t - 1, i] * 2.0, name="s1")
    s2 = te.compute((m, n), lambda t, i: s1[t, i] + X[t, i], name="s2")
    res = te.scan(init, s2, state)
    Z = te.compute((m, n), lambda t, i: res[t, i] + 1.0, name="Z")
    s = te.create_schedule(Z.op)
    assert_raises_naming(ScheduleError, lambda: s[s1].compute_at(s[Z], Z.op.axis[0]), "s1", "scan", "Z")


# -- CUDA ------------------------------------------------------------------------------------------------------


def bind_columns(s, *tensors):
    """The tutorial's GPU schedule: columns over blocks of 64 threads."""
    for t in tensors:
        xo, xi = s[t].split(t.op.axis[1], factor=64)
        s[t].bind(xo, te.thread_axis("blockIdx.x"))
        s[t].bind(xi, te.thread_axis("threadIdx.x"))


@pytest.mark.nvcc


@pytest.mark.cuda_sim
def test_cuda_cumsum_tutorial():
    X, _, init, update, res = cumsum()
    s = te.create_schedule(res.op)
    bind_columns(s, init, update)
    mod = codegen.build(s, [X, res], target="cuda", name="myscan")
    src = mod.get_source("cuda")
    assert src.count("__global__") == 1 and "for (int scan_idx = 0; scan_idx < (m - 1); ++scan_idx)" in src
    m, n = X.shape
    for sizes in ({m: 10, n: 200}, {m: 3, n: 64}):
        run_check(lambda *a: cuda_sim.run(mod, *a), [X, res], numpy_cumsum, sizes=sizes)


@pytest.mark.nvcc


@pytest.mark.cuda_sim
def test_cuda_scan_reading_other_threads_is_refused():
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    update = te.compute((m, n), lambda t, i: state[t - 1, n - 1 - i] + X[t, i], name="update")
    res = te.scan(init, update, state, inputs=[X])
    s = te.create_schedule(res.op)
    bind_columns(s, init, update)
    assert_raises_naming(ScheduleError, lambda: codegen.build(s, [X, res], target="cuda"), "update", "scan")


# -- TVM's lowering tests ------------------------------------------------------------------------------------
def test_inlined_body_stages_with_two_states():
    m, n = te.var("m"), 5  # TVM's test has a symbolic n: isl refuses it (st2[t - 1, 2] with n = 1)
    x = te.placeholder((m, n), name="x")
    st1, st2 = te.placeholder((m, n), name="st1"), te.placeholder((m, n), name="st2")
    init1 = te.compute((1, n), lambda _, i: x[0, i], name="init1")
    init2 = te.compute((1, n), lambda _, i: x[0, i], name="init2")
    xx = te.compute((m, n), lambda t, i: st1[t - 1, i] + x[t, i], name="xx")
    x1 = te.compute((m, n), lambda t, i: xx[t, i] + 1, name="x1")
    x2 = te.compute((m, n), lambda t, i: xx[t, i] + st2[t - 1, 2], name="x2")
    u1 = te.compute((m, n), lambda t, i: x1[t, i], name="u1")
    u2 = te.compute((m, n), lambda t, i: x2[t, i], name="u2")
    r1, r2 = te.scan([init1, init2], [u1, u2], [st1, st2])
    s = te.create_schedule(r1.op)
    for t in (xx, x1, x2):
        s[t].compute_inline()

    def ref(a):
        a = a.astype("float64")
        o1, o2 = a.copy(), a.copy()
        for t in range(1, len(a)):
            o1[t] = o1[t - 1] + a[t] + 1
            o2[t] = o1[t - 1] + a[t] + o2[t - 1, 2]
        return o1, o2
    check(s, [x, r1, r2], ref, sizes={m: 6}, rtol=1e-4, atol=1e-4)


def test_state_placeholder_as_an_argument_and_lstm_lowering():
    X, state, _, _, s_scan = cumsum(8, 4)
    s = te.create_schedule(s_scan.op)
    text = str(te.lower(s, [X, state]))  # TVM accepts it: the state is the scan's buffer, allocated
    assert "allocate scan[float32 * 8 * 4]" in text
    steps, batch, hidden, inp = 6, 2, 8, 4
    Xl = te.placeholder((steps - 1, batch, inp), name="X")
    Wi, Wh = te.placeholder((4, hidden, inp), name="Wi2h"), te.placeholder((4, hidden, hidden), name="Wh2h")
    sh, sc = te.placeholder((steps, batch, hidden)), te.placeholder((steps, batch, hidden))
    init_c = te.compute((1, batch, hidden), lambda *i: 0.0, name="init_c")
    init_h = te.compute((1, batch, hidden), lambda *i: 0.0, name="init_h")
    k = te.reduce_axis((0, inp), name="ki2h")
    i2h = te.compute((steps, 4, batch, hidden), lambda t, x, i, j: te.sum(Xl[t - 1, i, k] * Wi[x, j, k], axis=k),
                     name="s_i2h")
    k = te.reduce_axis((0, hidden), name="kh2h")
    h2h = te.compute((steps, 4, batch, hidden), lambda t, x, i, j: te.sum(sh[t - 1, i, k] * Wh[x, j, k], axis=k),
                     name="s_h2h")
    gates = te.compute(i2h.shape, lambda *i: i2h(*i) + h2h(*i), name="gates")
    g = (steps, batch, hidden)
    ig = te.compute(g, lambda t, i, j: te.sigmoid(gates[t, 0, i, j]), name="in_gate")
    it = te.compute(g, lambda t, i, j: te.tanh(gates[t, 1, i, j]), name="in_transform")
    fg = te.compute(g, lambda t, i, j: te.sigmoid(gates[t, 2, i, j]), name="forget_gate")
    og = te.compute(g, lambda t, i, j: te.sigmoid(gates[t, 3, i, j]), name="out_gate")
    nc = te.compute(g, lambda t, i, j: fg[t, i, j] * sc[t - 1, i, j] + ig[t, i, j] * it[t, i, j], name="next_c")
    nh = te.compute(g, lambda t, i, j: og[t, i, j] * te.tanh(nc[t, i, j]), name="next_h")
    uc = te.compute(g, lambda *i: nc(*i), name="update_c")
    uh = te.compute(g, lambda *i: nh(*i), name="update_h")
    scan_h, scan_c = te.scan([init_h, init_c], [uh, uc], [sh, sc], inputs=[Xl], name="lstm_scan")
    s = te.create_schedule(scan_h.op)
    for t in (gates, ig, it, fg, og):
        s[t].compute_inline()

    def sigmoid(v):
        return 1 / (1 + np.exp(-v))

    def ref(x, wi, wh):
        h, c = np.zeros((steps, batch, hidden)), np.zeros((steps, batch, hidden))
        for t in range(1, steps):
            gt = np.einsum("ik,xjk->xij", x[t - 1], wi) + np.einsum("ik,xjk->xij", h[t - 1], wh)
            c[t] = sigmoid(gt[2]) * c[t - 1] + sigmoid(gt[0]) * np.tanh(gt[1])
            h[t] = sigmoid(gt[3]) * np.tanh(c[t])
        return h, c
    check(s, [Xl, Wi, Wh, scan_h, scan_c], ref, low=-0.5, high=0.5, rtol=1e-4, atol=1e-4)
