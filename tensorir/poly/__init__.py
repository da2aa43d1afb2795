"""isl idioms in one place: loop IR and expressions turned into isl sets and maps.

A :class:`PolyProgram` views a loop nest (multi-dimensional indices, before flattening) as
statements, one per ``BufferStore``: each has an iteration domain over its enclosing loops (size
variables are parameters, ``>= 1``), a write and its reads as access relations, and a position in
the loop order as a schedule map ``S[i, j] -> [c0, i, c1, j, c2]``.  Expressions isl cannot represent
(products of variables, loads used as indices, float conditions) are over-approximated: a dropped
constraint or an unconstrained index, never a wrong answer.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from .. import dtype as dt
from ..expr import (And, BufferLoad, EQ, Expr, GE, GT, IntImm, LE, LT, Max, Min, NE, Not, Or, Select, Var, binary)
from ..stmt import Allocate, Buffer, BufferStore, Evaluate, For, IfThenElse, Stmt
from ..visitor import collect
from .affine import Affine, Scope, aff, isl_ident, isl_name  # aff, isl_name: this module's API
from .errors import isl_boundary, isl_or

_ctx = isl.DEFAULT_CONTEXT


def buffer_name(b: Buffer) -> str:
    return isl_ident(b.name, f"_b{b.uid}")


_CMP = {LT: "<", LE: "<=", GT: ">", GE: ">=", EQ: "=", NE: "!="}
_NEG = {LT: GE, LE: GT, GT: LE, GE: LT, EQ: NE, NE: EQ}


def constraint(e: Expr, negate: bool = False, scope: Scope | None = None) -> str | None:
    """A boolean expression as an isl constraint string; None when not representable.  Given the
    ``scope`` it is converted in, non-affine terms are kept as far as isl can (see poly/affine.py): the
    result is then implied by the condition, never stronger."""
    conv = Affine(scope, atoms=scope is not None)
    c = _constraint(e, negate, conv)
    return None if c is None else conv.wrap(c)


def _constraint(e: Expr, negate: bool, conv: Affine) -> str | None:
    t = type(e)
    if t is IntImm:
        return "1 = 1" if bool(e.value) != negate else "1 = 0"
    if t is Not:
        return _constraint(e.a, not negate, conv)
    if t in (And, Or):
        a, b = _constraint(e.a, negate, conv), _constraint(e.b, negate, conv)
        conj = (t is And) != negate
        if conj:  # dropping one side of a conjunction over-approximates
            parts = [p for p in (a, b) if p is not None]
            return " and ".join(f"({p})" for p in parts) if parts else None
        return None if a is None or b is None else f"(({a}) or ({b}))"
    if t in _CMP and dt.is_int(e.a.dtype) and dt.lanes(e.a.dtype) == 1:
        a, b = conv(e.a), conv(e.b)
        if a is None or b is None:
            return None
        op = _CMP[_NEG[t]] if negate else _CMP[t]
        if op == "!=":
            return f"(({a}) < ({b}) or ({a}) > ({b}))"
        return f"{a} {op} {b}"
    return None


def loop_constraints(f: For, scope: Scope) -> list[str]:
    """What a loop's bounds say of its variable (each bound kept as far as isl can express it)."""
    v = f.loop_var
    lo, hi = binary(GE, v, f.min), binary(LT, v, f.min + f.extent)
    return [c for c in (constraint(x, scope=scope) for x in (lo, hi)) if c is not None]


@dataclass
class Access:
    buffer: Buffer
    indices: tuple
    relation: isl.Map          # statement instance -> element, restricted to where it happens
    is_write: bool
    flow_relation: isl.Map     # the same, elements of a buffer allocated inside loops prefixed by
                               # those loops' values (each iteration has a private copy)
    opaque_dims: tuple = ()    # dimensions whose index isl cannot represent (data-dependent, ...)


@dataclass
class Statement:
    """A store (or, with ``store`` None, the evaluation of a condition or a let value that reads
    memory)."""
    name: str
    store: BufferStore | None
    stage: str                 # the stage whose code this is (the buffer it writes)
    loops: list                # For nodes, outermost first
    domain: isl.Set
    schedule: isl.Map
    accesses: list = field(default_factory=list)


