"""Computes with several outputs and tuple reducers (TVM's ``tuple_inputs`` tutorial): one operation,
one stage, one loop nest storing every output; argmax / argmin as ``te.comm_reducer`` over tuples,
updated simultaneously; scheduling, caching and rfactor of them; misuse refused by name."""
from __future__ import annotations

import numpy as np
import pytest

import codegen
import tensorir as te
from conftest import assert_raises_naming, check, run_check
from tensorir.poly.analysis import OutOfBoundsError
from tensorir.schedule import ScheduleError
from tensorir.stmt import Allocate, For, LetStmt
from tensorir.visitor import collect


def batch(m=None, n=None):
    """``B0, B1 = A + 2, A * 3`` as one operation (the tutorial's batchwise computation)."""
    m, n = (te.var("m") if m is None else m), (te.var("n") if n is None else n)
    A = te.placeholder((m, n), name="A")
    B0, B1 = te.compute((m, n), lambda i, j: (A[i, j] + 2, A[i, j] * 3), name="B")
    return A, B0, B1


def argmax_reducer(ties_to_lower_index: bool = False):
    """TVM's tutorial argmax: ``x`` is the running (index, value), ``y`` the new one; ``>=`` keeps the
    earlier index on ties (numpy's rule for a serial scan).  With ``ties_to_lower_index`` the
    combiner is truly commutative: the lower index wins ties whatever the order."""
    def fcombine(x, y):
        keep = x[1] > y[1] if ties_to_lower_index else x[1] >= y[1]
        if ties_to_lower_index:
            keep = keep | ((x[1] == y[1]) & (x[0] < y[0]))
        return te.if_then_else(keep, x[0], y[0]), te.if_then_else(keep, x[1], y[1])

    def fidentity(t0, t1):
        return te.const(-1, t0), te.min_value(t1)

    return te.comm_reducer(fcombine, fidentity, name="argmax")


def argmin_reducer():
    def fcombine(x, y):
        keep = x[1] <= y[1]
        return te.if_then_else(keep, x[0], y[0]), te.if_then_else(keep, x[1], y[1])
    return te.comm_reducer(fcombine, lambda t0, t1: (te.const(-1, t0), te.max_value(t1)), name="argmin")


def argmax_compute(m, n, dtype="float32", reducer=None):
    idx = te.placeholder((m, n), name="idx", dtype="int32")
    val = te.placeholder((m, n), name="val", dtype=dtype)
    k = te.reduce_axis((0, n), "k")
    T0, T1 = te.compute((m,), lambda i: (reducer or argmax_reducer())((idx[i, k], val[i, k]), axis=k), name="T")
    return idx, val, T0, T1, k


def np_argmax(idx, val):
    rows = np.arange(val.shape[0])
    best = val.argmax(axis=1)
    return idx[rows, best], val[rows, best]


def np_argmin(idx, val):
    rows = np.arange(val.shape[0])
    best = val.argmin(axis=1)
    return idx[rows, best], val[rows, best]


def ties(rng, shape, dtype):
    """Values from a tiny range, so most rows hold their maximum several times."""
    return rng.integers(0, 4, size=shape).astype(dtype)


def perm_index(rng, shape, dtype):
    """Distinct indices (a row's index identifies its element)."""
    return rng.permutation(int(np.prod(shape))).reshape(shape).astype(dtype)


# -- one operation, several outputs ----------------------------------------------------------------------
def test_multi_output_op_tensors_and_one_stage():
    A, B0, B1 = batch()
    op = B0.op
    assert op is B1.op and op.num_outputs == 2
    assert (op.output(0), op.output(1)) == (B0, B1)
    assert (B0.value_index, B1.value_index) == (0, 1)
    assert (B0.name, B1.name) == ("B.v0", "B.v1")
    assert op.input_tensors == [A]
    s = te.create_schedule(op)
    assert s[B0] is s[B1]
    single = te.compute((4,), lambda i: A[i, 0] * 2, name="C")
    assert single.name == "C" and single.op.num_outputs == 1


