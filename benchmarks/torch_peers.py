"""The PyTorch peer of a benchmark's ONNX model: a callable ``f(**inputs) -> [outputs]`` of torch tensors
that ``torch.compile`` can trace, on the same weights.

- The BERT-base layer of ``tensorir.graph.testing`` (graph ``bert_layer``) is :class:`BertLayer`, written
  as a PyTorch user writes it (``nn.Linear``, ``nn.LayerNorm``, exact ``F.gelu``, attention by
  ``F.scaled_dot_product_attention`` as Hugging Face's ``BertLayer`` runs by default, or the explicit
  softmax chain of the ONNX graph), its weights read from the graph's initializers and checked against
  onnxruntime in fp32 on fresh random inputs every time it is built (a mismatch raises).  onnx2torch's
  ``Reshape`` reads its shape from a tensor each call (a host sync in eager, a dynamo error under
  ``torch.compile``), so it is no peer for this graph.
- Any other model goes through ``onnx2torch`` when installed, else a small interpreter calling one
  torch op per ONNX node (what an eager ``nn.Module`` does).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

FP32_TOLERANCE = 1e-5   # of the output's largest magnitude: fp32 peers differ by ~5e-7, a tanh GELU by ~1e-4


class BertLayer(nn.Module):
    """One BERT encoder layer, post-norm (``BertLayer``): self-attention with an additive mask, output
    projection + residual + LayerNorm, feed-forward with exact GELU + residual + LayerNorm."""

    def __init__(self, hidden: int, heads: int, ffn: int, eps: float, attention: str = "sdpa"):
        super().__init__()
        if attention not in ("sdpa", "math"):
            raise ValueError(f"BertLayer: attention {attention!r}: expected 'sdpa' or 'math'")
        self.heads, self.attention = heads, attention
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.attn_out, self.attn_norm = nn.Linear(hidden, hidden), nn.LayerNorm(hidden, eps)
        self.intermediate, self.output = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        b, s, _ = hidden_states.shape
        q, k, v = (lin(hidden_states).view(b, s, self.heads, -1).transpose(1, 2)
                   for lin in (self.query, self.key, self.value))
        if self.attention == "sdpa":
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask)
        else:
            scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + attention_mask
            ctx = torch.softmax(scores, dim=-1) @ v
        h = self.attn_norm(self.attn_out(ctx.transpose(1, 2).reshape(b, s, -1)) + hidden_states)
        return self.out_norm(self.output(F.gelu(self.intermediate(h))) + h)


def bert_layer(model, attention: str = "sdpa") -> BertLayer:
    """:class:`BertLayer` (fp32, on the CPU) with the weights of ``testing.bert_layer``'s ONNX ``model``,
    read in node order: six ``MatMul`` by an initializer each followed by ``Add`` of one (query, key,
    value, attention output, intermediate, output), two ``LayerNormalization`` and the first
    ``Reshape``'s [batch, seq, heads, head size].  Checked against onnxruntime (:func:`check_onnxruntime`)."""
    from onnx import helper, numpy_helper
    g = model.graph
    init = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    linears, norms, heads = [], [], None
    for node in g.node:
        if node.op_type == "MatMul" and node.input[1] in init:
            add = [n for n in g.node if n.op_type == "Add" and node.output[0] in n.input]
            bias = [init[i] for a in add for i in a.input if i in init]
            if len(bias) != 1:
                raise ValueError(f"{g.name}: MatMul {node.name or node.output[0]} is not followed by one Add of a bias")
            linears.append((init[node.input[1]], bias[0]))
        elif node.op_type == "LayerNormalization":
            eps = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "epsilon"), 1e-5)
            norms.append((init[node.input[1]], init[node.input[2]], eps))
        elif node.op_type == "Reshape" and heads is None and node.input[1] in init:
            heads = int(init[node.input[1]][2])
    if len(linears) != 6 or len(norms) != 2 or heads is None or len({e for *_, e in norms}) != 1:
        raise ValueError(f"{g.name}: not a testing.bert_layer graph ({len(linears)} linear layers, "
                         f"{len(norms)} LayerNormalizations, heads {heads}); expected 6, 2 and a Reshape to heads")
    hidden, ffn = linears[4][0].shape
    net = BertLayer(hidden, heads, ffn, norms[0][2], attention)
    with torch.no_grad():
        for lin, (w, bias) in zip((net.query, net.key, net.value, net.attn_out, net.intermediate, net.output),
                                  linears):
            if tuple(lin.weight.shape) != w.shape[::-1]:
                raise ValueError(f"{g.name}: weight {w.shape} does not fit {lin}")
            lin.weight.copy_(torch.tensor(w.T))
            lin.bias.copy_(torch.tensor(bias))
        for ln, (gamma, beta, _) in zip((net.attn_norm, net.out_norm), norms):
            ln.weight.copy_(torch.tensor(gamma))
            ln.bias.copy_(torch.tensor(beta))
    run = runner(net.eval(), [i.name for i in g.input], "cpu")
    err = check_onnxruntime(model, run, random_inputs(model))
    if not err <= FP32_TOLERANCE:
        raise RuntimeError(f"{g.name}: the hand-written torch peer ({attention} attention) differs from onnxruntime "
                           f"by {err:.1e} of the output's largest magnitude (fp32; tolerance {FP32_TOLERANCE:g})")
    return net


PEERS = {"bert_layer": bert_layer}     # graph name -> hand-written module builder


