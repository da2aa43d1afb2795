"""A differential fuzzer of the ONNX frontend: random small ONNX graphs (opsets 13-18, the ops of
:mod:`onnx_fuzz_ops`, :mod:`onnx_fuzz_nn`) built by tiletune for LLVM and run against onnxruntime on
fresh random data, every buffer poisoned with NaN before the run. ``generate(seed)`` gives the same
model for a seed.

Each seed ends as one of: ``ok``; ``refused`` (a clear :class:`GraphError` at import, or an op left to
the reference fallback, with the converter's reason); ``wrong`` (a shape, dtype or value that differs
from onnxruntime beyond a tolerance scaled to the data); ``crash`` (anything else: a raw exception, or a
build failure of a graph whose ops were all accepted); ``invalid`` (onnxruntime itself refuses the model
or gives non-finite values: the generator's fault, not tiletune's; the detail says whether tiletune
refuses such a model too).

``python tests/onnx_fuzz.py 0:2000`` runs seeds 0..1999 and prints a summary; ``--show SEED`` prints
one seed's model and result (the reproducer to minimize)."""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_fuzz_nn as nn
import onnx_fuzz_ops as ops

#: (op generator, weight): how often each is drawn.
GENERATORS = [(ops.unary, 3), (ops.activation, 2), (ops.discontinuous, 1), (ops.clip, 1), (ops.binary, 5),
              (ops.where, 1), (ops.reshape, 3), (ops.flatten, 1), (ops.squeeze_unsqueeze, 2), (ops.transpose, 2),
              (ops.concat, 2), (ops.split, 2), (ops.slice_, 5), (ops.gather, 2), (ops.pad, 3), (ops.expand_tile, 2),
              (ops.cast_cumsum, 1), (ops.positive_math, 2), (ops.shape_chain, 1), (ops.misc, 1), (ops.int_ops, 2),
              (nn.resize, 6), (nn.reduce, 3), (nn.arg, 1), (nn.softmax, 2), (nn.pool, 3), (nn.conv, 3), (nn.matmul, 2),
              (nn.gemm, 2), (nn.norm, 2), (nn.lp_pool, 1), (nn.conv_transpose, 2), (nn.depth_space, 1), (nn.einsum, 1)]

#: Ops whose output is an exact function of exact inputs (no rounding), so discontinuous ops may read it.
EXACT_OPS = {"Identity", "Neg", "Abs", "Relu", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat",
             "Split", "Slice", "Gather", "Pad", "Expand", "Tile", "Max", "Min", "MaxPool", "GlobalMaxPool",
             "ReduceMax", "ReduceMin", "Floor", "Ceil", "Round", "Sign", "Where", "Clip"}
MAX_ELEMENTS = 2048
RTOL = 1e-4


class Invalid(Exception):
    """The generator made a node that ONNX's shape inference refuses (that op is not added)."""


