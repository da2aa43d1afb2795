"""One visitor and one mutator for both expressions and statements.

Subclasses define ``visit_<NodeClass>`` for the nodes they care about; every other node is traversed
generically through its dataclass fields.  Mutators rebuild a node only when a child changed.
"""
from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, Callable

from .expr import Expr, Var
from .stmt import Stmt

_Node = (Expr, Stmt)
_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(node) -> tuple[str, ...]:
    t = type(node)
    names = _FIELDS.get(t)
    if names is None:
        names = tuple(f.name for f in fields(node) if f.name not in ("dtype", "uid", "buffer", "tensor",
                                                                      "combiner", "axis", "name"))
        _FIELDS[t] = names
    return names


_NAMES: dict[tuple[str, type], tuple[str, ...]] = {}


def _method(obj, prefix: str, node):
    """``obj.<prefix><Class>`` for the node's class or, failing that, a node class it derives from
    (a SizeVar is visited as a Var)."""
    names = _NAMES.get((prefix, type(node)))
    if names is None:
        bases = type(node).__mro__[1:]
        names = (prefix + type(node).__name__,) + tuple(prefix + c.__name__ for c in bases
                                                         if "__dataclass_fields__" in c.__dict__)
        _NAMES[(prefix, type(node))] = names
    for name in names:
        m = getattr(obj, name, None)
        if m is not None:
            return m
    return None


class Visitor:
    """Walks a tree; override ``visit_X`` methods (call ``self.generic_visit(node)`` to descend)."""

    def visit(self, node: Any) -> None:
        if isinstance(node, (tuple, list)):
            for x in node:
                self.visit(x)
            return
        method = _method(self, "visit_", node)
        if method is not None:
            method(node)
        else:
            self.generic_visit(node)

    def generic_visit(self, node: Any) -> None:
        for name in _child_fields(node):
            self._visit_value(getattr(node, name))

    def _visit_value(self, v: Any) -> None:
        if isinstance(v, _Node):
            self.visit(v)
        elif isinstance(v, tuple):
            for x in v:
                self._visit_value(x)


class Mutator:
    """Rewrites a tree bottom-up; ``visit_X`` returns the replacement node."""

    def visit(self, node: Any) -> Any:
        if isinstance(node, tuple):
            return self._visit_value(node)
        method = _method(self, "visit_", node)
        return method(node) if method is not None else self.generic_visit(node)

    def generic_visit(self, node: Any) -> Any:
        changes = {}
        for name in _child_fields(node):
            old = getattr(node, name)
            new = self._visit_value(old)
            if new is not old:
                changes[name] = new
        return replace(node, **changes) if changes else node

    def _visit_value(self, v: Any) -> Any:
        if isinstance(v, _Node):
            return self.visit(v)
        if isinstance(v, tuple) and v:
            new = tuple(self._visit_value(x) for x in v)
            return v if all(a is b for a, b in zip(new, v)) else new
        return v


class _Collector(Visitor):
    """Pre-order search, iterative below the root (collectors walk whole unrolled bodies, where the
    recursive visitor's per-node dispatch dominated the time)."""
    skip = ()       # child classes not descended into

    def __init__(self, pred: Callable[[Any], bool]):
        self.pred, self.found = pred, []

    def visit(self, node):
        if self.pred(node):
            self.found.append(node)
        if isinstance(node, (tuple, list)):
            for x in node:
                self.visit(x)
        else:
            self._descendants(node)

    def _descendants(self, root) -> None:
        pred, found, skip = self.pred, self.found, self.skip
        stack = self._children(root, skip)
        while stack:
            n = stack.pop()
            if pred(n):
                found.append(n)
            stack.extend(self._children(n, skip))

    @staticmethod
    def _children(n, skip) -> list:
        """The child nodes of ``n`` (inside tuples too), last first (a stack pops them in order)."""
        out: list = []
        for name in _child_fields(n):
            _nodes_in(getattr(n, name), skip, out)
        out.reverse()
        return out


def children(node) -> list:
    """The child nodes of ``node`` in field order (those inside tuples too: a load's indices)."""
    out: list = []
    for name in _child_fields(node):
        _nodes_in(getattr(node, name), (), out)
    return out


def _nodes_in(v, skip, out: list) -> None:
    if isinstance(v, _Node):
        if not isinstance(v, skip):
            out.append(v)
    elif isinstance(v, tuple):
        for x in v:
            _nodes_in(x, skip, out)