def random_inputs(model, seed: int | None = None) -> dict[str, np.ndarray]:
    """Fresh float32 inputs for ``model``'s graph: standard normal, except an ``attention_mask`` of 0 or
    -10000 (about a quarter of the keys hidden, at random)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in model.graph.input:
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = (np.where(rng.random(shape) < 0.25, -10000.0, 0.0) if i.name == "attention_mask"
                         else rng.standard_normal(shape)).astype(np.float32)
    return feeds


def check_onnxruntime(model, run, feeds: dict[str, np.ndarray]) -> float:
    """Largest deviation of ``run(**feeds)`` (torch, any float dtype) from onnxruntime's fp32 output on
    the CPU, over that output's largest magnitude (inf if not finite)."""
    import onnxruntime as ort
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    with torch.no_grad():
        got = [o.float().cpu().numpy() for o in run(**{k: torch.from_numpy(v) for k, v in feeds.items()})]
    errs = [np.abs(a.astype(np.float64) - b).max() / max(np.abs(b).max(), 1e-6) for a, b in zip(got, want)]
    return float(max(errs)) if len(got) == len(want) and all(np.isfinite(errs)) else math.inf


def runner(net, names: list[str], device: str, dtype=None, kind: str = "nn.Module"):
    """``f(**inputs) -> [outputs]`` calling ``net`` on the inputs in ``names`` order, moved to ``device``
    and cast to ``dtype`` (floating tensors) when given; ``f.kind`` names the peer."""
    cast = _caster(device, dtype)

    def run(**feeds):
        out = net(*[cast(feeds[n]) for n in names])
        return list(out) if isinstance(out, (tuple, list)) else [out]
    run.kind = kind
    return run


def _caster(device: str, dtype=None):
    """A tensor moved to ``device`` and, if floating and ``dtype`` is given, converted to it."""
    def cast(t):
        t = t.to(device)
        return t.to(dtype) if dtype is not None and t.is_floating_point() else t
    return cast


def torch_runner(model, dtype=None, device: str = "cuda", attention: str = "sdpa"):
    """A callable ``f(**inputs) -> [outputs]`` of torch tensors on ``device`` running ``model`` eagerly;
    with a torch ``dtype`` (float16, bfloat16) its floating weights and inputs are converted to it first.
    ``attention`` (sdpa or math) is the hand-written BERT layer's."""
    names = [i.name for i in model.graph.input]
    if model.graph.name in PEERS:
        net = PEERS[model.graph.name](model, attention).to(device).eval()
        return runner(net if dtype is None else net.to(dtype), names, device, dtype,
                      f"nn.Module {type(net).__name__}, {attention} attention")
    try:
        from onnx2torch import convert
        net = convert(model).to(device).eval()
        return runner(net if dtype is None else net.to(dtype), names, device, dtype, "onnx2torch")
    except ImportError:
        pass
    return _interpreter(model, dtype, device)


def _interpreter(model, dtype, device: str):
    """One torch op per ONNX node (the few ops of ``tensorir.graph.testing``'s models)."""
    from onnx import numpy_helper
    cast = _caster(device, dtype)
    host = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    consts = {n: cast(torch.from_numpy(a.copy())) for n, a in host.items()}
    attrs = [{a.name: _attr(a) for a in n.attribute} for n in model.graph.node]

    def conv(x, w, *b, strides=(1, 1), pads=(0, 0, 0, 0), group=1, **_):
        return F.conv2d(x, w, b[0] if b else None, tuple(strides), (pads[0], pads[1]), 1, group)

    def gemm(a, b, c=None, transB=0, **_):
        return F.linear(a, b, c) if transB else a @ b + (0 if c is None else c)
    ops = {
        "Conv": conv, "Relu": lambda x, **_: F.relu(x), "Add": lambda a, b, **_: a + b,
        "Mul": lambda a, b, **_: a * b, "Div": lambda a, b, **_: a / b, "Erf": lambda x, **_: torch.erf(x),
        "BatchNormalization": lambda x, g, b, m, v, epsilon=1e-5, **_: F.batch_norm(x, m, v, g, b, False, 0.0, epsilon),
        "MaxPool": lambda x, kernel_shape, strides, pads=(0, 0, 0, 0), **_: F.max_pool2d(
            x, tuple(kernel_shape), tuple(strides), (pads[0], pads[1])),
        "GlobalAveragePool": lambda x, **_: F.adaptive_avg_pool2d(x, 1),
        "Flatten": lambda x, axis=1, **_: torch.flatten(x, axis), "Gemm": gemm,
        "MatMul": lambda a, b, **_: a @ b, "Reshape": lambda x, shape, **_: x.reshape(shape),
        "Transpose": lambda x, perm, **_: x.permute(*perm), "Softmax": lambda x, axis=-1, **_: torch.softmax(x, axis),
        "LayerNormalization": lambda x, g, b, axis=-1, epsilon=1e-5, **_: F.layer_norm(x, g.shape, g, b, epsilon),
        "Identity": lambda x, **_: x,
    }

    for node, a in zip(model.graph.node, attrs):     # constant shapes read once, on the host
        if node.op_type == "Reshape":
            a["shape"] = tuple(int(d) for d in host[node.input[1]])

    # plain tuples, not the protobuf nodes: torch.compile traces the loop into one graph (iterating protobuf
    # containers broke it per op, and each conv shape recompiled until dynamo's recompile limit: eager again)
    steps = [(ops[n.op_type], tuple(n.input[:1] if n.op_type == "Reshape" else n.input), n.output[0], a)
             for n, a in zip(model.graph.node, attrs)]
    outputs = [o.name for o in model.graph.output]

    def run(**feeds):
        env = dict(consts, **{k: cast(v) for k, v in feeds.items()})
        for fn, args, out, a in steps:
            env[out] = fn(*[env[i] for i in args], **a)
        return [env[o] for o in outputs]
    run.kind = "torch ops per ONNX node"
    return run


def _attr(a):
    from onnx import helper
    v = helper.get_attribute_value(a)
    return list(v) if isinstance(v, (list, tuple)) else v
