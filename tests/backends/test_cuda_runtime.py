"""The CUDA backend on a GPU: results against numpy on random data (outputs poisoned first), torch
tensors through ``__cuda_array_interface__`` without copies, argument checks, time_evaluator, and
a faulting kernel named in its error.  Skipped without pycuda or a CUDA device.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import codegen
import tensorir as te
from codegen.cuda.module import driver
from conftest import ROOT, run_check
from test_cuda_codegen import classic_gemm, conv2d_reference, elementwise

pytestmark = pytest.mark.gpu


def build(s, args, name="kernel"):
    return codegen.build(s, args, target="cuda", name=name)


def test_default_arch_is_the_devices():
    major, minor = driver().Device(0).compute_capability()
    assert build(*elementwise()).arch == f"sm_{major}{minor}"


def test_elementwise_numpy_in_and_out():
    for s, args in (elementwise(1000, 128), elementwise(4096, 256, vector=4)):
        run_check(build(s, args), args, lambda a, b: a * 2 + np.exp(b), rtol=1e-5, atol=1e-5)


def test_symbolic_sizes_and_row_reduction():
    n = te.var("n")
    A = te.placeholder((n, 96), name="A")
    k = te.reduce_axis((0, 96), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k] * A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    mod = build(s, [A, B])
    for size in (1, 77, 1000):
        run_check(mod, [A, B], lambda a: (a.astype("float64") ** 2).sum(1), sizes={n: size}, seed=size,
                  rtol=1e-4, atol=1e-4)


def test_gemm_schedules():
    from autotune.templates.gemm_cuda import gemm_schedule
    ref = lambda a, b: a.astype("float64") @ b
    s, args = classic_gemm(n=128)
    run_check(build(s, args), args, ref, rtol=1e-4, atol=1e-4)
    for kw in ({}, {"k_tile": 16, "transpose_a": False}, {"block_m": 64, "block_n": 64}):
        s, args = gemm_schedule(256, 512, 384, **kw)
        run_check(build(s, args), args, ref, rtol=1e-4, atol=1e-4, seed=len(kw))


def test_conv2d_schedule():
    from autotune.templates.conv2d_cuda import conv2d_schedule
    s, args = conv2d_schedule(1, 64, 56, 56, 64)
    run_check(build(s, args), args, conv2d_reference, rtol=1e-4, atol=1e-4)


def test_torch_tensors_are_used_in_place():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    from autotune.templates.gemm_cuda import gemm_schedule
    s, args = gemm_schedule(256, 256, 256, block_m=64, block_n=64)
    mod = build(s, args)
    a = torch.randn(256, 256, device="cuda")
    b = torch.randn(256, 256, device="cuda")
    c = torch.full((256, 256), float("nan"), device="cuda")
    ptr = c.data_ptr()
    mod(a, b, c)
    assert c.data_ptr() == ptr
    ref = (a.double() @ b.double()).float()
    assert torch.allclose(c, ref, rtol=1e-4, atol=1e-3)
    with pytest.raises(TypeError, match="dtype"):
        mod(a.double(), b, c)
    with pytest.raises(ValueError, match="non-contiguous"):
        mod(a.t(), b, c)
    with pytest.raises(ValueError, match="aligned"):          # float4 loads need 16-byte alignment
        big = torch.randn(256 * 256 + 1, device="cuda")
        mod(big[1:].view(256, 256), b, c)


def test_argument_checks():
    s, args = elementwise(1000, 128)
    mod = build(s, args)
    a = np.zeros(1000, "float32")
    with pytest.raises(TypeError, match="takes 3 arrays"):
        mod(a, a)
    with pytest.raises(ValueError, match="axis 0 has size 999"):
        mod(a, a, np.zeros(999, "float32"))
    with pytest.raises(TypeError, match=r"argument 0 \(A\) has dtype float64"):
        mod(a.astype("float64"), a, a.copy())
    with pytest.raises(TypeError, match="cuda_array_interface"):
        mod([0.0] * 1000, a, a.copy())


def test_time_evaluator_uses_events():
    from autotune.templates.gemm_cuda import gemm_schedule
    s, args = gemm_schedule(512, 512, 512)
    mod = build(s, args)
    a, b = (np.random.default_rng(0).standard_normal((512, 512), dtype=np.float32) for _ in range(2))
    c = np.empty((512, 512), np.float32)
    res = mod.time_evaluator(number=5, repeat=3)(a, b, c)
    assert len(res.results) == 3 and 0 < res.median < 0.05 and res.number == 5


def test_a_faulting_kernel_is_named(tmp_path):
    script = textwrap.dedent("""
        import numpy as np, codegen, tensorir as te
        A = te.placeholder((256,), name="A"); B = te.compute((256,), lambda i: A[i] + 1.0, name="B")
        s = te.create_schedule(B.op); s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
        mod = codegen.build(s, [A, B], target="cuda", name="faulty_kernel")
        class Bad:
            def __init__(self, ptr):
                self.__cuda_array_interface__ = {"shape": (256,), "typestr": "<f4", "data": (ptr, False),
                                                 "version": 3, "strides": None}
        try:
            mod(Bad(16), Bad(4096))
        except RuntimeError as e:
            print("ERROR:", e)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert "ERROR: CUDA kernel faulty_kernel" in out.stdout, out.stdout + out.stderr


def test_tuning_measures_on_the_gpu(tmp_path):
    """Builder (nvcc in worker processes) and runner (the GPU, in its own process): every legal
    candidate is checked against numpy and timed; deployment from the log gives a correct kernel."""
    import autotune
    from autotune.templates.gemm_cuda import gemm_cuda_template
    task = autotune.task.create("gemm_cuda", args=(256, 256, 256), target="cuda")
    log = str(tmp_path / "gemm.jsonl")
    tuner = autotune.tuner.RandomTuner(task, seed=0)
    option = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=4, timeout=60),
                                     runner=autotune.LocalRunner(number=1, repeat=2, min_repeat_ms=1, timeout=30))
    tuner.tune(n_trial=12, measure_option=option, callbacks=[autotune.callback.log_to_file(log)])
    recs = autotune.record.load_records(log)
    assert len(recs) == 12
    ok = [r for r in recs if r.result.ok]
    assert ok and all(0 < c < 0.1 for r in ok for c in r.result.costs)
    assert {r.result.error_no.name for r in recs} <= {"NO_ERROR", "INSTANTIATION_ERROR"}
    with autotune.apply_history_best(log, target="cuda"):
        s, args = gemm_cuda_template(256, 256, 256)
    rng = np.random.default_rng(1)
    a, b = (rng.uniform(-1, 1, (256, 256)).astype("float32") for _ in range(2))
    c = np.full((256, 256), np.nan, "float32")
    build(s, args)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
