"""``codegen.model.build``: the one model driver.  Its schedule source comes from the tensorir-level
dispatch context (no autotune import), a schedule that fails to build is handed back to the source,
and codegen builds a model without importing the tuner."""
import os
import subprocess
import sys

import numpy as np
import pytest

import codegen
from codegen.model.build import PROFILES, fused_graph, model_kernels
from tensorir.graph.schedules import kernel_schedule
from tensorir import graph
from tensorir.graph import TensorType, Var, call
from tensorir.schedule.dispatch import DispatchContext

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _graph():
    x, y = Var("x", TensorType((4, 16), "float32")), Var("y", TensorType((16,), "float32"))
    s = call("add", x, y)
    return graph.Graph((x, y), (call("nn.softmax", s), call("tanh", s)), output_names=("p", "t"))


class Probe:
    """A schedule source: the first answer for each kernel is a schedule that does not build (another
    kernel's), handed back through ``reject``; then its default schedule with a probe origin."""

    def __init__(self, target):
        self.target, self.asked, self.rejected, self.warned = target, [], [], 0
        self.other = None

    def __call__(self, kt):
        self.asked.append(kt)
        if self.other is None:
            self.other = kt
        if kt is not self.other and kt not in [r for r, _ in self.rejected]:
            return kernel_schedule(self.other, self.target)[0], {"kind": "probe", "bad": True}
        return kernel_schedule(kt, self.target)[0], {"kind": "probe", "kernel": kt.kernel.name}

    def reject(self, kt, error):
        self.rejected.append((kt, error))
        return True

    def warn_missing(self):
        self.warned += 1


class ProbeContext(DispatchContext):
    def __init__(self):
        self.sources = []

    def model_schedule(self, target):
        self.sources.append(Probe(target))
        return self.sources[-1]


def test_build_takes_its_schedules_from_the_dispatch_context():
    g = _graph()
    with ProbeContext() as ctx:
        m = codegen.build_model(g, "llvm")
    (probe,) = ctx.sources
    assert probe.target.kind == "llvm" and probe.warned == 1
    steps = m.run_list.steps
    assert len(steps) >= 2 and all(s.schedule["kind"] == "probe" and "bad" not in s.schedule for s in steps)
    assert len(probe.rejected) == len(steps) - 1          # every kernel but the first got the bad one first
    assert all(isinstance(e, Exception) for _, e in probe.rejected)
    rng = np.random.default_rng()
    x, y = rng.standard_normal((4, 16)).astype("float32"), rng.standard_normal(16).astype("float32")
    want = graph.evaluate(g, {"x": x, "y": y})
    for b in m.buffers:
        b.fill(np.nan)
    for got, ref in zip(m(x=x, y=y), want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6 * np.abs(ref).max())


def test_explicit_schedule_wins_over_the_context():
    g = _graph()
    with ProbeContext() as ctx:
        m = codegen.build_model(g, "llvm", schedule=lambda kt: None)
    assert ctx.sources == [] and all(s.schedule["kind"] == "default" for s in m.run_list.steps)


def test_kernels_stage_lowers_with_the_target_computes():
    """CUDA's profile keeps N-d dense (no reshape around the GEMM); the CPU lowers the registered
    compute (rows flattened)."""
    x = Var("x", TensorType((2, 3, 8), "float32"))
    g = graph.Graph((x,), (call("nn.dense", x, graph.Const(np.ones((5, 8), "float32"))),))
    dense = {}
    for kind in PROFILES:
        (mk,) = model_kernels(fused_graph(g, {}, kind), kind)
        assert mk.error is None and len(mk.nodes) == 1
        dense[kind] = [tuple(int(d) for d in t.shape) for t in _tensors(mk.te.outputs) if t.op.tag == "dense"]
    assert dense == {"llvm": [(6, 5)], "cuda": [(2, 3, 5)]}


def _tensors(outputs) -> list:
    """Every compute tensor of a DAG."""
    from tensorir.tensor import ComputeOp
    seen, todo = [], list(outputs)
    while todo:
        t = todo.pop()
        if t not in seen and isinstance(t.op, ComputeOp):
            seen.append(t)
            todo += list(t.op.input_tensors)
    return seen


@pytest.mark.parametrize("target", ["llvm", "cuda"])
def test_codegen_builds_without_importing_autotune(target):
    code = ("import sys, codegen\n"
            "from tensorir import graph\n"
            "from tensorir.graph import TensorType, Var, call\n"
            "x = Var('x', TensorType((3, 4), 'float32'))\n"
            f"m = codegen.build_model(graph.Graph((x,), (call('exp', x),)), {target!r})\n"
            "assert not [k for k in sys.modules if k.split('.')[0] == 'autotune'], sorted(sys.modules)\n")
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
