"""Reductions inside larger expressions become stages of their own (as Halide accepts; TVM refuses).

``te.compute((n,), lambda i: te.sum(X[i, k], axis=k) / m, name="C")`` computes the reduction in a new
``ComputeOp`` named ``C.red0`` over the axes it uses (here ``i``) and ``C`` reads ``C.red0[i]``.  Every
reduction that is not TVM's form (the whole body; for several outputs, all results of one reducer
call, in order) is lifted this way, innermost first: ``C.red0``, ``C.red1``, ... in the order they
finish.  A lifted stage's axes are the compute's axes that the reduction reads, in the compute's
order, then the enclosing reduction axes it reads (a reduction nested in another one), each from 0.
One reducer call (the same ``Reduce`` object, or the results of one tuple reducer) is one stage.
A reduction in an arm of a select (or in the source of a reduction with ``where=``) is needed only
where that arm is taken: its stage reduces under that condition too when it can evaluate it, so a
read the condition protects (``i > 0`` around ``X[i - 1, k]``) stays protected.
"""
from __future__ import annotations

from dataclasses import replace

from .expr import Expr, Not, Reduce, Var, const, is_const, structural_key
from .intrin import all as all_of
from .visitor import Mutator, collect, substitute


def lift_reductions(name: str, axis: tuple, bodies: tuple, error) -> tuple:
    """``bodies`` with every reduction that is not TVM's top-level form read from its own stage;
    ``error(message)`` makes the exception for what cannot be lifted."""
    lifter = _Lifter(name, axis, error)
    if is_tvm_reduction(bodies):
        first = bodies[0]
        parts = lifter.inside(first)
        return tuple(_with_parts(b, parts) for b in bodies)
    return tuple(lifter.visit(b) for b in bodies)


def is_tvm_reduction(bodies: tuple) -> bool:
    """Whether ``bodies`` are TVM's reduction form: one non-tuple reduction as the whole (single) body,
    or all results of one tuple reducer call, in order."""
    if not all(isinstance(b, Reduce) for b in bodies):
        return False
    first = bodies[0]
    if not isinstance(first.source, tuple):
        return len(bodies) == 1
    return len(first.source) == len(bodies) and all(
        _key(r) == _key(first) and r.value_index == k for k, r in enumerate(bodies))


def _key(r: Reduce) -> tuple:
    """What the results of one reducer call share (by identity)."""
    return (id(r.combiner), id(r.source), tuple(id(a) for a in r.axis), id(r.condition), id(r.init))


def _with_parts(r: Reduce, parts: tuple) -> Reduce:
    source, condition, init = parts
    if source is r.source and condition is r.condition and init is r.init:
        return r
    return replace(r, source=source, condition=condition, init=init)


