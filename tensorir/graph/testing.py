"""Whole models with random weights, built with ``onnx.helper`` (TVM's ``relay.testing``): ResNet-18
and one BERT-base encoder layer, both as PyTorch's exporter writes them.  Every size is a parameter,
so tests can build small variants of the real architectures; ``onnx`` is imported on first use.

>>> model = resnet18(image=64, width=16)          # a ModelProto; input "data" float32[1, 3, 64, 64]
>>> g, params = tensorir.graph.from_onnx(model)
"""
from __future__ import annotations

import numpy as np

OPSET = 17


class _Builder:
    """Nodes and initializers of one ONNX graph; names are numbered as they are made."""

    def __init__(self, seed: int):
        from onnx import helper, numpy_helper
        self.helper, self.numpy_helper = helper, numpy_helper
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.count = 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def const(self, hint: str, array) -> str:
        name = self.name(hint)
        self.inits.append(self.numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, hint: str, shape, fan_in: int) -> str:
        """Random weights scaled by ``1/sqrt(fan_in)`` (activations keep unit size through the layers)."""
        w = self.rng.standard_normal(shape) / np.sqrt(fan_in)
        return self.const(hint, w.astype(np.float32))

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        out = self.name(op_type.lower())
        self.nodes.append(self.helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def model(self, name: str, inputs, outputs):
        from onnx import TensorProto
        h = self.helper
        graph = h.make_graph(self.nodes, name,
                             [h.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                             [h.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs], self.inits)
        # IR version 8 (opset 17's own), not the onnx package's newest: older onnxruntimes load it too
        return h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)], producer_name="tiletune.testing",
                            ir_version=8)


