"""te.extern, decl_buffer, call_extern / call_packed / call_intrin and the ir_builder, on the CPU."""
import subprocess

import numpy as np
import pytest
from conftest import assert_close_scaled

import codegen
import tensorir as te
from codegen.packed import PackedCallError

rng = np.random.default_rng(7)

ADD_C = """
int tt_scale_add(float *out, const float *a, const float *b, float alpha, int n) {
    for (int i = 0; i < n; ++i) out[i] = alpha * a[i] + b[i];
    return 0;
}
"""


def rand(*shape):
    return rng.standard_normal(shape).astype("float32")


def nans(*shape):
    return np.full(shape, np.nan, dtype="float32")


@pytest.fixture(scope="module")
def scale_add_lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("lib")
    (d / "scale_add.c").write_text(ADD_C)
    lib = d / "libscaleadd.so"
    subprocess.run(["cc", "-O2", "-fPIC", "-shared", "-o", str(lib), str(d / "scale_add.c")], check=True)
    return codegen.load_library(lib)


# -- packed functions --------------------------------------------------------------------------------
@te.register_func("test_extern.matmul")
def _matmul(a, b, c, trans_a, trans_b):
    c[:] = (a.T if trans_a else a) @ (b.T if trans_b else b)


@te.register_func("test_extern.addone")
def _addone(x, y):
    y[:] = x + 1


def test_packed_matmul_then_bias_tutorial():
    n, l, m = 64, 16, 35
    bias = 10.0  # the tutorial's te.var("bias", "float32"): scalar kernel arguments are not in Module yet
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((l, m), name="B")
    C = te.extern((n, m), [A, B], lambda ins, outs: te.call_packed(
        "test_extern.matmul", ins[0], ins[1], outs[0], False, False), name="C")
    D = te.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
    s = te.create_schedule(D.op)
    f = codegen.build(s, [A, B, D])
    a, b, d = rand(n, l), rand(l, m), nans(n, m)
    f(a, b, d)
    np.testing.assert_allclose(d, a @ b + 10, rtol=1e-5)


def test_packed_symbolic_shape_and_args():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.extern(A.shape, [A], lambda ins, outs: te.call_packed("test_extern.addone", ins[0], outs[0]), name="B")
    s = te.create_schedule(B.op)
    assert "test_extern.addone" in str(te.lower(s, [A, B]))
    f = codegen.build(s, [A, B])
    for size in (1, 17, 100):
        a, b = rand(size), nans(size)
        f(a, b)
        np.testing.assert_allclose(b, a + 1)


def test_packed_error_is_raised_after_the_call():
    @te.register_func("test_extern.fails", override=True)
    def fails(x, y):
        raise ValueError("boom")

    A = te.placeholder((8,), name="A")
    B = te.extern(A.shape, [A], lambda ins, outs: te.call_packed("test_extern.fails", ins[0], outs[0]), name="B")
    f = codegen.build(te.create_schedule(B.op), [A, B])
    with pytest.raises(PackedCallError, match="test_extern.fails.*boom"):
        f(rand(8), nans(8))


def test_unregistered_packed_function_named_at_build():
    A = te.placeholder((8,), name="A")
    B = te.extern(A.shape, [A], lambda ins, outs: te.call_packed("test_extern.nope", ins[0], outs[0]), name="B")
    with pytest.raises(codegen.CodegenError, match="test_extern.nope"):
        codegen.build(te.create_schedule(B.op), [A, B])


# -- C functions -------------------------------------------------------------------------------------------
def _scale_add(n, name="D"):
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.extern((n,), [A, B], lambda ins, outs: te.call_extern(
        "int32", "tt_scale_add", outs[0].access_ptr("w"), ins[0].access_ptr("r"), ins[1].access_ptr("r"),
        te.const(2.0), n), name="C")
    D = te.compute((n,), lambda i: C[i] * 3, name=name)
    return A, B, C, D


def test_call_extern_from_loaded_library(scale_add_lib):
    n = te.var("n")
    A, B, C, D = _scale_add(n)
    f = codegen.build(te.create_schedule(D.op), [A, B, D])
    a, b, d = rand(33), rand(33), nans(33)
    f(a, b, d)
    assert_close_scaled(d, (2 * a + b) * 3, (2 * np.abs(a) + np.abs(b)) * 3)


def test_call_extern_import_c_pragma():
    src = ADD_C.replace("tt_scale_add", "tt_scale_add_c")
    A = te.placeholder((20,), name="A")
    B = te.placeholder((20,), name="B")
    C = te.extern((20,), [A, B], lambda ins, outs: te.call_extern(
        "int32", "tt_scale_add_c", outs[0].access_ptr("w"), ins[0].access_ptr("r"), ins[1].access_ptr("r"),
        te.const(-1.5), 20), name="C")
    D = te.compute((20,), lambda i: C[i] + A[i], name="D")
    s = te.create_schedule(D.op)
    s[D].pragma(D.op.axis[0], "import_c", src)
    f = codegen.build(s, [A, B, D])
    a, b, d = rand(20), rand(20), nans(20)
    f(a, b, d)
    np.testing.assert_allclose(d, -1.5 * a + b + a, rtol=1e-5, atol=1e-6)


