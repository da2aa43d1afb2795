"""Tensor compute stages (TVM's TensorComputeOp): te.compute whose fcompute returns a tensor intrinsic's
call on tensor regions (A[i, 0:16]), with scalar inputs and reduce axes; schedules on the outer axes;
te.extern with several outputs.  Every kernel runs against numpy on random data with NaN-poisoned outputs."""
import numpy as np
import pytest
from conftest import assert_close_scaled

import codegen
import tensorir as te
from tensorir.poly.analysis import OutOfBoundsError

rng = np.random.default_rng(7)


def rand(*shape):
    return rng.standard_normal(shape).astype("float32")


def nan(*shape):
    return np.full(shape, np.nan, "float32")


def intrin_vadd(n, name="vadd"):
    """z[v] = x[v] + y[v] over n elements, as an ir_builder loop."""
    x = te.placeholder((n,), name="vx")
    y = te.placeholder((n,), name="vy")
    z = te.compute((n,), lambda i: x[i] + y[i], name="z")

    def code(ins, outs):
        ib = te.ir_builder.create()
        xx, yy, zz = ib.buffer_ptr(ins[0]), ib.buffer_ptr(ins[1]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, n, name="v") as v:
            zz[v] = xx[v] + yy[v]
        return ib.get()

    return te.decl_tensor_intrin(z.op, code, name=name, default_buffer_params={"offset_factor": 1})


def intrin_gemv(m, n, with_reset=True):
    """z[r] = sum_c w[r, c] * x[c]: body, reset and update as ir_builder loops."""
    w = te.placeholder((m, n), name="w")
    x = te.placeholder((n,), name="x")
    c = te.reduce_axis((0, n), name="c")
    z = te.compute((m,), lambda r: te.sum(w[r, c] * x[c], axis=c), name="z")
    wb = te.decl_buffer(w.shape, w.dtype, name="W", offset_factor=1, strides=[te.var("ldw"), 1])

    def code(ins, outs):
        ww, xx = ins
        zz = outs[0]

        def nest(reset, update):
            ib = te.ir_builder.create()
            with ib.for_range(0, m, name="r") as r:
                if reset:
                    ib.emit(zz.vstore(r, te.const(0.0)))
                if update:
                    with ib.for_range(0, n, name="cc") as cc:
                        ib.emit(zz.vstore(r, zz.vload(r) + ww[r, cc] * xx.vload(cc)))
            return ib.get()

        return nest(True, True), nest(True, False) if with_reset else None, nest(False, True)

    return te.decl_tensor_intrin(z.op, code, name="gemv", binds={w: wb}, default_buffer_params={"offset_factor": 1})


def blocked_gemv(mb, kb, m, n, with_reset=True):
    """C[ib, 0:m] = sum over kb of A[ib, kb] @ X[kb]: the intrinsic accumulates over reduce axis k."""
    A = te.placeholder((mb, kb, m, n), name="A")
    X = te.placeholder((kb, n), name="X")
    k = te.reduce_axis((0, kb), name="k")
    gemv = intrin_gemv(m, n, with_reset)
    C = te.compute((mb, m), lambda i: gemv(A[i, k, 0:m, 0:n], X[k, 0:n], reduce_axis=k), name="C")
    return A, X, C


def check_gemv(s, A, X, C):
    f = codegen.build(s, [A, X, C])
    a, x = rand(*[d.value for d in A.shape]), rand(*[d.value for d in X.shape])
    c = nan(*[d.value for d in C.shape])
    f(a, x, c)
    np.testing.assert_allclose(c, np.einsum("ikmn,kn->im", a, x), rtol=1e-4, atol=1e-4)


def test_rows_of_an_intrinsic_parallel_and_split():
    vadd = intrin_vadd(16)
    A, B = te.placeholder((20, 16), name="A"), te.placeholder((20, 16), name="B")
    C = te.compute((20, 16), lambda i: vadd(A[i, 0:16], B[i, 0:16]), name="C")
    assert isinstance(C.op, te.TensorComputeOp) and C.op.schedulable_ndim == 1
    assert [iv.var.name for iv in C.op.axis] == ["i", "ax0"]
    assert C.op.inputs == [A, B] and C.op.intrin is vadd
    assert [(r.min.value, r.extent.value) for r in C.op.input_regions[0][1:]] == [(0, 16)]
    s = te.create_schedule(C.op)
    assert s[C].leaf_iter_vars == [C.op.axis[0]]
    io, ii = s[C].split(C.op.axis[0], factor=3)  # a tail: the call is guarded
    s[C].parallel(io)
    f = codegen.build(s, [A, B, C])
    a, b, c = rand(20, 16), rand(20, 16), nan(20, 16)
    f(a, b, c)
    np.testing.assert_allclose(c, a + b)


