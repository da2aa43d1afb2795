"""Catalogue of illegal schedules and programs: each is refused before anything runs -- at the
schedule call, or by ``te.lower`` / ``codegen.build`` -- with an error naming the culprit (stage,
axis, tensor, index expression, a counterexample point).

Covered: parallel reduction axes (direct, split, reordered, fused, cache stage, after rfactor),
vectorized reductions (lowered correctly or refused, never wrong), compute_at into a non-consumer
or too early, out-of-bounds reads (and, in hand-built IR, writes) with constant and symbolic sizes,
stale axes and axes of other stages, and the isl checks themselves on hand-built loop IR (carried
dependences of parallel / vectorized loops, reads before writes).
"""
import re

import pytest

import tensorir as te
from tensorir.poly.analysis import Analysis
from tensorir.stmt import (PARALLEL, SERIAL, VECTORIZED, Allocate, Buffer, BufferStore, For, LoweredFunc,
                           Seq)

from conftest import assert_raises_naming, build, check

# -- helpers -----------------------------------------------------------------------------------------


def gemm(M=16, N=12, K=20):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C, k


def refused_at_lower_and_build(exc, s, args, *names):
    """``te.lower`` and ``codegen.build`` both refuse ``s`` with ``exc`` naming ``names``; returns the
    message."""
    msg = assert_raises_naming(exc, lambda: te.lower(s, args), *names)
    assert_raises_naming(exc, lambda: build(s, args), *names)
    return msg


def counterexample(msg: str) -> dict:
    """The ``name = value`` pairs of the counterexample in an out-of-bounds message."""
    m = re.search(r"counterexample:?\s*([^)]*)\)?", msg)
    assert m, f"no counterexample in {msg!r}"
    pairs = re.findall(r"([\w.]+)\s*=\s*(-?\d+)", m.group(1))
    assert pairs, f"counterexample without values in {msg!r}"
    return {k: int(v) for k, v in pairs}


# -- where the reduction axis k of a GEMM ends up, before it is made parallel or vectorized -------------
def _place_k(split: int = 0, take: str = "outer", order: str = ""):
    """A schedule step: split k by ``split`` (taking its outer or inner part), reorder by ``order``
    (names among i j k ko ki); returns the axis to annotate and the name an error must give."""
    def place(s, C, k):
        axes = dict(zip("ij", C.op.axis), k=k)
        if split:
            axes["ko"], axes["ki"] = s[C].split(k, factor=split)
        if order:
            s[C].reorder(*(axes[a] for a in order.split()))
        key = ("ko" if take == "outer" else "ki") if split else "k"
        return axes[key], {"k": "k", "ko": "k.outer", "ki": "k.inner"}[key]
    return place


# -- parallel reduction axes -----------------------------------------------------------------------------
CASES_PARALLEL_REDUCTION = {
    "direct": _place_k(), "split_outer": _place_k(split=4),
    "split_inner": _place_k(split=4, take="inner", order="i ko j ki"),
    "split_with_tail": _place_k(split=3),                 # 20 = 6 * 3 + 2: with a tail guard
    "reordered_outermost": _place_k(order="k i j"),
    "reordered_split_outer": _place_k(split=5, order="ko i j ki"),
}


@pytest.mark.parametrize("case", sorted(CASES_PARALLEL_REDUCTION))
def test_parallel_reduction_axis_refused(case):
    A, B, C, k = gemm()
    s = te.create_schedule(C.op)
    axis, name = CASES_PARALLEL_REDUCTION[case](s, C, k)
    s[C].parallel(axis)
    msg = refused_at_lower_and_build(te.ScheduleError, s, [A, B, C], "C", name)
    assert re.search(r"reduction|dependence", msg), f"the dependence is not described: {msg!r}"


def test_parallel_fused_reduction_axes_refused():
    A = te.placeholder((8, 6, 5), name="A")
    k1, k2 = te.reduce_axis((0, 6), name="k1"), te.reduce_axis((0, 5), name="k2")
    R = te.compute((8,), lambda i: te.sum(A[i, k1, k2], axis=[k1, k2]), name="R")
    s = te.create_schedule(R.op)
    f = s[R].fuse(k1, k2)
    s[R].parallel(f)
    refused_at_lower_and_build(te.ScheduleError, s, [A, R], "R", f.var.name)


