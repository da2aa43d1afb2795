"""Reductions inside a larger expression: each becomes its own stage ``<name>.red<k>`` (TVM refuses
these bodies; Halide accepts them), which schedules like any reduction stage."""
import numpy as np
import pytest

import tensorir as te
from tensorir.expr import Reduce
from tensorir.visitor import collect

from conftest import assert_raises_naming, build, check, run_check

N, M, P = 7, 13, 5


def _stage(s, name):
    return next(st for st in s.stages if st.op.name == name)


def _lifted(op):
    return sorted(t.name for t in op.input_tensors if ".red" in t.name)


def test_sum_divided_by_constant_is_its_own_stage():
    X = te.placeholder((N, M), name="X")
    k = te.reduce_axis((0, M), name="k")
    C = te.compute((N,), lambda i: te.sum(X[i, k], axis=k) / M, name="C")
    assert not collect(C.op.body, Reduce)
    assert _lifted(C.op) == ["C.red0"]
    red = C.op.input_tensors[0]
    assert red.shape[0].value == N and len(red.op.axis) == 1 and red.op.reduce_axis[0] is k
    s = te.create_schedule(C.op)
    assert [st.op.name for st in s.stages] == ["X", "C.red0", "C"]
    check(s, [X, C], lambda x: x.astype("float64").sum(1) / M)


def test_two_reductions_in_one_body():
    X, Y = te.placeholder((N, M), name="X"), te.placeholder((N, P), name="Y")
    k, j = te.reduce_axis((0, M), name="k"), te.reduce_axis((0, P), name="j")
    C = te.compute((N,), lambda i: te.max(X[i, k], axis=k) + te.sum(Y[i, j], axis=j), name="C")
    assert _lifted(C.op) == ["C.red0", "C.red1"]
    check(te.create_schedule(C.op), [X, Y, C], lambda x, y: x.max(1) + y.astype("float64").sum(1),
          low=-9, high=-1)


def test_reduction_over_fewer_axes_than_the_output():
    """``X[i, j] - mean_k X[i, k]``: the stage runs over i only (not recomputed for every j)."""
    X = te.placeholder((N, M), name="X")
    k = te.reduce_axis((0, M), name="k")
    C = te.compute((N, M), lambda i, j: X[i, j] - te.sum(X[i, k], axis=k) / M, name="C")
    red = C.op.input_tensors[1]
    assert red.op.name == "C.red0" and len(red.shape) == 1
    check(te.create_schedule(C.op), [X, C], lambda x: x - x.astype("float64").mean(1, keepdims=True))


def test_reduction_using_no_output_axis_is_a_scalar_stage():
    X = te.placeholder((M,), name="X")
    k = te.reduce_axis((0, M), name="k")
    C = te.compute((M,), lambda i: X[i] / te.sum(X[k], axis=k), name="C")
    assert C.op.input_tensors[1].shape == ()
    check(te.create_schedule(C.op), [X, C], lambda x: x / x.astype("float64").sum(), low=0.5, high=1)


@pytest.mark.parametrize("wrap, ref", [
    (lambda r: te.exp(r), np.exp),
    (lambda r: r.astype("float64") * 2, lambda v: v * 2),
    (lambda r: te.if_then_else(r > 0, r, -r), np.abs),
    (lambda r: te.sqrt(te.max(r, 0.0) + 1), lambda v: np.sqrt(np.maximum(v, 0) + 1)),
])
def test_reduction_under_calls_casts_and_selects(wrap, ref):
    X = te.placeholder((N, M), name="X")
    k = te.reduce_axis((0, M), name="k")
    C = te.compute((N,), lambda i: wrap(te.sum(X[i, k], axis=k) / M), name="C")
    check(te.create_schedule(C.op), [X, C], lambda x: ref(x.astype("float64").sum(1) / M), atol=1e-5)


def test_softmax_in_one_compute():
    """A reduction nested in a top-level reduction: only the inner one is lifted."""
    X = te.placeholder((N, M), name="X")
    k, k2 = te.reduce_axis((0, M), name="k"), te.reduce_axis((0, M), name="k2")
    den = te.compute((N,), lambda i: te.sum(te.exp(X[i, k] - te.max(X[i, k2], axis=k2)), axis=k), name="den")
    assert isinstance(den.op.body[0], Reduce) and _lifted(den.op) == ["den.red0"]
    S = te.compute((N, M), lambda i, j: te.exp(X[i, j] - te.max(X[i, k2], axis=k2)) / den[i], name="S")

    def ref(x):
        e = np.exp(x - x.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)
    check(te.create_schedule(S.op), [X, S], ref, low=-3, high=3)