def test_call_extern_to_c_code_prints_regions():
    x = te.placeholder((8,), name="vx")
    y = te.placeholder((8,), name="vy")
    z = te.compute((8,), lambda i: x[i] * y[i], name="z")
    vmul = te.decl_tensor_intrin(z.op, lambda ins, outs: te.call_extern(
        "int32", "tt_vmul8", ins[0].access_ptr("r"), ins[1].access_ptr("r"), outs[0].access_ptr("w")),
        name="vmul", default_buffer_params={"offset_factor": 1})
    A, B = te.placeholder((4, 3, 8), name="A"), te.placeholder((3, 8), name="B")
    C = te.compute((4, 3, 8), lambda i, j: vmul(A[i, j, 0:8], B[j, 0:8]), name="C")
    s = te.create_schedule(C.op)
    s[C].reorder(C.op.axis[1], C.op.axis[0])
    s[C].pragma(C.op.axis[1], "import_c", "int tt_vmul8(const float *a, const float *b, float *c) {"
                                          " for (int v = 0; v < 8; ++v) c[v] = a[v] * b[v]; return 0; }")
    text = str(te.lower(s, [A, B, C]))
    assert "tt_vmul8(&A[i * 24 + j * 8] (r), &B[j * 8] (r), &C[i * 24 + j * 8] (w))" in text
    f = codegen.build(s, [A, B, C])
    a, b, c = rand(4, 3, 8), rand(3, 8), nan(4, 3, 8)
    f(a, b, c)
    np.testing.assert_allclose(c, a * b[None])


@pytest.mark.parametrize("with_reset", [True, False])
def test_reduction_over_calls_reset_update(with_reset):
    A, X, C = blocked_gemv(6, 5, 4, 8, with_reset)
    s = te.create_schedule(C.op)
    text = str(te.lower(s, [A, X, C]))
    assert (text.index("= 0.0f") < text.index("for (k")) == with_reset  # reset above the k loop, else body at k == 0
    check_gemv(s, A, X, C)


def test_reduction_split_reorder_parallel():
    A, X, C = blocked_gemv(6, 6, 4, 8)
    s = te.create_schedule(C.op)
    i, (k,) = C.op.axis[0], C.op.reduce_axis
    ko, ki = s[C].split(k, factor=2)
    s[C].reorder(ko, i, ki)
    check_gemv(s, A, X, C)
    s = te.create_schedule(C.op)
    s[C].parallel(C.op.axis[0])
    check_gemv(s, A, X, C)
    s[C].parallel(C.op.reduce_axis[0])
    with pytest.raises(te.ScheduleError, match="stage C: intrinsic gemv: cannot parallelize axis k"):
        te.lower(s, [A, X, C])


def test_producer_computed_at_the_intrinsic_loops():
    """Bound inference sees the regions: a producer attached at k computes one block of A."""
    A0 = te.placeholder((6, 5, 4, 8), name="A0")
    A = te.compute(A0.shape, lambda *i: A0[i] * 2.0, name="A")
    X = te.placeholder((5, 8), name="X")
    k = te.reduce_axis((0, 5), name="k")
    C = te.compute((6, 4), lambda i: intrin_gemv(4, 8)(A[i, k, 0:4, 0:8], X[k, 0:8], reduce_axis=k), name="C")
    s = te.create_schedule(C.op)
    s[A].compute_at(s[C], k)
    bounds = te.schedule.InferBound(s)
    assert [bounds[iv].extent.value for iv in A.op.axis] == [1, 1, 4, 8]
    f = codegen.build(s, [A0, X, C])
    a, x, c = rand(6, 5, 4, 8), rand(5, 8), nan(6, 4)
    f(a, x, c)
    np.testing.assert_allclose(c, np.einsum("ikmn,kn->im", 2 * a, x), rtol=1e-4, atol=1e-4)


def test_cache_read_and_cache_write():
    vadd = intrin_vadd(16)
    A, B = te.placeholder((8, 16), name="A"), te.placeholder((8, 16), name="B")
    C = te.compute((8, 16), lambda i: vadd(A[i, 0:16], B[i, 0:16]), name="C")
    s = te.create_schedule(C.op)
    AL = s.cache_read(A, "local", [C])
    CL = s.cache_write(C, "local")
    assert isinstance(CL.op, te.TensorComputeOp) and CL.op.inputs[0] == AL
    s[AL].compute_at(s[CL], CL.op.axis[0])
    s[CL].compute_at(s[C], C.op.axis[0])
    f = codegen.build(s, [A, B, C])
    a, b, c = rand(8, 16), rand(8, 16), nan(8, 16)
    f(a, b, c)
    np.testing.assert_allclose(c, a + b)


