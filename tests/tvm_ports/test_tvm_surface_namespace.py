"""`import tensorir as tvm` ports: tvm.te / tir / runtime / nd / target / build / testing / error /
autotvm, Target(target, host=), runtime.convert and the NDArray numpy subclass."""
import numpy as np
import pytest

import tensorir as tvm
from tensorir import te


def test_tvm_style_vector_add_end_to_end():
    n = te.size_var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    outer, inner = s[C].split(C.op.axis[0], factor=64)
    s[C].parallel(outer)
    s[C].vectorize(inner)
    tgt = tvm.target.Target(target="llvm", host="llvm")
    fadd = tvm.build(s, [A, B, C], tgt, name="myadd")
    dev = tvm.device(tgt.kind.name, 0)
    size = 1031
    a = tvm.nd.array(np.random.uniform(size=size).astype(A.dtype), dev)
    b = tvm.nd.array(np.random.uniform(size=size).astype(B.dtype), dev)
    c = tvm.nd.empty((size,), C.dtype, dev)
    assert np.isnan(c.numpy()).all()
    fadd(a, b, c)
    tvm.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
    assert isinstance(c.asnumpy(), np.ndarray) and type(c.numpy()) is np.ndarray
    assert c.device == tvm.cpu(0) and str(dev) == "cpu(0)"
    evaluator = fadd.time_evaluator(fadd.entry_name, dev, number=3)
    assert evaluator(a, b, c).mean > 0


def test_lazy_namespace():
    import codegen.target
    import autotune
    assert tvm.te is tvm and tvm.tir is tvm.tir and tvm.target is codegen.target
    assert tvm.autotvm is autotune and tvm.lower is te.lower and tvm.error.TVMError is tvm.TVMError
    assert tvm.runtime.convert is tvm.convert and tvm.topi.add is not None
    assert tvm.device("cuda", 1) == tvm.cuda(1) and tvm.device("llvm") == tvm.cpu()
    assert not tvm.device("opencl").exist  # TVM's other kinds name devices that are never here
    with pytest.raises(ValueError, match="device type"):
        tvm.device("tpu")
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = tvm.no_such_name
    assert not hasattr(tvm, "relay")


def test_tensorir_import_keeps_codegen_lazy():
    import subprocess
    import sys
    code = "import sys, tensorir; tensorir.nd; tensorir.runtime; print('codegen' in sys.modules, 'autotune' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_target_tvm_spelling():
    Target = tvm.target.Target
    t = Target("llvm", host="llvm")
    assert t.kind.name == "llvm" and t.keys == ("cpu",) and t.host.kind == "llvm"
    assert str(t).startswith("llvm -mcpu=") and t == tvm.target.parse("llvm")
    c = Target("cuda", host="llvm")
    assert c.kind.name == "cuda" and c.keys == ("cuda", "gpu") and str(c) == "cuda" and c.host.keys == ("cpu",)
    assert Target("cuda -arch=sm_80").option("arch") == "sm_80"
    assert str(Target("llvm -mcpu=znver4")) == str(Target("llvm", "znver4")) == "llvm -mcpu=znver4"
    assert Target("cuda").host is None and Target.current() is None
    with Target("cuda") as cur:
        assert Target.current() is cur
    assert Target.current() is None
    with pytest.raises(ValueError, match="opencl"):
        Target("opencl")


def test_build_with_target_object_runs():
    import codegen
    A = te.placeholder((40, 3), name="A")
    B = te.compute((40, 3), lambda i, j: A[i, j] * A[i, j], name="B")
    s = te.create_schedule(B.op)
    f = codegen.build(s, [A, B], target=tvm.target.Target("llvm", host="llvm"))
    a = tvm.nd.array(np.random.default_rng(0).standard_normal((40, 3)).astype("float32"))
    b = tvm.nd.empty((40, 3))
    f(a, b)
    tvm.testing.assert_allclose(b.numpy(), a.numpy() ** 2, rtol=1e-6)


def test_runtime_convert():
    x = tvm.runtime.convert(3)
    assert isinstance(x, tvm.tir.IntImm) and x.value == 3
    lst = tvm.runtime.convert([1, 2.5, te.var("n")])
    assert isinstance(lst, list) and isinstance(lst[1], tvm.tir.FloatImm) and isinstance(lst[2], tvm.tir.Var)
    assert tvm.runtime.convert((1, (2, 3)))[1][0].value == 2
    assert tvm.runtime.convert("name") == "name" and tvm.runtime.convert(None) is None
    assert tvm.runtime.convert(np.int64(7)).dtype == "int64"
    assert tvm.runtime.const(2.0, "float64").dtype == "float64"


def test_ndarray_copy_semantics():
    src = np.arange(6, dtype="int32").reshape(2, 3)
    a = tvm.nd.array(src)
    src[0, 0] = 100
    assert a.numpy()[0, 0] == 0 and a.shape == (2, 3) and a.dtype == "int32"
    a.copyfrom(np.ones((2, 3)))
    assert (a.numpy() == 1).all() and a.dtype == "int32"
