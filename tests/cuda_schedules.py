"""TVM-style CUDA schedules of row reductions, softmax and layer norm, shared by the tests that
check them through the simulator (tests/cuda_sim.py) and on a GPU."""
from __future__ import annotations

import numpy as np

import tensorir as te


def _reduce_over_threads(s, R, threads: int, rfactor: bool = True, rows: bool = True) -> None:
    """``R``'s reduction across ``threads`` threads of threadIdx.x; with ``rows``, one block per row."""
    tx = te.thread_axis("threadIdx.x")
    ko, ki = s[R].split(R.op.reduce_axis[0], factor=threads)
    if rfactor:
        RF = s.rfactor(R, ki)
        s[R].bind(s[R].op.reduce_axis[0], tx)
        s[RF].compute_at(s[R], s[R].op.reduce_axis[0])
    else:
        s[R].bind(ki, tx)
    if rows:
        s[R].bind(s[R].op.axis[0], te.thread_axis("blockIdx.x"))


def _rows_over_threads(s, T, threads: int) -> None:
    """One block per row of the elementwise ``T``; its columns strided over the threads."""
    i, j = s[T].op.axis
    jo, ji = s[T].split(j, factor=threads)
    s[T].bind(i, te.thread_axis("blockIdx.x"))
    s[T].bind(ji, te.thread_axis("threadIdx.x"))


def row_reduce(n, m, kind: str, threads: int, rfactor: bool = True):
    """``B[i] = reduce_k A[i, k]`` (sum / max / min), one block of ``threads`` per row."""
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    f = {"sum": te.sum, "max": te.max, "min": te.min}[kind]
    B = te.compute((n,), lambda i: f(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    _reduce_over_threads(s, B, threads, rfactor)
    ref = {"sum": lambda a: a.sum(1), "max": lambda a: a.max(1), "min": lambda a: a.min(1)}[kind]
    return s, [A, B], ref


def row_argmax(n, m, threads: int):
    """``(index, value)`` of each row's maximum, a tuple reduction across threads."""
    def fcombine(x, y):
        lhs = te.if_then_else(x[1] >= y[1], x[0], y[0])
        rhs = te.if_then_else(x[1] >= y[1], x[1], y[1])
        return lhs, rhs

    def fidentity(t0, t1):
        return te.const(-1, t0), te.min_value(t1)

    argmax = te.comm_reducer(fcombine, fidentity, name="argmax")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    idx, val = te.compute((n,), lambda i: argmax((k.var, A[i, k]), axis=k), name="T")
    s = te.create_schedule(idx.op)
    _reduce_over_threads(s, idx, threads, rfactor=False)
    return s, [A, idx, val], lambda a: (a.argmax(1).astype("int32"), a.max(1))


def softmax(n, m, threads: int, one_block: bool = False, bind_exp: bool = True):
    """TVM's row softmax: max, exp, sum and normalize; two rfactored reductions over threadIdx.x.
    Separate root stages build into four kernels; ``one_block`` computes everything in the
    normalizing stage's block (exp inlined, max and sum in shared memory)."""
    A = te.placeholder((n, m), name="A")
    k1 = te.reduce_axis((0, m), "k1")
    M = te.compute((n,), lambda i: te.max(A[i, k1], axis=k1), name="M")
    E = te.compute((n, m), lambda i, j: te.exp(A[i, j] - M[i]), name="E")
    k2 = te.reduce_axis((0, m), "k2")
    S = te.compute((n,), lambda i: te.sum(E[i, k2], axis=k2), name="S")
    O = te.compute((n, m), lambda i, j: E[i, j] / S[i], name="O")
    s = te.create_schedule(O.op)
    for R in (M, S):
        _reduce_over_threads(s, R, threads, rows=not one_block)
    _rows_over_threads(s, O, threads)
    if one_block:
        s[E].compute_inline()
        block = s[O].op.axis[0]
        s[M].compute_at(s[O], block)
        s[S].compute_at(s[O], block)
    elif bind_exp:
        _rows_over_threads(s, E, threads)

    def ref(a):
        e = np.exp(a - a.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)
    return s, [A, O], ref


def layer_norm(n, m, threads: int, eps: float = 1e-5):
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` per row: mean and mean of squares reduced
    across threads in separate kernels, the normalization in a third."""
    A = te.placeholder((n, m), name="A")
    gamma = te.placeholder((m,), name="gamma")
    beta = te.placeholder((m,), name="beta")
    k1 = te.reduce_axis((0, m), "k1")
    mean = te.compute((n,), lambda i: te.sum(A[i, k1] / m, axis=k1), name="mean")
    k2 = te.reduce_axis((0, m), "k2")
    sq = te.compute((n,), lambda i: te.sum(A[i, k2] * A[i, k2] / m, axis=k2), name="sq")
    O = te.compute((n, m), lambda i, j: (A[i, j] - mean[i]) * te.rsqrt(sq[i] - mean[i] * mean[i] + eps)
                   * gamma[j] + beta[j], name="O")
    s = te.create_schedule(O.op)
    for R in (mean, sq):
        _reduce_over_threads(s, R, threads)
    _rows_over_threads(s, O, threads)

    def ref(a, g, b):
        mu = a.mean(1, keepdims=True)
        return (a - mu) / np.sqrt(a.var(1, keepdims=True) + eps) * g + b
    return s, [A, gamma, beta, O], ref