def test_spatial_axis_fused_with_reduction_is_a_reduction_loop():
    """TVM: the fused loop is a reduction loop (the initialisation runs over it too): it cannot be
    parallelized or vectorized, and it computes the product."""
    A, B, C, k = gemm()
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    s[C].reorder(i, k, j)
    f = s[C].fuse(i, k)
    assert_raises_naming(te.ScheduleError, lambda: s[C].vectorize(f), "C", f.var.name)
    s[C].parallel(f)
    refused_at_lower_and_build(te.ScheduleError, s, [A, B, C], "C", f.var.name)
    s = te.create_schedule(C.op)
    s[C].reorder(i, k, j)
    s[C].fuse(i, k)
    check(s, [A, B, C], lambda a, b: a.astype("float64") @ b, atol=1e-4)


def test_parallel_reduction_axis_of_cache_write_stage_refused():
    A, B, C, k = gemm(16, 16, 16)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*C.op.axis, 4, 4)
    s[CC].compute_at(s[C], jo)
    (kk,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kk, factor=4)
    s[CC].parallel(ki)
    refused_at_lower_and_build(te.ScheduleError, s, [A, B, C], "C.local", "k.inner")


def test_parallel_reduction_of_final_stage_after_rfactor_refused():
    A = te.placeholder((4, 64), name="A")
    k = te.reduce_axis((0, 64), name="k")
    R = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(k, factor=8)
    s.rfactor(R, ko)
    (kr,) = s[R].op.reduce_axis
    s[R].parallel(kr)
    refused_at_lower_and_build(te.ScheduleError, s, [A, R], "R", kr.var.name)


# -- vectorized reductions: refused at the call, as in TVM ("Cannot vectorize on reduction axis") ------
CASES_VECTORIZED_REDUCTION = {
    "k_innermost": _place_k(), "k_inner_split": _place_k(split=4, take="inner"),
    "k_inner_split_tail": _place_k(split=8, take="inner"),     # 20 = 2 * 8 + 4
    "k_middle": _place_k(order="i k j"), "k_outermost": _place_k(order="k i j"),
}


@pytest.mark.parametrize("case", sorted(CASES_VECTORIZED_REDUCTION))
def test_vectorized_reduction_axis_refused_at_the_call(case):
    A, B, C, k = gemm()
    s = te.create_schedule(C.op)
    axis, name = CASES_VECTORIZED_REDUCTION[case](s, C, k)
    assert_raises_naming(te.ScheduleError, lambda: s[C].vectorize(axis), "C", name, "reduction")
    check(s, [A, B, C], lambda a, b: a.astype("float64") @ b, atol=1e-4)  # the schedule is unchanged


def test_vectorized_fused_reduction_axes_refused_at_the_call():
    A = te.placeholder((8, 6, 5), name="A")
    k1, k2 = te.reduce_axis((0, 6), name="k1"), te.reduce_axis((0, 5), name="k2")
    R = te.compute((8,), lambda i: te.sum(A[i, k1, k2], axis=[k1, k2]), name="R")
    s = te.create_schedule(R.op)
    f = s[R].fuse(k1, k2)
    assert_raises_naming(te.ScheduleError, lambda: s[R].vectorize(f), "R", f.var.name)


def test_vectorized_reduction_inside_cache_write_tile_refused_at_the_call():
    A, B, C, k = gemm(16, 16, 16)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*C.op.axis, 4, 4)
    s[CC].compute_at(s[C], jo)
    (kk,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kk, factor=4)
    mc, nc = s[CC].op.axis
    s[CC].reorder(ko, mc, ki, nc)
    assert_raises_naming(te.ScheduleError, lambda: s[CC].vectorize(ki), "C.local", "k.inner")
    s[CC].vectorize(nc)  # the data-parallel axis inside it is fine
    check(s, [A, B, C], lambda a, b: a.astype("float64") @ b, atol=1e-4)


# -- compute_at into a non-consumer, or too early -------------------------------------------------------
def test_compute_at_into_a_non_consumer_refused():
    A = te.placeholder((16,), name="A")
    P = te.compute((16,), lambda i: A[i] + 1.0, name="P")
    Q = te.compute((16,), lambda i: A[i] * 2.0, name="Q")
    C = te.compute((16,), lambda i: P[i] + Q[i], name="C")
    s = te.create_schedule(C.op)
    s[P].compute_at(s[Q], Q.op.axis[0])  # as in TVM, refused when lowered
    refused_at_lower_and_build(te.ScheduleError, s, [A, C], "P", "Q")