def test_unknown_extern_symbol_named_at_build():
    A = te.placeholder((8,), name="A")
    B = te.extern(A.shape, [A], lambda ins, outs: te.call_extern(
        "int32", "tt_no_such_function", ins[0].access_ptr("r"), outs[0].access_ptr("w")), name="B")
    with pytest.raises(codegen.CodegenError, match="tt_no_such_function"):
        codegen.build(te.create_schedule(B.op), [A, B])


def test_export_library_with_extern_and_packed(tmp_path, scale_add_lib):
    n = te.var("n")
    A, B, C, D = _scale_add(n)
    E = te.extern((n,), [D], lambda ins, outs: te.call_packed("test_extern.addone", ins[0], outs[0]), name="E")
    f = codegen.build(te.create_schedule(E.op), [A, B, E])
    path = str(tmp_path / "k.so")
    f.export_library(path)
    g = codegen.load_module(path)
    a, b, e = rand(21), rand(21), nans(21)
    g(a, b, e)
    assert_close_scaled(e, (2 * a + b) * 3 + 1, (2 * np.abs(a) + np.abs(b)) * 3 + 1)


# -- ir_builder bodies -----------------------------------------------------------------------------------------
def test_ir_builder_extern_between_computes():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    A2 = te.compute((n,), lambda i: A[i] * 3, name="A2")

    def body(ins, outs):
        ib = te.ir_builder.create()
        a, c = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, n, name="i") as i:
            with ib.if_scope(a[i] > 0.5):
                c[i] = a[i]
            with ib.else_scope():
                c[i] = -a[i]
        return ib.get()

    B = te.extern((n,), [A2], body, name="B")
    C = te.compute((n,), lambda i: B[i] + 1, name="C")
    s = te.create_schedule(C.op)
    f = codegen.build(s, [A, C])
    for size in (1, 37):
        a, c = rand(size), nans(size)
        f(a, c)
        np.testing.assert_allclose(c, np.where(3 * a > 0.5, 3 * a, -3 * a) + 1, rtol=1e-6)


def test_ir_builder_allocate_let_and_scopes():
    A = te.placeholder((4, 6), name="A")

    def body(ins, outs):
        ib = te.ir_builder.create()
        a, c = ins[0], ib.buffer_ptr(outs[0])
        tmp = ib.allocate("float32", (6,), name="tmp")
        with ib.for_range(0, 4, name="i") as i:
            with ib.new_scope():
                k = ib.let("k", i * 6)
                with ib.for_range(0, 6, name="j") as j:
                    tmp[j] = a[i, j] * 2
                with ib.for_range(0, 6, name="j") as j:
                    c[k + j] = tmp[5 - j]
        return ib.get()

    B = te.extern((4, 6), [A], body, name="B")
    f = codegen.build(te.create_schedule(B.op), [A, B])
    a, b = rand(4, 6), nans(4, 6)
    f(a, b)
    np.testing.assert_allclose(b, 2 * a[:, ::-1])


def test_extern_output_read_out_of_bounds_is_refused():
    A = te.placeholder((16,), name="A")
    B = te.extern(A.shape, [A], lambda ins, outs: te.call_packed("test_extern.addone", ins[0], outs[0]), name="B")
    C = te.compute((16,), lambda i: B[i + 1], name="C")
    with pytest.raises(te.OutOfBoundsError, match="B"):
        te.lower(te.create_schedule(C.op), [A, C])


def test_ir_builder_out_of_bounds_is_refused():
    A = te.placeholder((8,), name="A")

    def body(ins, outs):
        ib = te.ir_builder.create()
        a, c = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, 8, name="i") as i:
            c[i] = a[i + 1]
        return ib.get()

    B = te.extern((8,), [A], body, name="B")
    with pytest.raises(te.OutOfBoundsError, match="A"):
        te.lower(te.create_schedule(B.op), [A, B])


