"""Schedules whose loop extents and indices are not affine (splits by nparts or by a symbolic factor,
fused symbolic loops, compute_at under them): isl keeps what it can of their bounds, so they build
and compute the right values; a schedule that really reads out of bounds or races is still refused."""
import numpy as np
import pytest

import codegen
import tensorir as te
from tensorir import ir_builder

from conftest import assert_raises_naming, build, run_check

SIZES = (1, 2, 3, 5, 8, 13, 31)


def _chain(n):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2, name="B")
    C = te.compute((n,), lambda i: B[i] + 1, name="C")
    return A, B, C


def _run_with(mod, nn, extra, reference):
    """Run ``mod(a, c, *extra)`` on random ``a`` of length ``nn`` with ``c`` poisoned."""
    a = np.random.default_rng(nn).standard_normal(nn).astype("float32")
    c = np.full(nn, np.nan, "float32")
    mod(a, c, *extra)
    np.testing.assert_allclose(c, reference(a), rtol=1e-6, err_msg=f"n={nn}, extra={extra}")


def test_split_nparts_of_symbolic_extent_then_parallel():
    n = te.size_var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2, name="B")
    s = te.create_schedule(B.op)
    xo, _ = s[B].split(B.op.axis[0], nparts=4)
    s[B].parallel(xo)
    mod = build(s, [A, B])
    for nn in SIZES:
        run_check(mod, [A, B], lambda a: a * 2, sizes={n: nn}, seed=nn)


def test_compute_at_under_nparts_split_with_parallel_outer():
    """The producer's loop runs to ``min(q, n - i.outer * q)``: isl keeps both arms (the product
    over the 4 parts exactly), so its writes are proven inside the buffer."""
    n = te.size_var("n")
    A, B, C = _chain(n)
    s = te.create_schedule(C.op)
    xo, _ = s[C].split(C.op.axis[0], nparts=4)
    s[B].compute_at(s[C], xo)
    s[C].parallel(xo)
    assert "min(" in str(te.lower(s, [A, C]))
    mod = build(s, [A, C])
    for nn in SIZES:
        run_check(mod, [A, C], lambda a: a * 2 + 1, sizes={n: nn}, seed=nn)


@pytest.mark.parametrize("how", ["nparts", "factor"])
def test_split_by_a_symbolic_size_then_parallel(how):
    """``i.outer * ((n + p - 1) // p)`` or ``i.outer * p``: iterations of the parallel loop write
    disjoint blocks (each offset below the block size), which isl proves with the size a parameter."""
    n, p = te.size_var("n"), te.size_var("p")
    A, B, C = _chain(n)
    s = te.create_schedule(C.op)
    xo, _ = s[C].split(C.op.axis[0], **{how: p})
    s[B].compute_at(s[C], xo)
    s[C].parallel(xo)
    mod = codegen.build(s, [A, C, p])
    for nn in SIZES:
        for pp in (1, 2, 3, 7, 40):
            _run_with(mod, nn, (pp,), lambda a: a * 2 + 1)


def test_nested_split_symbolic_nparts_compute_at_inner():
    n, p = te.size_var("n"), te.size_var("p")
    A, B, C = _chain(n)
    s = te.create_schedule(C.op)
    xo, _ = s[C].split(C.op.axis[0], factor=4)
    xoo, xoi = s[C].split(xo, nparts=p)
    s[B].compute_at(s[C], xoi)
    s[C].parallel(xoo)
    mod = codegen.build(s, [A, C, p])
    for nn in SIZES:
        for pp in (1, 3, 5):
            _run_with(mod, nn, (pp,), lambda a: a * 2 + 1)


def test_tile_fuse_parallel_with_compute_at_on_symbolic_sizes():
    """The fused loop indexes ``f // q`` and ``f % q``: different iterations pin different tiles."""
    n, m = te.size_var("n"), te.size_var("m")
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((n, m), lambda i, j: B[i, j] + 1, name="C")
    s = te.create_schedule(C.op)
    xo, yo, _, _ = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    s[B].compute_at(s[C], yo)
    s[C].parallel(s[C].fuse(xo, yo))
    mod = build(s, [A, C])
    for nn, mm in ((1, 1), (3, 17), (9, 8), (20, 5)):
        run_check(mod, [A, C], lambda a: a * 2 + 1, sizes={n: nn, m: mm}, seed=nn + mm)


def test_stencil_under_nparts_split():
    """The producer's region per part is ``[lo, hi]`` clipped to the domain with min/max of
    non-affine terms; the consumer's shifted read stays inside it."""
    n = te.size_var("n")
    A = te.placeholder((n + 2,), name="A")
    B = te.compute((n + 2,), lambda i: A[i] * 2, name="B")
    C = te.compute((n,), lambda i: B[i] + B[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, _ = s[C].split(C.op.axis[0], nparts=3)
    s[B].compute_at(s[C], xo)
    s[C].parallel(xo)
    mod = build(s, [A, C])
    for nn in SIZES:
        run_check(mod, [A, C], lambda a: a[:-2] * 2 + a[2:] * 2, sizes={n: nn}, seed=nn)


# -- still refused ---------------------------------------------------------------------------------------
def test_real_out_of_bounds_read_under_nparts_split_refused():
    n = te.size_var("n")
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: A[i + 1], name="C")
    s = te.create_schedule(C.op)
    xo, _ = s[C].split(C.op.axis[0], nparts=4)
    s[C].parallel(xo)
    assert_raises_naming(te.OutOfBoundsError, lambda: te.lower(s, [A, C]), "A", "C")


def _extern(n, body):
    A = te.placeholder((n,), name="A")

    def fextern(ins, outs):
        ib = ir_builder.create()
        body(ib, ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0]), (n + 3) // 4)
        return ib.get()
    return A, te.extern((n,), [A], fextern, name="E", dtype="float32")


def test_real_race_under_symbolic_block_size_refused():
    """Every part writes the same first block: a true race, refused."""
    n = te.size_var("n")

    def body(ib, a, out, q):
        with ib.for_range(0, 4, name="part", kind="parallel") as part:
            with ib.for_range(0, q, name="k") as k:
                with ib.if_scope(part * q + k < n):
                    out[k] = a[part * q + k]
    A, E = _extern(n, body)
    with pytest.raises(te.ScheduleError, match="part"):
        te.lower(te.create_schedule(E.op), [A, E])


def test_real_out_of_bounds_block_without_tail_guard_refused():
    """Blocks of ``(n + 3) // 4`` over 4 parts overrun ``n`` without the tail guard."""
    n = te.size_var("n")

    def body(ib, a, out, q):
        with ib.for_range(0, 4, name="part", kind="parallel") as part:
            with ib.for_range(0, q, name="k") as k:
                out[part * q + k] = a[part * q + k]
    A, E = _extern(n, body)
    with pytest.raises(te.OutOfBoundsError):
        te.lower(te.create_schedule(E.op), [A, E])


def test_guarded_blocks_of_an_extern_build():
    """The same blocks with the tail guard: proven, and correct."""
    n = te.size_var("n")

    def body(ib, a, out, q):
        with ib.for_range(0, 4, name="part", kind="parallel") as part:
            with ib.for_range(0, q, name="k") as k:
                with ib.if_scope(part * q + k < n):
                    out[part * q + k] = a[part * q + k] * 3
    A, E = _extern(n, body)
    mod = build(te.create_schedule(E.op), [A, E])
    for nn in SIZES:
        run_check(mod, [A, E], lambda a: a * 3, sizes={n: nn}, seed=nn)
