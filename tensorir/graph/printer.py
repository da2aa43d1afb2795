"""Text form of a graph: one line per node, ``%7 = nn.conv2d(%x, %w1, strides=[2, 2]) : float32[...]``.

Fused kernels print first, each as its own small graph; the main graph then calls them by name."""
from __future__ import annotations

import numpy as np

from .ir import Const, Graph, Kernel, subgraphs

_INLINE_MAX = 8
_SUFFIX = {"float32": "f", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64", "int32": "i32", "bool": ""}


def _scalar(x, dtype: str) -> str:
    if dtype == "bool":
        return "True" if x else "False"
    s = repr(float(x)) if dtype.startswith("float") else str(int(x))
    return s + _SUFFIX.get(dtype, ":" + dtype)


def const_text(c: Const) -> str | None:
    """The inline text of a small constant (None for one printed by name)."""
    v, dtype = c.value, str(c.value.dtype)
    if v.ndim == 0:
        return _scalar(v, dtype)
    if v.ndim == 1 and v.size <= _INLINE_MAX and c.name is None and not dtype.startswith("float"):
        return "[" + ", ".join(_scalar(x, dtype) for x in v) + "]"
    return None


def attr_text(v) -> str:
    if isinstance(v, Graph):
        return f"@{v.name}"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(attr_text(x) for x in v) + "]"
    if isinstance(v, np.ndarray):
        return attr_text(v.tolist())
    if isinstance(v, float):
        return repr(v)
    return str(v)


def call_text(op_name: str, args: list[str], attrs) -> str:
    parts = args + [f"{k}={attr_text(v)}" for k, v in attrs.items()]
    return f"{op_name}({', '.join(parts)})"


def _body_lines(g: Graph, indent: str) -> list[str]:
    names: dict[int, str] = {id(v): f"%{v.name}" for v in (*g.inputs, *g.params)}
    lines, unnamed = [], 0
    for c in g.constants:
        text = const_text(c)
        if text is None:
            names[id(c)] = f"%{c.name}" if c.name else f"%c{unnamed}"
            unnamed += c.name is None
            lines.append(f"{indent}{names[id(c)]} = constant : {c.type}")
        else:
            names[id(c)] = text
    for i, n in enumerate(g.nodes):
        args = [names.get(id(a), "%?") for a in n.inputs]
        names[id(n)] = f"%{i}"
        attrs = {} if isinstance(n.op, Kernel) else n.attrs
        lines.append(f"{indent}%{i} = {call_text(n.op_name, args, attrs)} : {n.type}")
    outs = [names.get(id(o), "%?") for o in g.outputs]
    ret = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"
    lines.append(f"{indent}return {ret}")
    return lines


def _header(keyword: str, name: str, g: Graph, comment: str = "") -> str:
    args = [f"%{v.name}: {v.type}" for v in (*g.inputs, *g.params)]
    return f"{keyword} {name}({', '.join(args)}) {{{comment}"


def kernel_text(k: Kernel) -> str:
    return "\n".join([_header("kernel", k.name, k.body, f"  # {k.pattern}"), *_body_lines(k.body, "  "), "}"])


def graph_text(g: Graph) -> str:
    """The kernels ``g`` calls and the subgraphs its control flow holds (each printed before its use,
    named ``@name`` where used), then ``g`` itself."""
    parts = [kernel_text(k) for k in g.kernels]
    seen: set[int] = set()
    for n in g.nodes:
        for sub in subgraphs(n):
            if id(sub) not in seen:
                seen.add(id(sub))
                parts.append(graph_text(sub))
    parts.append("\n".join([_header("graph", g.name, g), *_body_lines(g, "  "), "}"]))
    return "\n".join(parts)
