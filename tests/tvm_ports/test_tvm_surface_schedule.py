"""TVM-style schedule surface: thread_axis argument order, fuse() of no axes, float sizes from
Python 3 division, dtype aliases, tag_scope, A[i][j] slices, TVMError and GPU binds on CPU targets."""
import warnings

import numpy as np
import pytest

import codegen
import tensorir as te
from tensorir import tir

import cuda_sim
from conftest import assert_raises_naming, check


# -- thread_axis --------------------------------------------------------------------------------------
def test_thread_axis_argument_forms():
    tx = te.thread_axis("threadIdx.x")
    assert tx.thread_tag == "threadIdx.x" and tx.var.name == "threadIdx.x" and tx.dom is None
    bx = te.thread_axis((0, 32), "blockIdx.x")
    assert bx.thread_tag == "blockIdx.x" and bx.dom.extent.value == 32
    vx = te.thread_axis(tag="vthread", name="vx")
    assert vx.thread_tag == "vthread" and vx.var.name == "vx"
    assert te.thread_axis("vthread", name="vy").var.name == "vy"
    assert te.thread_axis((0, 1024 / 32), "threadIdx.y").dom.extent.value == 32
    with pytest.raises(ValueError, match="tag"):
        te.thread_axis()


def test_thread_bound_schedule_builds_for_cuda_and_is_refused_on_llvm():
    n = 256
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis((0, 64), "threadIdx.x"))
    assert "threadIdx.x" in codegen.build(s, [A, B], target="cuda").get_source()
    msg = assert_raises_naming(te.ScheduleError, lambda: codegen.build(s, [A, B], target="llvm"), "B", "llvm")
    assert "i.outer" in msg and "blockIdx.x" in msg
    with pytest.raises(te.TVMError):
        codegen.build(s, [A, B], target=codegen.Target("llvm", host="llvm"))


# -- fuse() with no axes -------------------------------------------------------------------------------
def test_fuse_no_axes_gives_outermost_unit_loop():
    n, m = 13, 7
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((n, m), lambda i, j: B[i, j] * 3.0, name="C")
    s = te.create_schedule(C.op)
    unit = s[C].fuse()
    assert s[C].leaf_iter_vars[0] is unit
    s[C].parallel(unit)
    s[B].compute_at(s[C], unit)
    check(s, [A, C], lambda a: (a + 1) * 3)
    s = te.create_schedule(C.op)
    unit = s[C].fuse()
    fused = s[C].fuse(unit, C.op.axis[0])
    s[C].parallel(fused)
    check(s, [A, C], lambda a: (a + 1) * 3)


def test_fuse_no_axes_on_gpu_binds_a_single_block():
    A = te.placeholder((32,), name="A")
    B = te.compute((32,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(s[B].fuse(), te.thread_axis("blockIdx.x"))
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    mod = codegen.build(s, [A, B], target="cuda")
    assert mod.launch.block == (32, 1, 1) and "threadIdx.x" in mod.get_source()
    if cuda_sim.available():
        a = np.random.default_rng(1).standard_normal(32).astype("float32")
        cuda_sim.check(mod, [a], [np.empty(32, "float32")], lambda a: a + 1)


# -- integral floats as sizes, dtype aliases ------------------------------------------------------------
def test_python3_division_sizes_factors_and_ranges():
    N, bn = 64, 16
    A = te.placeholder((N / bn, bn), name="A")                      # (4.0, 16)
    k = te.reduce_axis((0, N / bn), name="k")
    B = te.compute((bn,), lambda j: te.sum(A[k, j], axis=k), name="B")
    s = te.create_schedule(B.op)
    jo, ji = s[B].split(B.op.axis[0], factor=bn / 4)
    s[B].vectorize(ji)
    assert A.shape[0].value == 4 and A.shape[0].dtype == "int32"
    check(s, [A, B], lambda a: a.sum(axis=0))


def test_non_integral_float_size_is_an_error_naming_the_tensor():
    with pytest.raises(ValueError, match="Q.*2.5"):
        te.placeholder((10, 2.5), name="Q")
    with pytest.raises(ValueError, match="R"):
        te.compute((3.5,), lambda i: i, name="R")
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i], name="B")
    s = te.create_schedule(B.op)
    assert_raises_naming(te.ScheduleError, lambda: s[B].split(B.op.axis[0], factor=2.5), "B", "i")