# -- schedules and declared buffers ------------------------------------------------------------------------------
def test_extern_stage_cannot_be_inlined_or_attached():
    A = te.placeholder((8,), name="A")
    B = te.extern(A.shape, [A], lambda ins, outs: te.call_packed("test_extern.addone", ins[0], outs[0]), name="B")
    C = te.compute((8,), lambda i: B[i] * 2, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    with pytest.raises(te.ScheduleError, match="stage B"):
        te.lower(s, [A, C])
    P = te.compute((8,), lambda i: A[i] * 2, name="P")
    B2 = te.extern(P.shape, [P], lambda ins, outs: te.call_packed("test_extern.addone", ins[0], outs[0]), name="B2")
    s = te.create_schedule(B2.op)
    s[P].compute_inline()
    with pytest.raises(te.ScheduleError, match="stage P.*B2"):
        te.lower(s, [A, B2])


def test_in_buffers_and_wrong_buffer_shapes():
    A = te.placeholder((8, 4), name="A")
    Ab = te.decl_buffer((8, 4), "float32", name="Ab")
    B = te.extern((8, 4), [A], lambda ins, outs: te.call_packed("test_extern.addone", ins[0], outs[0]),
                  in_buffers=[Ab], name="B")
    f = codegen.build(te.create_schedule(B.op), [A, B])
    a, b = rand(8, 4), nans(8, 4)
    f(a, b)
    np.testing.assert_allclose(b, a + 1)
    with pytest.raises(ValueError, match="in_buffer"):
        te.extern((8, 4), [A], lambda ins, outs: ins[0].data, in_buffers=[te.decl_buffer((32,), name="flat")])
    wrong = te.decl_buffer((8, 5), "float32", name="wrong")
    B = te.extern((8, 4), [A], lambda ins, outs: te.call_packed("test_extern.addone", ins[0], outs[0]),
                  in_buffers=[wrong], name="B")
    with pytest.raises(te.ScheduleError, match="wrong.*extent 1 = 5"):
        te.lower(te.create_schedule(B.op), [A, B])


def test_decl_buffer_fields():
    s1 = te.var("s1")
    b = te.decl_buffer((4, 8), "float32", name="B", strides=[s1, 1], offset_factor=1)
    assert [str(x) for x in b.shape] == ["4", "8"]
    assert b.strides[0] is s1
    assert b.elem_offset.name == "B_elem_offset"
    assert te.decl_buffer((3,), name="C").elem_offset.value == 0
    assert "&B" in str(b.access_ptr("r", offset=2))
    assert str(b[1, 2]) == "B[1, 2]"
    assert str(b.vload((1, 2))) == "B[1, 2]"
    with pytest.raises(ValueError, match="access mask"):
        b.access_ptr("x")


def test_symbolic_strides_bound_at_call_site():
    A = te.placeholder((6, 10), name="A")
    s = te.var("s")
    Ab = te.decl_buffer((6, 10), "float32", name="Ab", strides=[s, 1])

    def body(ins, outs):
        ib = te.ir_builder.create()
        a, c = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, 6, name="i") as i:
            c[i] = a[i * ins[0].strides[0] + 9]  # flat offsets through the bound stride
        return ib.get()

    B = te.extern((6,), [A], body, in_buffers=[Ab], name="B")
    f = codegen.build(te.create_schedule(B.op), [A, B])
    a, b = rand(6, 10), nans(6)
    f(a, b)
    np.testing.assert_allclose(b, a[:, 9])


def test_call_intrin():
    A = te.placeholder((10,), name="A")
    B = te.compute((10,), lambda i: te.call_intrin("float32", "tir.exp", A[i]), name="B")
    f = codegen.build(te.create_schedule(B.op), [A, B])
    a, b = rand(10), nans(10)
    f(a, b)
    np.testing.assert_allclose(b, np.exp(a), rtol=1e-5)


def test_extern_body_carries_its_c_code():
    src = ADD_C.replace("tt_scale_add", "tt_scale_add_attr")

    def body(ins, outs):
        ib = te.ir_builder.create()
        ib.scope_attr(None, "pragma_import_c", src)
        ib.emit(te.call_extern("int32", "tt_scale_add_attr", outs[0].access_ptr("w"), ins[0].access_ptr("r"),
                               ins[0].access_ptr("r"), te.const(0.5), 12))
        return ib.get()

    A = te.placeholder((12,), name="A")
    B = te.extern((12,), [A], body, name="B")
    f = codegen.build(te.create_schedule(B.op), [A, B])
    a, b = rand(12), nans(12)
    f(a, b)
    np.testing.assert_allclose(b, 1.5 * a, rtol=1e-6)


def test_packed_functions_get_ndarrays():
    """TVM's extern tutorial: a registered function reads ``x.numpy()`` and writes ``y.copyfrom(...)``."""
    import tensorir as tvm
    n = 10
    A = te.placeholder((n,), name="A")

    @tvm.register_func("test_extern.numpy_plus_one", override=True)
    def plus_one(x, y):
        assert isinstance(x, tvm.nd.NDArray)
        y.copyfrom(x.numpy() + 1)
    B = te.extern((n,), [A], lambda ins, outs: te.call_packed("test_extern.numpy_plus_one", ins[0], outs[0]),
                  name="B")
    f = codegen.build(te.create_schedule(B.op), [A, B])
    a, b = rand(n), nans(n)
    f(a, b)
    np.testing.assert_array_equal(b, a + 1)
