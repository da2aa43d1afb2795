"""TVM's schedule-level surface: InferBound / ScheduleOps, stage introspection, groups, cache_write
after loop transformations, reducers whose identity uses an axis, store predicates, storage_align."""
import numpy as np
import pytest
from conftest import assert_close_scaled

import codegen
import tensorir as te
import tensorir.schedule
from tensorir.visitor import substitute
from tensorir.arith import simplify


def run(s, args, shapes, inputs):
    """Build, run on the given inputs with NaN-poisoned outputs, return the outputs."""
    mod = codegen.build(s, args)
    outs = [np.full(sh, np.nan, "float32") for sh in shapes]
    mod(*inputs, *outs)
    return outs


def rand(*shape):
    return np.random.uniform(-1, 1, shape).astype("float32")


# -- InferBound: TVM's numbers ---------------------------------------------------------------------
def chain(shape=None):
    m, l = te.var("m"), te.var("l")
    A = te.placeholder(shape or (m, l), name="A")
    A1 = te.compute(A.shape, lambda i, j: A[i, j], name="A1")
    A2 = te.compute(A.shape, lambda i, j: A1[i, j] + 3, name="A2")
    return A, A1, A2


def test_infer_bound_compute_at_split_is_the_factor_not_clipped():
    A, A1, A2 = chain()
    s = te.create_schedule(A2.op)
    xo, xi = s[A2].split(A2.op.axis[0], 8)
    s[A1].compute_at(s[A2], xo)
    bounds = te.schedule.InferBound(s)
    assert bounds[A1.op.axis[0]].extent.value == 8
    assert bounds[A1.op.axis[1]].extent is A1.op.axis[1].dom.extent
    assert bounds[xi].extent.value == 8
    assert set(bounds) >= set(s[A2].all_iter_vars) | set(s[A1].all_iter_vars)


def test_infer_bound_tile_after_normalize_and_shared_memory_threads():
    A, A1, A2 = chain()
    s = te.create_schedule(A2.op)
    xo, yo, xi, yi = s[A2].tile(A2.op.axis[0], A2.op.axis[1], 8, 8)
    assert s.normalize() is s
    s[A1].compute_at(s[A2], yo)
    bounds = te.schedule.InferBound(s)
    assert (bounds[A1.op.axis[0]].extent.value, bounds[A1.op.axis[1]].extent.value) == (8, 8)

    A, A1, A2 = chain()
    s = te.create_schedule(A2.op)
    s[A1].set_scope("shared")
    xo, xi = s[A2].split(A2.op.axis[0], 32)
    xi0, xi1 = s[A2].split(xi, nparts=16)
    s[A2].bind(xi0, te.thread_axis("threadIdx.x"))
    yo, yi = s[A2].split(A2.op.axis[1], 16)
    s[A2].reorder(xo, xi0, yo, xi1, yi)
    s[A1].compute_at(s[A2], yo)
    bounds = te.schedule.InferBound(s)  # shared: spans the threads of the block
    assert (bounds[A1.op.axis[0]].extent.value, bounds[A1.op.axis[1]].extent.value) == (32, 16)


@pytest.mark.parametrize("how, leaf, expected", [("factor", 1, 8), ("nparts", 0, 8)])
def test_infer_bound_split_larger_than_extent(how, leaf, expected):
    I = te.placeholder((8,), name="I")
    EF = te.compute((8,), lambda i: I[i] * 2, name="EF")
    E = te.compute((8,), lambda i: EF[i] * 2, name="E")
    s = te.create_schedule(E.op)
    parts = s[E].split(E.op.axis[0], **{how: 32})
    s[EF].compute_at(s[E], parts[0])
    assert te.schedule.InferBound(s)[parts[leaf]].extent.value == expected
    i = rand(8)
    (e,) = run(s, [I, E], [(8,)], [i])
    np.testing.assert_allclose(e, i * 4, rtol=1e-6)


def test_infer_bound_divisible_symbolic_split():
    m, l = te.var("m"), te.var("l")
    A = te.placeholder((8 * m, 32 * l), name="A")
    B = te.compute(A.shape, lambda i, j: A[i, j], name="B")
    s = te.create_schedule(B.op)
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], 8, 32)
    bounds = te.schedule.InferBound(s)
    assert bounds[xo].extent is m and bounds[yo].extent is l
    assert (bounds[xi].extent.value, bounds[yi].extent.value) == (8, 32)


