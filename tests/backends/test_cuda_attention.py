"""``nn.attention`` on CUDA (``graph/schedules/attention.py``, ``cuda_attention.py``): the tensor-core
kernel (16-bit) and the CUDA-core one run on the CPU by tests/cuda_sim.py over NaN-poisoned outputs
against the float64 numpy reference (a query tail, 1 and 12 heads, masks, both key layouts, 1 and 4
row warps, 1, 2 and 4 column warps), the isl checks, one kernel where a 16-bit model had three and the named refusals, ptxas, and
the GPU."""
import sys
import warnings

import ml_dtypes  # noqa: F401
import numpy as np
import pytest

import codegen
import cuda_sim
import tensorir as te
from tensorir import graph
from tensorir.graph import testing
from tensorir.graph.lower_te import lower_kernel
from tensorir.graph.schedules import cuda_attention, kernel_schedule

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0] + "/tests/graph")
from test_attention import REF, _attention_graph, _feeds


def _kernel(g, target="cuda -arch=sm_80"):
    og = graph.optimize(g, target=target)
    (call,) = [n for n in og.nodes if hasattr(n.op, "body")]
    kt = lower_kernel(call.op)
    s, origin = kernel_schedule(kt, target)
    assert origin["rule"] == "attention_cuda"
    return s, kt


def _simulate(args, seed=5):
    """The kernel of ``nn.attention(*args)`` run by the simulator (a NaN in q[0, 1]), against numpy."""
    n, s, t, d, dv, heads, mask, scale, transpose_k, dtype = args
    g = _attention_graph(*args)
    sch, kt = _kernel(g)
    mod = codegen.build(sch, kt.args, target="cuda -arch=sm_80")
    feeds = _feeds(g, seed)
    feeds["q"][0, 1, 0] = np.nan                  # a NaN score: that row NaN, no other
    out = np.full((n, s, dv), np.nan, dtype)
    cuda_sim.run(mod, *feeds.values(), out)
    want = REF(*feeds.values(), scale=scale, transpose_k=transpose_k, heads=heads).astype(np.float64)
    assert np.isnan(out[0, 1]).all()
    got = out.astype(np.float64)
    got[0, 1] = want[0, 1] = 0
    eps = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 1e-6}[dtype]
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * eps * np.abs(want).max())
    return mod.get_source("cuda")


CASES = [  # n, s, t, d, dv, heads, mask, scale, transpose_k, dtype
    (4, 37, 29, 8, 12, 2, (2, 1, 1, 29), 0.5, False, "float32"),
    (12, 70, 16, 8, 8, 12, (1, 12, 70, 16), 0.125, True, "float32"),     # 70 rows: a 64-row tile and a tail
    (2, 9, 24, 16, 8, 1, None, 0.25, False, "float16"),
]


@pytest.mark.cuda_sim
@pytest.mark.parametrize("n,s,t,d,dv,heads,mask,scale,transpose_k,dtype", CASES)
def test_attention_simulated(n, s, t, d, dv, heads, mask, scale, transpose_k, dtype):
    """The CUDA-core kernel (float32; 16-bit sizes the tensor cores refuse)."""
    src = _simulate((n, s, t, d, dv, heads, mask, scale, transpose_k, dtype))
    assert "tt_mma(" not in src


TC_CASES = [  # n, s, t, d, dv, heads, mask, scale, transpose_k, dtype, warps
    (4, 32, 48, 32, 16, 2, (2, 1, 1, 48), 0.125, True, "float16", 1),      # score columns: 64 + a 16-column rest
    (2, 16, 32, 16, 32, 1, (1, 1, 16, 32), 0.5, False, "bfloat16", 1),     # K stored [D, T]: ldmatrix.trans
    (2, 64, 32, 16, 16, 2, (1, 2, 64, 32), 0.25, True, "float16", 4),      # 4 row warps of 16 rows a block
    (2, 32, 64, 16, 64, 1, (1, 1, 1, 64), 0.125, True, "float16", 1),      # 4 column warps share 16 rows
]


@pytest.mark.cuda_sim
@pytest.mark.parametrize("n,s,t,d,dv,heads,mask,scale,transpose_k,dtype,warps", TC_CASES)
def test_tensorcore_attention_simulated(monkeypatch, n, s, t, d, dv, heads, mask, scale, transpose_k, dtype, warps):
    """The tensor-core kernel through the simulator's scalar model of ldmatrix / mma.sync."""
    monkeypatch.setattr(cuda_attention, "WARPS", (warps,))      # row warps, whatever the grid
    monkeypatch.setattr(cuda_attention, "MIN_BLOCKS", 0)
    src = _simulate((n, s, t, d, dv, heads, mask, scale, transpose_k, dtype))
    assert src.count("(void)(tt_mma(") == 2 and "tt_ldmatrix(" in src and "__shfl_xor_sync" in src
    assert f"__launch_bounds__({32 * warps * cuda_attention.col_warps(t, dv)})" in src