def test_compute_at_into_the_consumer_of_a_consumer_refused():
    """C reads Q, Q reads P: C does not read P directly, P at C's loop is not inside Q's loops."""
    A = te.placeholder((16,), name="A")
    P = te.compute((16,), lambda i: A[i] + 1.0, name="P")
    Q = te.compute((16,), lambda i: P[i] * 2.0, name="Q")
    C = te.compute((16,), lambda i: Q[i] - 1.0, name="C")
    s = te.create_schedule(C.op)

    def attach_and_lower():
        s[P].compute_at(s[C], C.op.axis[0])
        return te.lower(s, [A, C])

    assert_raises_naming(te.ScheduleError, attach_and_lower, "P")


def test_compute_at_too_early_chain_producer_read_before_computed():
    """Q is attached inside C's loop, but P (at the root, before C) reads all of Q."""
    A = te.placeholder((16,), name="A")
    Q = te.compute((16,), lambda i: A[i] + 1.0, name="Q")
    P = te.compute((16,), lambda i: Q[i] * 2.0, name="P")
    C = te.compute((16,), lambda i: P[i] + Q[i], name="C")
    s = te.create_schedule(C.op)
    s[Q].compute_at(s[C], C.op.axis[0])
    refused_at_lower_and_build(te.ScheduleError, s, [A, C], "Q", "P")


def test_compute_at_too_deep_for_a_second_consumer():
    """P attached at C1.j, but C2 (C1's consumer) reads P outside C1's loops."""
    A = te.placeholder((16, 16), name="A")
    P = te.compute((16, 16), lambda i, j: A[i, j] + 1.0, name="P")
    C1 = te.compute((16, 16), lambda i, j: P[i, j] * 2.0, name="C1")
    C2 = te.compute((16, 16), lambda i, j: P[i, j] + C1[i, j], name="C2")
    s = te.create_schedule(C2.op)
    s[C1].compute_at(s[C2], C2.op.axis[0])
    s[P].compute_at(s[C1], C1.op.axis[1])
    refused_at_lower_and_build(te.ScheduleError, s, [A, C2], "P", "C2")


def test_compute_at_of_two_consumers_at_different_depths():
    """P attached at C1's inner loop of a split; C2 reads P's whole rows from root."""
    A = te.placeholder((16, 16), name="A")
    P = te.compute((16, 16), lambda i, j: A[i, j] + 1.0, name="P")
    C1 = te.compute((16, 16), lambda i, j: P[i, j] * 2.0, name="C1")
    C2 = te.compute((16,), lambda i: P[i, 0] + P[i, 15], name="C2")
    s = te.create_schedule([C1.op, C2.op])
    jo, ji = s[C1].split(C1.op.axis[1], factor=4)
    s[P].compute_at(s[C1], ji)
    refused_at_lower_and_build(te.ScheduleError, s, [A, C1, C2], "P", "C2")


