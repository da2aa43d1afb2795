"""Readable text for expressions and loop IR (C-like, one statement per line)."""
from __future__ import annotations

import contextvars

from . import expr as E
from . import stmt as S
from . import dtype as dt

# display names of the loop variables of the statement being printed (distinct Vars that share a
# name, such as a producer's `i` inside its consumer's `i`, print as `i` and `i_1`)
_names: contextvars.ContextVar[dict] = contextvars.ContextVar("names", default={})  # noqa: B039 - read only

_PREC = {E.Or: 1, E.And: 2, E.EQ: 3, E.NE: 3, E.LT: 4, E.LE: 4, E.GT: 4, E.GE: 4,
         E.Add: 5, E.Sub: 5, E.Mul: 6, E.Div: 6, E.Mod: 6, E.FloorDiv: 6, E.FloorMod: 6}


def expr_str(e, parent_prec: int = 0) -> str:
    t = type(e)
    if isinstance(e, E.Var):
        return _names.get().get(e, e.name)
    if t is E.IntImm:
        if e.dtype == "bool":
            return "True" if e.value else "False"
        return str(e.value) if e.dtype == "int32" else f"{e.dtype}({e.value})"
    if t is E.FloatImm:
        return f"{e.value!r}f" if e.dtype == "float32" else f"{e.dtype}({e.value!r})"
    if t is E.StringImm:  # as C and TVM print strings
        return '"' + e.value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if t is E.Cast:
        return f"{e.dtype}({expr_str(e.value)})"
    if t in (E.Min, E.Max):
        return f"{t.__name__.lower()}({expr_str(e.a)}, {expr_str(e.b)})"
    if t in (E.FloorDiv, E.FloorMod) and dt.is_int(e.dtype):
        sym = "//" if t is E.FloorDiv else "%"
    elif t is E.Mod:
        return f"truncmod({expr_str(e.a)}, {expr_str(e.b)})"
    elif t is E.Div and dt.is_int(e.dtype):
        return f"truncdiv({expr_str(e.a)}, {expr_str(e.b)})"
    else:
        sym = getattr(e, "symbol", None)
    if isinstance(e, E.BinaryOp):
        p = _PREC[t]
        s = f"{expr_str(e.a, p)} {sym} {expr_str(e.b, p + 1)}"
        return f"({s})" if p < parent_prec else s
    if t is E.Not:
        return f"!{expr_str(e.a, 9)}"
    if t is E.Select:
        return f"select({expr_str(e.cond)}, {expr_str(e.true_value)}, {expr_str(e.false_value)})"
    if t is E.Call:
        from .bitops import BIT_OPS
        if e.name in BIT_OPS:  # (a << b), ~a
            op = BIT_OPS[e.name][0]
            args = [expr_str(a) for a in e.args]
            return f"{op}{args[0]}" if len(args) == 1 else f"({args[0]} {op} {args[1]})"
        return f"{e.name}({', '.join(expr_str(a) for a in e.args)})"
    if t is E.TensorLoad:
        return f"{e.tensor.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if t is E.BufferLoad:
        return f"{e.buffer.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if t is E.Reduce:
        axes = ", ".join(iv.var.name for iv in e.axis)
        where = "" if E.is_const(e.condition, 1) else f", where={expr_str(e.condition)}"
        init = "" if e.init is None else f", init={_tuple_str(e.init)}"
        pick = f"[{e.value_index}]" if isinstance(e.source, tuple) else ""
        return f"{e.combiner.name}({_tuple_str(e.source)}, axis=[{axes}]{where}{init}){pick}"
    if t is E.Ramp:
        return f"ramp({expr_str(e.base)}, {expr_str(e.stride)}, {e.lanes})"
    if t is E.Broadcast:
        return f"x{e.lanes}({expr_str(e.value)})"
    if t is E.Let:
        return f"(let {e.var.name} = {expr_str(e.value)} in {expr_str(e.body)})"
    if hasattr(e, "text"):  # nodes defined outside expr.py print themselves
        return e.text(expr_str)
    return f"<{t.__name__}>"


