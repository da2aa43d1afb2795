"""The integer arithmetic that lowering trusts: simplify, prove, const_bounds and interval must be
sound.  Random expressions over bounded variables are evaluated before and after, at random points
inside the bounds (no kernel is built)."""
import numpy as np
import pytest

import tensorir as te
from tensorir import expr as E
from tensorir.arith import INF, const_bounds, interval, prove, simplify

N_EXPR = 400
POINTS = 12


def evaluate(e, env: dict):
    t = type(e)
    if isinstance(e, E.Var):
        return env[e]
    if t is E.IntImm:
        return e.value
    if t is E.Not:
        return int(not evaluate(e.a, env))
    if t is E.Select:
        return evaluate(e.true_value, env) if evaluate(e.cond, env) else evaluate(e.false_value, env)
    if t is E.Cast:
        return evaluate(e.value, env)
    a, b = evaluate(e.a, env), evaluate(e.b, env)
    ops = {E.Add: lambda: a + b, E.Sub: lambda: a - b, E.Mul: lambda: a * b, E.FloorDiv: lambda: a // b,
           E.FloorMod: lambda: a % b, E.Min: lambda: min(a, b), E.Max: lambda: max(a, b),
           E.LT: lambda: int(a < b), E.LE: lambda: int(a <= b), E.GT: lambda: int(a > b),
           E.GE: lambda: int(a >= b), E.EQ: lambda: int(a == b), E.NE: lambda: int(a != b),
           E.And: lambda: int(bool(a) and bool(b)), E.Or: lambda: int(bool(a) or bool(b))}
    return ops[t]()


