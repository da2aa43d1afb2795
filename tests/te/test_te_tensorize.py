"""te.decl_tensor_intrin and s[T].tensorize on the CPU: the tensorize tutorial's gemv (micro-kernel as
hand-written LLVM IR and as C), body / reset / update, ir_builder intrinsics, and clear errors."""
import numpy as np
import pytest

import codegen
import tensorir as te

rng = np.random.default_rng(11)

# cc[i] += sum_j aa[j] * bb[i * stride + j]  and  cc[i] = 0, as the tutorial's C (written by hand: no clang)
GEMV_LL = r"""
define i32 @tt_gemv_update(ptr %cc, ptr %aa, ptr %bb, i32 %m, i32 %l, i32 %stride) {
entry:
  br label %outer
outer:
  %i = phi i32 [0, %entry], [%i.next, %latch]
  %ic = icmp slt i32 %i, %m
  br i1 %ic, label %pre, label %done
pre:
  %ci = getelementptr float, ptr %cc, i32 %i
  %row = mul i32 %i, %stride
  br label %inner
inner:
  %j = phi i32 [0, %pre], [%j.next, %body]
  %jc = icmp slt i32 %j, %l
  br i1 %jc, label %body, label %latch
body:
  %ap = getelementptr float, ptr %aa, i32 %j
  %a = load float, ptr %ap
  %bi = add i32 %row, %j
  %bp = getelementptr float, ptr %bb, i32 %bi
  %b = load float, ptr %bp
  %c = load float, ptr %ci
  %p = fmul float %a, %b
  %s = fadd float %c, %p
  store float %s, ptr %ci
  %j.next = add i32 %j, 1
  br label %inner
latch:
  %i.next = add i32 %i, 1
  br label %outer
done:
  ret i32 0
}

define i32 @tt_gemv_reset(ptr %cc, i32 %m) {
entry:
  br label %loop
loop:
  %i = phi i32 [0, %entry], [%i.next, %body]
  %c = icmp slt i32 %i, %m
  br i1 %c, label %body, label %done
body:
  %p = getelementptr float, ptr %cc, i32 %i
  store float 0.0, ptr %p
  %i.next = add i32 %i, 1
  br label %loop
done:
  ret i32 0
}
"""

GEMV_C = """
int tt_gemv_update_c(float *cc, const float *aa, const float *bb, int m, int l, int stride) {
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < l; ++j)
            cc[i] += aa[j] * bb[i * stride + j];
    return 0;
}
int tt_gemv_reset_c(float *cc, int m) {
    for (int i = 0; i < m; ++i) cc[i] = 0.0f;
    return 0;
}
"""


def rand(*shape):
    return rng.standard_normal(shape).astype("float32")


def gemm(N, M, L):
    A = te.placeholder((N, L), name="A")
    B = te.placeholder((M, L), name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    return A, B, C


def intrin_gemv(m, l, suffix="", reset_update=True, with_reset=True):
    """The tutorial's gemv intrinsic; ``body`` resets then updates (it must compute from scratch)."""
    a = te.placeholder((l,), name="a")
    b = te.placeholder((m, l), name="b")
    k = te.reduce_axis((0, l), name="k")
    c = te.compute((m,), lambda i: te.sum(a[k] * b[i, k], axis=k), name="c")
    Ab = te.decl_buffer(a.shape, a.dtype, name="A", offset_factor=1, strides=[1])
    Bb = te.decl_buffer(b.shape, b.dtype, name="B", offset_factor=1, strides=[te.var("s1"), 1])
    Cb = te.decl_buffer(c.shape, c.dtype, name="C", offset_factor=1, strides=[1])

    def intrin_func(ins, outs):
        aa, bb = ins
        cc = outs[0]

        def update():
            ib = te.ir_builder.create()
            ib.emit(te.call_extern("int32", "tt_gemv_update" + suffix, cc.access_ptr("w"), aa.access_ptr("r"),
                                   bb.access_ptr("r"), m, l, bb.strides[0]))
            return ib.get()

        def reset():
            ib = te.ir_builder.create()
            ib.emit(te.call_extern("int32", "tt_gemv_reset" + suffix, cc.access_ptr("w"), m))
            return ib.get()

        ib = te.ir_builder.create()
        ib.emit(reset())
        ib.emit(update())
        if not reset_update:
            return ib.get()
        return ib.get(), reset() if with_reset else None, update()

    return te.decl_tensor_intrin(c.op, intrin_func, binds={a: Ab, b: Bb, c: Cb})


def run(s, A, B, C):
    f = codegen.build(s, [A, B, C], name="gemv")
    a, b = rand(*(x.value for x in A.shape)), rand(*(x.value for x in B.shape))
    c = np.full([x.value for x in C.shape], np.nan, dtype="float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-4)
    return f


def test_tutorial_gemv_whole_reduction_inside():
    A, B, C = gemm(64, 48, 32)
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=16)
    s[C].reorder(x, yo, yi, z)
    s[C].tensorize(yi, intrin_gemv(16, 32, reset_update=False))
    s[C].pragma(x, "import_llvm", GEMV_LL)
    text = str(te.lower(s, [A, B, C]))
    assert "tt_gemv_update(&C[i * 48 + j.outer * 16] (w), &A[i * 32] (r), &B[j.outer * 512] (r), 16, 32, 32)" \
        in text
    run(s, A, B, C)


@pytest.mark.parametrize("with_reset", [True, False])
def test_tutorial_gemv_reset_update(with_reset):
    A, B, C = gemm(32, 48, 64)
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=16)
    zo, zi = s[C].split(z, factor=16)
    s[C].reorder(x, yo, zo, yi, zi)
    s[C].tensorize(yi, intrin_gemv(16, 16, with_reset=with_reset))
    s[C].pragma(yo, "import_llvm", GEMV_LL)
    s[C].parallel(x)
    text = str(te.lower(s, [A, B, C]))
    assert ("tt_gemv_reset" in text.split("for (k.outer")[0]) == with_reset
    run(s, A, B, C)


