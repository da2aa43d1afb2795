"""Matrix multiplication under many schedules: every one must compute A @ B, tails included."""
import numpy as np
import pytest

import tensorir as te
from autotune.templates import gemm_cpu

from conftest import build, check, run_check

M, N, K = 19, 23, 17  # primes: every split by 4 or 8 has a tail


def matmul(m=M, n=N, k=K, dtype="float32"):
    A = te.placeholder((m, k), name="A", dtype=dtype)
    B = te.placeholder((k, n), name="B", dtype=dtype)
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


def ref_matmul(a, b):
    return a.astype("float64") @ b.astype("float64")


# Each schedule gets (s, C) and changes s in place.
def sched_naive(s, C):
    pass


def sched_split_rows(s, C):
    s[C].split(C.op.axis[0], factor=4)


def sched_split_nparts(s, C):
    s[C].split(C.op.axis[1], nparts=3)


def sched_tile_reorder(s, C):
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 8, 8)
    s[C].reorder(io, jo, k, ii, ji)


def sched_reduction_outermost(s, C):
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    ko, ki = s[C].split(k, factor=5)
    s[C].reorder(ko, i, j, ki)


def sched_vectorize_tail(s, C):
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    jo, ji = s[C].split(j, factor=8)
    s[C].reorder(i, jo, k, ji)
    s[C].vectorize(ji)


def sched_unroll_tail(s, C):
    (k,) = C.op.reduce_axis
    ko, ki = s[C].split(k, factor=4)
    s[C].unroll(ki)


def sched_parallel_fused(s, C):
    i, j = C.op.axis
    io, ii = s[C].split(i, factor=4)
    f = s[C].fuse(io, ii)
    s[C].parallel(f)


def sched_parallel_tile(s, C):
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    s[C].parallel(io)
    s[C].unroll(ii)


def sched_cache_write(s, C):
    CC = s.cache_write(C, "local")
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, 8, 8)
    s[CC].compute_at(s[C], jo)
    ic, jc = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(k, factor=4)
    s[CC].reorder(ko, ki, ic, jc)
    s[CC].unroll(ki)
    s[C].parallel(io)


def sched_cache_read(s, C):
    A, B = C.op.input_tensors
    AA = s.cache_read(A, "local", [C])
    i, j = C.op.axis
    io, ii = s[C].split(i, factor=4)
    s[AA].compute_at(s[C], io)


SCHEDULES = [sched_naive, sched_split_rows, sched_split_nparts, sched_tile_reorder, sched_reduction_outermost,
             sched_vectorize_tail, sched_unroll_tail, sched_parallel_fused, sched_parallel_tile,
             sched_cache_write, sched_cache_read]


@pytest.mark.parametrize("schedule", SCHEDULES, ids=[f.__name__[6:] for f in SCHEDULES])
def test_matmul_schedules_with_tails(schedule):
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    schedule(s, C)
    check(s, [A, B, C], ref_matmul, atol=1e-4)


def test_matmul_vectorized_divisible():
    """N = 32: the inner 8 columns become real vectors (ramps), accumulated over k."""
    A, B, C = matmul(16, 32, 12)
    s = te.create_schedule(C.op)
    sched_vectorize_tail(s, C)
    assert "ramp(" in str(te.lower(s, [A, B, C]))
    check(s, [A, B, C], ref_matmul, atol=1e-4)


def test_matmul_cache_write_vectorized_divisible():
    A, B, C = matmul(16, 32, 12)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 16)
    s[C].vectorize(ji)
    s[CC].compute_at(s[C], jo)
    ic, jc = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    s[CC].reorder(k, ic, jc)
    s[CC].vectorize(jc)
    s[C].parallel(io)
    check(s, [A, B, C], ref_matmul, atol=1e-4)


@pytest.mark.parametrize("template", ["naive", "packed"])
def test_gemm_templates(template):
    if template == "naive":
        s, args = gemm_cpu.naive_schedule(20, 24, 9)
    else:
        s, args = gemm_cpu.packed_schedule(20, 32, 12, bn=16, mr=4, kfactor=4)
    check(s, args, ref_matmul, atol=1e-4)


def test_matmul_int32_exact():
    A, B, C = matmul(7, 9, 11, dtype="int32")
    s = te.create_schedule(C.op)
    sched_tile_reorder(s, C)
    check(s, [A, B, C], lambda a, b: a @ b)


def test_matmul_symbolic_rows_tiled():
    m = te.var("m")
    A, B, C = matmul(m, 10, 6)
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 4)
    s[C].parallel(io)
    mod = build(s, [A, B, C])
    for rows in (1, 4, 9):
        run_check(mod, [A, B, C], ref_matmul, sizes={m: rows}, atol=1e-4, seed=rows)


def test_batch_matmul():
    b, m, n, k = 3, 5, 7, 6
    A = te.placeholder((b, m, k), name="A")
    B = te.placeholder((b, k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((b, m, n), lambda z, i, j: te.sum(A[z, i, r] * B[z, r, j], axis=r), name="C")
    s = te.create_schedule(C.op)
    z, i, j = C.op.axis
    s[C].parallel(s[C].fuse(z, i))
    check(s, [A, B, C], lambda a, b_: np.einsum("zik,zkj->zij", a.astype("float64"), b_), atol=1e-4)


@pytest.mark.parametrize("layout", ["AtB", "ABt", "AtBt"])
def test_transposed_operands(layout):
    m, n, k = 6, 9, 7
    A = te.placeholder((k, m) if layout.startswith("At") else (m, k), name="A")
    B = te.placeholder((n, k) if layout.endswith("Bt") else (k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    a_at = (lambda i: A[r, i]) if layout.startswith("At") else (lambda i: A[i, r])
    b_at = (lambda j: B[j, r]) if layout.endswith("Bt") else (lambda j: B[r, j])
    C = te.compute((m, n), lambda i, j: te.sum(a_at(i) * b_at(j), axis=r), name="C")
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[1], factor=4)

    def ref(a, b):
        a = a.T if layout.startswith("At") else a
        b = b.T if layout.endswith("Bt") else b
        return ref_matmul(a, b)

    check(s, [A, B, C], ref, atol=1e-4)


@pytest.mark.parametrize("split", ["nparts", "factor"])
def test_rfactor_parallel(split):
    """Split k, rfactor the outer part into a tensor whose first axis runs in parallel."""
    A, B, C = matmul(5, 6, 19)
    s = te.create_schedule(C.op)
    (k,) = C.op.reduce_axis
    ko, ki = s[C].split(k, nparts=4) if split == "nparts" else s[C].split(k, factor=4)
    CF = s.rfactor(C, ko)
    s[CF].parallel(CF.op.axis[0])
    assert len(CF.shape) == 3
    check(s, [A, B, C], ref_matmul, atol=1e-4)


def test_rfactor_inner_with_factor_axis():
    A, B, C = matmul(4, 5, 18)
    s = te.create_schedule(C.op)
    (k,) = C.op.reduce_axis
    ko, ki = s[C].split(k, factor=6)
    CF = s.rfactor(C, ki, factor_axis=2)
    s[CF].parallel(CF.op.axis[0])
    check(s, [A, B, C], ref_matmul, atol=1e-4)