class PolyProgram:
    """Statements of a loop nest with their domains, accesses and schedule, as isl objects."""

    def __init__(self, body: Stmt, params: list[Var]):
        self.params = list(params)
        self.statements: list[Statement] = []
        self.alloc_loops: dict[Buffer, tuple] = {}
        self._extra_params: list[Var] = []
        _Builder(self).build(body)

    # -- helpers for analyses ---------------------------------------------------------------------
    def param_names(self) -> list[str]:
        return [isl_name(v) for v in self.params + self._extra_params]

    def prefix(self) -> str:
        return "[" + ", ".join(self.param_names()) + "] -> "

    def context(self) -> isl.Set:
        """Size parameters are at least one."""
        cons = " and ".join(f"{isl_name(v)} >= 1" for v in self.params) or "1 = 1"
        return isl.Set(f"{self.prefix()}{{ : {cons} }}")

    def union(self, pieces: list) -> isl.UnionMap:
        out = None
        for p in pieces:
            u = isl.UnionMap.from_map(p) if isinstance(p, isl.Map) else p
            out = u if out is None else out.union(u)
        return out if out is not None else isl.UnionMap("{ }")

    def domains(self) -> isl.UnionSet:
        out = isl.UnionSet("{ }")
        for s in self.statements:
            out = out.union(isl.UnionSet.from_set(s.domain))
        return out

    def schedule(self) -> isl.UnionMap:
        return self.union([s.schedule for s in self.statements])

    def access_map(self, write: bool, private_copies: bool = True, keep=None) -> isl.UnionMap:
        """The reads (or writes) of every statement; ``keep(buffer)`` picks the buffers (default: all)."""
        maps = []
        for s in self.statements:
            for a in s.accesses:
                if a.is_write == write and (keep is None or keep(a.buffer)):
                    maps.append(a.flow_relation if private_copies else a.relation)
        return self.union(maps)


def _loop_name(f: For) -> str:
    return isl_name(f.loop_var)