class Gen:
    """Random integer expressions in the shapes lowering produces (affine index arithmetic with
    // and % by constants, min/max clamps, selects)."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.vars = [te.var("i"), te.var("j"), te.var("k"), te.var("n")]
        self.bounds = {self.vars[0]: (0, 15), self.vars[1]: (0, 7), self.vars[2]: (-4, 4), self.vars[3]: (1, 64)}

    def leaf(self):
        if self.rng.random() < 0.65:
            return self.vars[self.rng.integers(len(self.vars))]
        return te.const(int(self.rng.integers(-9, 10)))

    def expr(self, depth: int):
        if depth == 0 or self.rng.random() < 0.2:
            return self.leaf()
        a, b = self.expr(depth - 1), self.expr(depth - 1)
        c = int(self.rng.choice([1, 2, 3, 4, 5, 8, 16, -3, -4]))
        op = self.rng.integers(8)
        if op == 0:
            return a + b
        if op == 1:
            return a - b
        if op == 2:
            return a * c
        if op == 3:
            return a // c
        if op == 4:
            return a % c
        if op == 5:
            return te.min(a, b)
        if op == 6:
            return te.max(a, b)
        return te.if_then_else(a < b, a, b + c)

    def cond(self, depth: int):
        a, b = self.expr(depth), self.expr(depth)
        return [a < b, a <= b, a > b, a >= b, a == b, a != b][self.rng.integers(6)]

    def points(self):
        for _ in range(POINTS):
            yield {v: int(self.rng.integers(lo, hi + 1)) for v, (lo, hi) in self.bounds.items()}
        yield {v: lo for v, (lo, hi) in self.bounds.items()}
        yield {v: hi for v, (lo, hi) in self.bounds.items()}


@pytest.mark.parametrize("seed", range(4))
def test_simplify_preserves_value(seed):
    g = Gen(seed)
    for _ in range(N_EXPR // 4):
        e = g.expr(4)
        se = simplify(e, g.bounds)
        for env in g.points():
            assert evaluate(se, env) == evaluate(e, env), f"simplify({e}) = {se} differs at {env}"


@pytest.mark.parametrize("seed", range(4))
def test_simplify_of_conditions_preserves_truth(seed):
    g = Gen(100 + seed)
    for _ in range(N_EXPR // 4):
        c = g.cond(3)
        sc = simplify(c, g.bounds)
        for env in g.points():
            assert bool(evaluate(sc, env)) == bool(evaluate(c, env)), f"simplify({c}) = {sc} differs at {env}"


@pytest.mark.parametrize("seed", range(4))
def test_prove_is_sound(seed):
    g = Gen(200 + seed)
    proved = 0
    for _ in range(N_EXPR):
        c = g.cond(2)
        if prove(c, g.bounds):
            proved += 1
            for env in g.points():
                assert evaluate(c, env), f"prove({c}) claimed true but it is false at {env}"
    assert proved > 0  # the generator does produce provable conditions


@pytest.mark.parametrize("seed", range(4))
def test_const_bounds_contain_every_value(seed):
    g = Gen(300 + seed)
    for _ in range(N_EXPR // 4):
        e = g.expr(4)
        lo, hi = const_bounds(e, g.bounds)
        for env in g.points():
            v = evaluate(e, env)
            assert lo <= v <= hi, f"const_bounds({e}) = ({lo}, {hi}) but the value is {v} at {env}"


@pytest.mark.parametrize("seed", range(4))
def test_interval_contains_every_value_of_relaxed_vars(seed):
    """interval(e, relax): with i and k relaxed to their ranges and j, n fixed, every value of e
    lies between the (symbolic) bounds evaluated at the fixed values."""
    g = Gen(400 + seed)
    i, j, k, n = g.vars
    relax = {i: (te.const(0), te.const(15)), k: (te.const(-4), te.const(4))}
    checked = 0
    for _ in range(N_EXPR // 4):
        e = g.expr(3)
        rng = interval(e, relax)
        if rng is None:
            continue
        checked += 1
        for env in g.points():
            lo, hi = evaluate(rng[0], env), evaluate(rng[1], env)
            for iv in (0, 7, 15):
                for kv in (-4, 0, 4):
                    v = evaluate(e, {**env, i: iv, k: kv})
                    assert lo <= v <= hi, f"interval({e}) = [{rng[0]}, {rng[1]}] misses {v} at i={iv} k={kv} {env}"
    assert checked > 0


@pytest.mark.parametrize("make", [
    lambda i, j, k, n: (j * 5 + i) // n,
    lambda i, j, k, n: (i - k * 3 + j) // (n * 2 + j),
    lambda i, j, k, n: (j * 9 + i) % n,
    lambda i, j, k, n: (n * j + k + 4) % n,
])
def test_interval_divides_by_a_fixed_symbol_proved_positive(make):
    """A divisor holding no relaxed var and proved ``>= 1`` under the bounds (a size) is monotone: every
    value lies in the interval; a divisor that may be 0 or negative (j, unbounded n) gives no interval."""
    g = Gen(500)
    i, j, k, n = g.vars
    relax = {i: (te.const(0), te.const(15)), k: (te.const(-4), te.const(4))}
    e = make(i, j, k, n)
    rng = interval(e, relax, g.bounds)
    assert rng is not None
    for env in g.points():
        lo, hi = evaluate(rng[0], env), evaluate(rng[1], env)
        for iv in range(16):
            for kv in range(-4, 5):
                v = evaluate(e, {**env, i: iv, k: kv})
                assert lo <= v <= hi, f"interval({e}) = [{rng[0]}, {rng[1]}] misses {v} at i={iv} k={kv} {env}"
    assert interval(e, relax) is None
    assert interval((i + k) // j, relax, g.bounds) is None
    assert interval((i + k) // (n + i), relax, g.bounds) is None


@pytest.mark.parametrize("text, expected", [
    (lambda i, j: (i * 4 + j) // 4, "i"),           # j in [0, 3]
    (lambda i, j: (i * 4 + j) % 4, "j"),
    (lambda i, j: (i * 8 + j * 2) // 2, "i * 4 + j"),
    (lambda i, j: te.min(i, 100), "i"),
    (lambda i, j: i * 2 - i - i, "0"),
    # a common factor of the divisor and the coefficients: (20 x + 19) // 40 == x // 2 (a tile of 20 rows in
    # batches of 40: one batch), whatever x's range
    (lambda i, j: (j * 20 + 19) // 40 - j * 20 // 40, "0"),
])
def test_simplify_known_rewrites(text, expected):
    i, j = te.var("i"), te.var("j")
    out = simplify(text(i, j), {i: (0, 15), j: (0, 3)})
    assert str(out) == expected


def test_simplify_nested_divisions_of_a_swizzled_block_index():
    """A block index swizzled in groups (``x = (col * 16 + row_group) * 8 + row``): its parts' offsets cancel
    (a warp buffer's tile offset stays constant: no local memory); ``(x // a) // c`` is one division."""
    x = te.var("x")
    assert str(simplify(x // 8 // 16)) == "x // 128"
    assert str(simplify(x // 8 % 16 * 256 - x // 8 * 256 + x // 128 * 4096)) == "0"
    assert str(simplify(x // 4 * 3 - x // 8 * 6)) == "x // 4 % 2 * 3"


def test_bounds_of_unknown_are_infinite():
    x = te.var("x")
    assert const_bounds(x * 2, {}) == (-INF, INF)


def test_vector_comparisons_fold_when_every_lane_agrees():
    """Ramp / broadcast comparisons decided for every lane by the variables' bounds become a broadcast
    constant (a padding select of an interior vector disappears); one undecided lane keeps them."""
    x = te.var("x")
    bounds = {x: (0, 2)}
    ramp = E.Ramp("int32x16", x + 32, te.const(1), 16)
    one, end = E.Broadcast("int32x16", te.const(1), 16), E.Broadcast("int32x16", te.const(57), 16)
    for cond, value in ((ramp >= one, True), (ramp < end, True), (ramp < one, False)):
        folded = simplify(cond, bounds)
        assert isinstance(folded, E.Broadcast) and folded.value.value == value, (cond, folded)
    edge = E.Ramp("int32x16", x + 48, te.const(1), 16)      # lane 15 reaches 63 > 56 when x = 2
    assert not isinstance(simplify(edge < end, bounds), E.Broadcast)
    data = E.Broadcast("float32x16", te.const(1.5, "float32"), 16)
    zero = E.Broadcast("float32x16", te.const(0.0, "float32"), 16)
    assert simplify(E.Select("float32x16", ramp >= one, data, zero), bounds) is data


def test_aligned_ramp_div_mod_by_a_multiple_of_its_lanes():
    """``Ramp(8 q + 16 t, 1, 8) // 96`` is one quotient for all lanes (a broadcast; the im2col gather's tap) and
    ``% 32`` a ramp from the base's remainder; a base not known to be a multiple of the lanes, or a divisor
    the lanes do not divide, keeps the lane-wise form."""
    q, t = te.var("q"), te.var("t")
    ramp = E.Ramp("int32x8", q * 8 + t * 16, te.const(1), 8)
    c96, c32, c12 = (E.Broadcast("int32x8", te.const(v), 8) for v in (96, 32, 12))
    div = simplify(E.FloorDiv("int32x8", ramp, c96))
    assert isinstance(div, E.Broadcast), div
    mod = simplify(E.FloorMod("int32x8", ramp, c32))
    assert isinstance(mod, E.Ramp) and mod.stride.value == 1, mod
    for x in range(6):       # each lane agrees with scalar arithmetic
        for lane in range(8):
            k = 8 * x + 16 * 3 + lane
            env = {q: x, t: 3}
            assert _eval(div.value, env) == k // 96 and _eval(mod.base, env) + lane == k % 32
    odd = E.Ramp("int32x8", q * 4, te.const(1), 8)
    assert not isinstance(simplify(E.FloorDiv("int32x8", odd, c96)), E.Broadcast)
    assert not isinstance(simplify(E.FloorDiv("int32x8", ramp, c12)), E.Broadcast)


def test_aligned_ramp_comparison_with_a_multiple_of_its_lanes_is_one_answer():
    """``Ramp(4 q, 1, 4) < 1600`` is the same in every lane (a concatenate's which-input test along a
    vectorized axis: a branch on the scalar, not masked loads of every input); each lane agrees with scalar
    arithmetic; a base or bound the lanes do not divide keeps the lane-wise test."""
    q = te.var("q")
    ramp = E.Ramp("int32x4", q * 4, te.const(1), 4)
    c1600, c1602 = E.Broadcast("int32x4", te.const(1600), 4), E.Broadcast("int32x4", te.const(1602), 4)
    for op, ref in ((E.LT, lambda k: k < 1600), (E.GE, lambda k: k >= 1600)):
        folded = simplify(op("boolx4", ramp, c1600))
        assert isinstance(folded, E.Broadcast), folded
        for x in (0, 398, 399, 400, 401):
            assert all(bool(_eval(folded.value, {q: x})) == ref(4 * x + lane) for lane in range(4))
    assert not isinstance(simplify(E.LT("boolx4", ramp, c1602)), E.Broadcast)
    odd = E.Ramp("int32x4", q * 2, te.const(1), 4)
    assert not isinstance(simplify(E.LT("boolx4", odd, c1600)), E.Broadcast)


def _eval(e, env):
    from tensorir.visitor import substitute
    return simplify(substitute(e, {v: te.const(x) for v, x in env.items()})).value


def test_nested_divisions_evaluate_as_numpy():
    """The folds of nested floor divisions and of a division beside a wider one keep every value, negative
    ones included; ``(x // a) // c`` stays nested where ``a c`` is no int32 (``x // 2**32`` would be UB)."""
    import codegen
    x = te.var("x")
    assert str(simplify(x // 65536 // 65536)) == "x // 65536 // 65536"
    n = 64
    A = te.placeholder((n,), name="A", dtype="int32")
    rng = np.random.default_rng(0)
    cases = [(lambda v: v // 8 // 16, 2**31), (lambda v: v // 65536 // 65536, 2**31),
             (lambda v: v // 4 * 3 - v // 8 * 6, 2**29),
             (lambda v: v // 8 % 16 * 256 - v // 8 * 256 + v // 128 * 4096, 2**22)]   # no int32 overflow
    for f, bound in cases:
        data = rng.integers(-bound, bound, n).astype(np.int32)
        data[:3] = [-1, -bound, bound - 1]

        def body(i, f=f):
            return f(A[i])
        B = te.compute((n,), lambda i: body(i), name="B")
        mod = codegen.build(te.create_schedule(B.op), [A, B], "llvm")
        out = np.full(n, -7, np.int32)
        mod(data, out)
        np.testing.assert_array_equal(out, f(data.astype(np.int64)).astype(np.int32))