def test_multi_output_elementwise_one_loop_nest_symbolic_sizes():
    A, B0, B1 = batch()
    s = te.create_schedule(B0.op)
    f = te.lower(s, [A, B0, B1])
    assert len(collect(f.body, For)) == 2, f"one loop nest stores both outputs\n{f}"
    text = str(f)
    assert "B.v0[" in text and "B.v1[" in text
    m, n = A.shape
    for sizes in ({m: 5, n: 7}, {m: 1, n: 13}):
        check(s, [A, B0, B1], lambda a: (a + 2, a * 3), sizes=sizes)


def test_outputs_of_different_dtypes_and_scheduled_once():
    A = te.placeholder((37, 19), name="A")
    B0, B1 = te.compute(A.shape, lambda i, j: (A[i, j] * 2, (A[i, j] * 10).astype("int32")), name="B")
    s = te.create_schedule(B1.op)
    xo, yo, xi, yi = s[B0].tile(B0.op.axis[0], B0.op.axis[1], 8, 4)
    s[B1].parallel(xo)
    s[B0].vectorize(yi)
    check(s, [A, B0, B1], lambda a: (a * 2, (a.astype("float32") * 10).astype("int32")))


@pytest.mark.parametrize("which", [0, 1])
def test_one_output_as_argument_other_is_internal(which):
    A, B0, B1 = batch(te.var("m"), te.var("n"))
    C = te.compute(A.shape, lambda i, j: B0[i, j] - B1[i, j], name="C")
    s = te.create_schedule(C.op)
    out = (B0, B1)[which]
    f = te.lower(s, [A, out, C])
    allocated = [a.buffer.name for a in collect(f.body, Allocate)]
    assert allocated == [("B.v1", "B.v0")[which]], f
    m, n = A.shape
    ref = (lambda a: (a + 2, (a + 2) - a * 3)) if which == 0 else (lambda a: (a * 3, (a + 2) - a * 3))
    check(s, [A, out, C], ref, sizes={m: 6, n: 9})


def test_consumer_of_both_outputs_with_compute_at():
    """The tutorial's last schedule: the multi-output stage computed inside its consumer's row loop."""
    m, n = te.var("m"), te.var("n")
    A0 = te.placeholder((m, n), name="A0")
    B0, B1 = te.compute((m, n), lambda i, j: (A0[i, j] + 2, A0[i, j] * 3), name="B")
    A1 = te.placeholder((m, n), name="A1")
    C = te.compute((m, n), lambda i, j: A1[i, j] + B0[i, j] * B1[i, (j + 1) % n], name="C")
    s = te.create_schedule(C.op)
    s[B0].compute_at(s[C], C.op.axis[0])
    f = te.lower(s, [A0, A1, C])
    assert [str(list(a.buffer.shape)) for a in collect(f.body, Allocate)] == ["[1, n]"] * 2, f
    check(s, [A0, A1, C], lambda a0, a1: a1 + (a0 + 2) * np.roll(a0 * 3, -1, axis=1), sizes={m: 4, n: 11})


def test_compute_at_region_covers_reads_of_every_output():
    A = te.placeholder((64,), name="A")
    B0, B1 = te.compute((64,), lambda i: (A[i] + 1, A[i] - 1), name="B")
    C = te.compute((62,), lambda i: B0[i] * B1[i + 2], name="C")
    s = te.create_schedule(C.op)
    co, ci = s[C].split(C.op.axis[0], factor=8)
    s[B0].compute_at(s[C], co)
    f = te.lower(s, [A, C])
    assert [a.buffer.shape[0].value for a in collect(f.body, Allocate)] == [10, 10], f
    check(s, [A, C], lambda a: (a[:62] + 1) * (a[2:] - 1))