class Builder:
    """A growing ONNX graph whose tensor shapes come from ONNX's shape inference after every node."""

    def __init__(self, rng, opset: int):
        from onnx import helper
        self.rng, self.opset, self.helper = rng, opset, helper
        self.inputs, self.nodes, self.inits = [], [], []
        self.shapes: dict[str, tuple] = {}
        self.dtypes: dict[str, int] = {}
        self.exacts: set[str] = set()
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def exact(self, x: str) -> bool:
        return x in self.exacts

    def add_input(self, shape) -> str:
        name = self.name("in")
        self.inputs.append(self.helper.make_tensor_value_info(name, 1, list(shape)))
        self.shapes[name], self.dtypes[name] = tuple(shape), 1
        self.exacts.add(name)
        return name

    def const(self, a) -> str:
        from onnx import numpy_helper
        name = self.name("c")
        a = np.asarray(a)
        self.inits.append(numpy_helper.from_array(a, name))
        self.shapes[name] = a.shape
        self.exacts.add(name)
        return name

    def partner(self, shape, exact: bool = False) -> str:
        """A float tensor of ``shape``: an existing one, a new graph input or an initializer."""
        same = [n for n, s in self.floats() if s == tuple(shape) and (self.exact(n) or not exact)]
        u = self.rng.random()
        if same and u < 0.4:
            return ops.rng_choice(self.rng, same)
        if u < 0.7 and len(self.inputs) < 3:
            return self.add_input(shape)
        return self.const(self.rng.uniform(-2, 2, shape).astype(np.float32))

    def floats(self) -> list[tuple[str, tuple]]:
        """Float tensors produced by nodes or graph inputs (not initializers)."""
        made = [o for n in self.nodes for o in n.output] + [i.name for i in self.inputs]
        return [(n, self.shapes[n]) for n in made if self.dtypes.get(n) == 1]

    def model(self, outputs: list[str]):
        h = self.helper
        outs = [h.make_tensor_value_info(o, self.dtypes[o], list(self.shapes[o])) for o in outputs]
        used = {i for n in self.nodes for i in n.input}
        g = h.make_graph(self.nodes, "fuzz", self.inputs, outs, [i for i in self.inits if i.name in used])
        m = h.make_model(g, opset_imports=[h.make_opsetid("", self.opset)])
        m.ir_version = 8
        return m

    def node(self, op: str, inputs: list[str], n_out: int = 1, **attrs) -> list[str]:
        from onnx import shape_inference
        outs = [self.name("t") for _ in range(n_out)]
        node = self.helper.make_node(op, inputs, outs, name=self.name(op.lower() + "_"), **attrs)
        self.nodes.append(node)
        try:
            inferred = shape_inference.infer_shapes(self.model([]), strict_mode=True)
        except Exception as e:  # noqa: BLE001  (onnx's InferenceError and friends)
            self.nodes.pop()
            raise Invalid(f"{op}: {str(e).splitlines()[0][:200]}") from None
        types = {vi.name: vi.type.tensor_type for vi in inferred.graph.value_info}
        for o in outs:
            t = types.get(o)
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim] if t is not None else [-1]
            if t is None or -1 in dims or int(np.prod(dims)) > MAX_ELEMENTS or 0 in dims:
                self.nodes.pop()
                raise Invalid(f"{op}: output {o} has shape {dims} (unknown, empty or too large)")
            self.shapes[o], self.dtypes[o] = tuple(dims), t.elem_type
        if op in EXACT_OPS and all(self.exact(i) for i in inputs if i and self.dtypes.get(i, 1) == 1):
            self.exacts.update(outs)
        if op == "Cast" and inputs[0] in self.exacts:
            self.exacts.update(outs)
        return outs


def _input_shape(rng) -> tuple:
    rank = int(ops.rng_choice(rng, [0, 1, 2, 2, 3, 3, 4, 4, 4]))
    return tuple(int(ops.rng_choice(rng, [1, 1, 2, 3, 4, 5, 6])) for _ in range(rank))


def generate(seed: int, only: tuple[str, ...] = ()):
    """``(model, feeds)`` for ``seed``: a graph of 1-5 random ops and random float inputs in [-2, 2]."""
    rng = np.random.default_rng(seed)
    b = Builder(rng, int(rng.integers(13, 19)))
    b.add_input(_input_shape(rng))
    gens, weights = zip(*[(g, w) for g, w in GENERATORS if not only or g.__name__ in only])
    p = np.array(weights, float) / sum(weights)
    last: list[str] = []
    for _ in range(int(rng.integers(1, 6))):
        for _attempt in range(20):
            floats = b.floats()
            x, shape = floats[-1] if rng.random() < 0.75 or len(floats) == 1 else ops.rng_choice(rng, floats)
            gen = gens[int(rng.choice(len(gens), p=p))]
            try:
                outs = gen(b, x, shape)
            except Invalid:
                continue
            if outs:
                last = outs
                break
    if not last:
        last = b.node("Identity", [b.inputs[0].name])
    read = {i for n in b.nodes for i in n.input}
    dead_ends = [o for n in b.nodes for o in n.output if o not in read and o not in last]
    extra = [n for n, _ in b.floats() if n not in last + dead_ends and n[0] == "t" and rng.random() < 0.1]
    model = b.model(last + dead_ends + extra[:1])
    data = np.random.default_rng(seed + 1_000_003)
    feeds = {vi.name: data.uniform(-2, 2, b.shapes[vi.name]).astype(np.float32) for vi in b.inputs}
    return model, feeds


@dataclass
class Result:
    kind: str      # ok, refused, wrong, crash, invalid
    detail: str = ""


def _reference(model, feeds):
    import onnxruntime as ort
    ort.set_default_logger_severity(4)
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _fallback_reasons(g) -> list[str]:
    from tensorir.graph.ir import Kernel
    out = []
    for n in g.nodes:
        if isinstance(n.op, Kernel):
            out += _fallback_reasons(n.op.body)
        elif n.op == "onnx.fallback":
            out.append(f"{n.attrs['op_type']}: {n.attrs['reason'] or 'no converter'}")
    return out


def _tiletune_view(model) -> str:
    """What tiletune's importer says of a model onnxruntime refuses (it should refuse it too)."""
    from tensorir import graph
    try:
        graph.from_onnx(model)
    except Exception as e:  # noqa: BLE001
        return f"; tiletune refuses it too ({type(e).__name__})"
    return "; tiletune imports it"