class _Lifter(Mutator):
    def __init__(self, name: str, axis: tuple, error):
        self.name, self.axis, self.error = name, axis, error
        self.enclosing: list = []     # reduce axes of the reductions being visited, outermost first
        self.lets: list[Var] = []     # variables bound by enclosing Lets
        self.guards: list[Expr] = []  # conditions under which the expression being visited is used
        self.lifted: dict = {}        # context key -> (original Reduce kept alive, (its op, read indices))
        self.parts: dict = {}         # context key -> lifted source, condition, init

    def inside(self, r: Reduce) -> tuple:
        """``r``'s source, condition and init with the reductions inside them lifted (once per call)."""
        key = self._context(r)
        if key not in self.parts:
            self.enclosing.extend(r.axis)
            try:
                condition, init = self.visit(r.condition), self._visit_value(r.init)
                source = self._guarded(condition, lambda: self._visit_value(r.source))
                self.parts[key] = (source, condition, init)
            finally:
                del self.enclosing[len(self.enclosing) - len(r.axis):]
        return self.parts[key]

    def _context(self, r: Reduce) -> tuple:
        """One reducer call in one context (the same call under other conditions is another stage)."""
        return _key(r), tuple(id(iv) for iv in self.enclosing), structural_key(tuple(self.guards))

    def _guarded(self, cond: Expr, visit):
        self.guards.append(cond)
        try:
            return visit()
        finally:
            self.guards.pop()

    def visit_Select(self, e):
        """A reduction in one arm is needed only where the condition picks that arm: the lifted stage
        reduces under that condition too (when it can evaluate it), so a read the condition protects
        stays protected."""
        cond = self.visit(e.cond)
        t = self._guarded(cond, lambda: self.visit(e.true_value))
        f = self._guarded(Not("bool", cond), lambda: self.visit(e.false_value))
        if cond is e.cond and t is e.true_value and f is e.false_value:
            return e
        return replace(e, cond=cond, true_value=t, false_value=f)

    def visit_Let(self, e):
        value = self.visit(e.value)
        self.lets.append(e.var)
        try:
            body = self.visit(e.body)
        finally:
            self.lets.pop()
        return e if value is e.value and body is e.body else replace(e, value=value, body=body)

    def visit_Reduce(self, r: Reduce) -> Expr:
        key = self._context(r)
        if key not in self.lifted:
            self.lifted[key] = (r, self._stage(r))
        op, reads = self.lifted[key][1]
        return op.output(r.value_index)(*reads)

    def _outer(self, r: Reduce) -> list:
        """The compute's axes, then the enclosing reduce axes, that ``r`` uses: its stage's axes."""
        used = set(_vars(r)) - {iv.var for iv in r.axis}
        bad = [v for v in self.lets if v in used]
        if bad:
            raise self.error(f"compute {self.name}: a reduction inside a larger expression uses {bad[0].name}, "
                             "bound by a let inside the body; compute the reduction in its own stage")
        return [iv for iv in self.axis if iv.var in used] + [iv for iv in self.enclosing if iv.var in used]

    def _guards(self, r: Reduce) -> list:
        """The enclosing conditions the stage of ``r`` can evaluate (they use no other axis)."""
        others = {iv.var for iv in self.axis} | {iv.var for iv in self.enclosing} | set(self.lets)
        others -= {iv.var for iv in self._outer(r)}
        return [g for g in self.guards if not is_const(g, 1) and not any(v in others for v in _vars(g))]

    def _context(self, r: Reduce) -> tuple:
        """One reducer call in one context (under other conditions it is another stage)."""
        return _key(r), tuple(id(iv) for iv in self.enclosing), structural_key(tuple(self._guards(r)))

    def _stage(self, r: Reduce):
        """The ComputeOp computing ``r`` (every result of its reducer call) and the indices to read it at."""
        from .tensor import DATA_PAR, ComputeOp, IterVar, Range
        outer, guards = self._outer(r), self._guards(r)
        r = _with_parts(r, self.inside(r))
        if guards:
            r = replace(r, condition=all_of(guards + [r.condition]))
        axes = {a.var for a in self.axis} | {a.var for a in self.enclosing}
        new_axes, mapping, reads = [], {}, []
        for iv in outer:
            if any(v in axes for v in _vars((iv.dom.min, iv.dom.extent))):
                raise self.error(f"compute {self.name}: a reduction nested in the reduction over {iv.var.name} "
                                 f"reads {iv.var.name}, whose range depends on another axis; compute it in its "
                                 "own stage")
            nv = IterVar(Var(iv.var.name, iv.var.dtype), Range(const(0, iv.dom.extent.dtype), iv.dom.extent),
                         DATA_PAR)
            zero = is_const(iv.dom.min, 0)
            mapping[iv.var] = nv.var if zero else nv.var + iv.dom.min
            reads.append(iv.var if zero else iv.var - iv.dom.min)
            new_axes.append(nv)
        moved = substitute(r, mapping)
        dtypes = [e.dtype for e in moved.source] if isinstance(r.source, tuple) else [moved.dtype]
        bodies = tuple(replace(moved, dtype=d, value_index=k) for k, d in enumerate(dtypes))
        op = ComputeOp(f"{self.name}.red{len(self.lifted)}", new_axes, bodies)
        return op, tuple(reads)


def _vars(node) -> list[Var]:
    """Every variable ``node`` uses, also in the domains of its reduce axes and in its reducer's functions."""
    out = list(collect(node, Var))
    for r in collect(node, Reduce):
        for iv in r.axis:
            out.append(iv.var)
            if iv.dom is not None:
                out += collect((iv.dom.min, iv.dom.extent), Var)
        out += collect(_reducer_exprs(r), Var)
    return out


def _reducer_exprs(r: Reduce) -> tuple:
    """What the reducer's functions return on fresh arguments (an identity may use an axis)."""
    comb = r.combiner
    if isinstance(r.source, tuple):
        dtypes = [e.dtype for e in r.source]
        xs = tuple(Var(f"x{k}", d) for k, d in enumerate(dtypes))
        ys = tuple(Var(f"y{k}", d) for k, d in enumerate(dtypes))
        return comb.combine_tuple(xs, ys) + comb.identity_tuple(dtypes)
    return (comb.combine(Var("x", r.dtype), Var("y", r.dtype)), comb.identity(r.dtype))