@te.register_func("test_tensor_compute.axpy", override=True)
def _axpy(x, z, alpha, beta):
    z[:] = x * alpha + beta


def test_scalar_inputs_to_a_packed_callback():
    n = te.size_var("n")
    x = te.placeholder((n,), name="x")
    v, w = te.size_var("v", "float32"), te.size_var("w", "float32")
    z = te.compute((n,), lambda i: x[i] * v + w, name="z")
    axpy = te.decl_tensor_intrin(z.op, lambda ins, outs, sp: te.call_packed(
        "test_tensor_compute.axpy", ins[0], outs[0], sp[0], sp[1]), scalar_params=[v, w],
        default_buffer_params={"offset_factor": 1})
    assert isinstance(axpy.buffers[0], te.schedule.Buffer) and isinstance(axpy.buffers[0], te.tir.Buffer)
    assert tuple(axpy.scalar_params) == (v, w) and axpy.reduce_init is None
    A = te.placeholder((5, 12), name="A")
    C = te.compute((5, 12), lambda i: axpy(te.const(0.5) * i, A[i, 0:12], i + 1.0), name="C")
    s = te.create_schedule(C.op)
    f = codegen.build(s, [A, C])
    a, c = rand(5, 12), nan(5, 12)
    f(a, c)
    i = np.arange(5, dtype="float32")[:, None]
    assert_close_scaled(c, a * 0.5 * i + i + 1, np.abs(a) * 0.5 * i + i + 1)


def test_one_element_regions_and_scalars_interleaved():
    """TVM's test_tensor_intrin_scalar_params: intrin(i * i, A[i, j], i + j) on every element."""
    n = te.size_var("n")
    x = te.placeholder((n,), name="x")
    v, w = te.size_var("v"), te.size_var("w")
    z = te.compute((n,), lambda i: x[i] * v + w, name="z")

    def code(ins, outs, sp):
        ib = te.ir_builder.create()
        ib.emit(outs[0].vstore(0, ins[0].vload(0) * te.tir.cast(sp[0], "float32") + te.tir.cast(sp[1], "float32")))
        return ib.get()

    intrin = te.decl_tensor_intrin(z.op, code, scalar_params=[v, w], default_buffer_params={"offset_factor": 1})
    A = te.placeholder((10, 10), name="A")
    C = te.compute((10, 10), lambda i, j: intrin(i * i, A[i, j], i + j), name="C")
    s = te.create_schedule(C.op)
    f = codegen.build(s, [A, C])
    a, c = rand(10, 10), nan(10, 10)
    f(a, c)
    i, j = np.meshgrid(np.arange(10), np.arange(10), indexing="ij")
    assert_close_scaled(c, a * (i * i) + (i + j), np.abs(a) * (i * i) + (i + j))


def test_regions_that_do_not_fit_name_tensor_and_intrinsic():
    vadd = intrin_vadd(16)
    A, B = te.placeholder((4, 16), name="A"), te.placeholder((4, 16), name="B")
    with pytest.raises(ValueError, match=r"compute C: intrinsic vadd: the region of tensor A, A\[i, 0:8\].*"
                                         r"does not fit the intrinsic's input 0, buffer vx of shape \[16\]"):
        te.compute((4, 16), lambda i: vadd(A[i, 0:8], B[i, 0:16]), name="C")
    with pytest.raises(ValueError, match=r"compute C: intrinsic vadd takes 2 tensor regions .* called with 1 A"):
        te.compute((4, 16), lambda i: vadd(A[i, 0:16]), name="C")
    with pytest.raises(ValueError, match=r"the intrinsic computes z of shape \[16\] but the trailing dimensions "
                                         r"of C are \[8\]"):
        te.compute((4, 8), lambda i: vadd(A[i, 0:16], B[i, 0:16]), name="C")
    with pytest.raises(ValueError, match="takes 0 scalar inputs but is called with 1"):
        te.compute((4, 16), lambda i: vadd(A[i, 0:16], B[i, 0:16], 3), name="C")
    H = te.placeholder((4, 16), "float16", name="H")
    with pytest.raises(TypeError, match="tensor H is float16 but input 0 of the intrinsic"):
        te.compute((4, 16), lambda i: vadd(H[i, 0:16], B[i, 0:16]), name="C")
    with pytest.raises(TypeError, match=r"A\[i, 0:16\] is a region of tensor A"):
        te.compute((4, 16), lambda i, j: A[i, 0:16] + 1.0, name="D")


