"""``codegen.build_model(g, target="cuda")`` without a GPU: the default GPU schedules by pattern, one CUDA
source compiled once by nvcc to PTX and a cubin, and the generated kernels run in order on the CPU by
``tests/cuda_sim.py`` over the planned buffers (workspace and outputs poisoned with NaN first) against
onnxruntime; the artifact (cubin, graph, weights, manifest) and the refusals.  The same models on a
real GPU: ``tests/model/test_model_cuda_gpu.py``."""
from __future__ import annotations

import json
import os
import re

import cuda_sim
import numpy as np
import pytest

import codegen
from codegen.model.plan import INPUT, OUTPUT, WEIGHTS, WORKSPACE
from tensorir import graph
from tensorir.graph import Const, GraphError, TensorType, Var, call, testing
from tensorir.graph.schedules import cuda_conv, cuda_rows, schedule_entry

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import graph_models as gm


def simulate(m, inputs: dict) -> list[np.ndarray]:
    """Run every step's kernel of CUDA model ``m`` in order on the CPU (cuda_sim) over host copies of the
    planned buffers: the workspace and the outputs start as NaN."""
    run = m.run_list
    ins = [np.ascontiguousarray(inputs[n]) for n, _, _ in run.inputs]
    outs = [np.full(s, np.nan, d) for _, d, s in run.outputs]
    workspace = np.full(max(run.memory.peak, 4) // 4, np.nan, np.float32).view(np.uint8)
    weights = m.weights.copy()

    def view(loc):
        if loc.kind == INPUT:
            return ins[loc.index]
        if loc.kind == OUTPUT:
            return outs[loc.index]
        base = workspace if loc.kind == WORKSPACE else weights
        assert loc.kind in (WORKSPACE, WEIGHTS)
        return base[loc.offset:loc.offset + loc.nbytes].view(loc.dtype).reshape(loc.shape)
    for step in run.steps:
        mod = m.kernel_module(step.symbol)     # scratch (a scan's state): a flat workspace place
        cuda_sim.run(mod, *[view(a).reshape(arg.shape) for a, arg in zip(step.call_args, mod.signature.args)])
    for dst, src in run.copies:
        view(dst)[...] = view(src)
    assert all(a.tobytes() == np.ascontiguousarray(inputs[n]).tobytes() for a, (n, _, _) in zip(ins, run.inputs))
    return outs


def _check(model, shapes, feeds, rtol=1e-4):
    g, params = graph.from_onnx(model, shapes)
    m = codegen.build_model(g, target="cuda", params=params)
    want = gm.run_onnxruntime(model, feeds)
    got = simulate(m, feeds)
    for a, w in zip(got, want):
        assert a.shape == w.shape and np.isfinite(a).all()
        np.testing.assert_allclose(a, w, rtol=rtol, atol=rtol * np.abs(w).max())
    return m


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_small_cnn_source_ptx_and_simulated_run():
    model = gm.small_cnn()
    x = np.random.default_rng().standard_normal((2, 3, 32, 32)).astype("float32")
    m = _check(model, {"N": 2}, {"x": x})
    src = m.get_source("cuda")
    assert src.count('extern "C" __global__') == len(m.kernels) and "__shared__" in src
    ptx = m.get_source("ptx")
    assert all(f".entry {s}(" in ptx for s in m.kernels)
    assert m.cubin[:4] == b"\x7fELF"
    rules = m.stats()["schedules"]
    assert rules["fused_nn_conv2d_nn_bias_add_nn_relu"] == "schedule_conv2d_cuda"
    assert rules["fused_nn_softmax"] == "schedule_softmax_norm"
    assert not any("NCHW" in s.kernel or "contrib" in s.kernel for s in m.steps)    # no CPU layouts


@pytest.mark.nvcc
@pytest.mark.cuda_sim
@pytest.mark.parametrize("seq", [7, 20])     # 20: the shared-memory GEMM with tails (7: per element)
def test_transformer_block_simulated(seq):
    model = gm.transformer_block()
    x = np.random.default_rng().standard_normal((2, seq, 32)).astype("float32")
    m = _check(model, {"batch": 2, "seq": seq}, {"x": x})
    if seq == 20:
        assert "_shared" in m.kernels["fused_nn_batch_matmul"].source


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_resnet18_and_bert_layer_small_simulated():
    """Small variants of the benchmark models: 7x7 / 3x3 / 1x1 convs with stride 2, max pool, global
    pool, dense; BERT's projections, batch matmuls, softmax with a mask, layer norms, GELU."""
    model = testing.resnet18(image=32, width=16, classes=20)
    _check(model, {}, testing.resnet18_inputs(image=32, seed=np.random.default_rng().integers(1 << 30)))
    model = testing.bert_layer(seq=16, hidden=64, heads=4, ffn=128)
    _check(model, {}, testing.bert_inputs(seq=16, hidden=64, seed=np.random.default_rng().integers(1 << 30)))


@pytest.mark.nvcc
@pytest.mark.cuda_sim
@pytest.mark.parametrize("rows,cols", [(128, 192), (100, 72)])   # tiles that divide (virtual threads), tails
def test_gemm_kernels_shared_tiles(rows, cols):
    rng = np.random.default_rng()
    w, b = rng.standard_normal((cols, 64)).astype("float32"), rng.standard_normal(cols).astype("float32")
    x, a, c = (Var(n, TensorType(s, "float32")) for n, s in (("x", (rows, 64)), ("a", (3, rows, 40)), ("c", (3, 40, 50))))
    y = call("nn.relu", call("nn.bias_add", call("nn.dense", x, Const(w)), Const(b), axis=1))
    z = call("nn.batch_matmul", a, c, transpose_a=False, transpose_b=False)
    m = codegen.build_model(graph.Graph((x, a, c), (y, z)), target="cuda")
    assert set(m.stats()["schedules"].values()) == {"schedule_gemm"}
    dense = m.kernels["fused_nn_dense_nn_bias_add_nn_relu"]
    assert dense.block[0] * dense.block[1] >= 64 and "p1_shared" in dense.source and re.search(r"float T_matmul_NT\w*\[16\];", dense.source)
    assert ("float4" in dense.source) == (rows == 128)                # vector loads where the tiles divide
    feeds = {n: rng.standard_normal(v.type.shape).astype("float32") for n, v in (("x", x), ("a", a), ("c", c))}
    got = simulate(m, feeds)
    np.testing.assert_allclose(got[0], np.maximum(feeds["x"] @ w.T + b, 0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[1], feeds["a"] @ feeds["c"], rtol=1e-4, atol=1e-4)


def test_cuda_graph_keeps_nchw_and_plain_weights():
    g, params = graph.from_onnx(gm.small_cnn(), {"N": 1})
    cpu = graph.optimize(g, params)
    gpu = graph.optimize(g, params, target="cuda")
    assert "alter_op_layout" in cpu.passes and "alter_op_layout" not in gpu.passes
    ops = {n.op for k in gpu.nodes for n in k.op.body.nodes}
    assert "nn.conv2d" in ops and not any("NCHWc" in o or "layout_transform" in o for o in ops)


def test_rules_registered_by_pattern():
    for op in ("nn.conv2d", "nn.dense", "nn.batch_matmul", "nn.softmax", "nn.layer_norm", "nn.max_pool2d", "sum"):
        assert schedule_entry(op, "cuda").anchor_ops != (None,)


def test_fallback_ops_refused_naming_them():
    """An ``onnx.fallback`` node (CenterCropPad has no converter) is refused for cuda, named and counted."""
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node("CenterCropPad", ["x", "s"], ["a"], name="crop"), helper.make_node("Relu", ["a"], ["y"])]
    model = helper.make_model(helper.make_graph(
        nodes, "crop", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
        [numpy_helper.from_array(np.array([4, 4], np.int64), "s")]), opset_imports=[helper.make_opsetid("", 18)])
    g, params = graph.from_onnx(model)
    assert graph.unsupported_ops(g)
    with pytest.raises(GraphError, match=r"no CUDA kernel: CenterCropPad \(x1\).*no reference fallback"):
        codegen.build_model(g, target="cuda", params=params)
    with pytest.raises(ValueError, match="target cuda runs no reference fallback"):
        codegen.build_model(g, target="cuda", params=params, fallback="reference")


@pytest.mark.nvcc
def test_export_and_load_without_compiler(tmp_path, monkeypatch):
    model = gm.small_cnn()
    g, params = graph.from_onnx(model, {"N": 1})
    m = codegen.build_model(g, target="cuda", params=params)
    m.export_library(tmp_path / "art")
    names = sorted(os.listdir(tmp_path / "art"))
    assert names == ["graph.json", "manifest.json", "model.cu", "model.cubin", "weights.npy"]
    man = json.loads((tmp_path / "art" / "manifest.json").read_text())
    assert man["arch"] == m.arch and "nvcc" in man and "gpu" in man and "driver" in man["gpu"]
    assert man["kernels"][0]["schedule"]["kind"] == "default"
    monkeypatch.setenv("TILETUNE_NVCC", "/nonexistent/nvcc")       # loading compiles nothing
    loaded = codegen.load_model(tmp_path / "art")
    assert type(loaded).__name__ == "CUDAModelModule" and loaded.cubin == m.cubin
    assert [s.symbol for s in loaded.steps] == [s.symbol for s in m.steps]
    x = np.random.default_rng().standard_normal((1, 3, 32, 32)).astype("float32")
    if cuda_sim.available():
        got = simulate(loaded, {"x": x})[0]
        np.testing.assert_allclose(got, gm.run_onnxruntime(model, {"x": x})[0], rtol=1e-4, atol=1e-5)
    with open(tmp_path / "art" / "model.cubin", "ab") as f:
        f.write(b"x")
    with pytest.raises(codegen.ArtifactError, match="model.cubin is corrupt"):
        codegen.load_model(tmp_path / "art")


@pytest.mark.nvcc
def test_cli_compile_for_cuda(tmp_path, capsys):
    from autotune.cli import main
    path = tmp_path / "cnn.onnx"
    onnx.save(gm.small_cnn(), str(path))
    assert main(["compile", str(path), "--shape", "x=1,3,32,32", "--target", "cuda", "-o", str(tmp_path / "out")]) == 0
    assert "target    cuda -arch=" in capsys.readouterr().out
    assert type(codegen.load_model(tmp_path / "out")).__name__ == "CUDAModelModule"


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_conv_batches_strides_and_tile_size():
    """Batch 4, 1x1 stride 2 and 3x3 pad 1 convs vs numpy; at batch 32 the shared input tile stays one
    block's window (the batch is its own grid axis, not fused into a relaxed block index)."""
    rng = np.random.default_rng()
    x = Var("x", TensorType((4, 16, 14, 14), "float32"))
    w1, w3 = rng.standard_normal((64, 16, 1, 1)).astype("float32"), rng.standard_normal((8, 16, 3, 3)).astype("float32")
    y1 = call("nn.conv2d", x, Const(w1), strides=[2, 2], padding=[0, 0, 0, 0])
    y3 = call("nn.conv2d", x, Const(w3), strides=[1, 1], padding=[1, 1, 1, 1])
    m = codegen.build_model(graph.Graph((x,), (y1, y3)), target="cuda")
    xs = rng.standard_normal((4, 16, 14, 14)).astype("float32")
    got = simulate(m, {"x": xs})
    np.testing.assert_allclose(got[0], np.einsum("nchw,fc->nfhw", xs[:, :, ::2, ::2], w1[:, :, 0, 0]), rtol=1e-4, atol=1e-4)
    pad = np.pad(xs, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(pad, (3, 3), axis=(2, 3))
    np.testing.assert_allclose(got[1], np.einsum("ncyxhw,fchw->nfyx", win, w3), rtol=1e-4, atol=1e-4)
    big = Var("x", TensorType((32, 16, 14, 14), "float32"))
    m = codegen.build_model(graph.Graph((big,), (call("nn.conv2d", big, Const(rng.standard_normal(
        (512, 16, 1, 1)).astype("float32")), strides=[2, 2], padding=[0, 0, 0, 0]),)), target="cuda")
    assert max(k.shared_bytes for k in m.kernels.values()) <= cuda_conv.CONV_SHARED_BUDGET   # its images only


@pytest.mark.nvcc
@pytest.mark.cuda_sim
@pytest.mark.parametrize("rows,n", [(3, 64), (5, 96), (2, 7), (2, 300)])  # a warp per row, per thread, a block
def test_softmax_and_layer_norm_reduce_rows_across_threads(rows, n):
    rng = np.random.default_rng()
    x = Var("x", TensorType((2, rows, n), "float32"))
    gamma, beta = rng.uniform(0.5, 1.5, n).astype("float32"), rng.standard_normal(n).astype("float32")
    y = call("nn.layer_norm", x, Const(gamma), Const(beta), axis=-1, epsilon=1e-5)
    z = call("nn.softmax", x, axis=-1)
    m = codegen.build_model(graph.Graph((x,), (y, z)), target="cuda")
    norm = m.kernels["fused_nn_layer_norm"]
    if n < cuda_rows.ALLREDUCE_MIN:        # rows shorter than a warp: one thread per row
        assert norm.block == (min(2 * rows, 64), 1, 1) and "__shfl_xor_sync" not in norm.source
    else:                           # a warp per row (several rows per block), or a block per long row
        assert norm.block == ((32, max(d for d in (1, 2, 3, 4) if 2 * rows % d == 0), 1) if n <= cuda_rows.WARP_ROW_MAX
                              else (160, 1, 1)) and "__shfl_xor_sync" in norm.source
        assert (norm.shared_bytes > 0) == (n > cuda_rows.WARP_ROW_MAX)     # shared memory only between warps
    xs = rng.standard_normal((2, rows, n)).astype("float32") * 3
    got = simulate(m, {"x": xs})
    mu, var = xs.mean(-1, keepdims=True), xs.var(-1, keepdims=True)
    np.testing.assert_allclose(got[0], (xs - mu) / np.sqrt(var + 1e-5) * gamma + beta, rtol=1e-4, atol=1e-4)
    e = np.exp(xs - xs.max(-1, keepdims=True))
    np.testing.assert_allclose(got[1], e / e.sum(-1, keepdims=True), rtol=1e-4, atol=1e-6)