class _Builder:
    def __init__(self, prog: PolyProgram):
        self.prog = prog
        self.loops: list[For] = []
        self.conds: list[str] = []
        self.position: list[int] = [0]
        self.allocs: dict = {}

    def build(self, body: Stmt) -> None:
        bound = {v for v in collect(body, For)}
        known = set(self.prog.params)
        from ..stmt import LetStmt
        # bound, not params: loop vars, and let vars other than integers tied to an affine value
        loop_vars = {f.loop_var for f in bound} | {x.var for x in collect(body, LetStmt)
                                                   if not (dt.is_int(x.var.dtype) and aff(x.value) is not None)}
        for v in collect(body, Var):
            if v not in known and v not in loop_vars and dt.is_int(v.dtype):
                known.add(v)
                self.prog._extra_params.append(v)
        self._params = set(self.prog.params) | set(self.prog._extra_params)
        self.thread_tags = _thread_extents(body, self._params)
        self._kernel_extents: dict[int, dict] = {}
        self.visit(body)

    def visit(self, s: Stmt) -> None:
        from ..stmt import Seq, LetStmt, Attr
        if isinstance(s, Seq):
            for x in s.stmts:
                self.visit(x)
                self.position[-1] += 1
        elif isinstance(s, For):
            self.loops.append(s)
            cons = loop_constraints(s, self.scope())
            self.conds += cons
            self.position.append(0)
            self.visit(s.body)
            self.position.pop()
            del self.conds[len(self.conds) - len(cons):]
            self.loops.pop()
        elif isinstance(s, IfThenElse):
            if collect(s.condition, BufferLoad):
                stores = collect(s.then_case, BufferStore)
                self.statement(None, s.condition, stores[0].buffer.name if stores else "?")
            c = constraint(s.condition, scope=self.scope())
            self.conds.append(c or "1 = 1")
            self.visit(s.then_case)
            self.conds.pop()
            if s.else_case is not None:
                self.position[-1] += 1
                c = constraint(s.condition, negate=True, scope=self.scope())
                self.conds.append(c or "1 = 1")
                self.visit(s.else_case)
                self.conds.pop()
        elif isinstance(s, Allocate):
            self.allocs[s.buffer] = tuple(self.loops)
            self.prog.alloc_loops[s.buffer] = tuple(self.loops)
            self.visit(s.body)
        elif isinstance(s, LetStmt):
            if collect(s.value, BufferLoad):  # its reads come before the body's
                stores = collect(s.body, BufferStore)
                self.statement(None, s.value, stores[0].buffer.name if stores else "?")
                self.position[-1] += 1
            tied = dt.is_int(s.var.dtype) and aff(s.value) is not None
            if tied:  # the let's var is a parameter tied to its value here
                self.conds.append(f"{isl_name(s.var)} = {aff(s.value)}")
            self.visit(s.body)
            if tied:
                self.conds.pop()
        elif isinstance(s, (LetStmt, Attr)):
            self.visit(s.body)
        elif isinstance(s, BufferStore):
            self.statement(s, None, s.buffer.name)
        elif isinstance(s, Evaluate):
            self.call_statement(s.value)

    def scope(self) -> Scope:
        out = Scope.of(self.prog.params, ())
        out.bound = set(self.prog.params) | set(self.prog._extra_params)
        for f in self.loops:
            out.push(f)
        return out

    def call_statement(self, value: Expr) -> None:
        """A statement for an evaluated expression (an extern call): its loads, and each address it
        passes read and/or written over the whole region the address stands for."""
        from ..buffer import AccessPtr
        ptrs = collect(value, AccessPtr)
        if not ptrs and not collect(value, BufferLoad):
            return
        named = [p for p in ptrs if "w" in p.mask] or ptrs
        stage = named[0].buffer.name if named else "?"
        with isl_boundary("building the isl model of its accesses (domain, schedule, access relations)", stage):
            self._call_statement(value, ptrs, stage)

    def _call_statement(self, value: Expr, ptrs: list, stage: str) -> None:
        st = self.new_statement(None, stage)
        for p in ptrs:
            for write in (False, True):
                if ("w" if write else "r") in p.mask:
                    st.accesses.append(self.box_access(st, p.buffer, p.region, write))
        for load, conds in loads_with_conditions(value):
            st.accesses.append(self.access(st, load.buffer, load.indices, _guards(conds, self.scope()), False))
        self.prog.statements.append(st)

    def box_access(self, st: "Statement", buf: Buffer, region: tuple, write: bool) -> "Access":
        """An access of every element of ``region`` ((min, extent) per dimension) of ``buf``."""
        dims = ", ".join(f"x{d}" for d in range(len(buf.shape)))
        cons = []
        for d, (lo, ext) in enumerate(region):
            a, b = aff(lo), aff(ext)
            if a is not None and b is not None:
                cons.append(f"{a} <= x{d} < {a} + {b}")
            elif aff(buf.shape[d]) is not None:
                cons.append(f"0 <= x{d} < {aff(buf.shape[d])}")
        body = " and ".join(f"({c})" for c in cons) or "1 = 1"
        loops = ", ".join(_loop_name(f) for f in self.loops)
        head = f"{self.prog.prefix()}{{ {st.name}[{loops}] -> {buffer_name(buf)}"
        rel = isl.Map(f"{head}[{dims}] : {body} }}").intersect_domain(st.domain)
        scope, copies = self.private_prefix(buf)
        flow = rel if not scope else isl.Map(f"{head}[{', '.join(scope + [dims])}] : "
                                             f"{' and '.join([body] + copies)} }}").intersect_domain(st.domain)
        return Access(buf, tuple(lo for lo, _ in region), rel, write, flow)

    def private_prefix(self, buf: Buffer) -> tuple[list[str], list[str]]:
        """The dimensions that tell private copies of ``buf`` apart in flow relations, with their
        constraints: the loops it is allocated in (a copy per iteration) and, for ``local`` memory,
        the GPU thread indices (a copy per thread; a statement outside a thread loop runs in every
        thread, so it touches every thread's copy)."""
        scope = [_loop_name(f) for f in self.allocs.get(buf, ())]
        if buf.scope != "local" or not self.thread_tags:
            return scope, []
        cons = []
        kernel = self.kernel_extents()
        for k, (tag, extent) in enumerate(self.thread_tags.items()):
            own = next((f for f in self.loops if f.kind == "thread" and f.thread_tag == tag), None)
            scope.append(f"thr{k}")
            if own is not None:
                cons.append(f"thr{k} = {_loop_name(own)}")
            elif kernel is not None and tag not in kernel:   # this kernel launches one thread along tag
                cons.append(f"thr{k} = 0")
            else:  # (an extent isl cannot write leaves the copies unbounded: reads of them are refused)
                extent = extent if kernel is None else kernel[tag]
                cons.append(f"0 <= thr{k}" + (f" < {extent}" if extent is not None else ""))
        return scope, cons

    def kernel_extents(self) -> dict[str, str | None] | None:
        """The thread extents of the kernel the current statement is in (the loop nest under its
        outermost thread loop: kernels of one function launch different numbers of threads), None
        outside every thread loop."""
        root = next((f for f in self.loops if f.kind == "thread"), None)
        if root is None:
            return None
        if id(root) not in self._kernel_extents:
            self._kernel_extents[id(root)] = _thread_extents(root, self._params)
        return self._kernel_extents[id(root)]

    def new_statement(self, s: BufferStore | None, stage: str) -> "Statement":
        prog = self.prog
        name = f"S{len(prog.statements)}"
        dims = ", ".join(_loop_name(f) for f in self.loops)
        cons = " and ".join(f"({c})" for c in self.conds) or "1 = 1"
        domain = isl.Set(f"{prog.prefix()}{{ {name}[{dims}] : {cons} }}")
        depth = len(self.loops)
        sched_dims = []
        for k in range(depth + 1):
            sched_dims.append(str(self.position[k]))
            if k < depth:
                sched_dims.append(_loop_name(self.loops[k]))
        sched = isl.Map(f"{prog.prefix()}{{ {name}[{dims}] -> [{', '.join(sched_dims)}] }}")
        return Statement(name, s, stage, list(self.loops), domain, sched)

    def statement(self, s: BufferStore | None, cond: Expr | None, stage: str) -> None:
        """A statement for a store, or for the loads of a condition or let value (``s`` None)."""
        with isl_boundary("building the isl model of its accesses (domain, schedule, access relations)", stage):
            self._statement(s, cond, stage)

    def _statement(self, s: BufferStore | None, cond: Expr | None, stage: str) -> None:
        prog = self.prog
        st = self.new_statement(s, stage)
        if s is not None:
            st.accesses.append(self.access(st, s.buffer, s.indices, [], True))
        for e in (s.value,) + tuple(s.indices) if s is not None else (cond,):
            for load, conds in loads_with_conditions(e):
                st.accesses.append(self.access(st, load.buffer, load.indices, _guards(conds, self.scope()), False))
        prog.statements.append(st)

    def access(self, st: Statement, buf: Buffer, indices: tuple, guard: list[str], write: bool) -> Access:
        """The access relation.  A read's non-affine index terms are bounded unknowns (the elements
        it may read, a superset) when that still proves it inside ``buf``; otherwise, and for
        writes, an index isl cannot represent is free (assumed inside, listed as unverified)."""
        exact = self._access(st, buf, indices, guard, write, Affine(self.scope()))
        if write or not exact.opaque_dims:
            return exact
        acc = self._access(st, buf, indices, guard, write, Affine(self.scope(), atoms=True))
        box = _box(self.prog, buf)
        if box is not None and acc.relation.intersect_params(self.prog.context()).subtract_range(box).is_empty():
            return acc
        return exact

    def _access(self, st: Statement, buf: Buffer, indices: tuple, guard: list[str], write: bool,
                conv: Affine) -> Access:
        dims = ", ".join(_loop_name(f) for f in self.loops)
        out, cons = [], list(guard)
        for d, i in enumerate(indices):
            a = conv(i)
            out.append(f"x{d}" if a is not None else f"free{d}")
            if a is not None:
                cons.append(f"x{d} = {a}")
            else:  # an index isl cannot represent is assumed inside the buffer
                extent = aff(buf.shape[d]) if d < len(buf.shape) else None
                if extent is not None:
                    cons.append(f"0 <= free{d} < {extent}")
        body = conv.wrap(" and ".join(f"({c})" for c in cons) or "1 = 1")
        head = f"{self.prog.prefix()}{{ {st.name}[{dims}] -> {buffer_name(buf)}"
        rel = isl.Map(f"{head}[{', '.join(out)}] : {body} }}").intersect_domain(st.domain)
        scope, copies = self.private_prefix(buf)
        flow = rel if not scope else isl.Map(f"{head}[{', '.join(scope + out)}] : "
                                             f"{' and '.join([body] + copies)} }}").intersect_domain(st.domain)
        opaque = tuple(d for d, o in enumerate(out) if o == f"free{d}")
        return Access(buf, tuple(indices), rel, write, flow, opaque)


