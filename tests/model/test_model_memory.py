"""Memory a model run uses outside its inputs and outputs: a kernel's allocations too large for the
stack (a conv's padded input) are planned into the workspace as scratch buffers, so a run calls no
allocator; what stays on the heap (allocations inside parallel loops) is reported per kernel; stats()
and the artifact's manifest give a peak that counts both."""
from __future__ import annotations

import json

import numpy as np
import pytest

import codegen
import tensorir as te
from codegen.llvm.memory import STACK_LIMIT, heap_bytes, hoist_heap_allocations
from codegen.model.plan import WORKSPACE
from tensorir import graph

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import graph_models as gm

C, HW = 16, 96          # a padded 16 x 98 x 98 float32 input: 615 KB, past the stack limit


def conv_pair():
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    nd = helper.make_node
    nodes = [nd("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), nd("Relu", ["c1"], ["r1"]),
             nd("Conv", ["r1", "w2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), nd("Relu", ["c2"], ["y"])]
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.2).astype("float32"), n)
             for n, s in (("w1", (C, C, 3, 3)), ("w2", (2 * C, C, 3, 3)))]
    g = helper.make_graph(nodes, "conv_pair", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, HW, HW])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2 * C, HW, HW])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="tiletune-tests")


@pytest.fixture(scope="module")
def built():
    model = conv_pair()
    g, params = graph.from_onnx(model, {})
    return model, codegen.build_model(g, params=params)


def _check_outputs(m, model):
    x = np.random.default_rng().standard_normal((1, C, HW, HW)).astype("float32")
    m.workspace.view(np.uint8)[...] = 0xFF                      # NaN, scratch included
    want = gm.run_onnxruntime(model, {"x": x})[0]
    got = m(x=x)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_padded_inputs_are_planned_not_allocated(built):
    model, m = built
    assert "aligned_alloc" not in m._ir and "@free" not in m._ir          # the run allocates nothing
    convs = [s for s in m.steps if "conv2d" in s.kernel]
    padded = C * (HW + 2) * (HW + 2) * 4
    assert len(convs) == 2
    for s in convs:
        assert sum(a.nbytes for a in s.scratch) >= padded and all(a.kind == WORKSPACE for a in s.scratch)
        assert s.heap_bytes == 0
    _check_outputs(m, model)
    x = np.random.default_rng().standard_normal((1, C, HW, HW)).astype("float32")
    rep = m.profile(repeat=2, quiet=True, x=x)          # each kernel alone, its scratch passed too
    assert len(rep.kernels) == len(m.steps)
    m.workspace.view(np.uint8)[...] = 0xFF
    for i in range(len(m.steps)):                       # the steps one by one give the run's output
        m.kernel_function(i)()
    stepwise = m.get_output(0)
    assert np.isfinite(stepwise).all()
    np.testing.assert_array_equal(stepwise, m(x=x)[0])


def test_scratch_never_overlaps_a_live_buffer(built):
    _, m = built
    run = m.run_list
    last = {}
    for i, s in enumerate(run.steps):
        for a in s.args:
            if a.kind == WORKSPACE:
                last[a.offset] = i
    live = [(s.out.offset, s.out.nbytes, i, last.get(s.out.offset, i))
            for i, s in enumerate(run.steps) if s.out.kind == WORKSPACE]
    for i, s in enumerate(run.steps):
        for a in s.scratch:
            assert a.offset % 64 == 0 and a.offset + a.nbytes <= run.memory.peak
            for off, n, first, end in live:
                if first <= i <= end:
                    assert a.offset + a.nbytes <= off or off + n <= a.offset, f"step {i} scratch overlaps"


def test_stats_and_manifest_count_the_scratch(built, tmp_path):
    model, m = built
    mem = m.stats()["memory_plan"]
    scratch = mem["scratch_bytes_by_kernel"]
    assert sorted(scratch) == sorted(s.kernel for s in m.steps if "conv2d" in s.kernel)
    assert mem["workspace_bytes"] >= max(scratch.values()) and mem["heap_bytes"] == 0
    x_bytes, y_bytes = C * HW * HW * 4, 2 * C * HW * HW * 4
    assert mem["io_bytes"] == x_bytes + y_bytes
    assert mem["peak_bytes"] == mem["workspace_bytes"] + mem["io_bytes"] + mem["weights_bytes"]
    m.export_library(str(tmp_path / "a"))
    man = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert man["memory_plan"]["scratch_bytes_by_kernel"] == scratch
    assert man["memory_plan"]["peak_bytes"] == mem["peak_bytes"]
    loaded = codegen.load_model(str(tmp_path / "a"))
    assert [s.scratch for s in loaded.steps] == [s.scratch for s in m.steps]
    _check_outputs(loaded, model)


