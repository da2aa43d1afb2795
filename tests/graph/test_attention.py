"""``nn.attention`` and the ``fuse_attention`` pass: what the pass matches and leaves, the operator built
for the CPU against its float64 numpy reference (rows not a multiple of the row block, 1 and 12 heads,
masks of every broadcast, scale, both key layouts, 16-bit inputs), NaN and fully masked rows as
onnxruntime gives them, and BERT layers built for llvm against onnxruntime.  (CUDA:
tests/backends/test_cuda_attention.py.)"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import codegen
from tensorir import graph
from tensorir.graph import testing
from tensorir.graph.ir import Const, Graph, TensorType, Var
from tensorir.graph.op.registry import call, get_op
from tensorir.graph.passes import fuse_attention
from tensorir.graph.schedules.attention import keys_by_dim

import graph_models as gm

REF = get_op("nn.attention").numpy


def _ops(g: Graph) -> list[str]:
    return [n.op for n in g.nodes]


def _chain(n=2, heads=3, s=5, t=7, d=4, *, scale=(("divide", 2.0),), mask=(1, 1, 1, 7), axis=-1, transpose_b=False,
           extra_use=False, scale_after_mask=False):
    """batch_matmul -> reshape [B, H, S, T] -> scale ops -> add mask -> softmax -> reshape -> batch_matmul."""
    nb = n * heads
    q = Var("q", TensorType((nb, s, d), "float32"))
    k = Var("k", TensorType((nb, t, d) if transpose_b else (nb, d, t), "float32"))
    v = Var("v", TensorType((nb, t, 6), "float32"))
    x = call("reshape", call("nn.batch_matmul", q, k, transpose_a=False, transpose_b=transpose_b),
             newshape=[n, heads, s, t])
    inputs = [q, k, v]
    for op, c in scale:
        x = call(op, x, Const(np.array(c, np.float32)))
    scores = x
    if mask is not None:
        m = Var("mask", TensorType(mask, "float32"))
        inputs.append(m)
        x = call("add", x, m)
    if scale_after_mask:
        x = call("multiply", x, Const(np.array(2.0, np.float32)))
    p = call("nn.softmax", x, axis=axis)
    out = call("nn.batch_matmul", call("reshape", p, newshape=[nb, s, t]), v, transpose_a=False, transpose_b=False)
    return Graph(inputs, [out, scores] if extra_use else [out])


def test_pass_matches_scale_and_mask():
    g = fuse_attention(_chain(scale=(("divide", 2.0), ("multiply", 3.0))))
    (a,) = [n for n in g.nodes if n.op == "nn.attention"]
    assert "nn.softmax" not in _ops(g) and "nn.batch_matmul" not in _ops(g)
    assert a.attrs["scale"] == pytest.approx(1.5) and a.attrs["heads"] == 3 and not a.attrs["transpose_k"]
    assert a.inputs[3].type.shape == (1, 1, 1, 7)


def test_pass_matches_without_mask_and_transposed_keys():
    """Keys stored [N, T, D] (``Q K^T`` as batch_matmul(transpose_b)): the CPU's schedule reads them transposed
    to [N, D, T] by a kernel of their own (its scores a vector along the keys); CUDA's takes them as they are."""
    for target in (None, "llvm"):
        g = fuse_attention(_chain(scale=(), mask=None, transpose_b=True), target=target)
        (a,) = [n for n in g.nodes if n.op == "nn.attention"]
        assert len(a.inputs) == 3 and not a.attrs["transpose_k"] and a.attrs["scale"] == 1.0
        assert a.inputs[1].op == "transpose" and a.inputs[1].type.shape == (6, 4, 7)
    assert not keys_by_dim("cuda -arch=sm_90")


