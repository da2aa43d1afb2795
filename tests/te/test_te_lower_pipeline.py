"""The lowering pipelines (``tensorir/lower/pipeline.py``) and the loop-IR verifier (``verify.py``)."""
from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest

import codegen
import tensorir as te
from codegen.model.cuda import CUDA_COMPUTES
from tensorir import graph
from tensorir.expr import BufferLoad, IntImm, const
from tensorir.graph import Const, TensorType, Var, call
from tensorir.graph.lower_te import lower_kernel
from tensorir.graph.schedules import kernel_schedule
from tensorir.lower import loop_nest
from tensorir.lower.gpu import GPULimits
from tensorir.lower.pipeline import CPU_PASSES, gpu_passes, lower_gpu, on_body, run_passes
from tensorir.lower.verify import ENV, LoweringError, verify_func
from tensorir.stmt import Allocate, BufferStore
from tensorir.visitor import Mutator, collect


def _add_one():
    n = te.var("n")
    A = te.placeholder((n, 8), name="A")
    B = te.compute((n, 8), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    return s, [A, B]


def _gemm_cuda(k_unroll: bool = False):
    A, B = te.placeholder((64, 64), name="A"), te.placeholder((64, 64), name="B")
    k = te.reduce_axis((0, 64), name="k")
    C = te.compute((64, 64), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AS = s.cache_read(A, "shared", [C])
    i, j = s[C].op.axis
    io, ii = s[C].split(i, 16)
    jo, ji = s[C].split(j, 16)
    s[C].reorder(io, jo, ii, ji)
    s[C].bind(io, te.thread_axis("blockIdx.y"))
    s[C].bind(jo, te.thread_axis("blockIdx.x"))
    s[C].bind(ii, te.thread_axis("threadIdx.y"))
    s[C].bind(ji, te.thread_axis("threadIdx.x"))
    ko, ki = s[C].split(s[C].op.reduce_axis[0], 16)
    koo, ko = s[C].split(ko, 2)
    s[AS].compute_at(s[C], ko)
    ax0, ax1 = s[AS].op.axis     # the 16x16 tile: one element per thread
    s[AS].bind(ax0, te.thread_axis("threadIdx.y"))
    s[AS].bind(ax1, te.thread_axis("threadIdx.x"))
    if k_unroll:   # the loops inside koo unrolled: ko's two copies of its body allocate the tile
        s[C].pragma(koo, "auto_unroll_max_step", 4096)
        s[C].pragma(koo, "unroll_explicit", True)
    return s, [A, B, C]


def _planting(name: str, rewrite) -> list:
    """The CPU passes with a pass ``name`` that applies ``rewrite`` to the first store, after ``flatten``."""
    class Plant(Mutator):
        done = False

        def visit_BufferStore(self, st: BufferStore):
            if self.done:
                return st
            self.done = True
            return rewrite(st)
    return [CPU_PASSES[0], (name, on_body(lambda body: Plant().visit(body)))] + CPU_PASSES[1:]


PLANTED = {
    "unbound variable": (lambda st: replace(st, value=st.value + te.var("ghost", "float32")), "variable ghost"),
    "index count": (lambda st: replace(st, indices=st.indices + (const(0),)), "accessed with 2 indices"),
    "store dtype": (lambda st: replace(st, value=te.const(1, "int32")), "int32 is stored into buffer B"),
    "load index count": (lambda st: replace(st, value=BufferLoad("float32", st.value.a.buffer, ())),
                         "accessed with 0 indices"),
}


@pytest.mark.parametrize("what", sorted(PLANTED))
def test_verifier_names_the_pass_that_planted_bad_ir(what):
    rewrite, problem = PLANTED[what]
    func = te.lower(*_add_one(), expand=False)
    passes = _planting("plant_bug", rewrite)
    assert run_passes(func, CPU_PASSES[1:], flat=True, verify=True)     # the IR was well formed
    with pytest.raises(LoweringError, match=r"pass 'plant_bug'.*" + problem):
        run_passes(te.lower(*_add_one(), expand=False, name="f"), passes, flat=False, verify=True)
    run_passes(func, passes[1:], flat=True, verify=False)             # unchecked: the bug passes silently


def test_verifier_checks_scopes_allocations_and_leftovers():
    func = te.lower(*_gemm_cuda(), expand=False)
    alloc = collect(func.body, Allocate)[0]
    with pytest.raises(LoweringError, match="pass 'drop_alloc'.*A.shared is neither an argument nor allocated"):
        verify_func(replace(func, body=alloc.body), "drop_alloc", flat=True)
    empty = replace(alloc.buffer, shape=(IntImm("int32", 0),))
    with pytest.raises(LoweringError, match="allocated with extent 0"):
        verify_func(replace(func, body=Allocate(empty, func.body)), "zero", flat=True)
    with pytest.raises(LoweringError, match="bound again inside its own scope"):
        loop = collect(func.body, lambda x: type(x).__name__ == "For")[0]
        verify_func(replace(func, body=replace(loop, body=loop)), "rebind", flat=True)


def test_indices_counted_per_dimension_before_flatten_one_after():
    nest = loop_nest(*_add_one())
    verify_func(nest, "loop_nest", flat=False)
    with pytest.raises(LoweringError, match="buffer B .2-d. is accessed with 2 indices, expected 1 .flattened."):
        verify_func(nest, "loop_nest", flat=True)
    flat = run_passes(nest, CPU_PASSES[:1], verify=True)
    with pytest.raises(LoweringError, match="pass 'flatten'.*accessed with 1 index, expected 2"):
        verify_func(flat, "flatten", flat=False)


def test_pipelines_list_their_passes():
    assert [n for n, _ in CPU_PASSES] == ["flatten", "partition_loops", "vectorize_loops", "unroll_loops", "simplify"]
    assert [n for n, _ in gpu_passes(GPULimits())] == [
        "vectorize_loops", "verify_bindings", "inject_virtual_threads", "auto_unroll", "simplify", "hoist_shared",
        "insert_barriers", "inject_double_buffer", "expand_allreduce", "hoist_shared"]


def test_tests_verify_between_passes():
    assert os.environ.get(ENV) == "1"      # tests/conftest.py turns the verifier on for the whole suite


def test_unrolled_shared_tile_is_allocated_and_counted_once():
    s, args = _gemm_cuda(k_unroll=True)
    kernel, launch = lower_gpu(te.lower(s, args, expand=False), GPULimits(), verify=True)
    shared = [a.buffer for a in collect(kernel.body, Allocate) if a.buffer.scope == "shared"]
    assert [b.name for b in shared] == ["A.shared"]
    assert launch.shared_bytes == 16 * 16 * 4    # one float tile, not one per unrolled iteration (2)


def test_model_kernels_and_codegen_build_print_the_same_cuda():
    """The model path (``build_model``) and ``codegen.build(s, args, "cuda")`` lower through one pipeline."""
    rng = np.random.default_rng()
    w, b = rng.standard_normal((96, 64)).astype("float32"), rng.standard_normal(96).astype("float32")
    wc = rng.standard_normal((8, 4, 3, 3)).astype("float32")
    x, img = Var("x", TensorType((128, 64), "float32")), Var("img", TensorType((1, 4, 16, 16), "float32"))
    y = call("nn.relu", call("nn.bias_add", call("nn.dense", x, Const(w)), Const(b), axis=1))
    z = call("nn.softmax", call("nn.conv2d", img, Const(wc), padding=[1, 1, 1, 1]), axis=1)
    g = graph.Graph((x, img), (y, z))
    target = "cuda -arch=sm_80"
    m = codegen.build_model(g, target=target)
    kernels = [n.op for n in graph.optimize(g, target=target).nodes]
    assert len(kernels) >= 3 and {k.name for k in kernels} <= set(m.kernels)
    for k in kernels:
        kt = lower_kernel(k, CUDA_COMPUTES)
        built = codegen.build(kernel_schedule(kt, "cuda")[0], kt.args, target=target, name=k.name)
        assert built.get_source() == m.kernels[k.name].source, k.name


@pytest.mark.parametrize("m, n", [(10, 37), (8, 32), (10, "n")])
def test_split_tails_are_partitioned_into_full_tiles(m, n):
    """A tile computed per output tile (compute_at) of a split that does not divide: the body of the loop
    its remaining extent depends on is versioned, ``if (e >= 16)`` a constant-extent copy (vectorized,
    unrolled, the write-back guard gone), else the last tile's: of constant extent too where the axis is
    (37 columns in tiles of 16 end in one of 5: no ``min`` left), else the loops of ``min`` extent (a
    symbolic axis); no version where splits divide.  Every version computes numpy's product on
    NaN-poisoned outputs."""
    cols = te.var("n") if isinstance(n, str) else n
    A = te.placeholder((m, 8), name="A")
    B = te.placeholder((8, cols), name="B")
    k = te.reduce_axis((0, 8), name="k")
    C = te.compute((m, cols), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((m, cols), lambda i, j: C[i, j] * 2.0, name="D")
    s = te.create_schedule(D.op)
    io, ii = s[D].split(D.op.axis[0], factor=4)
    jo, ji = s[D].split(D.op.axis[1], factor=16)
    s[D].reorder(io, jo, ii, ji)
    s[C].compute_at(s[D], jo)
    ci, cj = s[C].op.axis
    s[C].reorder(*s[C].op.reduce_axis, ci, cj)
    s[C].unroll(ci)
    s[C].vectorize(cj)
    s[D].vectorize(ji)
    text = str(te.lower(s, [A, B, D]))
    n = 37 if isinstance(n, str) else n
    assert (" >= 16) {" in text) == bool(n % 16) and (" >= 4) {" in text) == bool(m % 4)
    if m % 4 or n % 16:
        full = text.split(" else {")[0]
        assert "min(" not in full and "C[ramp(48, 1, 16)] = C[ramp(48, 1, 16)] + " in full
        assert ("min(" in text) == isinstance(cols, te.Var)
        if not isinstance(cols, te.Var):     # the last tile: 2 rows x 5 columns, unrolled
            assert "C[ramp(16, 1, 4)] = C[ramp(16, 1, 4)] + " in text and "C[20] = C[20] + " in text
    else:
        assert "min(" not in text and " else {" not in text
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((m, 8)).astype("float32"), rng.standard_normal((8, n)).astype("float32"))
    d = np.full((m, n), np.nan, "float32")
    codegen.build(s, [A, B, D], target="llvm")(a, b, d)
    np.testing.assert_allclose(d, 2 * (a @ b), rtol=1e-5, atol=1e-5 * np.abs(a @ b).max())