def _row_kernel(rows: int, cols: int, parallel: bool):
    """B = 2 A computed per row of C = B + 1; with ``parallel``, the row loop is parallel and B's row
    is allocated inside it."""
    A = te.placeholder((rows, cols), name="A")
    B = te.compute((rows, cols), lambda i, j: A[i, j] * 2.0, name="B")
    Cc = te.compute((rows, cols), lambda i, j: B[i, j] + 1.0, name="C")
    s = te.create_schedule(Cc.op)
    if parallel:
        s[Cc].parallel(Cc.op.axis[0])
        s[B].compute_at(s[Cc], Cc.op.axis[0])
    return te.lower(s, [A, Cc], name="rows"), A, Cc


def test_hoisting_keeps_parallel_allocations_and_counts_them():
    cols = STACK_LIMIT // 4 * 2                                  # one row of B: twice the stack limit
    func, _, _ = _row_kernel(3, cols, parallel=False)
    hoisted, bufs = hoist_heap_allocations(func)
    assert [b.name for b in bufs] == ["B"] and len(hoisted.buffers) == 3 and heap_bytes(hoisted) == 0
    assert heap_bytes(func) == 3 * cols * 4
    func, _, _ = _row_kernel(3, cols, parallel=True)
    hoisted, bufs = hoist_heap_allocations(func)
    assert bufs == [] and hoisted is func and heap_bytes(func) == cols * 4   # one row per thread
    small, _, _ = _row_kernel(3, 16, parallel=False)
    assert hoist_heap_allocations(small) == (small, []) and heap_bytes(small) == 0


def test_hoisted_kernel_runs_over_caller_scratch():
    rows, cols = 3, STACK_LIMIT // 4 * 2
    func, _, _ = _row_kernel(rows, cols, parallel=False)
    hoisted, (b,) = hoist_heap_allocations(func)
    f = codegen.build(hoisted, target="llvm")
    a = np.random.default_rng().standard_normal((rows, cols)).astype("float32")
    c = np.full((rows, cols), np.nan, "float32")
    scratch = np.full(rows * cols, np.nan, "float32")
    f(a, c, scratch.reshape([int(x) for x in b.shape]))
    np.testing.assert_array_equal(c, a * 2 + 1)


def test_an_older_graph_json_leaves_the_heap_unknown(built):
    """A graph.json written before heap bytes were counted: the heap and the peak are unknown, not 0."""
    from codegen.model.plan import RunList
    from codegen.runtime.profile import memory
    _, m = built
    d = m.run_list.to_json()
    for s in d["steps"]:
        del s["heap_bytes"], s["scratch"]
    mem = memory(RunList.from_json(d))
    assert mem["heap_bytes"] is None and mem["peak_bytes"] is None
    assert memory(m.run_list)["heap_bytes"] == 0 and memory(m.run_list)["peak_bytes"] > 0


def test_equal_constants_are_stored_once():
    """A weight packed for each of its uses (a recurrent cell unrolled over time) and an initializer the
    exporter duplicated share one place in the weights blob; a weight differing in one unsampled
    element keeps its own (sharing it would change the answer)."""
    from onnx import TensorProto, helper, numpy_helper
    n = 64
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((n, n)) * 0.2).astype("float32")
    near = w.copy()
    near[0, 1] += 1.0                                   # bytes 4..7: between the sampled bytes
    nd = helper.make_node
    nodes = [nd("Gemm", ["x", "w"], ["a"], transB=1), nd("Tanh", ["a"], ["b"]),
             nd("Gemm", ["b", "w"], ["c"], transB=1), nd("Tanh", ["c"], ["d"]),
             nd("Gemm", ["d", "w_copy"], ["e"], transB=1), nd("Tanh", ["e"], ["f"]),
             nd("Gemm", ["f", "w_near"], ["y"], transB=1)]
    inits = [numpy_helper.from_array(v, k) for k, v in (("w", w), ("w_copy", w.copy()), ("w_near", near))]
    g = helper.make_graph(nodes, "shared", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="tiletune-tests")
    gr, params = graph.from_onnx(model, {})
    m = codegen.build_model(gr, params=params)
    assert 2 * w.nbytes <= m.run_list.weights_bytes < 3 * w.nbytes      # w (packed) and w_near
    offsets = {a.offset for s in m.steps for a in s.args if a.kind == "weights"}
    assert len(offsets) == 2
    x = rng.standard_normal((1, n)).astype("float32")
    m.workspace.view(np.uint8)[...] = 0xFF
    want = gm.run_onnxruntime(model, {"x": x})[0]
    np.testing.assert_allclose(m(x=x)[0], want, rtol=1e-4, atol=1e-5 * np.abs(want).max())
