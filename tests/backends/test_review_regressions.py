"""Regressions found by randomized review: an LLVM abort and a raw isl error, now a result and a
clear refusal."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import codegen
import tensorir as te


def test_reordered_broadcast_stage_builds_and_computes():
    """LLVM 22's SLP vectorizer broke this valid function and aborted the process; it runs in a
    subprocess so a regression fails the test instead of killing pytest."""
    code = textwrap.dedent("""
        import numpy as np, codegen, tensorir as te
        A = te.placeholder((7, 3, 4), name="A"); B = te.placeholder((3, 4), name="B")
        C = te.compute((7, 3, 4), lambda i, j, l: A[i, j, l] + B[j, l], name="C")
        D = te.compute((7, 3, 4), lambda i, j, l: C[i, j, l] + 1, name="D")
        s = te.create_schedule(D.op)
        s[C].reorder(C.op.axis[1], C.op.axis[0])
        f = codegen.build(s, [A, B, D], target="llvm")
        rng = np.random.default_rng(0)
        a, b = rng.random((7, 3, 4), dtype="float32"), rng.random((3, 4), dtype="float32")
        d = np.full((7, 3, 4), np.nan, "float32")
        f(a, b, d)
        np.testing.assert_array_equal(d, a + b + np.float32(1))
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_unbounded_symbolic_domain_is_a_clear_refusal():
    """isl cannot bound a loop fused over symbolic extents: where the flow of an intermediate it writes
    must be proven, the schedule is refused naming the loop; where nothing needs proving (it writes the
    output and reads only inputs) it builds, and is right."""
    m, n = te.var("m"), te.var("n")
    A = te.placeholder((m, n), name="A")
    k = te.reduce_axis((0, n), "k")
    B = te.compute((m,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = te.compute((m,), lambda i: B[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[B].fuse(B.op.axis[0], k)
    with pytest.raises(te.ScheduleError, match=r"cannot bound the iteration domain \(stage B: loop i\.k\.fused"):
        codegen.build(s, [A, C])

    s = te.create_schedule(B.op)
    s[B].fuse(B.op.axis[0], k)
    a = np.random.default_rng(3).standard_normal((7, 5)).astype("float32")
    b = np.full(7, np.nan, "float32")
    codegen.build(s, [A, B])(a, b)
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_same_fuse_with_constant_sizes_builds():
    A = te.placeholder((5, 7), name="A")
    k = te.reduce_axis((0, 7), "k")
    B = te.compute((5,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    s[B].fuse(B.op.axis[0], k)
    f = codegen.build(s, [A, B])
    a, b = np.random.default_rng(1).random((5, 7), dtype="float32"), np.full(5, np.nan, "float32")
    f(a, b)
    np.testing.assert_allclose(b, a.astype("float64").sum(1), rtol=1e-5)
