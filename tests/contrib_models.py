"""ONNX models that onnxruntime's own tools rewrite with ``com.microsoft`` contrib ops: a BERT-like encoder
(int64 token ids, segment ids and an attention mask; embeddings, post-LayerNorm attention layers, Erf-GELU
feed-forward) written the way PyTorch exports BERT, and helpers that run onnxruntime's transformer optimizer
(``onnxruntime.transformers.optimizer.optimize_model``) or its graph optimizer at a level and return the
rewritten model."""
from __future__ import annotations

import numpy as np


def _const(name, value, dtype=np.float32):
    from onnx import numpy_helper
    return numpy_helper.from_array(np.asarray(value, dtype), name)


def bert_like(seed=0, hidden=64, heads=4, layers=2, ffn=128, vocab=100, max_pos=32, opset=13):
    """A BERT encoder in the node pattern of PyTorch's export (LayerNorm spelled out as ReduceMean/Pow/Sqrt,
    the mask as ``(1 - mask) * -10000`` added to the scores, GELU as ``x * 0.5 * (1 + erf(x / sqrt 2))``);
    inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64, [batch, seq]), output ``last_hidden``."""
    from onnx import TensorProto, helper
    rng = np.random.default_rng(seed)
    nd, nodes, inits = helper.make_node, [], []
    dh = hidden // heads

    def weight(name, shape, scale):
        inits.append(_const(name, rng.standard_normal(shape) * scale))
        return name

    def layer_norm(x, name):
        g, b = weight(f"{name}.g", (hidden,), 0.1), weight(f"{name}.b", (hidden,), 0.1)
        inits[-2] = _const(g, 1 + rng.standard_normal(hidden) * 0.1)
        nodes.extend([nd("ReduceMean", [x], [f"{name}.mean"], axes=[-1]),
                      nd("Sub", [x, f"{name}.mean"], [f"{name}.d"]), nd("Pow", [f"{name}.d", "two"], [f"{name}.sq"]),
                      nd("ReduceMean", [f"{name}.sq"], [f"{name}.var"], axes=[-1]),
                      nd("Add", [f"{name}.var", "eps"], [f"{name}.ve"]), nd("Sqrt", [f"{name}.ve"], [f"{name}.std"]),
                      nd("Div", [f"{name}.d", f"{name}.std"], [f"{name}.n"]),
                      nd("Mul", [f"{name}.n", g], [f"{name}.s"]), nd("Add", [f"{name}.s", b], [name])])
        return name

    def linear(x, name, n_in, n_out):
        w, b = weight(f"{name}.w", (n_in, n_out), 1 / np.sqrt(n_in)), weight(f"{name}.b", (n_out,), 0.1)
        nodes.extend([nd("MatMul", [x, w], [f"{name}.mm"]), nd("Add", [b, f"{name}.mm"], [name])])
        return name

    def heads_of(x, name, perm):
        nodes.extend([nd("Reshape", [x, "shape4"], [f"{name}.4d"]), nd("Transpose", [f"{name}.4d"], [name], perm=perm)])
        return name

    inits += [_const("two", 2.0), _const("eps", 1e-12), _const("sqrt_dh", np.sqrt(dh)), _const("one", 1.0),
              _const("neg", -10000.0), _const("sqrt2", np.sqrt(2.0)), _const("half", 0.5),
              _const("shape4", [0, 0, heads, dh], np.int64), _const("shape3", [0, 0, hidden], np.int64),
              _const("ax1", [1], np.int64), _const("ax2", [2], np.int64), _const("zero", 0, np.int64),
              _const("start", 0, np.int64), _const("step", 1, np.int64), _const("ax0", [0], np.int64)]
    weight("word", (vocab, hidden), 0.5), weight("pos", (max_pos, hidden), 0.5), weight("seg", (2, hidden), 0.5)
    nodes += [nd("Shape", ["input_ids"], ["ids.shape"]), nd("Gather", ["ids.shape", "step"], ["seqlen"], axis=0),
              nd("Range", ["start", "seqlen", "step"], ["pos.range"]),
              nd("Unsqueeze", ["pos.range", "ax0"], ["pos.ids"]),
              nd("Gather", ["word", "input_ids"], ["emb.word"]), nd("Gather", ["pos", "pos.ids"], ["emb.pos"]),
              nd("Gather", ["seg", "token_type_ids"], ["emb.seg"]),
              nd("Add", ["emb.word", "emb.pos"], ["emb.wp"]), nd("Add", ["emb.wp", "emb.seg"], ["emb.sum"])]
    x = layer_norm("emb.sum", "emb.ln")
    nodes += [nd("Unsqueeze", ["attention_mask", "ax1"], ["m1"]), nd("Unsqueeze", ["m1", "ax2"], ["m2"]),
              nd("Cast", ["m2"], ["mf"], to=TensorProto.FLOAT), nd("Sub", ["one", "mf"], ["minv"]),
              nd("Mul", ["minv", "neg"], ["mask.add"])]
    for i in range(layers):
        p = f"l{i}"
        q = heads_of(linear(x, f"{p}.q", hidden, hidden), f"{p}.qh", [0, 2, 1, 3])
        k = heads_of(linear(x, f"{p}.k", hidden, hidden), f"{p}.kh", [0, 2, 3, 1])
        v = heads_of(linear(x, f"{p}.v", hidden, hidden), f"{p}.vh", [0, 2, 1, 3])
        nodes += [nd("MatMul", [q, k], [f"{p}.qk"]), nd("Div", [f"{p}.qk", "sqrt_dh"], [f"{p}.qks"]),
                  nd("Add", [f"{p}.qks", "mask.add"], [f"{p}.qkm"]), nd("Softmax", [f"{p}.qkm"], [f"{p}.p"], axis=3),
                  nd("MatMul", [f"{p}.p", v], [f"{p}.ctx4"]),
                  nd("Transpose", [f"{p}.ctx4"], [f"{p}.ctxT"], perm=[0, 2, 1, 3]),
                  nd("Reshape", [f"{p}.ctxT", "shape3"], [f"{p}.ctx"])]
        o = linear(f"{p}.ctx", f"{p}.o", hidden, hidden)
        nodes.append(nd("Add", [o, x], [f"{p}.res1"]))
        x = layer_norm(f"{p}.res1", f"{p}.ln1")
        h = linear(x, f"{p}.ff1", hidden, ffn)
        nodes += [nd("Div", [h, "sqrt2"], [f"{p}.g.div"]), nd("Erf", [f"{p}.g.div"], [f"{p}.g.erf"]),
                  nd("Add", [f"{p}.g.erf", "one"], [f"{p}.g.add"]), nd("Mul", [h, f"{p}.g.add"], [f"{p}.g.mul"]),
                  nd("Mul", [f"{p}.g.mul", "half"], [f"{p}.gelu"])]
        f2 = linear(f"{p}.gelu", f"{p}.ff2", ffn, hidden)
        nodes.append(nd("Add", [f2, x], [f"{p}.res2"]))
        x = layer_norm(f"{p}.res2", f"{p}.ln2")
    nodes.append(nd("Identity", [x], ["last_hidden"]))
    ids = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
           for n in ("input_ids", "attention_mask", "token_type_ids")]
    out = [helper.make_tensor_value_info("last_hidden", TensorProto.FLOAT, ["batch", "seq", hidden])]
    g = helper.make_graph(nodes, "bert_like", ids, out, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="pytorch")
    m.ir_version = 8
    return m


