"""Exact bounds from isl, read off the lowered IR.

* the region a producer computes at its compute_at point (allocation size and loop extents),
  with tails and symbolic sizes (the extent is then a ``min`` with the size);
* the buffers of ``cache_read`` / ``cache_write``, sized by their consumers' accesses;
* guards: none where isl proves them redundant (a GEMM tiled by divisors, a double split of a
  divisible inner part), and only where needed otherwise.
"""
import re

import pytest

import tensorir as te
from tensorir.arith import simplify
from tensorir.expr import IntImm
from tensorir.stmt import Allocate, BufferStore, For, IfThenElse
from tensorir.visitor import Visitor, collect, substitute

# -- reading the lowered IR ----------------------------------------------------------------------------


def alloc_shape(func, name: str) -> tuple:
    """Shape of the (single) allocation of buffer ``name`` as ints where constant, else Exprs."""
    allocs = [a for a in collect(func.body, Allocate) if a.buffer.name == name]
    assert len(allocs) == 1, f"{len(allocs)} allocations of {name} in\n{func}"
    return tuple(d.value if isinstance(d, IntImm) else d for d in allocs[0].buffer.shape)


class _StoreLoops(Visitor):
    def __init__(self, name):
        self.name, self.stack, self.found = name, [], []

    def visit_For(self, f):
        self.stack.append(f)
        self.visit(f.body)
        self.stack.pop()

    def visit_BufferStore(self, s):
        if s.buffer.name == self.name:
            self.found.append(list(self.stack))


def store_loops(func, name: str) -> list:
    """The loops enclosing the (first) store to ``name``, outermost first."""
    v = _StoreLoops(name)
    v.visit(func.body)
    assert v.found, f"no store to {name} in\n{func}"
    return v.found[0]


def inner_loops(func, name: str, outer_names) -> list:
    """The loops around the store to ``name`` below the outer loops named in ``outer_names`` (the
    attach path; a producer's own loop may have the same name as its consumer's)."""
    loops = store_loops(func, name)
    n = len(outer_names)
    assert [f.loop_var.name for f in loops[:n]] == list(outer_names), [f.loop_var.name for f in loops]
    return loops[n:]


def evaluate(e, env: dict) -> int:
    """``e`` with the Vars named in ``env`` replaced by ints, folded to an int."""
    mapping = {v: te.const(env[v.name], v.dtype) for v in collect(e, te.Var) if v.name in env}
    out = simplify(substitute(e, mapping))
    assert isinstance(out, IntImm), f"{e} does not fold to a constant with {env}: {out}"
    return out.value


def if_conditions(func) -> list[str]:
    return [str(s.condition) for s in collect(func.body, IfThenElse)]