def test_infer_bound_fuse_then_split():
    A, A1, A2 = chain((te.var("m"), 6))
    s = te.create_schedule(A2.op)
    xo, xi = s[A2].split(s[A2].fuse(*A2.op.axis), 3)
    s[A1].compute_at(s[A2], xo)
    bounds = te.schedule.InferBound(s)
    at5 = [simplify(substitute(e, {xo.var: 5})) for iv in A1.op.axis for e in (bounds[iv].min, bounds[iv].extent)]
    assert [e.value for e in at5] == [2, 1, 3, 3]  # row 2, columns 3..5


def test_infer_bound_stencils():
    n = te.var("n")
    A = te.compute((n + 2,), lambda i: te.const(1.0), name="A")
    B = te.compute((n,), lambda i: A[i] + A[i + 1] + A[i + 2], name="B")
    s = te.create_schedule(B.op)
    s[A].compute_at(s[B], B.op.axis[0])
    assert te.schedule.InferBound(s)[A.op.axis[0]].extent.value == 3

    A = te.compute((12, 12), lambda i, j: te.const(1.0), name="A")
    B = te.compute((10, 10), lambda i, j: A[i + 1, j + 1] + A[i, j + 1] + A[i + 2, j + 1] + A[i + 1, j]
                   + A[i + 1, j + 2], name="B")
    s = te.create_schedule(B.op)
    s[A].compute_at(s[B], B.op.axis[1])
    bounds = te.schedule.InferBound(s)
    assert (bounds[A.op.axis[0]].extent.value, bounds[A.op.axis[1]].extent.value) == (3, 3)


def test_infer_bound_root_stage_covers_what_is_read():
    A = te.placeholder((1, 3, 6, 6), name="A")
    repack = te.compute((1, 1, 6, 6, 4), lambda n, c, h, w, b: te.if_then_else(
        b >= 3, te.const(0.0), A[n, c * 4 + b, h, w]), name="repack")
    B = te.compute((1, 3, 6, 6), lambda n, c, h, w: repack[n, c // 4, h, w, c % 4], name="B")
    s = te.create_schedule(B.op)
    assert te.schedule.InferBound(s)[repack.op.axis[4]].extent.value == 3


def test_infer_bound_rfactor_and_threads():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n))
    B = te.compute((1,), lambda i: te.sum(A[k], axis=k, where=(i > 1)), name="B")
    s = te.create_schedule(B.op)
    kf, ki = s[B].split(k, nparts=4)
    BF = s.rfactor(B, kf)
    bounds = te.schedule.InferBound(s)
    assert (bounds[BF.op.axis[0]].extent.value, bounds[BF.op.axis[1]].extent.value) == (4, 1)

    m = te.var("m")
    A = te.placeholder((m,), name="A")
    A1 = te.compute((m,), lambda i: A[i], name="A1")
    A2 = te.compute((m,), lambda i: A1[i] + 2, name="A2")
    A3 = te.compute((m,), lambda i: A2[i] + 3, name="A3")
    s = te.create_schedule(A3.op)
    s[A2].set_scope("shared")
    s[A1].set_scope("local")
    tx = te.thread_axis("threadIdx.x")
    bx, xi = s[A3].split(A3.op.axis[0], factor=32)
    s[A3].bind(bx, te.thread_axis("blockIdx.x"))
    s[A3].bind(xi, tx)
    s[A2].compute_at(s[A3], xi)
    _, x2 = s[A2].split(A2.op.axis[0], nparts=1)
    s[A2].bind(x2, tx)
    s[A1].compute_at(s[A3], xi)
    bounds = te.schedule.InferBound(s)  # local: one per thread; shared: the block's 32
    assert (bounds[A1.op.axis[0]].extent.value, bounds[A2.op.axis[0]].extent.value) == (1, 32)
    assert bounds[A3.op.axis[0]].extent is m


def test_schedule_ops_gives_the_loop_nest():
    A, A1, A2 = chain()
    s = te.create_schedule(A2.op)
    xo, xi = s[A2].split(A2.op.axis[0], 8)
    s[A1].compute_at(s[A2], xo)
    stmt = te.schedule.ScheduleOps(s, te.schedule.InferBound(s))
    assert "A1" in str(stmt) and "for (" in str(stmt)
    assert te.schedule.create_schedule is te.create_schedule