# ResNet-18 ----------------------------------------------------------------------------------------------
def _conv_bn(b: _Builder, x: str, c_in: int, c_out: int, k: int, stride: int, relu: bool) -> str:
    w = b.weight("conv.w", (c_out, c_in, k, k), c_in * k * k // 2 if relu else c_in * k * k)
    p = k // 2
    y = b.op("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride], pads=[p, p, p, p])
    bn = [b.const("bn.gamma", b.rng.uniform(0.5, 1.5, c_out).astype(np.float32)),
          b.const("bn.beta", (b.rng.standard_normal(c_out) * 0.1).astype(np.float32)),
          b.const("bn.mean", (b.rng.standard_normal(c_out) * 0.1).astype(np.float32)),
          b.const("bn.var", b.rng.uniform(0.5, 1.5, c_out).astype(np.float32))]
    y = b.op("BatchNormalization", [y, *bn], epsilon=1e-5)
    return b.op("Relu", [y]) if relu else y


def _basic_block(b: _Builder, x: str, c_in: int, c_out: int, stride: int) -> str:
    y = _conv_bn(b, x, c_in, c_out, 3, stride, relu=True)
    y = _conv_bn(b, y, c_out, c_out, 3, 1, relu=False)
    shortcut = x if stride == 1 and c_in == c_out else _conv_bn(b, x, c_in, c_out, 1, stride, relu=False)
    return b.op("Relu", [b.op("Add", [y, shortcut])])


def resnet18(batch: int = 1, image: int = 224, seed: int = 0, width: int = 64, classes: int = 1000):
    """ResNet-18 (He et al. 2015, torchvision's layout): conv 7x7/2 + BN + ReLU, max pool 3x3/2, four
    stages of two basic blocks (``width`` x 1, 2, 4, 8 channels; 1x1 downsampling convs), global
    average pool, flatten, a fully connected layer of ``classes``.  Input ``data`` float32[batch, 3,
    image, image], output ``logits`` float32[batch, classes]."""
    b = _Builder(seed)
    x = _conv_bn(b, "data", 3, width, 7, 2, relu=True)
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = width
    for stage in range(4):
        c_out = width << stage
        for block in range(2):
            x = _basic_block(b, x, c, c_out, 2 if stage and not block else 1)
            c = c_out
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    fc_w = b.weight("fc.w", (classes, c), c)
    fc_b = b.const("fc.b", (b.rng.standard_normal(classes) * 0.1).astype(np.float32))
    b.nodes.append(b.helper.make_node("Gemm", [x, fc_w, fc_b], ["logits"], transB=1))
    return b.model("resnet18", [("data", [batch, 3, image, image])], [("logits", [batch, classes])])


# BERT -----------------------------------------------------------------------------------------------------
def _linear(b: _Builder, x: str, n_in: int, n_out: int) -> str:
    """``x @ W + bias`` as PyTorch exports ``nn.Linear`` on a 3-d input (MatMul by the transposed
    weight, then Add)."""
    w = b.weight("linear.w", (n_in, n_out), n_in)
    bias = b.const("linear.b", (b.rng.standard_normal(n_out) * 0.1).astype(np.float32))
    return b.op("Add", [b.op("MatMul", [x, w]), bias])


def _layer_norm(b: _Builder, x: str, hidden: int) -> str:
    gamma = b.const("ln.gamma", b.rng.uniform(0.5, 1.5, hidden).astype(np.float32))
    beta = b.const("ln.beta", (b.rng.standard_normal(hidden) * 0.1).astype(np.float32))
    return b.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-12)


def bert_layer(seq: int = 128, hidden: int = 768, heads: int = 12, ffn: int = 3072, seed: int = 0,
               batch: int = 1):
    """One BERT encoder layer (``BertLayer`` of Hugging Face, post-norm): self-attention (Q, K, V
    projections, heads split by Reshape + Transpose, scores scaled by 1/sqrt(head size), Softmax, an
    additive attention mask), output projection + residual + LayerNormalization, then the feed-forward
    block with Erf-GELU + residual + LayerNormalization.  Inputs ``hidden_states`` float32[batch, seq,
    hidden] and ``attention_mask`` float32[batch, 1, 1, seq] (0 or a large negative), output
    ``output`` float32[batch, seq, hidden]."""
    if hidden % heads:
        raise ValueError(f"bert_layer: hidden size {hidden} is not a multiple of {heads} heads")
    b = _Builder(seed)
    dh = hidden // heads
    x = "hidden_states"
    split = b.const("shape.heads", np.array([batch, seq, heads, dh], np.int64))

    def heads_of(t: str, perm) -> str:
        return b.op("Transpose", [b.op("Reshape", [t, split])], perm=perm)
    q = heads_of(_linear(b, x, hidden, hidden), [0, 2, 1, 3])
    k = heads_of(_linear(b, x, hidden, hidden), [0, 2, 3, 1])
    v = heads_of(_linear(b, x, hidden, hidden), [0, 2, 1, 3])
    scores = b.op("Div", [b.op("MatMul", [q, k]), b.const("sqrt_dh", np.array(np.sqrt(dh), np.float32))])
    probs = b.op("Softmax", [b.op("Add", [scores, "attention_mask"])], axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    ctx = b.op("Reshape", [ctx, b.const("shape.merge", np.array([batch, seq, hidden], np.int64))])
    attn = _layer_norm(b, b.op("Add", [_linear(b, ctx, hidden, hidden), x]), hidden)
    h = _linear(b, attn, hidden, ffn)
    erf = b.op("Erf", [b.op("Div", [h, b.const("sqrt2", np.array(np.sqrt(2.0), np.float32))])])
    gelu = b.op("Mul", [b.op("Mul", [h, b.op("Add", [erf, b.const("one", np.array(1.0, np.float32))])]),
                        b.const("half", np.array(0.5, np.float32))])
    out = _layer_norm(b, b.op("Add", [_linear(b, gelu, ffn, hidden), attn]), hidden)
    b.nodes.append(b.helper.make_node("Identity", [out], ["output"]))
    return b.model("bert_layer", [(x, [batch, seq, hidden]), ("attention_mask", [batch, 1, 1, seq])],
                   [("output", [batch, seq, hidden])])


def bert_inputs(seq: int = 128, hidden: int = 768, seed: int = 0, batch: int = 1) -> dict[str, np.ndarray]:
    """Random hidden states and a mask hiding the last quarter of the sequence."""
    rng = np.random.default_rng(seed)
    mask = np.zeros((batch, 1, 1, seq), np.float32)
    mask[..., seq - seq // 4:] = -10000.0
    return {"hidden_states": rng.standard_normal((batch, seq, hidden)).astype(np.float32), "attention_mask": mask}


def resnet18_inputs(batch: int = 1, image: int = 224, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"data": rng.standard_normal((batch, 3, image, image)).astype(np.float32)}


__all__ = ["bert_inputs", "bert_layer", "resnet18", "resnet18_inputs"]