#: GPU thread indices: each thread has its own copy of a ``local`` buffer.
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")


def _thread_extents(body: Stmt, params: set) -> dict[str, str | None]:
    """The GPU thread tags of the loop nest, with an extent of one of their loops in isl syntax
    (None where isl cannot write it over the parameters)."""
    out: dict = {}
    for f in collect(body, For):
        if f.kind == "thread" and f.thread_tag in THREAD_TAGS and out.get(f.thread_tag) is None:
            out[f.thread_tag] = aff(f.extent) if set(collect(f.extent, Var)) <= params else None
    return {tag: out[tag] for tag in THREAD_TAGS if tag in out}


def _box(prog: PolyProgram, buf: Buffer) -> isl.Set | None:
    """The elements of ``buf`` (None when its shape is not affine)."""
    shape = [aff(x) for x in buf.shape]
    if any(x is None for x in shape):
        return None
    dims = ", ".join(f"x{d}" for d in range(len(shape)))
    body = " and ".join(f"0 <= x{d} < {x}" for d, x in enumerate(shape)) or "1 = 1"
    return isl.Set(f"{prog.prefix()}{{ {buffer_name(buf)}[{dims}] : {body} }}")


def loads_with_conditions(e: Expr, kind=BufferLoad, conds: tuple = ()) -> list[tuple[Expr, tuple]]:
    """Loads (of class ``kind``) in ``e`` with the Select conditions under which they run (an
    ``if_then_else`` arm reads memory only where its condition holds)."""
    out: list = []
    if isinstance(e, tuple):  # the bodies of a multi-output stage
        for x in e:
            out += loads_with_conditions(x, kind, conds)
        return out
    if isinstance(e, Select):
        out += loads_with_conditions(e.cond, kind, conds)
        out += loads_with_conditions(e.true_value, kind, conds + (e.cond,))
        out += loads_with_conditions(e.false_value, kind, conds + (Not("bool", e.cond),))
        return out
    if isinstance(e, kind):
        for i in e.indices:
            out += loads_with_conditions(i, kind, conds)
        out.append((e, conds))
        return out
    if isinstance(e, Expr):
        from dataclasses import fields
        for f in fields(e):
            v = getattr(e, f.name)
            for x in (v if isinstance(v, tuple) else (v,)):
                if isinstance(x, Expr):
                    out += loads_with_conditions(x, kind, conds)
    return out


