"""Elementwise epilogues stored straight from tensor-core accumulator fragments (``warp`` buffers).

A GEMM's output stage ``out[.., i, j] = f(acc[.., i, j], t0[j], t1[.., i, j], ...)`` (bias, activation,
residual, cast: any elementwise ``f`` of the accumulator and of tensors indexed by the output column or by
the output element) becomes, per 16 x 8 accumulator tile, one call that each lane runs on its four values
(the fragment layout of ``codegen/cuda/mma.py``).  :func:`fragment_epilogue` reads ``f`` off the stage
(or says why it cannot); :func:`intrin_fragment_epilogue` is its tensor intrinsic, whose compute is ``f``
itself (so ``tensorize`` checks the match); the CUDA renderer prints the device function from
:data:`EPILOGUES` (``f`` over the variables ``v``, the accumulator value, and ``x0, x1, ...``, the other
tensors' values), with the backend's own expression printer.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ...buffer import decl_buffer
from ...expr import Expr, TensorLoad, Var
from ...extern import call_extern
from ...printer import expr_text
from ...stmt import Evaluate
from ...tensor import compute, placeholder
from ...tensor_intrin import decl_tensor_intrin
from ...visitor import Mutator, substitute


@dataclass(frozen=True)
class Epilogue:
    """``expr`` over ``value`` (float32, the accumulator) and ``inputs`` (``(Var, "col" | "tile")``: a value of
    a tensor indexed by the output column, or by the output element); its device function's name."""
    name: str
    expr: Expr
    value: Var
    inputs: tuple


#: device function name -> its epilogue (filled by :func:`fragment_epilogue`, read by the CUDA renderer)
EPILOGUES: dict[str, Epilogue] = {}


def fragment_epilogue(body: Expr, axes: list, acc) -> tuple[Epilogue, list] | str:
    """``(epilogue, the other tensors in order of first read)`` of an output stage's ``body`` over its axes
    (IterVars from 0; indices simplified over their ranges, as ``tensorize`` matches them) that reads the
    accumulator tensor ``acc`` at ``[.., i, j]``, or why it is not one."""
    from ...arith import simplify
    body = simplify(body, {iv.var: (0, int(iv.dom.extent) - 1) for iv in axes})
    axes = [iv.var for iv in axes]
    value = Var("v", "float32")
    tensors, inputs, why = [], [], []

    class Rewrite(Mutator):
        def visit_TensorLoad(self, e: TensorLoad):
            idx = list(e.indices)
            if e.tensor.op is acc.op:
                if not _vars_are(idx, axes):
                    why.append(f"the accumulator is read at [{', '.join(map(expr_text, idx))}], not its own element")
                return value
            kind = "col" if _vars_are(idx, axes[-1:]) else "tile" if _vars_are(idx, axes[len(axes) - len(idx):]) \
                and len(idx) >= 2 else None
            if kind is None:
                why.append(f"{e.tensor.name} is read at [{', '.join(map(expr_text, idx))}], neither by the output "
                           "column nor by the output element")
                return e
            for t, (v, k) in zip(tensors, inputs):
                if t is e.tensor and k == kind:
                    return v
            v = Var(f"x{len(tensors)}", e.dtype)
            tensors.append(e.tensor)
            inputs.append((v, kind))
            return v

    expr = Rewrite().visit(body)
    if why:
        return why[0]
    if not any(isinstance(x, Var) and x is value for x in _vars(expr)):
        return "the output does not read the accumulator"
    text = expr_text(expr) + "|" + ",".join(f"{v.name}:{v.dtype}:{k}" for v, k in inputs)
    name = "tt_epilogue_" + hashlib.sha1(text.encode()).hexdigest()[:12]
    ep = EPILOGUES.setdefault(name, Epilogue(name, expr, value, tuple(inputs)))
    return ep, tensors


def intrin_fragment_epilogue(ep: Epilogue, out_dtype: str, dst_scope: str = "global"):
    """The 16 x 8 accumulator tile (``warp`` buffer) through ``ep`` into ``dst_scope`` memory."""
    c = placeholder((16, 8), "float32", name="acc")
    ps = [placeholder((8,) if kind == "col" else (16, 8), v.dtype, name=f"in{k}") for k, (v, kind) in enumerate(ep.inputs)]

    def f(i, j):
        sub = {ep.value: c[i, j]}
        for p, (v, kind) in zip(ps, ep.inputs):
            sub[v] = p[j] if kind == "col" else p[i, j]
        return substitute(ep.expr, sub)
    d = compute((16, 8), f, name="store")
    if d.dtype != out_dtype:
        raise ValueError(f"fragment epilogue {ep.name}: computes {d.dtype}, the output is {out_dtype}")

    def buf(t, scope, name):
        strides = [Var(f"{name}_ld", "int32"), 1] if len(t.shape) == 2 else [1]
        return decl_buffer(t.shape, t.dtype, name, scope=scope, strides=strides, offset_factor=1)
    binds = {c: buf(c, "warp", "ep_acc"), d: buf(d, dst_scope, "ep_dst")}
    binds.update({p: buf(p, "global", f"ep_in{k}") for k, p in enumerate(ps)})
    order = d.op.input_tensors          # the order of ``ins``

    def body(ins, outs):
        got = dict(zip([(t.op, t.value_index) for t in order], ins))
        bc, (bd,) = got[(c.op, 0)], outs
        args = [bd.access_ptr("w"), bd.strides[0], bc.access_ptr("r"), bc.elem_offset, bc.strides[0]]
        for p, (_, kind) in zip(ps, ep.inputs):
            b = got[(p.op, 0)]
            args += [b.access_ptr("r")] + ([b.strides[0]] if kind == "tile" else [])
        return Evaluate(call_extern("int32", ep.name, *args))
    return decl_tensor_intrin(d.op, body, name=f"{ep.name}_{out_dtype}", binds=binds)


def _vars_are(idx, want) -> bool:
    return len(idx) == len(want) and all(isinstance(x, Var) and x is w for x, w in zip(idx, want))


def _vars(e):
    from ...visitor import collect
    return collect(e, Var)


__all__ = ["EPILOGUES", "Epilogue", "fragment_epilogue", "intrin_fragment_epilogue"]