def test_compute_inline_of_multi_output_refused():
    A, B0, B1 = batch(8, 8)
    C = te.compute(A.shape, lambda i, j: B0[i, j] + B1[i, j], name="C")
    s = te.create_schedule(C.op)
    assert_raises_naming(ScheduleError, s[B0].compute_inline, "B", "compute_inline")


def test_read_past_an_output_named():
    A, B0, B1 = batch(16, 16)
    C = te.compute((16, 16), lambda i, j: B1[i, j + 1], name="C")
    s = te.create_schedule(C.op)
    assert_raises_naming(OutOfBoundsError, lambda: te.lower(s, [A, B0, C]), "C", "B.v1")


# -- tuple reducers --------------------------------------------------------------------------------------
def test_argmax_lowers_to_one_nest_with_simultaneous_update():
    m, n = te.var("m"), te.var("n")
    idx, val, T0, T1, _ = argmax_compute(m, n)
    assert T0.op is T1.op and (T0.dtype, T1.dtype) == ("int32", "float32")
    s = te.create_schedule(T0.op)
    f = te.lower(s, [idx, val, T0, T1])
    lets = collect(f.body, LetStmt)
    assert [x.var.name for x in lets] == ["T.v0.next", "T.v1.next"], f
    assert len(collect(f.body, For)) == 2, f


@pytest.mark.parametrize("which", [0, 1])
def test_tuple_reduction_with_one_output_as_argument(which):
    m, n = te.var("m"), te.var("n")
    idx, val, T0, T1, _ = argmax_compute(m, n)
    s = te.create_schedule(T0.op)
    out = (T0, T1)[which]
    f = te.lower(s, [idx, val, out])
    assert [a.buffer.name for a in collect(f.body, Allocate)] == [("T.v1", "T.v0")[which]], f
    check(s, [idx, val, out], lambda i, v: np_argmax(i, v)[which], sizes={m: 7, n: 12},
          inputs={"idx": perm_index, "val": ties})


@pytest.mark.parametrize("values", ["float32", "int32", "ties"])
def test_argmax_against_numpy(values):
    m, n = te.var("m"), te.var("n")
    dtype = "float32" if values == "float32" else "int32"
    idx, val, T0, T1, _ = argmax_compute(m, n, dtype)
    s = te.create_schedule(T0.op)
    inputs = {"idx": perm_index, **({"val": ties} if values == "ties" else {})}
    for sizes in ({m: 9, n: 17}, {m: 3, n: 1}):
        check(s, [idx, val, T0, T1], np_argmax, sizes=sizes, inputs=inputs)


def test_argmin_with_ties_against_numpy():
    idx, val, T0, T1, _ = argmax_compute(12, 20, "float32", argmin_reducer())
    s = te.create_schedule(T0.op)
    check(s, [idx, val, T0, T1], np_argmin, inputs={"idx": perm_index, "val": ties})


def test_update_is_simultaneous():
    """A combiner whose second value reads the first: (a, b) + (x, y) = (a + x, b + a * y).  Updating
    the outputs one after the other would read the new first value."""
    red = te.comm_reducer(lambda p, q: (p[0] + q[0], p[1] + p[0] * q[1]),
                          lambda t0, t1: (te.const(0, t0), te.const(0, t1)), name="prefix_dot")
    X = te.placeholder((6, 10), name="X")
    Y = te.placeholder((6, 10), name="Y")
    k = te.reduce_axis((0, 10), "k")
    S0, S1 = te.compute((6,), lambda i: red((X[i, k], Y[i, k]), axis=k), name="S")
    s = te.create_schedule(S0.op)

    def ref(x, y):
        prefix = np.cumsum(x, axis=1) - x  # the running first value before each step
        return x.sum(axis=1), (prefix * y).sum(axis=1)
    check(s, [X, Y, S0, S1], ref, rtol=1e-4, atol=1e-4)