def _guards(conds: tuple, scope: Scope) -> list[str]:
    return [c for c in (constraint(x, scope=scope) for x in conds) if c is not None]


class LoopContext:
    """The constraints that hold at a point of a loop nest (enclosing loops and conditions), to
    ask whether a condition always or never holds there."""

    def __init__(self, params: list[Var]):
        self.params = list(params)
        self.dims: list[str] = []
        self.cons: list[str] = [f"{isl_name(v)} >= 1" for v in params]
        self.extra: set[str] = set()
        self.scope = Scope.of(params, ())
        self.loops: list[For] = []

    def _set(self, extra: str | None = None) -> isl.Set:
        names = [isl_name(v) for v in self.params] + sorted(self.extra)
        cons = self.cons + ([extra] if extra else [])
        body = " and ".join(f"({c})" for c in cons) or "1 = 1"
        return isl.Set(f"[{', '.join(names)}] -> {{ [{', '.join(self.dims)}] : {body} }}")

    def _note(self, e: Expr) -> None:
        for v in collect(e, Var):
            name = isl_name(v)
            if name not in self.dims and v not in self.params:
                self.extra.add(name)

    def push_loop(self, f: For) -> int:
        self.dims.append(isl_name(f.loop_var))
        self._note(f.min), self._note(f.extent)
        cons = loop_constraints(f, self.scope)
        self.cons += cons
        self.scope.push(f)
        self.loops.append(f)
        return len(cons)

    def pop_loop(self, added: int) -> None:
        self.dims.pop()
        self.scope.pop(self.loops.pop())
        del self.cons[len(self.cons) - added:]

    def push_cond(self, cond: Expr, negate: bool = False) -> int:
        c = constraint(cond, negate, self.scope)
        if c is None:
            return 0
        self._note(cond)
        self.cons.append(c)
        return 1

    def pop_cond(self, added: int) -> None:
        del self.cons[len(self.cons) - added:]

    @isl_or(None)  # a guard isl cannot decide stays
    def decide(self, cond: Expr) -> bool | None:
        """True when ``cond`` holds everywhere here, False when nowhere, None otherwise."""
        c, nc = constraint(cond, False, self.scope), constraint(cond, True, self.scope)
        if c is None or nc is None:
            return None
        self._note(cond)
        if self._set(nc).is_empty():
            return True
        if self._set(c).is_empty():
            return False
        return None