def bert_feeds(rng, batch=2, seq=12, vocab=100, pad=True) -> dict:
    """Token ids, segment ids and a right-padded attention mask (row ``b`` keeps ``seq - 3 * b`` tokens)."""
    ids = rng.integers(0, vocab, (batch, seq)).astype(np.int64)
    seg = (np.arange(seq) >= seq // 2).astype(np.int64)[None].repeat(batch, 0)
    mask = np.ones((batch, seq), np.int64)
    if pad:
        for b in range(batch):
            mask[b, seq - 3 * b:] = 0
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": seg}


def ort_optimized(model, level: str = "extended"):
    """``model`` rewritten by onnxruntime's CPU graph optimizer at ``level`` (``basic``/``extended``/``all``),
    as its ``optimized_model_filepath`` writes it."""
    import os
    import tempfile

    import onnx
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.graph_optimization_level = {"basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                                     "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
                                     "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[level]
    with tempfile.TemporaryDirectory() as tmp:
        opts.optimized_model_filepath = os.path.join(tmp, "opt.onnx")
        ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        return onnx.load(opts.optimized_model_filepath)


def transformers_optimized(model, model_type="bert", heads=4, hidden=64, opt_level=0, **options):
    """``model`` through ``onnxruntime.transformers.optimizer.optimize_model`` (its Python fusions, then
    onnxruntime's graph optimizer at ``opt_level``); ``options`` set ``FusionOptions`` fields."""
    import logging

    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model
    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
    fusion = FusionOptions(model_type)
    for k, v in options.items():
        setattr(fusion, k, v)
    copy = type(model)()
    copy.CopyFrom(model)   # optimize_model rewrites the model it is given
    opt = optimize_model(copy, model_type=model_type, num_heads=heads, hidden_size=hidden, opt_level=opt_level,
                         optimization_options=fusion, use_gpu=False)
    return opt.model


def op_counts(model) -> dict[str, int]:
    """``{"domain.Op": count}`` of the model's nodes (the default domain without a prefix)."""
    from collections import Counter
    return dict(Counter(f"{n.domain}.{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type
                        for n in model.graph.node))