# -- stage introspection -----------------------------------------------------------------------------
def test_stage_attributes_as_in_tvm():
    A = te.placeholder((100,), name="A")
    T = te.compute((100,), lambda i: A[i] * 2, name="T")
    s = te.create_schedule(T.op)
    xo, xi = s[T].split(T.op.axis[0], factor=10)
    s[T].pragma(xo, "pragma1")
    s[T].pragma(xi, "vectorize")
    attrs = s[T].iter_var_attrs
    assert attrs[xo].pragma_keys[0].value == "pragma1"
    assert attrs[xi].iter_type == te.schedule.IterVar.Vectorized
    assert any(isinstance(r, te.schedule.Split) for r in s[T].relations)
    assert s[T].origin_op is T.op and s.stage_map[T.op] is s[T] and s.outputs == [T.op]
    assert isinstance(s[T], te.schedule.Stage) and isinstance(s, te.schedule.Schedule)
    assert s[T].attach_type == 1 and s[A].attach_type == 1
    a = rand(100)
    (t,) = run(s, [A, T], [(100,)], [a])
    np.testing.assert_allclose(t, a * 2)


# -- groups ----------------------------------------------------------------------------------------
def three_stages():
    m, n = te.var("m"), te.var("n")
    P = te.placeholder((m, n), name="P")
    x = te.compute((m, n), lambda i, j: P[i, j] * 2, name="x")
    x1 = te.compute(x.shape, lambda i, j: x[i, j] + 1, name="x1")
    x2 = te.compute(x.shape, lambda i, j: x1[i, j] + 2, name="x2")
    return P, x, x1, x2


def test_group_is_placed_as_a_unit():
    P, x, x1, x2 = three_stages()
    s = te.create_schedule(x2.op)
    g = s.create_group(outputs=x1, inputs=x, include_inputs=True)
    assert s[x1].group is g and s[x].group is g and g.num_child_stages == 2
    g.compute_at(s[x2], x2.op.axis[0])
    assert g.attach_stage is s[x2]
    bounds = te.schedule.InferBound(s)
    assert bounds[x.op.axis[0]].extent.value == 1 and bounds[x1.op.axis[0]].extent.value == 1
    text = str(te.lower(s, [P, x2]))
    assert text.index("allocate x") > text.index("for (i, m)")  # both inside x2's outer loop
    p = rand(5, 7)
    (out,) = run(s, [P, x2], [(5, 7)], [p])
    np.testing.assert_allclose(out, p * 2 + 3, rtol=1e-6)


def test_nested_groups():
    P, x, x1, x2 = three_stages()
    s = te.create_schedule(x2.op)
    g1 = s.create_group(outputs=x, inputs=x, include_inputs=True)
    g2 = s.create_group(outputs=x1, inputs=x, include_inputs=True)
    assert s[x].group is g1 and s[x1].group is g2 and g1.group is g2 and set(s.groups) == {g1, g2}
    g2.compute_at(s[x2], x2.op.axis[0])
    g1.compute_at(s[x1], x1.op.axis[1])
    bounds = te.schedule.InferBound(s)
    assert [bounds[iv].extent.value for iv in x.op.axis] == [1, 1]
    p = rand(4, 3)
    (out,) = run(s, [P, x2], [(4, 3)], [p])
    np.testing.assert_allclose(out, p * 2 + 3, rtol=1e-6)


def test_group_compute_at_a_member_is_refused():
    P, x, x1, x2 = three_stages()
    s = te.create_schedule(x2.op)
    g = s.create_group(outputs=x1, inputs=x, include_inputs=True)
    with pytest.raises(te.ScheduleError, match="x1"):
        g.compute_at(s[x1], x1.op.axis[0])


