"""``graph.check(g, target)``: what a build of ``g`` would refuse, known before any code is generated.

``unsupported_ops`` lists only the ONNX nodes no converter took; a build also fails where a converter
took a node but its compute refuses the shapes, dtypes or attributes, where a graph pass fails, or
where a kernel's default schedule or lowering does.  ``check`` runs exactly the build's steps short of
code generation (the graph passes, then for each distinct fused kernel its tensor-expression DAG, its
default schedule and, with ``lower=True``, its lowering) and reports every failure with the nodes
behind it::

    report = graph.check(g, "llvm", params)
    if not report.ok:
        print(report)      # one line per culprit: node, op type, why

``report.ok`` means ``codegen.build_model(g, target, params)`` builds every kernel natively (a failure in
code generation proper, LLVM or nvcc, is not predicted).  Each problem says whether
``fallback="reference"`` would run it (a kernel that does not compile, on a CPU target) or the build
fails whatever the fallback (a graph pass, a CUDA kernel, an unsupported target).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .ir import Graph, GraphError, Kernel
from .op.control import is_control
from .printer import kernel_text

TARGET_KINDS = ("llvm", "cuda")


@dataclass(frozen=True)
class Problem:
    """One culprit: ``where`` (a node of the model, a kernel, the graph or the target), its ``op`` type,
    ``reason``, and whether ``fallback="reference"`` would run it instead."""
    where: str
    op: str
    reason: str
    fallback: bool

    def __str__(self) -> str:
        return f"{self.where} ({self.op}): {self.reason}" if self.op else f"{self.where}: {self.reason}"


@dataclass
class CheckReport:
    """Every problem a build of the graph for ``target`` would meet; ``graph``: the optimized (fused) graph
    the build would compile, None if the graph passes failed."""
    target: str
    problems: list[Problem] = field(default_factory=list)
    graph: Graph | None = None

    @property
    def ok(self) -> bool:
        """Every kernel builds natively."""
        return not self.problems

    @property
    def fatal(self) -> list[Problem]:
        """The problems no fallback avoids."""
        return [p for p in self.problems if not p.fallback]

    def __str__(self) -> str:
        if self.ok:
            return f"graph.check: every kernel builds natively for {self.target}"
        lines = [f"graph.check: {len(self.problems)} problem(s) for {self.target}:"]
        lines += [f"  {p}" + ("" if p.fallback else "  [no fallback]") for p in self.problems]
        return "\n".join(lines)


def check(g: Graph, target="llvm", params: dict | None = None, *, lower: bool = True,
          computes: dict | None = None) -> CheckReport:
    """What ``codegen.build_model(g, target, params)`` would refuse (see the module).  ``lower=False``
    skips lowering each kernel (the costliest step checked: about a third of a small model's build) and
    so does not predict a failure there (``tiletune compile`` checks so; the build reports such a kernel).
    ``computes``: the target's replacement computes (``codegen.model.cuda.CUDA_COMPUTES`` for ``cuda``;
    tensorir cannot import codegen)."""
    from .passes import optimize
    target = str(target)
    kind = target.split()[0] if target.split() else ""
    report = CheckReport(target)
    if kind not in TARGET_KINDS:
        report.problems.append(Problem(f"target {target!r}", "", f"build_model builds for {', '.join(TARGET_KINDS)}",
                                       False))
        return report
    if not isinstance(g, Graph):
        raise TypeError(f"graph.check: expected a tensorir.graph.Graph, got {type(g).__name__}")
    try:
        fused = g if not g.params and all(isinstance(n.op, Kernel) or is_control(n)
                                          for sub in g.walk() for n in sub.nodes) \
            else optimize(g, params or {}, target=target)
    except (GraphError, ValueError, TypeError, NotImplementedError, RecursionError) as e:
        report.problems.append(Problem("graph", "", f"the graph passes fail: {_first_line(e)}", False))
        return report
    report.graph = fused
    seen: set[str] = set()
    for node in [n for sub in fused.walk() for n in sub.nodes if not is_control(n)]:
        if not isinstance(node.op, Kernel):
            report.problems.append(Problem(f"node {node.op_name}", str(node.op), "not fused into a kernel", False))
            continue
        key = kernel_text(Kernel("k", node.op.body, node.op.pattern))
        if key in seen:
            continue
        seen.add(key)
        error = _kernel_error(node.op, kind, lower, computes)
        if error is not None:
            report.problems += _culprits(node.op, error, fallback=kind == "llvm")
    return report


def _kernel_error(kernel: Kernel, kind: str, lower: bool, computes) -> Exception | None:
    """The error building ``kernel`` meets short of code generation, or None."""
    from .lower_te import lower_kernel
    try:
        kt = lower_kernel(kernel, computes)
        from .schedules import kernel_schedule
        s, _ = kernel_schedule(kt, kind)
        if lower:
            from .. import lower as te_lower
            te_lower(s, kt.args, name=kernel.name, expand=kind != "cuda")
    except Exception as e:  # noqa: BLE001 - whatever stops the build of this kernel is the answer
        return e
    return None


def _label(n) -> tuple[str, str]:
    """``(where, op type)`` of a node: the model's node name and ONNX op type where known."""
    from .op.onnx_fallback import OP, op_label
    op = op_label(n.attrs["op_type"], n.attrs["domain"]) if n.op == OP else str(n.op)
    return (f"node {n.name}" if n.name else f"a {op} node"), op


def _culprits(kernel: Kernel, error: Exception, fallback: bool) -> list[Problem]:
    """The nodes of ``kernel`` behind ``error``: those with no compute (an ONNX node no converter took,
    with the converter's reason), else the op the error names, else every node of the kernel."""
    from .op.onnx_fallback import OP
    from .op.registry import get_op
    nodes = [n for n in kernel.body.nodes if isinstance(n.op, str)]

    def no_compute(n) -> bool:
        try:
            return get_op(n.op).topi is None
        except GraphError:
            return True
    missing = [n for n in nodes if no_compute(n)]
    if missing:
        return [Problem(*_label(n), (f"no converter: {n.attrs.get('reason')}" if n.op == OP and n.attrs.get("reason")
                                     else "no converter for this op" if n.op == OP else "no compute")
                        + f" (kernel {kernel.name})", fallback) for n in missing]
    why = _first_line(error).removeprefix(f"kernel {kernel.name}: ")
    named = [n for n in nodes if why.startswith(f"{n.op}:")][:1]      # lower_kernel names the op
    if named:
        return [Problem(*_label(named[0]), f"{why} (kernel {kernel.name})", fallback)]
    ops = ", ".join(dict.fromkeys(_label(n)[1] for n in nodes))
    return [Problem(f"kernel {kernel.name}", ops, f"{type(error).__name__}: {why}", fallback)]


def _first_line(e: Exception) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0][:300]


__all__ = ["check", "CheckReport", "Problem"]
