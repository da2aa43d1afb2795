"""isl's encoding of a tile's partial extent ``min(16, n - 16 * k.outer)`` as a factor or a divisor
(poly_affine: one case per value) is exact, checked point by point against Python; where the
divisor is below one (never where the division runs) the result says nothing."""
from __future__ import annotations

import islpy as isl

import tensorir as te
from tensorir.expr import const, Min
from tensorir.poly.affine import Affine, Scope, isl_name, upper_bound
from tensorir.stmt import Evaluate, For


def loop(v, extent):
    return For(v, const(0), const(extent), "serial", Evaluate(const(0)))


def isl_points(expr, loops, n=None):
    """{(loop values..., value)} isl's conversion of ``expr`` describes, loops at their ranges."""
    conv = Affine(Scope.of([], [loop(v, e) for v, e in loops]))
    text = conv(expr)
    assert text is not None
    dims = [isl_name(v) for v, _ in loops]
    cons = [f"0 <= {d} < {e}" for d, (_, e) in zip(dims, loops)] + [conv.wrap(f"y = {text}")]
    params = f"[{isl_name(n[0])}] -> " if n else ""
    s = isl.Set(f"{params}{{ [{', '.join(dims)}, y] : {' and '.join(f'({c})' for c in cons)} }}")
    if n:
        s = s.fix_val(isl.dim_type.param, 0, isl.Val(n[1])).project_out(isl.dim_type.param, 0, 1)
    return s


def as_set(points, ndim):
    body = "; ".join("[" + ", ".join(map(str, p)) + "]" for p in points)
    return isl.Set(f"{{ {body} }}") if points else isl.Set(f"{{ [{', '.join(f'x{k}' for k in range(ndim))}] : 1 = 0 }}")


def test_product_of_two_partial_tile_extents_is_exact():
    io, ko = te.var("io"), te.var("ko")
    e = Min("int32", const(64), 130 - io * 64) * Min("int32", const(16), 130 - ko * 16)
    got = isl_points(e, [(io, 3), (ko, 9)])
    want = as_set([(i, k, min(64, 130 - 64 * i) * min(16, 130 - 16 * k)) for i in range(3) for k in range(9)], 3)
    assert got.is_equal(want), got


def test_division_and_modulo_by_a_partial_tile_extent_are_exact():
    ko, x = te.var("ko"), te.var("x")
    d = Min("int32", const(16), 130 - ko * 16)
    for e, f in ((x // d, lambda a, b: a // b), (x % d, lambda a, b: a % b)):
        got = isl_points(e, [(ko, 9), (x, 40)])
        want = as_set([(k, v, f(v, min(16, 130 - 16 * k))) for k in range(9) for v in range(40)], 3)
        assert got.is_equal(want), (e, got)


def test_symbolic_divisor_exact_where_positive_unknown_below_one():
    n, ko, x = te.var("n"), te.var("ko"), te.var("x")
    e = x // Min("int32", const(8), n - ko * 8)
    got = isl_points(e, [(ko, 6), (x, 20)], n=(n, 30))
    # ko < 4: the divisor min(8, 30 - 8 * ko) >= 6 and the value is exact
    exact = got.intersect(isl.Set("{ [ko, x, y] : ko < 4 }"))
    want = as_set([(k, v, v // min(8, 30 - 8 * k)) for k in range(4) for v in range(20)], 3)
    assert exact.is_equal(want), exact
    # ko >= 4: the divisor is below one (the division never runs there); any value is allowed
    assert not got.intersect(isl.Set("{ [ko = 5, x = 3, y = 1000] }")).is_empty()


def test_upper_bounds():
    ko, n = te.var("ko"), te.var("n")
    ranges = {ko: (0, 9)}
    assert upper_bound(Min("int32", const(16), n - ko * 16), ranges, {}) == 16
    assert upper_bound(ko * 4 + 3, ranges, {ko: 0}) == 35
    assert upper_bound(n - ko, ranges, {ko: 0}) is None  # n has no upper bound
    assert upper_bound((ko + 5) % 4, ranges, {ko: 0}) == 3