@pytest.mark.parametrize("alias, dtype", [("float", "float32"), ("int", "int32"), ("double", "float64"),
                                          ("floatx4", "float32x4"), ("float32x4", "float32x4")])
def test_dtype_aliases(alias, dtype):
    assert te.var("x", alias).dtype == dtype
    if "x" not in dtype:
        assert te.placeholder((3,), dtype=alias).dtype == dtype
        assert te.placeholder((3,), name="P", dtype=alias).name == "P"


def test_float_and_double_placeholders_compute():
    A = te.placeholder((20,), dtype="double", name="A")
    B = te.placeholder((20,), dtype="float", name="B")
    C = te.compute((20,), lambda i: A[i] * B[i].astype("double"), name="C")
    s = te.create_schedule(C.op)
    assert C.dtype == "float64"
    check(s, [A, B, C], lambda a, b: a * b)


# -- tag_scope -------------------------------------------------------------------------------------------
def test_tag_scope_context_and_decorator():
    A = te.placeholder((4, 5), name="A")
    with te.tag_scope(tag="my_tag"):
        B = te.compute((4, 5), lambda i, j: A[i, j] + 1, name="B")
        C = te.compute((4, 5), lambda i, j: A[i, j] * 2, name="C", tag="explicit")
    assert B.op.tag == "my_tag" and C.op.tag == "explicit"

    @te.tag_scope(tag="relu")
    def relu(x):
        return te.compute(x.shape, lambda *i: tir.Select(x(*i) < 0, 0.0, x(*i)), name="relu")
    R = relu(A)
    assert R.op.tag == "relu" and te.compute((4,), lambda i: A[i, 0]).op.tag == ""
    s = te.create_schedule(R.op)
    check(s, [A, R], lambda a: np.maximum(a, 0))


def test_tag_scope_nesting_and_unused_scope():
    with pytest.raises(ValueError, match="nested"):
        with te.tag_scope("outer"):
            te.compute((2,), lambda i: i)
            with te.tag_scope("inner"):
                pass
    with pytest.warns(UserWarning, match="unused_tag"):
        with te.tag_scope("unused_tag"):
            pass
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with te.tag_scope("ok"):   # the scope was cleared after the error above
            te.compute((2,), lambda i: i)


# -- A[i][j] ----------------------------------------------------------------------------------------------
def test_tensor_slice_indexing():
    A = te.placeholder((6, 7, 3), name="A")
    B = te.compute((6, 7), lambda i, j: A[i][j][0] + A[i][j, 1] * A[i, j][2], name="B")
    s = te.create_schedule(B.op)
    check(s, [A, B], lambda a: a[:, :, 0] + a[:, :, 1] * a[:, :, 2])
    assert isinstance(A[1], te.TensorSlice) and isinstance(A[1][2], te.TensorSlice)
    assert A[1].dtype == "float32"


def test_incomplete_slice_used_as_value_names_the_tensor():
    A = te.placeholder((6, 7), name="Amat")
    with pytest.raises(TypeError, match="Amat"):
        te.compute((6,), lambda i: A[i] + 1.0, name="B")
    with pytest.raises(TypeError, match="Amat"):
        te.compute((6,), lambda i: A[i], name="B")
    with pytest.raises(TypeError, match="Amat"):
        te.compute((6,), lambda i: 2.0 * A[i], name="B")


# -- errors ----------------------------------------------------------------------------------------------
def test_schedule_errors_are_tvm_errors_and_value_errors():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i + 1], name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(te.error.TVMError):
        te.lower(s, [A, B])
    with pytest.raises(RuntimeError):
        te.lower(s, [A, B])
    with pytest.raises(ValueError):
        te.lower(s, [A, B])
    assert_raises_naming(te.TVMError, lambda: s[B].split(B.op.axis[0], factor=0), "B", "i")