def _tuple_str(x) -> str:
    return f"({', '.join(expr_str(v) for v in x)})" if isinstance(x, tuple) else expr_str(x)


def stmt_str(s, indent: int = 0) -> str:
    lines: list[str] = []
    token = _names.set(_display_names(s))
    try:
        _emit(s, indent, lines)
    finally:
        _names.reset(token)
    return "\n".join(lines)


def expr_text(e, names: dict | None = None) -> str:
    """``e`` printed with the given display names for its variables."""
    token = _names.set(names or {})
    try:
        return expr_str(e)
    finally:
        _names.reset(token)


def display_names(s) -> dict:
    """Distinct display names for the loop variables bound in ``s``."""
    return _display_names(s)


def _display_names(s) -> dict:
    from .visitor import collect
    names, taken = {}, {}
    for node in collect(s, (S.For, S.LetStmt, E.Let)):
        v = node.loop_var if isinstance(node, S.For) else node.var
        if v in names:
            continue
        k = taken.get(v.name, 0)
        taken[v.name] = k + 1
        names[v] = v.name if k == 0 else f"{v.name}_{k}"
    return names


def _emit(s, ind: int, out: list[str]) -> None:
    pad = "  " * ind
    t = type(s)
    if t is S.Seq:
        for x in s.stmts:
            _emit(x, ind, out)
    elif t is S.For:
        kind = "" if s.kind == S.SERIAL else f"{s.kind} "
        tag = f" [{s.thread_tag}]" if s.thread_tag else ""
        ann = "".join(f" #{k}={_short(v)}" for k, v in s.annotations)
        lo = "" if E.is_const(s.min, 0) else f"{expr_str(s.min)}, "
        out.append(f"{pad}{kind}for ({expr_str(s.loop_var)}, {lo}{expr_str(s.extent)}){tag}{ann} {{")
        _emit(s.body, ind + 1, out)
        out.append(pad + "}")
    elif t is S.BufferStore:
        idx = ", ".join(expr_str(i) for i in s.indices)
        out.append(f"{pad}{s.buffer.name}[{idx}] = {expr_str(s.value)}")
    elif t is S.Allocate:
        shape = " * ".join(expr_str(x) for x in s.buffer.shape) or "1"
        out.append(f"{pad}allocate {s.buffer.name}[{s.buffer.dtype} * {shape}] {s.buffer.scope}")
        _emit(s.body, ind, out)
    elif t is S.IfThenElse:
        out.append(f"{pad}if ({expr_str(s.condition)}) {{")
        _emit(s.then_case, ind + 1, out)
        if s.else_case is not None:
            out.append(pad + "} else {")
            _emit(s.else_case, ind + 1, out)
        out.append(pad + "}")
    elif t is S.Evaluate:
        out.append(pad + expr_str(s.value))
    elif t is S.LetStmt:
        out.append(f"{pad}{expr_str(s.var)} = {expr_str(s.value)}")
        _emit(s.body, ind, out)
    elif t is S.Attr:
        value = _short(s.value.value) if isinstance(s.value, E.StringImm) else expr_str(s.value)
        out.append(f"{pad}// attr {s.key} = {value}")
        _emit(s.body, ind, out)
    else:
        out.append(f"{pad}<{t.__name__}>")


def _short(value) -> str:
    """A pragma value; long code (``import_llvm`` / ``import_c``) as its line count."""
    text = str(value)
    return f"<{text.count(chr(10)) + 1} lines>" if "\n" in text else text


def func_str(f) -> str:
    args = ", ".join(f"{b.name}: {b.dtype}[{', '.join(expr_str(x) for x in b.shape)}]" for b in f.buffers)
    sizes = "".join(f", {v.name}: {v.dtype}" for v in f.size_vars)
    head = dict(f.attrs).get("analysis")
    text = f"def {f.name}({args}{sizes}) {{\n{stmt_str(f.body, 1)}\n}}"
    return f"{head}\n{text}" if head else text