def test_tensorcore_attention_passes_the_isl_checks():
    """te.lower's isl analysis (bounds, races of the thread loops, reads of values computed) models the
    shared tiles, the fragments the intrinsics load and the accumulators they store."""
    sch, kt = _kernel(_attention_graph(2, 32, 32, 16, 16, 1, (1, 1, 1, 32), 0.25, True, "float16"))
    analysis = dict(te.lower(sch, kt.args, show_analysis=True).attrs)["analysis"]
    writes = {st.split("(")[1].split(")")[0] for st in analysis.split("// S")[1:]}
    assert {"T_attention_score.shared", "T_attention_p", "T_attention_p.warp", "T_attention_pv"} <= writes, writes


def test_refusals_are_named():
    info = {"arch": "sm_90", "shared_limit": 227 * 1024}
    assert cuda_attention.tensorcore_refusal(("float16",) * 3, 12, 128, 128, 64, 64, info) is None
    for args, why in [((("float32",) * 3, 12, 128, 128, 64, 64, info), "float32"),
                      ((("float16",) * 3, 12, 128, 128, 40, 40, info), "multiples of 16"),
                      ((("float16",) * 3, 12, 128, 4096, 64, 64, info), "4096 keys"),
                      ((("float16",) * 3, 1 << 17, 128, 128, 64, 64, info), "batch x heads"),
                      ((("float16",) * 3, 12, 128, 128, 64, 64, {"arch": "sm_75"}), "sm_80")]:
        assert why in cuda_attention.tensorcore_refusal(*args)


def test_bert_layer_attention_fuses_on_cuda_in_16_bits():
    """A 16-bit BERT layer's attention is one tensor-core kernel on CUDA; in float32 (no tensor-core
    kernel, the CUDA-core one slower than the three kernels) the pass keeps three and says why; on the
    CPU the chain is one kernel."""
    g, params = graph.from_onnx(testing.bert_layer(seq=16, hidden=64, heads=4, ffn=128))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        low = graph.optimize(graph.to_mixed_precision(g, "float16"), params, target="cuda -arch=sm_80")
    names = [n.op.name for n in low.nodes if hasattr(n.op, "body")]
    assert any("attention" in x for x in names) and not any("softmax" in x for x in names)
    with pytest.warns(UserWarning, match="fuse_attention: 1 attention.*float32.*CUDA cores"):
        fused = graph.optimize(g, params, target="cuda -arch=sm_80")
    names = [n.op.name for n in fused.nodes if hasattr(n.op, "body")]
    assert not any("attention" in x for x in names) and any("softmax" in x for x in names)
    cpu = [n.op.name for n in graph.optimize(g, params).nodes if hasattr(n.op, "body")]
    assert any("attention" in x for x in cpu) and not any("softmax" in x for x in cpu)


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype,transpose_k", [("float16", True), ("bfloat16", False)])
def test_ptx_assembles(arch, dtype, transpose_k):
    """BERT-base's attention: the PTX has the tensor-core instructions and ptxas assembles it without spills."""
    g = _attention_graph(12, 128, 128, 64, 64, 12, (1, 1, 1, 128), 0.125, transpose_k, dtype)
    sch, kt = _kernel(g, f"cuda -arch={arch}")
    mod = codegen.build(sch, kt.args, target=f"cuda -arch={arch}")       # cubin: ptxas ran
    ptx = mod.get_source("ptx")
    kind = "f16.f16" if dtype == "float16" else "bf16.bf16"
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.f32" in ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx and "shfl.sync.bfly" in ptx
    assert mod.cubin and mod.resource_usage["spill_stores"] == 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,transpose_k,s", [("float16", True, 128), ("bfloat16", False, 64)])
def test_tensorcore_attention_on_gpu(dtype, transpose_k, s):
    n, heads, t, d = 24, 12, 128, 64
    g = _attention_graph(n, s, t, d, d, heads, (2, 1, 1, t), 0.125, transpose_k, dtype)
    sch, kt = _kernel(g, "cuda")
    mod = codegen.build(sch, kt.args, target="cuda")
    for seed in (0, 1):
        feeds = _feeds(g, seed)
        out = np.full((n, s, d), np.nan, dtype)
        mod(*feeds.values(), out)
        want = REF(*feeds.values(), scale=0.125, transpose_k=transpose_k, heads=heads).astype(np.float64)
        eps = 2.0 ** -11 if dtype == "float16" else 2.0 ** -8
        np.testing.assert_allclose(out.astype(np.float64), want, rtol=0, atol=4 * eps * np.abs(want).max())