def compare(got, want) -> str:
    """'' when ``got`` matches ``want`` (shape, dtype, values within a tolerance scaled to the data)."""
    want = np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"shape/dtype {got.dtype}{list(got.shape)}, onnxruntime {want.dtype}{list(want.shape)}"
    if want.dtype.kind != "f":
        bad = got != want
        return f"{int(bad.sum())} of {want.size} elements differ" if bad.any() else ""
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    err = np.abs(got.astype(np.float64) - want)
    bad = ~(err <= RTOL * scale + RTOL * np.abs(want))     # NaN (a poisoned, unwritten element) is bad
    if bad.any():
        i = np.unravel_index(int(np.argmax(np.where(bad, np.nan_to_num(err, nan=np.inf), -1))), want.shape)
        return (f"{int(bad.sum())} of {want.size} elements differ; at {tuple(map(int, i))}: "
                f"tiletune {got[i]!r}, onnxruntime {want[i]!r} (scale {scale:.3g})")
    return ""


def run_case(seed: int, only: tuple[str, ...] = ()) -> Result:
    """Build ``generate(seed, only)`` with tiletune and compare with onnxruntime."""
    import codegen
    from tensorir import graph
    from tensorir.graph import GraphError
    model, feeds = generate(seed, only)
    try:
        want = _reference(model, feeds)
    except Exception as e:  # noqa: BLE001
        return Result("invalid", f"onnxruntime: {str(e).splitlines()[0][:300]}{_tiletune_view(model)}")
    if not all(np.isfinite(w).all() for w in want if np.asarray(w).dtype.kind == "f"):
        return Result("invalid", "onnxruntime gives non-finite values")
    try:
        g, params = graph.from_onnx(model)
    except GraphError as e:
        return Result("refused", f"import: {e}")
    except Exception as e:  # noqa: BLE001
        return Result("crash", f"import: {type(e).__name__}: {e}")
    reasons = _fallback_reasons(g)
    if reasons:
        return Result("refused", "fallback: " + "; ".join(sorted(set(reasons))))
    try:
        m = codegen.build_model(g, params=params)
        for buf in m.buffers:
            if buf.dtype.kind == "f":
                buf.fill(np.nan)
        got = m(**feeds)
    except Exception as e:  # noqa: BLE001  (every op was accepted: a build or run failure is a bug)
        return Result("crash", f"build/run: {type(e).__name__}: {e}")
    if len(got) != len(want):
        return Result("wrong", f"{len(got)} outputs, onnxruntime {len(want)}")
    for k, (a, w) in enumerate(zip(got, want)):
        msg = compare(np.asarray(a), w)
        if msg:
            return Result("wrong", f"output {model.graph.output[k].name}: {msg}")
    return Result("ok")


def describe(seed: int, only: tuple[str, ...] = ()) -> str:
    from onnx import printer
    model, feeds = generate(seed, only)
    return f"seed {seed}\n{printer.to_text(model)}"


def _reason_key(detail: str) -> str:
    """A refusal's reason without node names and numbers, to count refusals by kind."""
    import re
    return re.sub(r"'[^']*'|\d+", "_", detail)[:160]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("seeds", nargs="?", default="0:200", help="START:STOP (default 0:200)")
    p.add_argument("--show", type=int, help="print one seed's model and result")
    p.add_argument("--only", default="", help="comma-separated generator names (GENERATORS), e.g. resize,slice_")
    args = p.parse_args(argv)
    only = tuple(filter(None, args.only.split(",")))
    if args.show is not None:
        print(describe(args.show, only))
        print(run_case(args.show, only))
        return 0
    start, stop = (int(v) for v in args.seeds.split(":"))
    counts, failures, refusals, invalid = Counter(), [], Counter(), Counter()
    t0 = time.perf_counter()
    for seed in range(start, stop):
        r = run_case(seed, only)
        counts[r.kind] += 1
        if r.kind in ("wrong", "crash"):
            failures.append((seed, r))
            print(f"seed {seed}: {r.kind}: {r.detail[:400]}", flush=True)
        elif r.kind == "refused":
            refusals[_reason_key(r.detail)] += 1
        elif r.kind == "invalid":
            invalid[_reason_key(r.detail)] += 1
    print(f"\n{stop - start} seeds in {time.perf_counter() - t0:.0f} s: "
          + ", ".join(f"{k} {counts[k]}" for k in ("ok", "wrong", "crash", "refused", "invalid")))
    for title, c in (("refusals by reason", refusals), ("invalid (generator) by reason", invalid)):
        if c:
            print(f"{title}:")
            for reason, n in c.most_common():
                print(f"  {n:5d}  {reason}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