@isl_or(False)
def proves(cond: Expr, bounds: dict) -> bool:
    """Whether the integer condition ``cond`` holds for every value of its variables within ``bounds`` ({Var:
    (lo, hi)}, constants; a variable without finite bounds ranges freely): where interval arithmetic cannot tell,
    as for the floor divisions of a swizzled block index (``x * 128 - (x + 1) // 2 * 128 >= 0``)."""
    negated = constraint(cond, True)
    if negated is None:
        return False
    names = {isl_name(v): v for v in collect(cond, Var)}
    cons = [negated] + [f"{int(lo)} <= {n} <= {int(hi)}" for n, v in names.items()
                        for lo, hi in [bounds.get(v, (None, None))]
                        if lo is not None and hi is not None and abs(lo) != float("inf") and abs(hi) != float("inf")]
    return isl.Set(f"{{ [{', '.join(names)}] : {' and '.join(f'({c})' for c in cons)} }}").is_empty()


# -- regions: what a set of reads needs, as exact bounds -----------------------------------------------
@dataclass
class Region:
    """What a set of reads needs of a producer, per dimension."""
    bounds: list          # exact (min, max) Exprs, or None where isl's answer has no Expr form
    alloc: list           # the largest extent over all values of the fixed loops (int or None)
    outside: tuple | None  # (read index, {Var or "x<d>": value}): a read leaving the domain there
    total: bool = False    # something is needed at every value of the fixed loops and sizes


@isl_or(None)  # callers fall back to interval bounds, as for reads isl cannot represent
def needed_region(ndim: int, reads: list, fixed: list, params: list[Var], domain: list) -> Region | None:
    """The elements that ``reads`` touch, clipped to ``domain``; None when isl cannot represent it.

    ``reads``: (indices, relaxed {Var: (lo, hi)}, conditions) triples; the relaxed Vars range over
    their bounds, every other Var is fixed (a parameter).  ``fixed``: (Var, lo, hi) of the fixed
    loop variables.  ``domain``: (lo, extent) per dimension of the producer."""
    names: dict[str, Var] = {isl_name(v): v for v in params}
    for v, _, _ in fixed:
        names[isl_name(v)] = v
    pieces = []
    for indices, relax, conds in reads:
        cons = []
        for v, (lo, hi) in relax.items():
            a, b = aff(lo), aff(hi)
            if a is None or b is None:
                return None
            cons.append(f"{a} <= {isl_name(v)} <= {b}")
        cons += [c for c in (constraint(x) for x in conds) if c is not None]
        for d, i in enumerate(indices):
            a = aff(i)
            if a is None:
                return None
            cons.append(f"x{d} = {a}")
        for e in list(indices) + [x for r in relax.values() for x in r] + list(conds):
            for v in collect(e, Var):
                if v not in relax and dt.is_int(v.dtype):
                    names.setdefault(isl_name(v), v)
        body = " and ".join(f"({c})" for c in cons) or "1 = 1"
        ex = [isl_name(v) for v in relax]
        pieces.append(f"exists ({', '.join(ex)} : {body})" if ex else body)
    dom = []
    for d, (lo, ext) in enumerate(domain):
        a, b = aff(lo), aff(ext)
        if a is None or b is None:
            return None
        dom.append(f"{a} <= x{d} < {a} + {b}")
    if not pieces:
        return None
    ctx = [f"{isl_name(v)} >= 1" for v in params]
    for v, lo, hi in fixed:
        a, b = aff(lo), aff(hi)
        if a is not None and b is not None:
            ctx.append(f"{a} <= {isl_name(v)} <= {b}")
    prefix = "[" + ", ".join(names) + "] -> "
    dims = ", ".join(f"x{d}" for d in range(ndim))
    context = isl.Set(f"{prefix}{{ : {' and '.join(ctx) or '1 = 1'} }}")
    box = isl.Set(f"{prefix}{{ [{dims}] : {' and '.join(dom) or '1 = 1'} }}")
    needed, outside = None, None
    for k, p in enumerate(pieces):
        part = isl.Set(f"{prefix}{{ [{dims}] : {p} }}").intersect_params(context)
        needed = part if needed is None else needed.union(part)
        bad = part.subtract(box)
        if outside is None and not bad.is_empty():
            pt = bad.sample_point()
            values = {v: _coord(pt, isl.dim_type.param, j) for j, v in enumerate(names.values())}
            values.update({f"x{d}": _coord(pt, isl.dim_type.set, d) for d in range(ndim)})
            outside = (k, values)
    region = needed.intersect(box)
    bounds, alloc = [], []
    one = isl.Val.one(region.get_ctx())
    for d in range(ndim):
        lo, hi = region.dim_min(d), region.dim_max(d)
        e_lo, e_hi = pw_to_expr(lo, names, context, "min"), pw_to_expr(hi, names, context, "max")
        bounds.append(None if e_lo is None or e_hi is None else (e_lo, e_hi))
        width = hi.sub(lo).add_constant_val(one).max_val()
        alloc.append(int(width.to_python()) if width.is_int() else None)
    total = region.params().is_equal(context)
    return Region(bounds, alloc, outside, total)