def test_region_out_of_bounds_is_refused_by_isl():
    vadd = intrin_vadd(16)
    A, B = te.placeholder((4, 20), name="A"), te.placeholder((4, 16), name="B")
    C = te.compute((4, 16), lambda i: vadd(A[i, 8:24], B[i, 0:16]), name="C")
    s = te.create_schedule(C.op)
    with pytest.raises(OutOfBoundsError, match="A"):
        te.lower(s, [A, B, C])


def test_schedule_misuse():
    vadd = intrin_vadd(16)
    A0, B = te.placeholder((4, 16), name="A0"), te.placeholder((4, 16), name="B")
    A = te.compute((4, 16), lambda i, j: A0[i, j] + 1.0, name="A")
    C = te.compute((4, 16), lambda i: vadd(A[i, 0:16], B[i, 0:16]), name="C")
    D = te.compute((4, 16), lambda i, j: C[i, j] * 2.0, name="D")
    s = te.create_schedule(D.op)
    s[A].compute_inline()
    with pytest.raises(te.ScheduleError, match="stage A: it cannot be inlined: stage C passes a region of A"):
        te.lower(s, [A0, B, D])
    s = te.create_schedule(D.op)
    s[C].compute_inline()
    with pytest.raises(te.ScheduleError, match="stage C: intrinsic vadd: a tensor compute stage cannot be inlined"):
        te.lower(s, [A0, B, D])
    s = te.create_schedule(D.op)
    s[C].vectorize(C.op.axis[0])
    with pytest.raises(te.ScheduleError, match="cannot vectorize axis i"):
        te.lower(s, [A0, B, D])
    s = te.create_schedule(D.op)
    with pytest.raises(te.ScheduleError, match="not an axis of this stage"):
        s[C].split(C.op.axis[1], factor=4)  # the opaque axis is not a loop


def test_consumer_of_a_tensor_compute_at_its_loop():
    """D reads C; C computed at D's row loop runs the intrinsic on that row only."""
    vadd = intrin_vadd(16)
    A, B = te.placeholder((6, 16), name="A"), te.placeholder((6, 16), name="B")
    C = te.compute((6, 16), lambda i: vadd(A[i, 0:16], B[i, 0:16]), name="C")
    D = te.compute((6, 16), lambda i, j: C[i, 15 - j] * 2.0, name="D")
    s = te.create_schedule(D.op)
    s[C].compute_at(s[D], D.op.axis[0])
    f = codegen.build(s, [A, B, D])
    a, b, d = rand(6, 16), rand(6, 16), nan(6, 16)
    f(a, b, d)
    np.testing.assert_allclose(d, 2 * (a + b)[:, ::-1])


def test_extern_with_several_outputs():
    n = te.size_var("n")
    A = te.placeholder((n,), name="A")

    def code(ins, outs):
        assert isinstance(ins[0], te.schedule.Buffer)
        ib = te.ir_builder.create()
        a, p, q = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0]), ib.buffer_ptr(outs[1])
        with ib.for_range(0, n, name="e") as e:
            p[e] = a[e] + 1.0
            q[e] = te.tir.cast(a[e] * 2.0, "int32")
        return ib.get()

    P, Q = te.extern([(n,), (n,)], [A], code, name="E", dtype=["float32", "int32"])
    assert (P.value_index, Q.value_index, Q.dtype, P.name) == (0, 1, "int32", "E.v0")
    R = te.compute((n,), lambda i: P[i] + Q[i].astype("float32"), name="R")
    s = te.create_schedule(R.op)
    f = codegen.build(s, [A, Q, R])
    for size in (1, 9):
        a, q, r = rand(size), np.full(size, -7, "int32"), nan(size)
        f(a, q, r)
        np.testing.assert_array_equal(q, (a * 2).astype("int32"))
        assert_close_scaled(r, a + 1 + q, np.abs(a) + 1 + np.abs(q))


def test_loop_structure_and_tensorize_is_ignored_as_in_tvm():
    A, X, C = blocked_gemv(3, 4, 4, 8)
    s = te.create_schedule(C.op)
    body = te.lower(s, [A, X, C])["main"].body.body  # for i: reset, then for k: update
    assert isinstance(body[0], te.tir.For) and isinstance(body[1], te.tir.For)
    assert body[1].loop_var.name == "k"
    s[C].tensorize(C.op.axis[0], intrin_gemv(4, 8))
    with pytest.warns(UserWarning, match="stage C: tensorize with gemv is ignored"):
        check_gemv(s, A, X, C)
