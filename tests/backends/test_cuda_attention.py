"""``nn.attention`` on CUDA (``graph/schedules/attention.py``): the kernel run on the CPU by
tests/cuda_sim.py over NaN-poisoned outputs against the float64 numpy reference (a query tail, 1 and
12 heads, masks, both key layouts, float16), one kernel where the model had three, and ptxas."""
import sys

import ml_dtypes  # noqa: F401
import numpy as np
import pytest

import codegen
import cuda_sim
from tensorir import graph
from tensorir.graph import testing
from tensorir.graph.lower_te import lower_kernel
from tensorir.graph.schedules import kernel_schedule

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0] + "/tests/graph")
from test_attention import REF, _attention_graph, _feeds


def _kernel(g):
    og = graph.optimize(g, target="cuda")
    (call,) = [n for n in og.nodes if hasattr(n.op, "body")]
    kt = lower_kernel(call.op)
    s, origin = kernel_schedule(kt, "cuda")
    assert origin["rule"] == "attention_rows_cuda"
    return s, kt


CASES = [  # n, s, t, d, dv, heads, mask, scale, transpose_k, dtype
    (4, 37, 29, 8, 12, 2, (2, 1, 1, 29), 0.5, False, "float32"),
    (12, 70, 16, 8, 8, 12, (1, 12, 70, 16), 0.125, True, "float32"),     # 70 rows: a 64-row tile and a tail
    (2, 9, 24, 16, 8, 1, None, 0.25, False, "float16"),
]


@pytest.mark.cuda_sim
@pytest.mark.parametrize("n,s,t,d,dv,heads,mask,scale,transpose_k,dtype", CASES)
def test_attention_simulated(n, s, t, d, dv, heads, mask, scale, transpose_k, dtype):
    g = _attention_graph(n, s, t, d, dv, heads, mask, scale, transpose_k, dtype)
    sch, kt = _kernel(g)
    mod = codegen.build(sch, kt.args, target="cuda")
    feeds = _feeds(g, 5)
    feeds["q"][0, 1, 0] = np.nan                  # a NaN score: that row NaN, no other
    out = np.full((n, s, dv), np.nan, dtype)
    cuda_sim.run(mod, *feeds.values(), out)
    want = REF(*[a.astype(np.float32) for a in feeds.values()], scale=scale, transpose_k=transpose_k, heads=heads)
    assert np.isnan(out[0, 1]).all()
    out[0, 1] = want[0, 1] = 0
    eps = 2.0 ** -11 if dtype == "float16" else 1e-6
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=0, atol=4 * eps * np.abs(want).max())


def test_bert_layer_attention_stays_three_kernels_on_cuda():
    """The CUDA attention kernel is slower than the batch matmuls and softmax it would replace (H100):
    the pass keeps them on CUDA and says so; on the CPU the chain is one kernel."""
    g, params = graph.from_onnx(testing.bert_layer(seq=16, hidden=64, heads=4, ffn=128))
    with pytest.warns(UserWarning, match="fuse_attention: 1 attention.*CUDA cores"):
        fused = graph.optimize(g, params, target="cuda")
    names = [n.op.name for n in fused.nodes if hasattr(n.op, "body")]
    assert not any("attention" in x for x in names) and any("softmax" in x for x in names)
    cpu = [n.op.name for n in graph.optimize(g, params).nodes if hasattr(n.op, "body")]
    assert any("attention" in x for x in cpu) and not any("softmax" in x for x in cpu)


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_assembles(arch):
    sch, kt = _kernel(_attention_graph(12, 128, 128, 64, 64, 12, (1, 1, 1, 128), 0.125, False))
    mod = codegen.build(sch, kt.args, target=f"cuda -arch={arch}")       # cubin: ptxas ran
    assert "ex2.approx" in mod.get_source("ptx") or "ex2" in mod.get_source("ptx")