class _StmtCollector(_Collector):
    """A collector of statements: expressions hold none, so it does not descend into them."""
    skip = (Expr,)


def collect(node: Any, what) -> list:
    """All sub-nodes that are instances of ``what`` (a class or tuple) or satisfy it (a callable).
    Statement classes are found without walking the expressions (the bulk of an unrolled body)."""
    if isinstance(what, type) or isinstance(what, tuple):
        classes = what if isinstance(what, tuple) else (what,)
        c = (_StmtCollector if all(issubclass(k, Stmt) for k in classes) else _Collector)(
            lambda n: isinstance(n, what))
    else:
        c = _Collector(what)
    c.visit(node)
    return c.found


class _Substituter(Mutator):
    def __init__(self, mapping: dict):
        self.mapping = mapping

    def visit_Var(self, v: Var):
        return self.mapping.get(v, v)

    def visit_Reduce(self, r):
        """Also into what the reducer's functions return (an identity may use an axis, as TVM
        allows) and into the domains of the reduce axes."""
        new = self.generic_visit(r)
        combiner = _substituted_combiner(r, self.mapping)
        axes = tuple(_substituted_axis(iv, self) for iv in r.axis)
        if combiner is r.combiner and all(a is b for a, b in zip(axes, r.axis)):
            return new
        return replace(new, combiner=combiner, axis=axes)


def _substituted_combiner(r, mapping: dict):
    """``r``'s reducer with ``mapping`` applied to what its functions return (the same reducer when
    they use none of it); a tuple reducer's functions take and return tuples."""
    from .reduce import CommReducer
    comb = r.combiner
    dtypes = [e.dtype for e in r.source] if isinstance(r.source, tuple) else [r.dtype]
    xs = tuple(Var(f"x{k}", d) for k, d in enumerate(dtypes))
    ys = tuple(Var(f"y{k}", d) for k, d in enumerate(dtypes))
    if isinstance(r.source, tuple):
        combined, identity = comb.combine_tuple(xs, ys), comb.identity_tuple(dtypes)
    else:
        combined, identity = (comb.combine(xs[0], ys[0]),), (comb.identity(r.dtype),)
    if not any(v in mapping for e in combined + identity for v in collect(e, Var)):
        return comb
    combined = substitute(combined, mapping)

    def fcombine(a, b):
        a, b = (a, b) if isinstance(r.source, tuple) else ((a,), (b,))
        out = substitute(combined, {**dict(zip(xs, a)), **dict(zip(ys, b))})
        return out if isinstance(r.source, tuple) else out[0]

    def fidentity(*ts):
        out = comb.identity_tuple(ts) if isinstance(r.source, tuple) else (comb.identity(ts[0]),)
        out = substitute(out, mapping)
        return out if isinstance(r.source, tuple) else out[0]
    return CommReducer(comb.name, fcombine, fidentity)


def _substituted_axis(iv, sub: "_Substituter"):
    if iv.dom is None:
        return iv
    lo, ext = sub.visit(iv.dom.min), sub.visit(iv.dom.extent)
    if lo is iv.dom.min and ext is iv.dom.extent:
        return iv
    return replace(iv, dom=type(iv.dom)(lo, ext))


def substitute(node: Any, mapping: dict) -> Any:
    """Replace Vars by expressions (keys may be Vars or IterVars)."""
    if not mapping:
        return node
    norm = {getattr(k, "var", k): v if isinstance(v, (Expr,)) else _as_expr(v) for k, v in mapping.items()}
    return _Substituter(norm).visit(node)


def _as_expr(v):
    from .expr import convert
    return convert(v)


def free_vars(node: Any) -> list[Var]:
    """Vars used in ``node`` but not bound inside it by a loop or let, in first-use order."""
    class Free(Visitor):
        def __init__(self):
            self.bound, self.out, self.seen = set(), [], set()

        def visit_Var(self, v):
            if v not in self.bound and v not in self.seen:
                self.seen.add(v)
                self.out.append(v)

        def visit_For(self, s):
            self.visit(s.min)
            self.visit(s.extent)
            self.bound.add(s.loop_var)
            self.visit(s.body)

        def visit_LetStmt(self, s):
            self.visit(s.value)
            self.bound.add(s.var)
            self.visit(s.body)

        visit_Let = visit_LetStmt

    f = Free()
    f.visit(node)
    return f.out