def test_gemv_micro_kernel_in_c_and_export(tmp_path):
    A, B, C = gemm(16, 32, 32)
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=8)
    zo, zi = s[C].split(z, factor=8)
    s[C].reorder(x, yo, zo, yi, zi)
    s[C].tensorize(yi, intrin_gemv(8, 8, suffix="_c"))
    s[C].pragma(x, "import_c", GEMV_C)
    f = run(s, A, B, C)
    path = str(tmp_path / "gemv.so")
    f.export_library(path)
    g = codegen.load_module(path)
    a, b, c = rand(16, 32), rand(32, 32), np.full((16, 32), np.nan, "float32")
    g(a, b, c)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-4)


def intrin_gemv_loops(m, l):
    """The same intrinsic with an ir_builder loop nest as its code (nothing external)."""
    a = te.placeholder((l,), name="a")
    b = te.placeholder((m, l), name="b")
    k = te.reduce_axis((0, l), name="k")
    c = te.compute((m,), lambda i: te.sum(a[k] * b[i, k], axis=k), name="c")
    Bb = te.decl_buffer(b.shape, b.dtype, name="B", offset_factor=1, strides=[te.var("s1"), 1])

    def intrin_func(ins, outs):
        aa, bb = ins
        cc = outs[0]

        def code(reset, update):
            ib = te.ir_builder.create()
            with ib.for_range(0, m, name="ii") as ii:
                if reset:
                    ib.emit(cc.vstore(ii, te.const(0.0)))
                if update:
                    with ib.for_range(0, l, name="jj") as jj:
                        ib.emit(cc.vstore(ii, cc.vload(ii) + aa.vload(jj) * bb[ii, jj]))
            return ib.get()

        return code(True, True), code(True, False), code(False, True)

    return te.decl_tensor_intrin(c.op, intrin_func, binds={b: Bb}, default_buffer_params={"offset_factor": 1})


def test_ir_builder_intrinsic_with_parallel_outer_loop():
    A, B, C = gemm(8, 32, 24)
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=8)
    zo, zi = s[C].split(z, factor=8)
    s[C].reorder(x, yo, zo, yi, zi)
    s[C].tensorize(yi, intrin_gemv_loops(8, 8))
    s[C].parallel(x)
    run(s, A, B, C)


def intrin_vadd(n):
    x = te.placeholder((n,), name="vx")
    y = te.placeholder((n,), name="vy")
    z = te.compute(x.shape, lambda i: x[i] + y[i], name="z")

    def intrin_func(ins, outs):
        ib = te.ir_builder.create()
        xx, yy, zz = ib.buffer_ptr(ins[0]), ib.buffer_ptr(ins[1]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, n, name="v") as v:
            zz[v] = xx[v] + yy[v]
        return ib.get()

    return te.decl_tensor_intrin(z.op, intrin_func, default_buffer_params={"offset_factor": 1})