# -- cache_write after loop transformations (TVM's relayout) ---------------------------------------
def test_cache_write_after_split_reorder_lays_the_cache_out_in_loop_order():
    A = te.placeholder((12, 5), name="A")
    B = te.placeholder((12, 5), name="B")
    C = te.compute(A.shape, lambda i, j: A[i, j] * B[i, j], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[C].reorder(xo, C.op.axis[1], xi)
    CC = s.cache_write(C, "global")
    assert [int(x) for x in CC.shape] == [3, 5, 4]
    a, b = rand(12, 5), rand(12, 5)
    (c,) = run(s, [A, B, C], [(12, 5)], [a, b])
    np.testing.assert_allclose(c, a * b, rtol=1e-6)


def test_cache_write_after_a_tail_split_of_a_reduction():
    A = te.placeholder((10, 7), name="A")
    k = te.reduce_axis((0, 7), name="k")
    C = te.compute((10,), lambda i: te.sum(A[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[0], factor=4)  # 10 = 3 * 4 with a tail
    CC = s.cache_write(C, "local")
    s[CC].compute_at(s[C], C.op.axis[0])
    a = rand(10, 7)
    (c,) = run(s, [A, C], [(10,)], [a])
    np.testing.assert_allclose(c, a.astype("float64").sum(1), rtol=1e-5, atol=1e-6)


def test_cache_write_tiling_with_storage_align():
    M = N = 256
    A = te.placeholder((N, M), name="A")
    C = te.compute((N, M), lambda n, m: A[n, m], name="C")
    s = te.create_schedule(C.op)
    s.cache_write(C, "local")
    bn, bm, ni, mi = s[C].tile(*C.op.axis, 128, 128)
    nio, nii = s[C].split(ni, 2)
    s[C].fuse(nii, mi)
    C_shared = s.cache_write(C, "shared")
    s[C_shared].storage_align(C_shared.op.axis[2], 256, 8)
    bn, bm, ni, mi = s[C].tile(*s[C].op.axis, 128, 128)
    niio, niii = s[C].split(ni, 32)
    s[C_shared].compute_at(s[C], niio)
    assert te.schedule.InferBound(s)[s.stages[2].op.axis[2]].extent.value == 16
    func = te.lower(s, [A, C])
    assert "C.shared[float32 * 1 * 1 * 16 * 264]" in str(func)  # the stride of dim 2: 264 = 256 + 8
    a = rand(N, M)
    (c,) = run(s, [A, C], [(N, M)], [a])
    np.testing.assert_array_equal(c, a)


# -- reducers whose identity or combiner reads an axis ---------------------------------------------
@pytest.mark.parametrize("variant", ["plain", "cache_write", "split"])
def test_reducer_identity_uses_an_axis(variant):
    X = te.placeholder((10,), name="X")

    def f(n):
        rv = te.reduce_axis((0, n))
        init = lambda dtype: te.if_then_else(n > 1, te.const(0, dtype), n.astype(dtype))
        red = te.comm_reducer(lambda x, y: te.max(x + y, n.astype("float32")), init, name="sum")
        return red(X[rv], axis=rv)

    Y = te.compute((10,), f, name="Y")
    s = te.create_schedule(Y.op)
    if variant == "cache_write":
        s.cache_write(Y, "local")
    x = rand(10)
    (y,) = run(s, [X, Y], [(10,)], [x])
    ref = []
    for n in range(10):
        acc = 0.0 if n > 1 else float(n)
        for r in range(n):
            acc = max(acc + x[r], float(n))
        ref.append(acc)
    np.testing.assert_allclose(y, ref, rtol=1e-5)


def test_reducer_identity_uses_a_size_var_after_split():
    n = te.var("n")
    A = te.placeholder((n, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    red = te.comm_reducer(lambda x, y: x + y, lambda t: n.astype(t), name="plus_n")
    B = te.compute((n,), lambda i: red(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    BL = s.cache_write(B, "local")
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[BL].compute_at(s[B], xo)
    a = rand(9, 6)
    (b,) = run(s, [A, B], [(9,)], [a])
    assert_close_scaled(b, a.sum(1) + 9, np.abs(a).sum(1) + 9, ulps=8)


# -- store predicate, storage_align, double_buffer, prefetch, env_threads --------------------------
def test_store_predicate_skips_stores():
    A = te.placeholder((8, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    B = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    s[B].set_store_predicate(B.op.axis[0] % 2 == 0)
    a = rand(8, 6)
    (b,) = run(s, [A, B], [(8,)], [a])
    assert_close_scaled(b[::2], a.sum(1)[::2], np.abs(a).sum(1)[::2], ulps=8)
    assert np.isnan(b[1::2]).all()


def test_storage_align_pads_the_buffer():
    A = te.placeholder((6, 10), name="A")
    T = te.compute((6, 10), lambda i, j: A[i, j] + 1, name="T")
    C = te.compute((6, 10), lambda i, j: T[i, j] * 2, name="C")
    s = te.create_schedule(C.op)
    s[T].storage_align(T.op.axis[0], 8, 4)
    s[T].double_buffer()
    s[C].prefetch(A, C.op.axis[0], 1)
    assert "T[float32 * 6 * 12]" in str(te.lower(s, [A, C]))
    a = rand(6, 10)
    (c,) = run(s, [A, C], [(6, 10)], [a])
    np.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)
    with pytest.raises(te.ScheduleError, match="T.*env_threads|env_threads.*T"):
        s[T].env_threads([te.thread_axis("threadIdx.x")])
    with pytest.raises(te.ScheduleError, match="output"):
        s[C].double_buffer()


def test_attached_stage_that_is_an_argument_is_written_in_place():
    m = te.var("m")
    A = te.placeholder((m,), name="A")
    B = te.compute((m,), lambda i: A[i] + 1, name="B")
    C = te.compute((m,), lambda i: B[i] * 2, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    a = rand(9)
    b, c = run(s, [A, B, C], [(9,), (9,)], [a])
    np.testing.assert_allclose(b, a + 1, rtol=1e-6)
    np.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)