# -- compute_at regions ------------------------------------------------------------------------------
def stencil3(n, factor=8):
    A = te.placeholder((n + 2,), name="A")
    P = te.compute((n + 2,), lambda i: A[i] * 2.0, name="P")
    C = te.compute((n,), lambda i: P[i] + P[i + 1] + P[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=factor)
    s[P].compute_at(s[C], xo)
    return s, [A, C]


def test_three_point_stencil_attached_at_split_by_8_computes_10():
    s, args = stencil3(64)
    f = te.lower(s, args)
    assert alloc_shape(f, "P") == (10,)
    (loop,) = inner_loops(f, "P", ["i.outer"])
    assert isinstance(loop.extent, IntImm) and loop.extent.value == 10, str(f)


@pytest.mark.parametrize("factor", [4, 5, 16])
def test_stencil_region_is_factor_plus_halo(factor):
    s, args = stencil3(80, factor)
    f = te.lower(s, args)
    assert alloc_shape(f, "P") == (factor + 2,)
    (loop,) = inner_loops(f, "P", ["i.outer"])
    n_outer = -(-80 // factor)
    for io in range(n_outer):
        # exact: the elements C's block reads, never past P's end (82)
        want = min(factor * io + factor + 1, 81) - factor * io + 1
        assert evaluate(loop.extent, {"i.outer": io}) == want, (io, str(f))


def test_stencil_region_with_tail_is_exact_in_the_last_block():
    s, args = stencil3(62)  # 62 = 7 * 8 + 6: the last block reads P[56 .. 63]
    f = te.lower(s, args)
    (loop,) = inner_loops(f, "P", ["i.outer"])
    assert [evaluate(loop.extent, {"i.outer": io}) for io in range(8)] == [10] * 7 + [8], str(f)


def test_stencil_region_symbolic_is_a_min_with_n():
    n = te.var("n")
    s, args = stencil3(n)
    f = te.lower(s, args)
    assert alloc_shape(f, "P") == (10,)
    (loop,) = inner_loops(f, "P", ["i.outer"])
    text = str(loop.extent)
    assert "min" in text and re.search(r"\bn\b", text), text
    for nv in (1, 5, 8, 9, 17, 24):
        for io in range(-(-nv // 8)):
            want = min(8 * io + 9, nv + 1) - 8 * io + 1
            assert evaluate(loop.extent, {"n": nv, "i.outer": io}) == want, (nv, io, text)


def test_five_point_stencil_attached_at_tile_computes_halo_tile():
    A = te.placeholder((34, 34), name="A")
    P = te.compute((34, 34), lambda y, x: A[y, x] + 1.0, name="P")
    C = te.compute((32, 32), lambda y, x: P[y + 1, x + 1] + P[y, x + 1] + P[y + 2, x + 1] + P[y + 1, x]
                   + P[y + 1, x + 2], name="C")
    s = te.create_schedule(C.op)
    yo, xo, yi, xi = s[C].tile(*C.op.axis, 4, 8)
    s[P].compute_at(s[C], xo)
    f = te.lower(s, [A, C])
    assert alloc_shape(f, "P") == (6, 10), str(f)
    loops = inner_loops(f, "P", ["y.outer", "x.outer"])
    assert [evaluate(lp.extent, {}) for lp in loops] == [6, 10], str(f)


def test_strided_consumer_region():
    A = te.placeholder((41,), name="A")
    P = te.compute((41,), lambda i: A[i] * 3.0, name="P")
    C = te.compute((20,), lambda i: P[2 * i] + P[2 * i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=5)
    s[P].compute_at(s[C], xo)
    f = te.lower(s, [A, C])
    assert alloc_shape(f, "P") == (11,), str(f)  # 2 * 4 + 2 + 1


def test_transposed_consumer_region_at_tile():
    A = te.placeholder((16, 24), name="A")
    P = te.compute((16, 24), lambda i, j: A[i, j] * 2.0, name="P")
    C = te.compute((24, 16), lambda i, j: P[j, i], name="C")
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(*C.op.axis, 8, 4)
    s[P].compute_at(s[C], jo)
    f = te.lower(s, [A, C])
    assert alloc_shape(f, "P") == (4, 8), str(f)


@pytest.mark.parametrize("sym", [False, True])
@pytest.mark.parametrize("where", ["axis", "split8"])
def test_clamped_read_region_and_allocation(where, sym):
    """C reads P[i] and P[min(i + 1, n - 1)].  At C.i P's region is at most 2 elements, at a split by
    8 at most 9: the loop extents say so, and so must the allocation (not all n elements of P in every
    iteration)."""
    n = te.var("n") if sym else 16
    A = te.placeholder((n,), name="A")
    P = te.compute((n,), lambda i: A[i] + 1.0, name="P")
    C = te.compute((n,), lambda i: P[i] * P[te.min(i + 1, n - 1)], name="C")
    s = te.create_schedule(C.op)
    if where == "axis":
        s[P].compute_at(s[C], C.op.axis[0])
        outer, block = "i", 1
    else:
        xo, xi = s[C].split(C.op.axis[0], factor=8)
        s[P].compute_at(s[C], xo)
        outer, block = "i.outer", 8
    f = te.lower(s, [A, C])
    (loop,) = inner_loops(f, "P", [outer])
    for nv in ((1, 2, 6, 16) if sym else (16,)):
        for o in range(-(-nv // block)):
            lo = block * o
            want = min(lo + block, nv - 1) - lo + 1 if nv > 1 else 1
            assert evaluate(loop.extent, {"n": nv, outer: o}) == want, (nv, o, str(f))
    assert alloc_shape(f, "P") == (block + 1,), f"the allocation is not the region\n{f}"


def test_clamped_blur_allocation_is_the_rows_needed_symbolic():
    h, w = te.var("h"), te.var("w")
    A = te.placeholder((h, w), name="A")
    BX = te.compute((h, w), lambda y, x: A[y, te.max(x - 1, 0)] + A[y, x] + A[y, te.min(x + 1, w - 1)],
                    name="BX")
    BY = te.compute((h, w), lambda y, x: BX[te.max(y - 1, 0), x] + BX[y, x] + BX[te.min(y + 1, h - 1), x],
                    name="BY")
    s = te.create_schedule(BY.op)
    yo, yi = s[BY].split(BY.op.axis[0], factor=4)
    s[BX].compute_at(s[BY], yo)
    f = te.lower(s, [A, BY])
    rows = inner_loops(f, "BX", ["y.outer"])[0]
    for hv in (1, 4, 9):
        for o in range(-(-hv // 4)):
            want = min(4 * o + 4, hv - 1) - max(4 * o - 1, 0) + 1
            assert evaluate(rows.extent, {"h": hv, "w": 3, "y.outer": o}) == want, (hv, o, str(rows.extent))
    shape = alloc_shape(f, "BX")
    assert shape[0] == 6 and str(shape[1]) == "w", f"BX's buffer is not 6 rows of w\n{f}"


# -- cache_read / cache_write buffers ---------------------------------------------------------------
def mm(M, N, K):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def test_cache_buffers_sized_by_their_consumers():
    A, B, C = mm(64, 48, 32)
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", [C])
    BB = s.cache_read(B, "local", [C])
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*C.op.axis, 8, 16)
    s[CC].compute_at(s[C], jo)
    s[AA].compute_at(s[C], io)
    (kk,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kk, factor=4)
    s[BB].compute_at(s[CC], ko)
    f = te.lower(s, [A, B, C])
    assert alloc_shape(f, "A.local") == (8, 32), str(f)   # the row block, all of k
    assert alloc_shape(f, "C.local") == (8, 16), str(f)   # the output tile
    assert alloc_shape(f, "B.local") == (4, 1), str(f)    # one k block of one column


def test_cache_read_of_a_stencil_symbolic_with_tail():
    n = te.var("n")
    A = te.placeholder((n + 2,), name="A")
    C = te.compute((n,), lambda i: A[i] + A[i + 1] + A[i + 2], name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", [C])
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[AA].compute_at(s[C], xo)
    f = te.lower(s, [A, C])
    assert alloc_shape(f, "A.local") == (10,), str(f)
    (loop,) = inner_loops(f, "A.local", ["i.outer"])
    assert "min" in str(loop.extent) and re.search(r"\bn\b", str(loop.extent)), str(loop.extent)
    for nv in (1, 8, 13):
        for io in range(-(-nv // 8)):
            assert evaluate(loop.extent, {"n": nv, "i.outer": io}) == min(nv + 2 - 8 * io, 10)


def test_cache_write_tile_with_tails_symbolic():
    n = te.var("n")
    A, B, C = mm(n, 48, 32)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*C.op.axis, 8, 16)
    s[CC].compute_at(s[C], jo)
    f = te.lower(s, [A, B, C])
    assert alloc_shape(f, "C.local") == (8, 16), str(f)
    rows = inner_loops(f, "C.local", ["i.outer", "j.outer"])[0]
    for nv in (3, 8, 21):
        for i_o in range(-(-nv // 8)):
            assert evaluate(rows.extent, {"n": nv, "i.outer": i_o}) == min(8, nv - 8 * i_o), str(f)


# -- guards -------------------------------------------------------------------------------------------
def tiled_gemm(M, N, K, tm=32, tn=32, tk=4):
    A, B, C = mm(M, N, K)
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(*C.op.axis, tm, tn)
    (k,) = C.op.reduce_axis
    ko, ki = s[C].split(k, factor=tk)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    return s, [A, B, C]


def test_gemm_tiled_by_divisors_has_no_guard():
    s, args = tiled_gemm(1024, 1024, 1024)
    f = te.lower(s, args)
    assert collect(f.body, IfThenElse) == [], str(f)
    assert "if (" not in str(f)


def _names(cond: str) -> set:
    return set(re.findall(r"[A-Za-z_][\w.]*", cond))


@pytest.mark.parametrize("which", ["M", "N", "K"])
def test_gemm_non_divisible_has_guards_only_where_needed(which):
    sizes = {"M": 1024, "N": 1024, "K": 1024}
    sizes[which] = 1001 if which == "K" else 1000  # not multiples of the tile (32) / k split (4)
    s, args = tiled_gemm(sizes["M"], sizes["N"], sizes["K"])
    f = te.lower(s, args)
    conds = if_conditions(f)
    var = {"M": "i", "N": "j", "K": "k"}[which]
    assert conds, f"a guard is needed for {which} = {sizes[which]}\n{f}"
    for c in conds:  # each guard tests only the loops of the non-divisible axis
        assert _names(c) <= {f"{var}.outer", f"{var}.inner"}, c
    # one guard per loop nest (init and update for i, j; the update alone for k)
    assert len(conds) == (1 if which == "K" else 2), conds


def test_gemm_guard_is_not_inside_the_innermost_loops():
    s, args = tiled_gemm(1000, 1024, 1024)
    f = te.lower(s, args)
    for g in collect(f.body, IfThenElse):
        assert not [x for x in collect(g.then_case, For) if x.loop_var.name == "i.inner"], \
            "the i guard belongs just inside i.inner"
    for loop in collect(f.body, For):
        if loop.loop_var.name in ("ki", "k.inner", "j.inner"):
            assert collect(loop.body, IfThenElse) == [], f"a guard inside {loop.loop_var.name}\n{f}"


@pytest.mark.parametrize("M,outer,inner,want", [
    (1024, 32, 8, 0),     # divisible, divisible: no guard
    (1000, 48, 8, 1),     # 1000 % 48 != 0, 48 % 8 == 0: the one guard of the first split, no more
    (1000, 40, 8, 0),     # 1000 = 25 * 40
    (1024, 32, 5, 1),     # the inner part of 32 split by 5 needs its guard
])
def test_double_split_guard_count(M, outer, inner, want):
    A, B, C = mm(M, 16, 8)
    s = te.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=outer)
    iio, iii = s[C].split(ii, factor=inner)
    f = te.lower(s, [A, B, C])
    # C's init and update share the row loops: a needed row guard sits once around both
    assert len(collect(f.body, IfThenElse)) == want, str(f)


def test_symbolic_size_keeps_its_guard():
    n = te.var("n")
    A, B, C = mm(n, 64, 16)
    s = te.create_schedule(C.op)
    s[C].tile(*C.op.axis, 8, 8)
    conds = if_conditions(te.lower(s, [A, B, C]))
    assert conds and all(re.search(r"\bn\b", c) for c in conds), conds
    assert all(_names(c) <= {"i.outer", "i.inner", "n"} for c in conds), conds


def test_packed_gemm_has_no_guard():
    from autotune.templates.gemm_cpu import packed_schedule
    s, args = packed_schedule(1024, 1024, 1024)
    f = te.lower(s, args)
    assert collect(f.body, IfThenElse) == [], str(f)


def test_redundant_reduction_condition_removed_needed_one_kept():
    A = te.placeholder((16,), name="A")
    k = te.reduce_axis((0, 16), name="k")
    R = te.compute((1,), lambda _: te.sum(A[k], axis=k, where=k >= 0), name="R")
    assert collect(te.lower(te.create_schedule(R.op), [A, R]).body, IfThenElse) == []
    k2 = te.reduce_axis((0, 16), name="k2")
    R2 = te.compute((1,), lambda _: te.sum(A[k2], axis=k2, where=k2 < 8), name="R2")
    assert len(collect(te.lower(te.create_schedule(R2.op), [A, R2]).body, IfThenElse)) == 1


def test_attached_consumer_tail_guard_kept_producer_loop_bounded_instead():
    """The attached producer's tail is an exact loop extent (no guard); the consumer keeps its guard."""
    n = te.var("n")
    s, args = stencil3(n)
    f = te.lower(s, args)
    conds = if_conditions(f)
    assert len(conds) == 1 and re.search(r"\bn\b", conds[0]), conds
    for g in collect(f.body, IfThenElse):
        assert not [x for x in collect(g.then_case, BufferStore) if x.buffer.name == "P"], str(f)


def test_proves_what_intervals_cannot():
    """``poly.proves``: a swizzled block index's hull (isl writes ``x // 2`` as ``x - (x + 1) // 2``) lies in the
    tensor, which interval arithmetic cannot tell; a condition that fails somewhere is not proved."""
    from tensorir.arith import prove
    from tensorir.poly import proves
    x = te.var("x")
    lo = x * 128 - (x + 1) // 2 * 128
    bounds = {x: (0, 3)}
    assert proves(lo >= 0, bounds) and proves(lo + 127 <= 255, bounds) and not prove(lo >= 0, bounds)
    assert not proves(lo + 127 <= 254, bounds) and not proves(x * 2 >= 1, bounds)
