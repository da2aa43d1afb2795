"""The classic TVM GPU GEMM schedule on sizes its tiles do not divide, without a GPU.

64x64 shared-memory tiles of A and B per block, 16x16 threads of 4x4 results each, k slices loaded
cooperatively (the shared stage's axes fused and split over threadIdx.y / threadIdx.x), results in a
local cache.  At 1000 (or 130) the last tiles are partial: the cooperative fetch loops run over
``min(64, n - 64 * i.outer) * min(16, n - 16 * k.outer)`` elements, a product isl used to leave
unbounded ("unbounded optimum" from compute_flow).  Built to CUDA C and PTX here, run on the CPU by
tests/cuda_sim.py against numpy with NaN-poisoned outputs.
"""
from __future__ import annotations


import numpy as np
import pytest

import codegen
import cuda_sim
import tensorir as te


def tutorial_gemm(n, tile=64, threads=16, k_tile=16):
    """C = A @ B (n x n, ``n`` an int or a te.var) with TVM's GPU GEMM tutorial schedule."""
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA, BB = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    CL = s.cache_write(C, "local")
    by, yi = s[C].split(C.op.axis[0], factor=tile)
    bx, xi = s[C].split(C.op.axis[1], factor=tile)
    ty, yi = s[C].split(yi, nparts=threads)
    tx, xi = s[C].split(xi, nparts=threads)
    s[C].reorder(by, bx, ty, tx, yi, xi)
    for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        s[C].bind(ax, te.thread_axis(tag))
    s[CL].compute_at(s[C], tx)
    ko, ki = s[CL].split(s[CL].op.reduce_axis[0], factor=k_tile)
    s[CL].reorder(ko, ki, *s[CL].op.axis)
    for T in (AA, BB):  # cooperative fetch
        s[T].compute_at(s[CL], ko)
        fused = s[T].fuse(*s[T].op.axis)
        fused, itx = s[T].split(fused, factor=threads)
        _, ity = s[T].split(fused, factor=threads)
        s[T].bind(ity, te.thread_axis("threadIdx.y"))
        s[T].bind(itx, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def run_sim(mod, n, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    cuda_sim.check(mod, [a, b], [c], lambda x, y: x @ y, rtol=1e-4, atol=1e-3)


def test_1000_builds_to_cuda_with_shared_tiles_and_barriers():
    mod = codegen.build(*tutorial_gemm(1000), target="cuda", name="gemm1000")
    src = mod.get_source("cuda")
    assert "__shared__" in src and "A_shared" in src and "B_shared" in src and "__syncthreads()" in src
    assert "min(" in src  # partial tiles are guarded
    assert mod.launch.block == (16, 16, 1) and mod._grid(()) == (16, 16, 1)


@pytest.mark.nvcc
def test_1000_compiles_to_ptx():
    mod = codegen.build(*tutorial_gemm(1000), target="cuda", name="gemm1000")
    ptx = mod.get_source("ptx")
    assert ".entry gemm1000" in ptx and "bar.sync" in ptx


def test_analysis_proves_the_partial_tiles():
    """The fetch of the A tile (divided by the k slice's extent, a tile extent of few values) is
    proven in bounds, not just assumed: no unverified A.shared access remains."""
    s, args = tutorial_gemm(130)
    unverified = {(acc.buffer.name, acc.is_write) for _, acc in te.analyze(s, args).unverified}
    assert ("A.shared", True) not in unverified and ("A", False) not in unverified, unverified


@pytest.mark.parametrize("n", [130, 200, 1000])
def test_shared_tiles_are_one_block_tile(n):
    """The shared buffers hold one 64x16 tile whatever the size (not the whole matrix at 130)."""
    src = codegen.build(*tutorial_gemm(n), target="cuda").get_source("cuda")
    assert "float A_shared[1024]" in src and "float B_shared[1024]" in src, src[:800]


@pytest.mark.cuda_sim
@pytest.mark.parametrize("n,k_tile", [(128, 16), (130, 16), (200, 16), (130, 8)])
def test_runs_correctly_divisible_or_not(n, k_tile):
    run_sim(codegen.build(*tutorial_gemm(n, k_tile=k_tile), target="cuda"), n)


@pytest.mark.cuda_sim
def test_symbolic_size_runs_at_several_sizes():
    n = te.var("n")
    mod = codegen.build(*tutorial_gemm(n, k_tile=8), target="cuda")
    assert "int n)" in mod.get_source()
    for size, seed in ((130, 1), (64, 2), (75, 3)):
        run_sim(mod, size, seed)


@pytest.mark.cuda_sim
def test_poisoned_output_is_fully_written():
    """The check fails when the kernel leaves an element unwritten (a test that can fail)."""
    mod = codegen.build(*tutorial_gemm(130), target="cuda")
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((130, 130), dtype=np.float32), rng.standard_normal((130, 130), dtype=np.float32)
    c = np.full((130, 130), np.nan, np.float32)
    cuda_sim.run(mod, a, b, c)
    assert not np.isnan(c).any()
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(c, a @ b + 1, rtol=1e-4, atol=1e-3)