def test_elementwise_symbolic_rows():
    n = te.var("n")
    A = te.placeholder((n, 16), name="A")
    B = te.placeholder((n, 16), name="B")
    C = te.compute((n, 16), lambda i, j: A[i, j] + B[i, j], name="C")
    s = te.create_schedule(C.op)
    s[C].tensorize(C.op.axis[1], intrin_vadd(16))
    f = codegen.build(s, [A, B, C])
    for rows in (1, 5):
        a, b, c = rand(rows, 16), rand(rows, 16), np.full((rows, 16), np.nan, "float32")
        f(a, b, c)
        np.testing.assert_allclose(c, a + b)


def test_elementwise_split_inner():
    A = te.placeholder((64,), name="A")
    B = te.placeholder((64,), name="B")
    C = te.compute((64,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=16)
    s[C].tensorize(xi, intrin_vadd(16))
    f = codegen.build(s, [A, B, C])
    a, b, c = rand(64), rand(64), np.full(64, np.nan, "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a + b)


# -- errors --------------------------------------------------------------------------------------------------
def test_mismatch_names_the_stage():
    A = te.placeholder((64,), name="A")
    B = te.placeholder((64,), name="B")
    C = te.compute((64,), lambda i: A[i] * B[i], name="Cmul")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=16)
    s[C].tensorize(xi, intrin_vadd(16))
    with pytest.raises(te.ScheduleError, match="stage Cmul: tensorize of axis i.inner.*does not match"):
        te.lower(s, [A, B, C])


def test_wrong_extent_is_refused():
    A = te.placeholder((64,), name="A")
    B = te.placeholder((64,), name="B")
    C = te.compute((64,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[C].tensorize(xi, intrin_vadd(16))
    with pytest.raises(te.ScheduleError, match="stage C.*spans 8 iterations.*extent 16"):
        te.lower(s, [A, B, C])


def test_tail_inside_tensorized_loops_is_refused():
    A = te.placeholder((60,), name="A")
    B = te.placeholder((60,), name="B")
    C = te.compute((60,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=16)
    s[C].tensorize(xi, intrin_vadd(16))
    with pytest.raises(te.ScheduleError, match="stage C.*tail"):
        te.lower(s, [A, B, C])


def test_non_contiguous_region_needs_strides():
    A, B, C = gemm(8, 32, 32)
    a = te.placeholder((16,), name="a")
    b = te.placeholder((8, 16), name="b")
    k = te.reduce_axis((0, 16), name="k")
    c = te.compute((8,), lambda i: te.sum(a[k] * b[i, k], axis=k), name="c")

    def intrin_func(ins, outs):
        return te.call_extern("int32", "tt_gemv_update", outs[0].access_ptr("w"), ins[0].access_ptr("r"),
                              ins[1].access_ptr("r"), 8, 16, 16)

    intrin = te.decl_tensor_intrin(c.op, intrin_func, name="compact_gemv")
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=8)
    zo, zi = s[C].split(z, factor=16)
    s[C].reorder(x, yo, zo, yi, zi)
    s[C].tensorize(yi, intrin)
    with pytest.raises(te.ScheduleError, match="compact_gemv.*buffer b is compact.*not contiguous"):
        te.lower(s, [A, B, C])


def test_partial_reduction_without_update_is_refused():
    A, B, C = gemm(8, 16, 32)
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    zo, zi = s[C].split(z, factor=16)
    s[C].reorder(x, zo, y, zi)
    s[C].tensorize(y, intrin_gemv(16, 16, reset_update=False))
    with pytest.raises(te.ScheduleError, match="stage C.*no update"):
        te.lower(s, [A, B, C])


def test_tensorize_misuse():
    A, B, C = gemm(8, 16, 16)
    s = te.create_schedule(C.op)
    with pytest.raises(te.ScheduleError, match="stage C: tensorize"):
        s[C].tensorize(C.op.axis[0], "not an intrinsic")
    with pytest.raises(ValueError, match="expected one, or"):
        te.decl_tensor_intrin(C.op, lambda ins, outs: (te.call_extern("int32", "f"),) * 2)


@te.register_func("test_tensorize.gather9")
def _gather9(x, z):
    i, j = np.meshgrid(np.arange(9), np.arange(9), indexing="ij")
    z[:] = x[j // 3 + i % 3, j % 3 + i // 3]


def test_packed_intrinsic_over_a_gather():
    """TVM's test_tensorize_op: the whole stage is one packed call; the read region is the hull."""
    def body(t):
        return lambda i, j: t[j // 3 + i % 3, j % 3 + i // 3]

    x = te.placeholder((5, 5), name="x")
    y = te.compute((9, 9), body(x), name="y")
    intrin = te.decl_tensor_intrin(y.op, lambda ins, outs: te.call_packed("test_tensorize.gather9", ins[0], outs[0]),
                                   default_buffer_params={"offset_factor": 2})
    A = te.placeholder((5, 5), name="A")
    B = te.compute((9, 9), body(A), name="B")
    s = te.create_schedule(B.op)
    s[B].tensorize(B.op.axis[0], intrin)
    f = codegen.build(s, [A, B])
    a, b = rand(5, 5), np.full((9, 9), np.nan, "float32")
    f(a, b)
    i, j = np.meshgrid(np.arange(9), np.arange(9), indexing="ij")
    np.testing.assert_allclose(b, a[j // 3 + i % 3, j % 3 + i // 3])


@pytest.mark.skipif(__import__("platform").machine().lower() not in ("x86_64", "amd64"), reason="x86 targets")
@pytest.mark.parametrize("feature,register", [("avx512vnni", "z"), ("avxvnni", "y")])
def test_vnni_dot_intrinsic_emits_vpdpbusd_and_runs_where_the_host_has_it(feature, register):
    """topi.x86's u8 x s8 -> s32 intrinsic (tir.reinterpret + call_llvm_pure_intrin) on a packed GEMM:
    vpdpbusd on the target's vector registers; the result exact (no saturation) where the host can run it."""
    from codegen import jit
    from codegen.target import host, parse
    from tensorir.topi.x86 import DOT_INT8, dot_int8
    isa = next(d for d in DOT_INT8 if d.feature == feature)
    M, N, K = 8, 32, 64
    A = te.placeholder((M, K), dtype="uint8", name="A")
    W = te.placeholder((N // 16, K // 4, 64), dtype="int8", name="W")
    ko, ki = te.reduce_axis((0, K // 4), name="ko"), te.reduce_axis((0, 4), name="ki")
    C = te.compute((M, N // 16, 16), lambda i, jo, ji: te.sum(
        A[i, ko * 4 + ki].astype("int32") * W[jo, ko, ji * 4 + ki].astype("int32"), axis=[ko, ki]), name="C")
    s = te.create_schedule(C.op)
    i, jo, ji = C.op.axis
    s[C].reorder(i, jo, ko, ji, ki)
    if isa.lanes < 16:
        jio, jii = s[C].split(ji, factor=isa.lanes)
        s[C].reorder(jio, jii, ki)
        ji = jii
    s[C].tensorize(ji, dot_int8(isa))
    target = f"llvm -mcpu={'znver4' if register == 'z' else 'alderlake'} -mattr=+{feature}" + \
        (",+avx512f,+avx512bw" if register == "z" else ",+avx2")
    func = te.lower(s, [A, W, C])
    assert f"llvm.x86.avx512.vpdpbusd.{isa.lanes * 32}" in str(func)
    f = codegen.build(func, target=target, name="vnni")
    assert f"vpdpbusd\t%{register}mm" in jit.emit_assembly(f.get_source("ll"), parse(target))
    if feature not in host().features:
        pytest.skip(f"this host has no {feature}")
    a = rng.integers(0, 256, (M, K)).astype(np.uint8)
    a[0] = 255                                  # products beyond int16 sums: no saturation
    w = rng.integers(-128, 128, (N, K)).astype(np.int8)
    w[:, :] = np.where(np.arange(N)[:, None] % 2, 127, -128)
    c = np.full((M, N // 16, 16), 0x5A5A5A5A, np.int32)
    f(a, w.reshape(N // 16, 16, K // 4, 4).transpose(0, 2, 1, 3).reshape(N // 16, K // 4, 64).copy(), c)
    np.testing.assert_array_equal(c.reshape(M, N), a.astype(np.int64) @ w.T.astype(np.int64))


def test_import_pragma_on_a_unit_loop_outlives_the_loop():
    """A unit loop is simplified away and an unrolled one expanded: their import_llvm pragma still links."""
    for unroll in (False, True):
        A, B, C = gemm(1, 16, 32)
        s = te.create_schedule(C.op)
        x, y = C.op.axis
        (z,) = C.op.reduce_axis
        yo, yi = s[C].split(y, factor=16)          # yo and x: one iteration each
        s[C].reorder(x, yo, yi, z)
        s[C].tensorize(yi, intrin_gemv(16, 32, reset_update=False))
        s[C].pragma(yo, "import_llvm", GEMV_LL)
        if unroll:
            s[C].unroll(yo)
        run(s, A, B, C)