def _coord(pt, kind, k: int) -> int:
    return int(pt.get_coordinate_val(kind, k).to_python())


def pw_to_expr(pa: isl.PwAff, names: dict, context: isl.Set, combine: str) -> Expr | None:
    """A piecewise affine bound as an Expr: one piece, or the min/max of its pieces."""
    from ..expr import binary
    pa = pa.gist_params(context) if hasattr(pa, "gist_params") else pa
    pieces = pa.get_pieces()
    exprs = [aff_to_expr(a, names) for _, a in pieces]
    if not exprs or any(e is None for e in exprs):
        return None
    if len(exprs) == 1:
        return exprs[0]
    affs = [isl.PwAff.from_aff(a) for _, a in pieces]
    where = pa.domain().intersect_params(context)
    for how in (combine, "max" if combine == "min" else "min"):
        cand = affs[0]
        for a in affs[1:]:
            cand = cand.min(a) if how == "min" else cand.max(a)
        if pa.ne_set(cand).intersect(where).is_empty():
            out = exprs[0]
            for e in exprs[1:]:
                out = binary(Min if how == "min" else Max, out, e)
            return out
    return None


def aff_to_expr(a: isl.Aff, names: dict) -> Expr | None:
    """An integer-valued isl affine expression (with floor divisions) as an Expr."""
    from ..arith import simplify
    from ..expr import const

    def val(v) -> tuple[int, int]:
        return v.get_num_si(), v.get_den_val().get_num_si()

    def linear(x: isl.Aff) -> tuple[Expr, int] | None:
        den = val(x.get_denominator_val())[0]
        c_num, c_den = val(x.get_constant_val())
        total = const(c_num * den // c_den)
        for kind in (isl.dim_type.param, isl.dim_type.in_):
            for k in range(x.dim(kind)):
                n, d = val(x.get_coefficient_val(kind, k))
                if n == 0:
                    continue
                name = x.get_dim_name(kind, k)
                if name not in names:
                    return None
                total = total + names[name] * (n * den // d)
        for k in range(x.dim(isl.dim_type.div)):
            n, d = val(x.get_coefficient_val(isl.dim_type.div, k))
            if n == 0:
                continue
            inner = linear(x.get_div(k))
            if inner is None:
                return None
            e, dd = inner
            total = total + (e // dd if dd != 1 else e) * (n * den // d)
        return total, den

    res = linear(a)
    if res is None or res[1] != 1:
        return None
    return simplify(res[0])