def test_nested_reduction_reads_the_enclosing_reduce_axis():
    """``sum_k X[i, k] * sum_j Y[k, j]`` with k from 2: the inner stage runs over k (shifted to 0)."""
    X, Y = te.placeholder((N, M), name="X"), te.placeholder((M, P), name="Y")
    k, j = te.reduce_axis((2, M), name="k"), te.reduce_axis((0, P), name="j")
    C = te.compute((N,), lambda i: te.sum(X[i, k] * te.sum(Y[k, j], axis=j), axis=k) + 1, name="C")
    outer = C.op.input_tensors[0]
    inner = next(t for t in outer.op.input_tensors if t.op.name == "C.red0")
    assert outer.op.name == "C.red1" and inner.shape[0].value == M - 2
    check(te.create_schedule(C.op), [X, Y, C],
          lambda x, y: (x[:, 2:].astype("float64") * y[2:].sum(1)).sum(1) + 1, atol=1e-4)


def test_where_predicate_and_custom_reducer():
    X = te.placeholder((N, M), name="X")
    k = te.reduce_axis((0, M), name="k")
    prod = te.comm_reducer(lambda a, b: a * b, lambda t: te.const(1, t), name="prod")
    C = te.compute((N,), lambda i: te.sum(X[i, k], axis=k, where=k % 2 == 0) - prod(X[i, k], axis=k), name="C")
    check(te.create_schedule(C.op), [X, C],
          lambda x: x[:, ::2].astype("float64").sum(1) - x.astype("float64").prod(1), low=0.5, high=1.5, atol=1e-4)


def _argmax():
    def fcombine(x, y):
        take = x[1] >= y[1]
        return te.if_then_else(take, x[0], y[0]), te.if_then_else(take, x[1], y[1])
    return te.comm_reducer(fcombine, lambda t0, t1: (te.const(-1, t0), te.min_value(t1)), name="argmax")


def test_tuple_reducer_results_inside_expressions():
    """One argmax call, both results used in one expression: one two-output stage."""
    X = te.placeholder((N, M), name="X")
    k = te.reduce_axis((0, M), name="k")
    argmax = _argmax()

    def body(i):
        idx, val = argmax((k, X[i, k]), axis=k)
        return val * 100 + idx.astype("float32")
    C = te.compute((N,), body, name="C")
    assert _lifted(C.op) == ["C.red0.v0", "C.red0.v1"]
    check(te.create_schedule(C.op), [X, C], lambda x: x.max(1).astype("float64") * 100 + x.argmax(1), atol=1e-3)


def test_tuple_reducer_index_only():
    X = te.placeholder((N, M), name="X")
    k = te.reduce_axis((0, M), name="k")
    C = te.compute((N,), lambda i: _argmax()((k, X[i, k]), axis=k)[0] * 10, name="C")
    check(te.create_schedule(C.op), [X, C], lambda x: x.argmax(1).astype("int32") * 10)


def test_multi_output_compute_with_nested_and_top_level_reductions():
    """Outputs that TVM requires to be one reducer call may mix reductions with other values."""
    X = te.placeholder((N, M), name="X")
    k = te.reduce_axis((0, M), name="k")
    A, B, C = te.compute((N,), lambda i: (te.sum(X[i, k], axis=k), X[i, 0] * 2, te.max(X[i, k], axis=k) + 1),
                         name="T")
    assert _lifted(A.op) == ["T.red0", "T.red1"]
    check(te.create_schedule(A.op), [X, A, B, C],
          lambda x: (x.astype("float64").sum(1), x[:, 0] * 2, x.max(1) + 1))


def test_select_condition_protects_a_shifted_read():
    """The stage of a reduction in a select arm reduces only where the arm is taken: X[i - 1] at i = 0
    is never read (isl proves it)."""
    X = te.placeholder((N, M), name="X")
    k = te.reduce_axis((0, M), name="k")
    C = te.compute((N,), lambda i: te.if_then_else(i > 0, te.sum(X[i - 1, k], axis=k), -1.0), name="C")
    check(te.create_schedule(C.op), [X, C],
          lambda x: np.concatenate([[-1.0], x[:-1].astype("float64").sum(1)]))