def test_compute_at_to_itself_refused():
    A = te.placeholder((16,), name="A")
    P = te.compute((16,), lambda i: A[i] + 1.0, name="P")
    C = te.compute((16,), lambda i: P[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[P].compute_at(s[P], P.op.axis[0])  # as in TVM, refused when lowered (and built)
    refused_at_lower_and_build(te.ScheduleError, s, [A, C], "P", "itself")


# -- stale axes and axes of another stage ----------------------------------------------------------------
def one_stage():
    A = te.placeholder((16, 8), name="A")
    B = te.compute((16, 8), lambda i, j: A[i, j] + 1.0, name="B")
    return A, B, te.create_schedule(B.op)


@pytest.mark.parametrize("use", ["parallel", "vectorize", "unroll", "split", "reorder", "fuse"])
def test_stale_axis_after_split_refused_at_the_call(use):
    A, B, s = one_stage()
    i, j = B.op.axis
    s[B].split(i, factor=4)
    call = {"parallel": lambda: s[B].parallel(i), "vectorize": lambda: s[B].vectorize(i),
            "unroll": lambda: s[B].unroll(i), "split": lambda: s[B].split(i, factor=2),
            "reorder": lambda: s[B].reorder(j, i), "fuse": lambda: s[B].fuse(i, j)}[use]
    assert_raises_naming(te.ScheduleError, call, "B", "i")


def test_stale_axis_after_fuse_refused_at_the_call():
    A, B, s = one_stage()
    i, j = B.op.axis
    s[B].fuse(i, j)
    assert_raises_naming(te.ScheduleError, lambda: s[B].parallel(j), "B", "j")


def test_compute_at_at_stale_axis_refused_at_the_call():
    A = te.placeholder((16,), name="A")
    P = te.compute((16,), lambda i: A[i] + 1.0, name="P")
    C = te.compute((16,), lambda ci: P[ci] * 2.0, name="C")
    s = te.create_schedule(C.op)
    (ci,) = C.op.axis
    s[C].split(ci, factor=4)
    assert_raises_naming(te.ScheduleError, lambda: s[P].compute_at(s[C], ci), "ci")


def test_attach_axis_fused_as_outer_after_compute_at_refused_at_lower():
    A = te.placeholder((16, 4), name="A")
    P = te.compute((16, 4), lambda i, j: A[i, j] + 1.0, name="P")
    C = te.compute((16, 4), lambda ci, cj: P[ci, cj] * 2.0, name="C")
    s = te.create_schedule(C.op)
    ci, cj = C.op.axis
    s[P].compute_at(s[C], ci)
    s[C].fuse(ci, cj)  # a split or a fuse as the inner axis moves the attachment (TVM's rule)
    refused_at_lower_and_build(te.ScheduleError, s, [A, C], "P", "ci", "C")


def test_axis_of_another_stage_refused_at_the_call():
    A = te.placeholder((16,), name="A")
    P = te.compute((16,), lambda pi: A[pi] + 1.0, name="P")
    C = te.compute((16,), lambda ci: P[ci] * 2.0, name="C")
    s = te.create_schedule(C.op)
    (pi,) = P.op.axis
    for call in (lambda: s[C].parallel(pi), lambda: s[C].vectorize(pi), lambda: s[C].split(pi, factor=2),
                 lambda: s[P].compute_at(s[C], pi)):
        assert_raises_naming(te.ScheduleError, call, "C", "pi")


# -- out-of-bounds reads: constant and symbolic sizes ---------------------------------------------------
N = te.var("n")

# name: (input shape, output shape, fcompute(A), index text (regex), index(env), A's extent(env),
#        B's extent(env)) -- env: the counterexample's values
OOB_1D = {
    "plus_one_const": ((16,), (16,), lambda A: lambda i: A[i + 1], r"i \+ 1",
                       lambda e: e["i"] + 1, lambda e: 16, lambda e: 16),
    "minus_one_const": ((16,), (16,), lambda A: lambda i: A[i - 1], r"i - 1",
                        lambda e: e["i"] - 1, lambda e: 16, lambda e: 16),
    "times_two_const": ((16,), (16,), lambda A: lambda i: A[2 * i], r"(2 \* i|i \* 2)",
                        lambda e: 2 * e["i"], lambda e: 16, lambda e: 16),
    # (the simplifier prints 16 - i as i * -1 + 16; either spelling names the index)
    "reverse_off_by_one_const": ((16,), (16,), lambda A: lambda i: A[16 - i], r"(16 - i|i \* -1 \+ 16)",
                                 lambda e: 16 - e["i"], lambda e: 16, lambda e: 16),
    "plus_one_sym": ((N,), (N,), lambda A: lambda i: A[i + 1], r"i \+ 1",
                     lambda e: e["i"] + 1, lambda e: e["n"], lambda e: e["n"]),
    "minus_one_sym": ((N,), (N,), lambda A: lambda i: A[i - 1], r"i - 1",
                      lambda e: e["i"] - 1, lambda e: e["n"], lambda e: e["n"]),
    "times_two_sym": ((N,), (N,), lambda A: lambda i: A[2 * i], r"(2 \* i|i \* 2)",
                      lambda e: 2 * e["i"], lambda e: e["n"], lambda e: e["n"]),
    "reverse_off_by_one_sym": ((N,), (N,), lambda A: lambda i: A[N - i], r"n - i",
                               lambda e: e["n"] - e["i"], lambda e: e["n"], lambda e: e["n"]),
    "stencil_one_too_long_sym": ((N,), (N - 1,), lambda A: lambda i: A[i] + A[i + 2], r"i \+ 2",
                                 lambda e: e["i"] + 2, lambda e: e["n"], lambda e: e["n"] - 1),
    "min_clamp_too_high_sym": ((N,), (N,), lambda A: lambda i: A[te.min(i + 1, N)], r"min",
                               lambda e: min(e["i"] + 1, e["n"]), lambda e: e["n"], lambda e: e["n"]),
    "upsample_sym": ((N,), (2 * N,), lambda A: lambda i: A[(i + 1) // 2], r"\(i \+ 1\) // 2",
                     lambda e: (e["i"] + 1) // 2, lambda e: e["n"], lambda e: 2 * e["n"]),
}


@pytest.mark.parametrize("case", sorted(OOB_1D))
def test_out_of_bounds_read_refused_with_counterexample(case):
    in_shape, out_shape, f, index_text, index_of, extent_of, out_extent_of = OOB_1D[case]
    A = te.placeholder(in_shape, name="A")
    B = te.compute(out_shape, lambda i: f(A)(i) * 2.0, name="B")
    s = te.create_schedule(B.op)
    msg = refused_at_lower_and_build(te.OutOfBoundsError, s, [A, B], "A", "B")
    assert re.search(index_text, msg), f"the index expression {index_text!r} is not in {msg!r}"
    env = counterexample(msg)
    if case.endswith("_sym"):
        assert re.search(r"\bn = \d+", msg), msg
    assert "i" in env, msg
    # the counterexample is a real one: inside the loop domain, outside the buffer
    assert 0 <= env["i"] < out_extent_of(env), f"counterexample {env} is outside the domain of B: {msg!r}"
    idx, ext = index_of(env), extent_of(env)
    assert not 0 <= idx < ext, f"counterexample {env} reads A[{idx}] outside [0, {ext}): {msg!r}"


def test_out_of_bounds_is_a_schedule_error():
    assert issubclass(te.OutOfBoundsError, te.ScheduleError)


def test_out_of_bounds_message_has_the_concrete_point_symbolic():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i + 1], name="B")
    s = te.create_schedule(B.op)
    msg = assert_raises_naming(te.OutOfBoundsError, lambda: te.lower(s, [A, B]), "A", "B")
    assert "i + 1" in msg and re.search(r"\bn = \d+", msg) and re.search(r"\bi = \d+", msg), msg


def test_out_of_bounds_2d_transposed():
    A = te.placeholder((3, 4), name="A")
    B = te.compute((4, 3), lambda i, j: A[i, j], name="B")  # should be A[j, i]
    s = te.create_schedule(B.op)
    msg = refused_at_lower_and_build(te.OutOfBoundsError, s, [A, B], "A")
    env = counterexample(msg)
    assert env["i"] >= 3 or env["j"] >= 4, msg


@pytest.mark.parametrize("case", ["div_by_wrong_factor", "mod_and_div_swapped", "row_stride_too_big"])
def test_out_of_bounds_reshape_with_wrong_div_mod(case):
    A = te.placeholder((3, 4), name="A")
    A1 = te.placeholder((12,), name="A1")
    if case == "div_by_wrong_factor":
        B = te.compute((12,), lambda x: A[x // 3, x % 3], name="B")  # x // 3 reaches 3
        args, culprit, text = [A, B], "A", "x // 3"
    elif case == "mod_and_div_swapped":
        B = te.compute((12,), lambda x: A[x % 4, x // 4], name="B")  # x % 4 reaches 3 on a dim of 3
        args, culprit, text = [A, B], "A", "x % 4"
    else:
        B = te.compute((3, 4), lambda i, j: A1[i * 5 + j], name="B")
        args, culprit, text = [A1, B], "A1", "5"
    s = te.create_schedule(B.op)
    msg = refused_at_lower_and_build(te.OutOfBoundsError, s, args, culprit)
    assert text in msg, msg
    counterexample(msg)


def test_the_correct_reshape_is_accepted():
    """Control for the test above: the right // and % build and match numpy."""
    A = te.placeholder((3, 4), name="A")
    B = te.compute((12,), lambda x: A[x // 4, x % 4], name="B")
    check(te.create_schedule(B.op), [A, B], lambda a: a.reshape(12))


@pytest.mark.parametrize("sym", [False, True])
def test_reduction_reading_past_the_end(sym):
    K = te.var("kk") if sym else 10
    A = te.placeholder((4, K), name="A")
    k = te.reduce_axis((0, K), name="k")
    R = te.compute((4,), lambda i: te.sum(A[i, k + 1], axis=k), name="R")
    s = te.create_schedule(R.op)
    msg = refused_at_lower_and_build(te.OutOfBoundsError, s, [A, R], "A", "R")
    assert "k + 1" in msg, msg
    env = counterexample(msg)
    ext = env["kk"] if sym else 10
    assert env["k"] + 1 >= ext, msg


def test_reduction_past_the_end_refused_after_split_and_parallel_outer():
    A = te.placeholder((8, 10), name="A")
    k = te.reduce_axis((0, 10), name="k")
    R = te.compute((8,), lambda i: te.sum(A[i, k + 1], axis=k), name="R")
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(k, factor=4)
    s[R].parallel(R.op.axis[0])
    refused_at_lower_and_build(te.OutOfBoundsError, s, [A, R], "A", "R")


def test_out_of_bounds_read_of_an_intermediate_stage():
    A = te.placeholder((16,), name="A")
    P = te.compute((16,), lambda i: A[i] * 2.0, name="P")
    C = te.compute((16,), lambda i: P[i] + P[i + 1], name="C")
    s = te.create_schedule(C.op)
    refused_at_lower_and_build(te.OutOfBoundsError, s, [A, C], "P", "C")


@pytest.mark.parametrize("where", ["split_outer", "axis"])
@pytest.mark.parametrize("sym", [False, True])
def test_out_of_bounds_read_of_an_intermediate_stage_attached(where, sym):
    """C reads P[i + 1] past P's end.  Attached, P's buffer is a window of the region C needs, but the
    program is the same: the error is the out-of-bounds read of P (at the root it is reported as
    such), not a misplaced compute_at -- attaching P elsewhere cannot fix it."""
    n = te.var("n") if sym else 16
    A = te.placeholder((n,), name="A")
    P = te.compute((n,), lambda i: A[i] * 2.0, name="P")
    C = te.compute((n,), lambda i: P[i] + P[i + 1], name="C")
    s = te.create_schedule(C.op)
    if where == "split_outer":
        xo, xi = s[C].split(C.op.axis[0], factor=8)
        s[P].compute_at(s[C], xo)
    else:
        s[P].compute_at(s[C], C.op.axis[0])
    msg = refused_at_lower_and_build(te.OutOfBoundsError, s, [A, C], "P", "C")
    assert "i + 1" in msg, msg


def test_out_of_bounds_inlined_producer_read():
    """The shifted read sits in an inlined stage; the culprit is still the tensor A."""
    A = te.placeholder((16,), name="A")
    P = te.compute((16,), lambda i: A[i + 1] * 2.0, name="P")
    C = te.compute((16,), lambda i: P[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    s[P].compute_inline()
    refused_at_lower_and_build(te.OutOfBoundsError, s, [A, C], "A")


def test_out_of_bounds_index_of_a_gather_index():
    """A[Idx[i + 1]]: the data-dependent outer index is unverified, Idx[i + 1] is affine and wrong."""
    A = te.placeholder((16,), name="A")
    Idx = te.placeholder((16,), name="Idx", dtype="int32")
    B = te.compute((16,), lambda i: A[Idx[i + 1]], name="B")
    s = te.create_schedule(B.op)
    msg = refused_at_lower_and_build(te.OutOfBoundsError, s, [A, Idx, B], "Idx")
    assert "i + 1" in msg


def test_out_of_bounds_with_a_scalar_offset_parameter():
    n, off = te.var("n"), te.var("off")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i + off], name="B")
    s = te.create_schedule(B.op)
    msg = refused_at_lower_and_build(te.OutOfBoundsError, s, [A, B, off], "A")
    env = counterexample(msg)
    assert env["i"] + env["off"] >= env["n"], msg


def test_out_of_bounds_under_a_parameter_guard_too_weak():
    """if n > 3 then A[4]: wrong at n = 4."""
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.if_then_else(n > 3, A[4], 0.0) + A[i], name="B")
    s = te.create_schedule(B.op)
    msg = refused_at_lower_and_build(te.OutOfBoundsError, s, [A, B], "A")
    assert counterexample(msg)["n"] == 4, msg


# -- guards that do not protect ---------------------------------------------------------------------------
def test_guard_too_weak_refused():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.if_then_else(i < n, A[i + 1], 0.0), name="B")
    s = te.create_schedule(B.op)
    msg = refused_at_lower_and_build(te.OutOfBoundsError, s, [A, B], "A")
    assert "i + 1" in msg


def test_guard_on_the_wrong_side_refused():
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: te.if_then_else(i < 15, 0.0, A[i + 1]), name="B")
    s = te.create_schedule(B.op)
    msg = refused_at_lower_and_build(te.OutOfBoundsError, s, [A, B], "A")
    assert counterexample(msg)["i"] == 15


def test_data_dependent_guard_is_not_a_proof():
    """The float condition is dropped (over-approximation): for other data A[16] would be read."""
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: te.if_then_else(A[i] > 0.0, A[i + 1], 0.0), name="B")
    s = te.create_schedule(B.op)
    msg = refused_at_lower_and_build(te.OutOfBoundsError, s, [A, B], "A")
    assert counterexample(msg)["i"] == 15


def test_disjunction_with_data_dependent_side_is_not_a_proof():
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: te.if_then_else(te.any(i < 15, A[i] > 0.0), A[i + 1], 0.0), name="B")
    s = te.create_schedule(B.op)
    refused_at_lower_and_build(te.OutOfBoundsError, s, [A, B], "A")


def test_load_in_reduction_where_condition_checked():
    """The where= condition is evaluated for every k: A[k + 1] there reads A[16]."""
    A = te.placeholder((16,), name="A")
    k = te.reduce_axis((0, 16), name="k")
    R = te.compute((1,), lambda i: te.sum(A[k], axis=k, where=A[k + 1] > 0.0), name="R")
    s = te.create_schedule(R.op)
    msg = refused_at_lower_and_build(te.OutOfBoundsError, s, [A, R], "A")
    assert "k + 1" in msg


def test_load_in_reduction_where_condition_checked_symbolic():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n), name="k")
    R = te.compute((1,), lambda i: te.sum(A[k], axis=k, where=A[k - 1] > 0.0), name="R")
    s = te.create_schedule(R.op)
    msg = refused_at_lower_and_build(te.OutOfBoundsError, s, [A, R], "A")
    assert "k - 1" in msg and "n = " in msg


# -- the isl checks on hand-built loop IR (writes, carried dependences, reads before writes) --------------
def _func(body, *buffers, sizes=()):
    return LoweredFunc("f", tuple(buffers), tuple(sizes), body)


@pytest.mark.parametrize("sym", [False, True])
def test_out_of_bounds_write_refused(sym):
    """No schedule writes outside its own output; the proof covers writes all the same."""
    n = te.var("n") if sym else te.const(16)  # shapes of loop IR are Exprs
    A, B = Buffer("A", "float32", (n,)), Buffer("B", "float32", (n,))
    i = te.var("i")
    body = For(i, te.const(0), n, SERIAL, BufferStore(B, A(i) * 2.0, (i + 1,)))
    with pytest.raises(te.OutOfBoundsError) as info:
        Analysis(_func(body, A, B, sizes=(n,) if sym else ())).verify()
    msg = str(info.value)
    assert re.search(r"\bwrite\b", msg) and re.search(r"\bB\b", msg) and "i + 1" in msg, msg
    env = counterexample(msg)
    assert env["i"] + 1 >= (env["n"] if sym else 16), msg


def test_out_of_bounds_negative_write_refused():
    A, B = Buffer("A", "float32", (te.const(16),)), Buffer("B", "float32", (te.const(16),))
    i = te.var("i")
    body = For(i, te.const(0), te.const(16), SERIAL, BufferStore(B, A(i), (i - 3,)))
    with pytest.raises(te.OutOfBoundsError, match=r"B"):
        Analysis(_func(body, A, B)).verify()


def _loop_ir(kind, store_index, load_index, extent_delta=0):
    n = te.var("n")
    A, B = Buffer("A", "float32", (n,)), Buffer("B", "float32", (n,))
    i = te.var("i")
    body = For(i, te.const(0), n - extent_delta, kind, BufferStore(B, B(load_index(i)) + A(i), (store_index(i),)))
    return _func(body, A, B, sizes=(n,))


@pytest.mark.parametrize("kind", [PARALLEL, VECTORIZED])
def test_carried_flow_dependence_refused(kind):
    f = _loop_ir(kind, lambda i: i + 1, lambda i: i, extent_delta=1)  # B[i + 1] = B[i] + A[i]
    with pytest.raises(te.ScheduleError) as info:
        Analysis(f).verify()
    msg = str(info.value)
    assert re.search(r"\bi\b", msg) and re.search(r"\bB\b", msg) and "read-after-write" in msg, msg


def test_carried_anti_dependence_named_write_after_read():
    """B[i] = B[i + 1] + A[i] in parallel: iteration i reads B[i + 1] before iteration i + 1 writes it,
    a write-after-read (anti) dependence."""
    f = _loop_ir(PARALLEL, lambda i: i, lambda i: i + 1, extent_delta=1)
    with pytest.raises(te.ScheduleError) as info:
        Analysis(f).verify()
    msg = str(info.value)
    assert re.search(r"\bi\b", msg) and re.search(r"\bB\b", msg), msg
    assert "write-after-read" in msg, f"the anti dependence is misnamed: {msg!r}"


def test_carried_output_dependence_refused():
    n = te.var("n")
    A, B = Buffer("A", "float32", (n,)), Buffer("B", "float32", (n,))
    i = te.var("i")
    body = For(i, te.const(0), n, PARALLEL, BufferStore(B, A(i), (i // 2,)))
    with pytest.raises(te.ScheduleError, match="write-after-write") as info:
        Analysis(_func(body, A, B, sizes=(n,))).verify()
    assert re.search(r"\bB\b", str(info.value))


def test_parallel_loop_without_carried_dependence_accepted():
    f = _loop_ir(PARALLEL, lambda i: i, lambda i: i)  # B[i] = B[i] + A[i]
    Analysis(f).verify()


def test_read_before_write_of_an_intermediate_refused():
    n = te.var("n")
    A, B, T = (Buffer(x, "float32", (n,)) for x in "ABT")
    i, j = te.var("i"), te.var("j")
    body = Allocate(T, Seq((For(i, te.const(0), n, SERIAL, BufferStore(B, T(i), (i,))),
                            For(j, te.const(0), n, SERIAL, BufferStore(T, A(j), (j,))))))
    with pytest.raises(te.ScheduleError) as info:
        Analysis(_func(body, A, B, sizes=(n,))).verify()
    msg = str(info.value)
    assert re.search(r"\bT\b", msg) and re.search(r"\bB\b", msg), msg


def test_write_then_read_of_an_intermediate_accepted():
    n = te.var("n")
    A, B, T = (Buffer(x, "float32", (n,)) for x in "ABT")
    i, j = te.var("i"), te.var("j")
    body = Allocate(T, Seq((For(j, te.const(0), n, SERIAL, BufferStore(T, A(j), (j,))),
                            For(i, te.const(0), n, SERIAL, BufferStore(B, T(i), (i,))))))
    Analysis(_func(body, A, B, sizes=(n,))).verify()


def test_refused_before_anything_runs():
    """codegen.build raises: no module comes back, so nothing can run."""
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i + 1], name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(te.OutOfBoundsError):
        build(s, [A, B])
    # and check=False is the only way around the proof (the IR itself is produced)
    text = str(te.lower(s, [A, B], check=False))
    assert "A[i + 1]" in text


def test_shifted_producer_computed_on_its_own_refused():
    """The counterpart of the legal inlined case: computed at the root, P[n - 1] reads A[n]."""
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    P = te.compute((n,), lambda i: A[i + 1] * 2.0, name="P")
    C = te.compute((n,), lambda i: te.if_then_else(i < n - 1, P[i], 0.0), name="C")
    s = te.create_schedule(C.op)
    refused_at_lower_and_build(te.OutOfBoundsError, s, [A, C], "P", "A")


def test_counterexample_of_an_attached_producer_is_unambiguous():
    """P attached at C.i has its own loop also called i: the message must not show an index
    'A[i + i + 1]' with a counterexample 'i = 0, i = 0' -- each loop must be told apart."""
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    P = te.compute((n,), lambda i: A[i + 1] * 2.0, name="P")
    C = te.compute((n,), lambda i: P[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    s[P].compute_at(s[C], C.op.axis[0])
    msg = assert_raises_naming(te.OutOfBoundsError, lambda: te.lower(s, [A, C]), "P", "A")
    names = re.findall(r"([\w.]+)\s*=\s*-?\d+", re.search(r"counterexample:?\s*([^)]*)", msg).group(1))
    assert len(names) == len(set(names)), f"ambiguous counterexample: {msg!r}"
