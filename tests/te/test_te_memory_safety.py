"""Lowered loops touch only the inside of their buffers.

A kernel that reads a few elements past the end of an array usually still gives the right answer
(the stray values are discarded), so the differential tests cannot see it; it is undefined behaviour
all the same and crashes when the array ends at a page boundary.  Every case below runs twice:

* through the IR interpreter (tests/ir_interp.py), which stops at the first load or store outside
  its buffer -- a failure there is in the lowering; conditions follow TVM: ``&&`` evaluates both
  sides, ``te.if_then_else`` only the branch it takes;
* compiled, in a subprocess, with every array placed right before (then right after) an
  inaccessible page -- a crash there is a real out-of-bounds access of the compiled code.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import tensorir as te

import ir_interp
from conftest import BACKEND, ROOT, build, guarded_array, run_check


def case_rfactor_where_with_tail_split():
    """The tail guard of the split must protect the loads in the where= condition."""
    A = te.placeholder((4, 30), name="A")
    k = te.reduce_axis((0, 30), name="k")
    R = te.compute((4,), lambda i: te.sum(A[i, k], axis=k, where=A[i, k] < 0.0), name="R")
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(k, factor=7)
    s.rfactor(R, ko)
    return s, [A, R], lambda a: np.where(a < 0, a, 0).sum(axis=1), [{"atol": 1e-5}]


def case_where_with_tail_split():
    A = te.placeholder((4, 30), name="A")
    k = te.reduce_axis((0, 30), name="k")
    R = te.compute((4,), lambda i: te.sum(A[i, k], axis=k, where=A[i, k] < 0.0), name="R")
    s = te.create_schedule(R.op)
    s[R].split(k, factor=7)
    return s, [A, R], lambda a: np.where(a < 0, a, 0).sum(axis=1), [{"atol": 1e-5}]


def case_rfactor_inner_tail():
    A = te.placeholder((3, 22), name="A")
    k = te.reduce_axis((0, 22), name="k")
    R = te.compute((3,), lambda i: te.sum(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(k, nparts=5)
    s.rfactor(R, ki)
    return s, [A, R], lambda a: a.astype("float64").sum(axis=1), [{"atol": 1e-5}]


def case_padded_conv_guarded_loads():
    X = te.placeholder((1, 2, 6, 6), name="X")
    Wt = te.placeholder((3, 2, 3, 3), name="W")
    P = te.compute((1, 2, 8, 8), lambda b, c, y, x: te.if_then_else(
        te.all(y >= 1, y < 7, x >= 1, x < 7), X[b, c, y - 1, x - 1], 0.0), name="P")
    rc, ry, rx = te.reduce_axis((0, 2), "rc"), te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    Y = te.compute((1, 3, 6, 6), lambda b, o, y, x: te.sum(P[b, rc, y + ry, x + rx] * Wt[o, rc, ry, rx],
                                                           axis=[rc, ry, rx]), name="Y")
    s = te.create_schedule(Y.op)
    s[P].compute_inline()
    s[Y].vectorize(Y.op.axis[3])

    def ref(x, w):
        xp = np.pad(x.astype("float64"), ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((1, 3, 6, 6))
        for dy in range(3):
            for dx in range(3):
                out += np.einsum("nchw,fc->nfhw", xp[:, :, dy:dy + 6, dx:dx + 6], w[:, :, dy, dx])
        return out

    return s, [X, Wt, Y], ref, [{"atol": 1e-5}]


def case_clamped_stencil_attached_with_tails():
    h, w = 7, 9
    A = te.placeholder((h, w), name="A")
    BX = te.compute((h, w), lambda y, x: A[y, te.max(x - 1, 0)] + A[y, te.min(x + 1, w - 1)], name="BX")
    BY = te.compute((h, w), lambda y, x: BX[te.max(y - 1, 0), x] + BX[te.min(y + 1, h - 1), x], name="BY")
    s = te.create_schedule(BY.op)
    yo, xo, yi, xi = s[BY].tile(*BY.op.axis, 3, 4)
    s[BX].compute_at(s[BY], xo)

    def ref(a):
        p = np.pad(a, ((0, 0), (1, 1)), mode="edge")
        bx = p[:, :-2] + p[:, 2:]
        q = np.pad(bx, ((1, 1), (0, 0)), mode="edge")
        return q[:-2] + q[2:]

    return s, [A, BY], ref, [{}]


def case_matmul_tiles_with_tails_cache_read_and_write():
    A = te.placeholder((7, 5), name="A")
    B = te.placeholder((5, 9), name="B")
    k = te.reduce_axis((0, 5), name="k")
    C = te.compute((7, 9), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", [C])
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*C.op.axis, 4, 4)
    s[CC].compute_at(s[C], jo)
    s[AA].compute_at(s[C], io)
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], factor=2)
    s[CC].unroll(ki)
    return s, [A, B, C], lambda a, b: a.astype("float64") @ b, [{"atol": 1e-5}]


def case_symbolic_tails_vectorized_and_unrolled():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: A[i] + A[n - 1 - i], name="C")
    s = te.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=4)
    iio, iii = s[C].split(ii, factor=2)
    s[C].unroll(iio)
    s[C].vectorize(iii)
    return s, [A, C], lambda a: a + a[::-1], [{"sizes": {n: m}} for m in (1, 3, 6, 9)]


def case_vector_tail_select():
    """A vectorized tail whose guard is per lane: the extra lanes must not touch memory."""
    A = te.placeholder((3, 13), name="A")
    C = te.compute((3, 13), lambda i, j: te.if_then_else(A[i, j] > 0, A[i, j], A[i, 12 - j]), name="C")
    s = te.create_schedule(C.op)
    _, ji = s[C].split(C.op.axis[1], factor=8)
    s[C].vectorize(ji)
    return s, [A, C], lambda a: np.where(a > 0, a, a[:, ::-1]), [{}]


CASES = {name[5:]: f for name, f in sorted(globals().items()) if name.startswith("case_")}


@pytest.mark.parametrize("name", sorted(CASES))
def test_lowered_ir_stays_in_bounds(name):
    s, args, ref, runs = CASES[name]()
    mod = ir_interp.Module(te.lower(s, args))
    for kw in runs:
        run_check(mod, args, ref, **kw)


def run_guarded(name: str) -> None:
    """Build case ``name`` and run it with arrays against guard pages (called in a subprocess)."""
    s, args, ref, runs = CASES[name]()
    mod = build(s, args)
    for at_end in (True, False):
        for kw in runs:
            run_check(mod, args, ref, wrap=lambda a: guarded_array(a, at_end), **kw)
    print("OK")


def _run_in_subprocess(code: str) -> subprocess.CompletedProcess:
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.dirname(here), here,
                                                                os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", code], cwd=here, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.skipif(BACKEND == "interp", reason="checks the compiled code")
@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_code_stays_in_bounds(name):
    proc = _run_in_subprocess(f"import test_te_memory_safety as m; m.run_guarded({name!r})")
    assert proc.returncode == 0 and "OK" in proc.stdout, \
        f"exit code {proc.returncode} (-11: segmentation fault)\nstdout: {proc.stdout[-2000:]}\n" \
        f"stderr: {proc.stderr[-3000:]}"


_OVERREAD = """
import numpy as np, tensorir as te, codegen
from conftest import guarded_array
A = te.placeholder((40,), name="A")
B = te.compute((40,), lambda i: A[te.min(i + 1, 40)] + 1.0, name="B")  # reads A[40] at i = 39
s = te.create_schedule(B.op)
try:  # isl refuses it before it runs ...
    te.lower(s, [A, B])
    raise SystemExit("not refused")
except te.OutOfBoundsError:
    pass
mod = codegen.build(te.lower(s, [A, B], check=False))  # ... so build it unchecked: it must crash
a, b = guarded_array(np.ones(40, "float32")), np.zeros(40, "float32")
mod(a, b)
print("survived")
"""


@pytest.mark.skipif(BACKEND == "interp", reason="checks the compiled code")
def test_guard_pages_catch_an_overread():
    """Self-test: a kernel whose definition reads one element past the end must crash here."""
    proc = _run_in_subprocess(_OVERREAD)
    assert proc.returncode != 0 and "survived" not in proc.stdout, proc.stdout + proc.stderr