def test_tuple_reduction_with_where_and_init():
    idx = te.placeholder((8, 12), name="idx", dtype="int32")
    val = te.placeholder((8, 12), name="val")
    k = te.reduce_axis((0, 12), "k")
    T0, T1 = te.compute((8,), lambda i: argmax_reducer()((idx[i, k], val[i, k]), axis=k, where=k % 3 != 0,
                                                         init=(-7, 0.5)), name="T")
    s = te.create_schedule(T0.op)

    def ref(ix, v):
        i2, v2 = np.full(8, -7, "int32"), np.full(8, 0.5, "float32")
        for r in range(8):
            for c in range(12):
                if c % 3 and not v2[r] >= v[r, c]:
                    i2[r], v2[r] = ix[r, c], v[r, c]
        return i2, v2
    check(s, [idx, val, T0, T1], ref, inputs={"idx": perm_index}, low=-1, high=1)


def test_tuple_reduction_split_reorder_parallel():
    m, n = te.var("m"), te.var("n")
    idx, val, T0, T1, k = argmax_compute(m, n)
    s = te.create_schedule(T0.op)
    io, ii = s[T0].split(T0.op.axis[0], factor=4)
    ko, ki = s[T0].split(k, factor=5)
    s[T0].reorder(io, ko, ii, ki)
    s[T0].parallel(io)
    for sizes in ({m: 10, n: 23}, {m: 7, n: 5}, {m: 1, n: 3}):
        check(s, [idx, val, T0, T1], np_argmax, sizes=sizes, inputs={"idx": perm_index, "val": ties})


def test_tuple_reduction_vectorized_data_axis():
    idx, val, T0, T1, k = argmax_compute(32, 9)
    s = te.create_schedule(T0.op)
    io, ii = s[T0].split(T0.op.axis[0], factor=8)
    s[T0].reorder(io, k, ii)
    s[T0].vectorize(ii)
    check(s, [idx, val, T0, T1], np_argmax, inputs={"idx": perm_index, "val": ties})


def test_parallel_reduce_axis_of_tuple_reduction_refused():
    idx, val, T0, T1, k = argmax_compute(16, 64)
    s = te.create_schedule(T0.op)
    ko, ki = s[T0].split(k, factor=8)
    s[T0].parallel(ko)
    assert_raises_naming(ScheduleError, lambda: te.lower(s, [idx, val, T0, T1]), "T", "k.outer")


def test_out_of_bounds_read_in_a_tuple_reduction_found():
    """The reads of a tuple update sit in its let values: isl must see them too."""
    idx = te.placeholder((8, 16), name="idx", dtype="int32")
    val = te.placeholder((8, 16), name="val")
    k = te.reduce_axis((0, 16), "k")
    T0, T1 = te.compute((8,), lambda i: argmax_reducer()((idx[i, k], val[i, k + 1]), axis=k), name="T")
    s = te.create_schedule(T0.op)
    assert_raises_naming(OutOfBoundsError, lambda: te.lower(s, [idx, val, T0, T1]), "T", "val")


def test_tuple_reduction_consumed_and_computed_at():
    m, n = te.var("m"), te.var("n")
    idx, val, T0, T1, k = argmax_compute(m, n)
    R = te.compute((m,), lambda i: T1[i] * 2 + T0[i].astype("float32"), name="R")
    s = te.create_schedule(R.op)
    ro, ri = s[R].split(R.op.axis[0], factor=4)
    s[T0].compute_at(s[R], ro)
    s[R].parallel(ro)

    def ref(ix, v):
        i2, v2 = np_argmax(ix, v)
        return v2 * 2 + i2.astype("float32")
    check(s, [idx, val, R], ref, sizes={m: 10, n: 6}, inputs={"idx": perm_index}, rtol=1e-5, atol=1e-4)