@pytest.mark.parametrize("s,t", [(7, 7), (9, 21), (77, 129)])
def test_transposed_keys_build_matches_numpy(s, t):
    """The chain with keys [N, T, D] built for the CPU: a transpose kernel, then the attention, as numpy
    (a -10000 and a -inf masked key; a query row of the second batch NaN)."""
    g = _chain(n=2, heads=3, s=s, t=t, d=8, transpose_b=True, mask=(2, 1, 1, t))
    m = codegen.build_model(g, "llvm")
    assert [name for name, _ in m.kernels] == ["fused_transpose", "fused_nn_attention"]
    feeds = _feeds(g, 5)
    feeds["mask"][0, ..., -1], feeds["mask"][1, ..., 0] = -np.inf, -10000.0
    feeds["q"][4, s // 2, 0] = np.nan
    want = REF(*feeds.values(), scale=0.5, transpose_k=True, heads=3)
    got = _run(m, feeds)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.isnan(got[4, s // 2]).all()
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-5, atol=1e-5 * np.abs(want[ok]).max())


def test_pass_reshapes_a_shorter_mask():
    g = fuse_attention(_chain(mask=(5, 7)))
    (a,) = [n for n in g.nodes if n.op == "nn.attention"]
    assert a.inputs[3].type.shape == (1, 1, 5, 7)


@pytest.mark.parametrize("kw", [dict(axis=2), dict(extra_use=True), dict(scale=(("add", 1.0),)),
                                dict(scale_after_mask=True)])
def test_pass_leaves_what_is_not_attention(kw):
    """Softmax over another axis, scores read elsewhere, a non-scale op between, a scale after the mask
    (it would scale the mask too)."""
    assert "nn.attention" in _ops(fuse_attention(_chain()))
    assert "nn.attention" not in _ops(fuse_attention(_chain(**kw)))


def test_cuda_refusal_is_counted():
    g = _chain(s=4, t=2048, mask=None, scale=())     # float32 (and 2048 keys): no tensor-core kernel
    with pytest.warns(UserWarning, match="fuse_attention: 1 attention"):
        out = fuse_attention(g, target="cuda")
    assert "nn.attention" not in _ops(out)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "nn.attention" in _ops(fuse_attention(g, target="llvm"))


def _attention_graph(n, s, t, d, dv, heads, mask, scale, transpose_k, dtype="float32"):
    q = Var("q", TensorType((n, s, d), dtype))
    k = Var("k", TensorType((n, t, d) if transpose_k else (n, d, t), dtype))
    v = Var("v", TensorType((n, t, dv), dtype))
    ins = [q, k, v] + ([Var("mask", TensorType(mask, dtype))] if mask else [])
    return Graph(ins, [call("nn.attention", *ins, scale=scale, transpose_k=transpose_k, heads=heads)])


def _feeds(g: Graph, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {v.name: rng.standard_normal(v.type.shape).astype(v.type.dtype) for v in g.inputs}


def _run(m, feeds):
    for o in m._outputs:
        o.view(np.uint8)[...] = 0xFF        # NaN-poisoned outputs
    return m(**feeds)[0]


CASES = [  # n, s, t, d, dv, heads, mask, scale, transpose_k
    (12, 20, 20, 16, 16, 12, (1, 1, 1, 20), 0.25, False),     # 20 rows: not a multiple of 16
    (2, 37, 29, 8, 12, 1, None, 1.0, True),                   # primes, keys stored [N, T, D]
    (6, 33, 48, 16, 8, 3, (2, 3, 33, 48), 0.125, False),      # a full mask
    (4, 9, 17, 4, 5, 2, (2, 1, 9, 1), 2.0, True),             # a mask per (batch, query)
]


@pytest.mark.parametrize("n,s,t,d,dv,heads,mask,scale,transpose_k", CASES)
def test_attention_cpu_matches_numpy(n, s, t, d, dv, heads, mask, scale, transpose_k):
    g = _attention_graph(n, s, t, d, dv, heads, mask, scale, transpose_k)
    m = codegen.build_model(g, "llvm")
    assert [name for name, _ in m.kernels] == ["fused_nn_attention"]
    feeds = _feeds(g, 1)
    got = _run(m, feeds)
    want = REF(*feeds.values(), scale=scale, transpose_k=transpose_k, heads=heads)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_attention_cpu_register_tiles_fit_the_target():
    """The scores' and ``P V``'s register tiles: a block's 16 query rows x 16 lanes on AVX-512 (16 zmm), 4 rows on
    AVX2 (16 rows of 2 ymm would spill: a ViT's attention 1.2-1.5x slower on a Zen 3)."""
    import tensorir as te
    from tensorir.graph.lower_te import lower_kernel
    from tensorir.graph.schedules import kernel_schedule

    (kern,) = graph.fuse_ops(_attention_graph(6, 197, 197, 64, 64, 6, None, 0.125, False)).kernels
    kt = lower_kernel(kern)
    for target, rows in (("llvm -mcpu=haswell", 4), ("llvm -mcpu=skylake-avx512", 16)):
        text = str(te.lower(kernel_schedule(kt, target)[0], kt.args))
        for acc in ("T_attention_score.local", "T_attention_pv.local"):
            assert f"allocate {acc}[float32 * 1 * {rows} * 16] local" in text, (target, acc)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_attention_cpu_16_bit(dtype):
    import ml_dtypes  # noqa: F401
    g = _attention_graph(4, 19, 24, 16, 16, 2, (2, 1, 1, 24), 0.25, False, dtype)
    feeds = _feeds(g, 2)
    got = _run(codegen.build_model(g, "llvm"), feeds).astype(np.float64)
    want = REF(*[a.astype(np.float32) for a in feeds.values()], scale=0.25, transpose_k=False, heads=2)
    eps = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}[dtype]
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * eps * np.abs(want).max())     # one rounding


@pytest.mark.parametrize("t", [8, 21])     # 21 keys: padded to 32 inside the operator
def test_attention_nan_and_fully_masked_rows(t):
    """A NaN score makes its row NaN (only that row); a row masked by -inf everywhere is NaN, as
    onnxruntime's Softmax of an all -inf row."""
    g = _attention_graph(2, 6, t, 4, 4, 2, (1, 2, 6, t), 1.0, False)
    feeds = _feeds(g, 3)
    feeds["q"][1, 2, 0] = np.nan
    feeds["mask"][0, 0, 4, :] = -np.inf
    got = _run(codegen.build_model(g, "llvm"), feeds)
    want = REF(*feeds.values(), scale=1.0, transpose_k=False, heads=2)
    assert np.isnan(got[1, 2]).all() and np.isnan(got[0, 4]).all() and np.isnan(want[0, 4]).all()
    finite = np.ones(got.shape[:2], bool)
    finite[1, 2] = finite[0, 4] = False
    assert np.isfinite(got[finite]).all()
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seq", [20, 128])
def test_bert_layer_matches_onnxruntime(seq):
    """BERT's attention (heads split by reshape + transpose, keys transposed, 1/sqrt(d) and a mask that
    hides the last quarter) as one nn.attention kernel, the layer matching onnxruntime."""
    model = testing.bert_layer(seq=seq, hidden=96, heads=12 if seq == 128 else 4, ffn=128)
    g, params = graph.from_onnx(model)
    assert "nn.attention" in _ops(graph.optimize(g, params, fuse=False))
    m = codegen.build_model(g, "llvm", params)
    feeds = testing.bert_inputs(seq=seq, hidden=96)
    want = gm.run_onnxruntime(model, feeds)[0]
    np.testing.assert_allclose(_run(m, feeds), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_transformer_block_matches_onnxruntime():
    model = gm.transformer_block()
    g, params = graph.from_onnx(model, shape_dict={"x": (2, 10, 32)})
    assert "nn.attention" in _ops(graph.optimize(g, params, fuse=False))
    feeds = {"x": np.random.default_rng(4).standard_normal((2, 10, 32)).astype(np.float32)}
    want = gm.run_onnxruntime(model, feeds)[0]
    np.testing.assert_allclose(_run(codegen.build_model(g, "llvm", params), feeds), want, rtol=1e-4,
                               atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_mixed_precision_attention_is_fused(dtype):
    """to_mixed_precision's casts around softmax (and a 16-bit scale constant) are part of the chain:
    16-bit Q, K, V into one nn.attention computing in float32."""
    g, params = graph.from_onnx(gm.transformer_block(), {"x": (2, 5, 32)})
    opt = graph.optimize(graph.to_mixed_precision(g, dtype), params, fuse=False)
    (a,) = [n for n in opt.nodes if n.op == "nn.attention"]
    assert {i.type.dtype for i in a.inputs} == {dtype} and "nn.softmax" not in _ops(opt)


def _deployed_and_tuned(g, params, target) -> tuple[str, str]:
    """The attention kernel's loop nest as the model build schedules it (``kernel_schedule`` of its kernel)
    and as its tuning task measures its default (the task recreated from its payload, as a measuring worker
    does: the DAG alone, no graph kernel)."""
    import autotune
    from autotune.task import Task, canonical_target
    from codegen.model.build import fused_graph, model_kernels
    from tensorir import lower
    from tensorir.graph.schedules import kernel_schedule
    target = canonical_target(target)
    tasks, _ = autotune.extract_tasks(g, params, target=target)
    (task,) = [t for t in tasks if t.anchor_op == "nn.attention"]
    (mk,) = [mk for mk in model_kernels(fused_graph(g, params, target), target) if mk.kernel.name == task.kernel_name]
    deployed = lower(kernel_schedule(mk.te, target)[0], mk.te.args, name="k")
    worker = Task.from_payload(task.payload())
    s, args = worker.instantiate(worker.default_config())
    return str(deployed), str(lower(s, args, name="k"))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tuning_task_measures_the_deployed_cuda_attention(dtype):
    """A BERT layer's attention task (CUDA, 16-bit): its default is the tensor-core kernel the model deploys,
    not the thread-per-row one (the rule decides from the DAG, which a task has without its graph kernel)."""
    g, params = graph.from_onnx(testing.bert_layer(seq=64, hidden=128, heads=2, ffn=256))
    deployed, tuned = _deployed_and_tuned(graph.to_mixed_precision(g, dtype), params, "cuda -arch=sm_90")
    assert "mma" in deployed and tuned == deployed


def test_tuning_task_measures_the_deployed_cpu_attention():
    """The CPU rule's key layout (K stored [N, T, D]) read from the DAG: the task's default is the deployed one."""
    g = _attention_graph(4, 32, 48, 16, 16, 2, (1, 1, 1, 48), 0.25, True)
    deployed, tuned = _deployed_and_tuned(g, None, "llvm")
    assert tuned == deployed