def test_same_reduction_in_both_arms_is_one_stage():
    X = te.placeholder((N, M), name="X")
    k = te.reduce_axis((0, M), name="k")
    r = te.sum(X[0, k], axis=k)
    C = te.compute((N,), lambda i: te.if_then_else(i > 3, r, r * 2), name="C")
    assert _lifted(C.op) == ["C.red0"]
    check(te.create_schedule(C.op), [X, C],
          lambda x: np.where(np.arange(N) > 3, 1, 2) * x[0].astype("float64").sum())


def test_symbolic_sizes():
    n, m = te.size_var("n"), te.size_var("m")
    X = te.placeholder((n, m), name="X")
    k = te.reduce_axis((0, m), name="k")
    C = te.compute((n, m), lambda i, j: X[i, j] - te.max(X[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    mod = build(s, [X, C])
    for nn, mm in ((1, 1), (3, 8), (6, 17)):
        run_check(mod, [X, C], lambda x: x - x.max(1, keepdims=True), sizes={n: nn, m: mm}, seed=mm)


# -- scheduling the lifted stages ------------------------------------------------------------------------
def _normalize():
    X = te.placeholder((N, M), name="X")
    k = te.reduce_axis((0, M), name="k")
    C = te.compute((N, M), lambda i, j: X[i, j] / te.sum(X[i, k], axis=k), name="C")
    return X, C, lambda x: x / x.astype("float64").sum(1, keepdims=True)


def test_compute_at_of_the_lifted_stage_and_parallel_outer():
    X, C, ref = _normalize()
    s = te.create_schedule(C.op)
    red = _stage(s, "C.red0")
    i, j = C.op.axis
    s[C].parallel(i)
    red.compute_at(s[C], i)
    ko, ki = red.split(red.op.reduce_axis[0], factor=4)
    assert "C.red0" in str(te.lower(s, [X, C]))
    check(s, [X, C], ref, low=0.5, high=1.5)


def test_lifted_stage_split_and_parallel_at_root():
    X, C, ref = _normalize()
    s = te.create_schedule(C.op)
    red = _stage(s, "C.red0")
    io, ii = red.split(red.op.axis[0], factor=3)
    red.parallel(io)
    s[C].vectorize(C.op.axis[1])
    check(s, [X, C], ref, low=0.5, high=1.5)


def test_lifted_stage_cannot_be_inlined():
    X, C, _ = _normalize()
    s = te.create_schedule(C.op)
    assert_raises_naming(te.ScheduleError, lambda: _stage(s, "C.red0").compute_inline(), "C.red0")


def test_compute_at_inside_a_parallel_loop_is_private():
    """Attached inside the consumer's parallel j, the stage's buffer is private to each iteration."""
    X, C, ref = _normalize()
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    _stage(s, "C.red0").compute_at(s[C], j)
    s[C].parallel(j)
    check(s, [X, C], ref, low=0.5, high=1.5)


def test_parallel_reduction_axis_of_the_lifted_stage_is_refused():
    X, C, _ = _normalize()
    s = te.create_schedule(C.op)
    red = _stage(s, "C.red0")

    def go():
        red.parallel(red.op.reduce_axis[0])
        te.lower(s, [X, C])
    assert_raises_naming(te.ScheduleError, go, "C.red0", "k")


def test_let_bound_variable_in_a_lifted_reduction_is_refused():
    from tensorir.expr import Let, Var
    X = te.placeholder((N, M), name="X")
    k = te.reduce_axis((0, M), name="k")
    v = Var("row")
    with pytest.raises(te.tensor.ComputeError, match="row"):
        te.compute((N,), lambda i: Let("float32", v, i, te.sum(X[v, k], axis=k)), name="C")


def test_lifted_stages_survive_serialization():
    from tensorir.serialize import load_json, save_json
    X, C, ref = _normalize()
    C2 = load_json(save_json(C))
    X2 = next(t for t in C2.op.input_tensors if t.name == "X")
    assert sorted(t.name for t in C2.op.input_tensors) == ["C.red0", "X"]
    check(te.create_schedule(C2.op), [X2, C2], ref, low=0.5, high=1.5)