def test_rfactor_of_tuple_reduction():
    idx, val, T0, T1, k = argmax_compute(10, 64, reducer=argmax_reducer(ties_to_lower_index=True))
    s = te.create_schedule(T0.op)
    ko, ki = s[T0].split(k, factor=8)
    R0, R1 = s.rfactor(T0, ki)
    assert R0.op is R1.op and R0.shape[0].value == 8
    s[R0].parallel(R0.op.axis[0])
    check(s, [idx, val, T0, T1], np_argmax, inputs={"idx": lambda rng, sh, d: np.tile(np.arange(64, dtype=d), (10, 1)),
                                                    "val": ties})


def test_cache_read_of_one_output():
    A, B0, B1 = batch(16, 16)
    C = te.compute(A.shape, lambda i, j: B0[i, j] + B1[i, j], name="C")
    s = te.create_schedule(C.op)
    B1c = s.cache_read(B1, "local", [C])
    assert B1c.name == "B.v1.local"
    s[B1c].compute_at(s[C], C.op.axis[0])
    check(s, [A, B0, C], lambda a: (a + 2, (a + 2) + a * 3))


def test_cache_write_of_multi_output_takes_all_outputs():
    idx, val, T0, T1, k = argmax_compute(16, 32)
    s = te.create_schedule(T0.op)
    assert_raises_naming(ScheduleError, lambda: s.cache_write(T0, "local"), "T", "cache_write")
    L0, L1 = s.cache_write([T0, T1], "local")
    assert L0.op is L1.op and L0.name == "T.local.v0"
    io, ii = s[T0].split(T0.op.axis[0], factor=4)
    s[L0].compute_at(s[T0], io)
    check(s, [idx, val, T0, T1], np_argmax, inputs={"idx": perm_index, "val": ties})


# -- backends --------------------------------------------------------------------------------------------
def test_export_library_with_two_outputs(tmp_path):
    m, n = te.var("m"), te.var("n")
    idx, val, T0, T1, k = argmax_compute(m, n)
    s = te.create_schedule(T0.op)
    mod = codegen.build(s, [idx, val, T0, T1], target="llvm", name="argmax")
    path = str(tmp_path / "argmax.so")
    mod.export_library(path)
    loaded = codegen.load_module(path)
    run_check(loaded, [idx, val, T0, T1], np_argmax, sizes={m: 5, n: 8}, inputs={"idx": perm_index})


def test_cuda_source_stores_both_outputs():
    idx, val, T0, T1, k = argmax_compute(256, 32)
    s = te.create_schedule(T0.op)
    bx, tx = s[T0].split(T0.op.axis[0], factor=64)
    s[T0].bind(bx, te.thread_axis("blockIdx.x"))
    s[T0].bind(tx, te.thread_axis("threadIdx.x"))
    mod = codegen.build(s, [idx, val, T0, T1], target="cuda", name="argmax")
    src = mod.get_source("cuda")
    assert src.count("T_v0[") >= 2 and src.count("T_v1[") >= 2, src
    import cuda_sim
    if cuda_sim.available():
        ins = [np.random.default_rng(1).permutation(256 * 32).reshape(256, 32).astype("int32"),
               np.random.default_rng(2).integers(0, 4, (256, 32)).astype("float32")]
        outs = [np.empty(256, "int32"), np.empty(256, "float32")]
        cuda_sim.check(mod, ins, outs, np_argmax)


# -- misuse ----------------------------------------------------------------------------------------------
def test_mixed_reduce_and_elementwise_outputs_lift_the_reduction():
    """TVM refuses these outputs; tiletune computes the reduction in its own stage (test_te_reduction_in_expr)."""
    idx = te.placeholder((4, 4), name="idx", dtype="int32")
    k = te.reduce_axis((0, 4), "k")
    S, F = te.compute((4,), lambda i: (te.sum(idx[i, k], axis=k), idx[i, 0]), name="Mixed")
    assert [t.name for t in S.op.input_tensors] == ["Mixed.red0", "idx"]


