"""Tensor intrinsics on CUDA: the intrinsic's call is a device function given as CUDA source
(``pragma(axis, "import_cuda", src)``), or its ir_builder body is printed inline; checked by running
the generated CUDA C on the CPU (tests/cuda_sim.py) and by nvcc where it is on the PATH."""

import numpy as np
import pytest

import codegen
import cuda_sim
import tensorir as te


VADD16 = """__device__ int vadd16(const float* a, const float* b, float* c) {
  for (int v = 0; v < 16; ++v) c[v] = a[v] + b[v];
  return 0;
}"""


def _vadd_intrin(extern: bool):
    x, y = te.placeholder((16,), name="vx"), te.placeholder((16,), name="vy")
    z = te.compute(x.shape, lambda i: x[i] + y[i], name="z")

    def body(ins, outs):
        ib = te.ir_builder.create()
        if extern:
            ib.emit(te.call_extern("int32", "vadd16", ins[0].access_ptr("r"), ins[1].access_ptr("r"),
                                   outs[0].access_ptr("w")))
        else:
            xx, yy, zz = ib.buffer_ptr(ins[0]), ib.buffer_ptr(ins[1]), ib.buffer_ptr(outs[0])
            with ib.for_range(0, 16, name="v") as v:
                zz[v] = xx[v] + yy[v]
        return ib.get()
    return te.decl_tensor_intrin(z.op, body, default_buffer_params={"offset_factor": 1})


def _schedule(extern: bool):
    A, B = te.placeholder((64, 16), name="A"), te.placeholder((64, 16), name="B")
    C = te.compute((64, 16), lambda i, j: A[i, j] + B[i, j], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=32)
    s[C].bind(xo, te.thread_axis("blockIdx.x"))
    s[C].bind(xi, te.thread_axis("threadIdx.x"))
    if extern:
        s[C].pragma(xo, "import_cuda", VADD16)
    s[C].tensorize(C.op.axis[1], _vadd_intrin(extern))
    return s, [A, B, C]


@pytest.mark.cuda_sim
@pytest.mark.parametrize("extern", [True, False], ids=["device_function", "ir_builder"])
def test_tensorized_vadd_runs_as_cuda(extern):
    s, args = _schedule(extern)
    mod = codegen.build(s, args, target="cuda")
    src = mod.get_source("cuda")
    assert ("vadd16((&A[" in src and src.index("__device__ int vadd16") < src.index("__global__")) if extern \
        else "vadd16" not in src
    assert "float* __restrict__ C" in src and "const float* __restrict__ C" not in src  # written by the call
    rng = np.random.default_rng(0)
    a, b = rng.random((64, 16), dtype="float32"), rng.random((64, 16), dtype="float32")
    c = np.full((64, 16), np.nan, "float32")
    cuda_sim.run(mod, a, b, c)
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.nvcc
def test_device_function_compiles_with_nvcc():
    s, args = _schedule(True)
    assert ".visible .entry default_function" in codegen.build(s, args, target="cuda").get_source("ptx")


def test_packed_call_is_refused_on_cuda():
    x = te.placeholder((16,), name="vx")
    z = te.compute(x.shape, lambda i: x[i] * 2, name="z")
    intrin = te.decl_tensor_intrin(z.op, lambda ins, outs: te.call_packed("cb", ins[0], outs[0]),
                                   default_buffer_params={"offset_factor": 1})
    A = te.placeholder((4, 16), name="A")
    C = te.compute((4, 16), lambda i, j: A[i, j] * 2, name="C")
    s = te.create_schedule(C.op)
    s[C].bind(C.op.axis[0], te.thread_axis("threadIdx.x"))
    s[C].tensorize(C.op.axis[1], intrin)
    with pytest.raises(Exception, match=r"call_packed\(cb\) calls a Python function: it runs on the CPU only"):
        codegen.build(s, [A, C], target="cuda").get_source("cuda")
