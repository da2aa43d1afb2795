"""Multi-kernel CUDA programs: root stages bound to GPU threads that pass global intermediates build
into one module of several kernels launched in order, the intermediates allocated by the module.
Checked with the CPU simulator (tests/cuda_sim.py) on NaN-poisoned outputs and intermediates;
tests/backends/test_cuda_gpu_reductions.py runs them on a GPU."""
from __future__ import annotations

import json

import numpy as np
import pytest

import codegen
import cuda_schedules as cs
import cuda_sim
import tensorir as te


def _rows(n, m, seed=0):
    return np.random.default_rng(seed).standard_normal((n, m)).astype("float32") * 3


@pytest.mark.cuda_sim
@pytest.mark.parametrize("threads", [32, 100, 256])
def test_softmax_stages_as_kernels(threads):
    """The schedule of issue 14: max, exp, sum and normalize as root stages, one block per row."""
    s, args, ref = cs.softmax(6, 700, threads)
    mod = codegen.build(s, args, target="cuda")
    assert [k.name for k in mod.kernels] == ["default_function_kernel"] + [f"default_function_kernel_{k}"
                                                                          for k in (1, 2, 3)]
    assert [b.name for b in mod.intermediates] == ["M", "E", "S"]
    assert mod.intermediate_shapes() == [(6,), (6, 700), (6,)]
    cuda_sim.check(mod, [_rows(6, 700)], [np.empty((6, 700), "float32")], ref)


@pytest.mark.cuda_sim
@pytest.mark.parametrize("threads", [64, 100])
def test_softmax_in_one_block(threads):
    s, args, ref = cs.softmax(5, 300, threads, one_block=True)
    mod = codegen.build(s, args, target="cuda")
    assert len(mod.kernels) == 1 and not mod.intermediates
    cuda_sim.check(mod, [_rows(5, 300, 1)], [np.empty((5, 300), "float32")], ref)


@pytest.mark.cuda_sim
def test_layer_norm_three_kernels():
    s, args, ref = cs.layer_norm(6, 333, 128)
    mod = codegen.build(s, args, target="cuda")
    assert len(mod.kernels) == 3
    rng = np.random.default_rng(2)
    g, b = rng.standard_normal(333).astype("float32"), rng.standard_normal(333).astype("float32")
    cuda_sim.check(mod, [_rows(6, 333, 3), g, b], [np.empty((6, 333), "float32")], ref, rtol=1e-3, atol=1e-3)


@pytest.mark.cuda_sim
def test_symbolic_rows_size_the_intermediates_per_call():
    n = te.var("n")
    s, args, ref = cs.softmax(n, 200, 64)
    mod = codegen.build(s, args, target="cuda")
    assert mod.intermediate_shapes((9,)) == [(9,), (9, 200), (9,)]
    for rows in (3, 9):
        cuda_sim.check(mod, [_rows(rows, 200, rows)], [np.empty((rows, 200), "float32")], ref)


@pytest.mark.nvcc
def test_ptx_has_every_kernel():
    s, args, _ = cs.softmax(4, 256, 64)
    ptx = codegen.build(s, args, target="cuda").get_source("ptx")
    for name in ("kernel", "kernel_1", "kernel_2", "kernel_3"):
        assert f".visible .entry default_function_{name}(" in ptx


@pytest.mark.nvcc
def test_export_and_load_keep_the_kernels(tmp_path):
    s, args, _ = cs.softmax(4, 256, 64)
    mod = codegen.build(s, args, target="cuda")
    path = str(tmp_path / "softmax.cubin")
    mod.export_library(path)
    meta = json.load(open(path + ".json"))
    assert [k["name"] for k in meta["kernels"]] == [k.name for k in mod.kernels]
    assert meta["intermediates"][1] == {"name": "E", "dtype": "float32", "shape": [4, 256]}
    loaded = codegen.load_module(path)
    assert [k.name for k in loaded.kernels] == [k.name for k in mod.kernels]
    assert loaded.intermediate_shapes() == mod.intermediate_shapes()
    assert [loaded._grid((), k) for k in range(4)] == [mod._grid((), k) for k in range(4)]


def test_single_kernel_modules_are_unchanged():
    A = te.placeholder((256,), name="A")
    B = te.compute((256,), lambda i: A[i] + 1, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    mod = codegen.build(s, [A, B], target="cuda")
    assert [k.name for k in mod.kernels] == ["default_function"] and mod.intermediates == ()
    assert "default_function(" in mod.get_source()


def test_root_stage_not_bound_to_threads_is_refused():
    s, args, _ = cs.softmax(4, 256, 64, bind_exp=False)
    with pytest.raises(te.ScheduleError, match=r"stage E: no loop of it is bound to a GPU thread"):
        codegen.build(s, args, target="cuda")


def test_intermediate_computed_and_read_in_one_kernel_is_refused():
    """A global intermediate attached inside the kernel that reads it cannot be synchronized."""
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 2, name="B")
    C = te.compute((63,), lambda i: B[i] + B[i + 1], name="C")
    s = te.create_schedule(C.op)
    co, ci = s[C].split(C.op.axis[0], factor=16)
    s[C].bind(co, te.thread_axis("blockIdx.x"))
    s[C].bind(ci, te.thread_axis("threadIdx.x"))
    s[B].set_scope("global")
    s[B].compute_at(s[C], co)
    with pytest.raises(te.ScheduleError, match=r"stage B: an intermediate buffer of a CUDA kernel must be"):
        codegen.build(s, [A, C], target="cuda")