def test_partial_or_reordered_tuple_reduction_lifted_and_nested_tuple_refused():
    idx, val = te.placeholder((4, 4), name="idx", dtype="int32"), te.placeholder((4, 4), name="val")
    k = te.reduce_axis((0, 4), "k")
    am = argmax_reducer()
    half = te.compute((4,), lambda i: am((idx[i, k], val[i, k]), axis=k)[1], name="Half")
    (red,) = half.op.input_tensors
    assert red.name == "Half.red0.v1" and red.op.num_outputs == 2
    swapped = te.compute((4,), lambda i: am((idx[i, k], val[i, k]), axis=k)[::-1], name="Swapped")
    s = te.create_schedule(swapped[0].op)
    check(s, [idx, val, *swapped], lambda ix, v: (v.max(1), ix[np.arange(4), v.argmax(1)]))
    assert_raises_naming(TypeError, lambda: te.compute((4,), lambda i: (am((idx[i, k], val[i, k]), axis=k),
                                                                        val[i, 0]), name="Nested"), "Nested")


def test_tuple_reducer_arity_mismatches_named():
    idx, val = te.placeholder((4, 4), name="idx", dtype="int32"), te.placeholder((4, 4), name="val")
    k = te.reduce_axis((0, 4), "k")
    one_id = te.comm_reducer(lambda x, y: (x[0], x[1]), lambda t0, t1: te.const(0, t0), name="short_id")
    assert_raises_naming(ValueError, lambda: one_id((idx[0, k], val[0, k]), axis=k), "short_id", "fidentity")
    one_out = te.comm_reducer(lambda x, y: x[0] + y[0], lambda t0, t1: (0, 0), name="short_combine")
    assert_raises_naming(ValueError, lambda: one_out((idx[0, k], val[0, k]), axis=k), "short_combine",
                         "fcombine")
    assert_raises_naming(ValueError, lambda: argmax_reducer()((idx[0, k], val[0, k]), axis=k, init=(0,)),
                         "argmax", "init")


def test_single_value_reducers_unchanged():
    A = te.placeholder((8, 8), name="A")
    k = te.reduce_axis((0, 8), "k")
    B = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="B")
    assert B.op.num_outputs == 1 and B.op.body[0].value_index == 0 and not isinstance(B.op.body[0].source, tuple)
    s = te.create_schedule(B.op)
    assert not collect(te.lower(s, [A, B]).body, LetStmt)
    check(s, [A, B], lambda a: a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_one_element_tuple_reducer():
    """A tuple reducer over a 1-tuple gives one Reduce (as TVM); fcombine still gets tuples."""
    prod = te.comm_reducer(lambda x, y: (x[0] * y[0],), lambda t: (te.const(1, t),), name="prod")
    A = te.placeholder((5, 6), name="A")
    k = te.reduce_axis((0, 6), "k")
    B = te.compute((5,), lambda i: prod((A[i, k],), axis=k), name="B")
    assert isinstance(B, te.Tensor) and B.op.num_outputs == 1
    check(te.create_schedule(B.op), [A, B], lambda a: a.prod(axis=1), low=0.5, high=1.5, rtol=1e-5, atol=1e-5)


def test_rfactor_of_whole_reduce_axis_tuple():
    """rfactor on the unsplit axis: each partial is one element or the identity tuple."""
    idx, val, T0, T1, k = argmax_compute(6, 10, reducer=argmax_reducer(ties_to_lower_index=True))
    s = te.create_schedule(T0.op)
    R0, R1 = s.rfactor(T0, k, factor_axis=1)
    assert [x.value for x in R0.shape] == [6, 10]
    check(s, [idx, val, T0, T1], np_argmax, inputs={"idx": lambda rng, sh, d: np.tile(np.arange(10, dtype=d), (6, 1)),
                                                    "val": ties})
