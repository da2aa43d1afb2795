"""LLVM IR emission (llvmlite.ir) for a lowered function: statements and expressions.

``codegen_llvm(func, target)`` returns the module text.  Calling convention of the kernel:
``void tiletune_<name>(T0* noalias buf0, ..., size_var0, ...)``: buffers are raw element pointers
(bool is one byte per element), size vars are scalars of their own dtype.  Helpers by idea:
:mod:`codegen.llvm.types` (types, constants, conversions), :mod:`codegen.llvm.memory` (loads, stores,
allocations), :mod:`codegen.llvm.math` (intrinsics), :mod:`codegen.llvm.parallel` (parallel loops).

Integer arithmetic in index positions (buffer indices, loop bounds, integer lets) carries ``nsw``;
float arithmetic is IEEE (results equal numpy's, operation by operation), except in the value of an
accumulating store (``C[i] = C[i] + a * b``: a reduction step), which carries the fast-math flags
``reassoc contract nsz arcp afn`` so multiply-adds become FMAs (never ``nnan`` / ``ninf``: NaN and
infinity keep their meaning).  A reduction's order differs from numpy's anyway.  Float ``Max`` / ``Min``
are ``llvm.maximum`` / ``llvm.minimum`` (NaN propagates; see docs/architecture.md, "NaN and signed zero").
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from llvmlite import ir

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir import stmt as S
from tensorir.expr import structural_key
from tensorir.visitor import collect

from .. import jit
from . import extern as llvm_extern, math as llvm_math, memory as llvm_memory, parallel as llvm_parallel
from .cse import IN_VALUE, CSEScopes
from .types import FAST, F32, I1, PTR, VOID, const, convert, lanes_of, ltype, mangle, round_bf16, scalar_type, splat, \
    to_i64, unify, with_lanes
from ..signature import native_symbol
from ..target import Target

ALIGN = llvm_memory.ALIGN


class CodegenError(Exception):
    """The lowered function cannot be compiled (unbound variable, unsupported node...)."""


@dataclass
class Frame:
    """Emission state of one LLVM function."""
    fn: ir.Function
    builder: ir.IRBuilder
    vars: dict = field(default_factory=dict)
    bufs: dict = field(default_factory=dict)
    in_parallel: bool = False
    cse: CSEScopes = field(default_factory=CSEScopes)     # pure integer values emitted so far, by region


_ICMP = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}
#: bfloat16 operations whose float32 result needs rounding (min, max, comparisons are exact)
_ROUNDS = (E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod)


class CodeGenLLVM:
    def __init__(self, target: Target, name: str = "tiletune"):
        self.module = ir.Module(name=name)
        self.module.triple = target.option("mtriple") or jit.triple()
        self.module.data_layout = jit.data_layout(target)
        self.frame: Frame | None = None
        self.uses_threads = False
        self.kernel_name = name
        self._decls: dict[str, ir.Function] = {}
        self._index_depth = 0
        self.float_flags: tuple = ()  # fast-math flags of float arithmetic being emitted (FAST in accumulations)
        self.mask: ir.Value | None = None        # lane mask while a vector select's arm is emitted
        # the widest vector of a masked load (bits; None: any): x86 without AVX-512 splits wider ones itself
        x86 = (target.option("mtriple") or jit.triple()).startswith(("x86_64", "i686", "i386"))
        self.masked_bits = 256 if x86 and "avx512f" not in target.features else None
        self._ids = itertools.count()
        self._exprs = {E.Var: self.expr_Var, E.SizeVar: self.expr_Var, E.IntImm: self.expr_Imm, E.FloatImm: self.expr_Imm,
                       E.Cast: self.expr_Cast, E.Not: self.expr_Not, E.Select: self.expr_Select,
                       E.Call: self.expr_Call, E.BufferLoad: lambda e: llvm_memory.load(self, e),
                       E.Ramp: self.expr_Ramp, E.Broadcast: self.expr_Broadcast, E.Let: self.expr_Let}
        self._exprs.update(llvm_extern.expr_emitters(self))
        self.packed_calls: list = []             # descriptors of call_packed sites (llvm_extern.py)

    # functions ---------------------------------------------------------------------------------------
    @property
    def b(self) -> ir.IRBuilder:
        return self.frame.builder

    def new_function(self, name: str, args: list, arg_names: list[str], internal: bool = False) -> Frame:
        """A function whose ``entry`` block holds only allocas; code starts in ``body`` (see ``finish``)."""
        fn = ir.Function(self.module, ir.FunctionType(VOID, args), name=name)
        fn.attributes.add("nounwind")
        if internal:
            fn.linkage = "internal"
        for a, n in zip(fn.args, arg_names):
            a.name = n
            if a.type == PTR:
                a.add_attribute("noalias")
        fn.append_basic_block("entry")
        return Frame(fn, ir.IRBuilder(fn.append_basic_block("body")))

    def finish(self, frame: Frame) -> None:
        """Return from the current block and branch from the alloca block to the code."""
        frame.builder.ret_void()
        ir.IRBuilder(frame.fn.entry_basic_block).branch(frame.fn.blocks[1])

    def add_function(self, func: S.LoweredFunc) -> None:
        args = [PTR] * len(func.buffers) + [ltype(v.dtype) for v in func.size_vars]
        names = [b.name for b in func.buffers] + [v.name for v in func.size_vars]
        self.kernel_name = native_symbol(func.name)
        frame = self.new_function(self.kernel_name, args, names)
        nb = len(func.buffers)
        frame.bufs.update(zip(func.buffers, frame.fn.args[:nb]))
        frame.vars.update(zip(func.size_vars, frame.fn.args[nb:]))
        self.frame = frame
        self.stmt(func.body)
        self.finish(frame)

    def declare(self, name: str, ret: ir.Type, args: list) -> ir.Function:
        fn = self._decls.get(name)
        if fn is None:
            fn = self.module.globals.get(name) or ir.Function(self.module, ir.FunctionType(ret, args), name=name)
            self._decls[name] = fn
        return fn

    def intrinsic(self, name: str, args: list, ret: ir.Type | None = None, overload=None,
                  flags: tuple = ()) -> ir.Value:
        """Call ``llvm.<name>.<suffix>`` where the suffix mangles ``overload`` (default: first arg type);
        ``flags`` are fast-math flags of the call."""
        types = overload if overload is not None else [args[0].type]
        full = "llvm." + name + "".join("." + mangle(t) for t in types)
        fn = self.declare(full, ret if ret is not None else args[0].type, [a.type for a in args])
        return self.b.call(fn, args, fastmath=flags)

    def alloca(self, t: ir.Type, count: ir.Value | None = None, align: int = ALIGN) -> ir.Value:
        """Stack memory, allocated once in the entry block of the current function."""
        a = ir.IRBuilder(self.frame.fn.entry_basic_block).alloca(t, size=count)
        a.align = align
        a.type = PTR
        return a

    def fresh(self, base: str) -> str:
        return f"{base}.{next(self._ids)}"

    # statements ---------------------------------------------------------------------------------------
    def stmt(self, s: S.Stmt) -> None:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise CodegenError(f"the LLVM backend cannot compile the statement {type(s).__name__}:\n{s}")
        method(s)

    def stmt_Seq(self, s: S.Seq) -> None:
        for x in s.stmts:
            self.stmt(x)

    def stmt_Evaluate(self, s: S.Evaluate) -> None:
        self.expr(s.value)

    def stmt_Attr(self, s: S.Attr) -> None:
        self.stmt(s.body)

    def stmt_LetStmt(self, s: S.LetStmt) -> None:
        value = self.index_value(s.value) if dt.is_int(s.var.dtype) else self.expr(s.value)
        self.frame.vars[s.var] = value
        with self.frame.cse.region():
            self.stmt(s.body)
        del self.frame.vars[s.var]

    def stmt_IfThenElse(self, s: S.IfThenElse) -> None:
        cond = self.truth(s.condition)
        if s.else_case is None:
            with self.b.if_then(cond), self.frame.cse.region():
                self.stmt(s.then_case)
        else:
            with self.b.if_else(cond) as (then, otherwise):
                with then, self.frame.cse.region():
                    self.stmt(s.then_case)
                with otherwise, self.frame.cse.region():
                    self.stmt(s.else_case)

    def stmt_For(self, s: S.For) -> None:
        if s.kind == S.PARALLEL and not self.frame.in_parallel:
            llvm_parallel.emit_parallel_for(self, s)
            return
        var = s.loop_var
        begin = convert(self.b, self.index_value(s.min), s.min.dtype, var.dtype)
        end = convert(self.b, self.index_value(s.extent), s.extent.dtype, var.dtype)
        if not E.is_const(s.min, 0):
            end = self.b.add(begin, end, flags=["nsw"])
        self.serial_loop(s.loop_var, begin, end, lambda: self.stmt(s.body))

    def serial_loop(self, var: E.Var, begin: ir.Value, end: ir.Value, body) -> None:
        """``for (var = begin; var < end; ++var) body()``; bounds have ``var``'s type, ``var`` is bound in body.

        Every non-parallel kind lands here: "vectorized" / "unrolled" loops the lowering could not
        transform are left to LLVM's own vectorizer and unroller (forcing them with loop metadata
        only adds "transformation not performed" warnings on stderr when they do not apply)."""
        b, fn = self.b, self.frame.fn
        pre = b.block
        header, body_bb, exit_bb = (fn.append_basic_block(self.fresh(f"{var.name}.{x}"))
                                    for x in ("head", "body", "exit"))
        b.branch(header)
        b.position_at_end(header)
        iv = b.phi(begin.type, name=var.name)
        iv.add_incoming(begin, pre)
        less = b.icmp_unsigned if dt.is_unsigned(var.dtype) else b.icmp_signed
        b.cbranch(less("<", iv, end), body_bb, exit_bb)
        b.position_at_end(body_bb)
        self.frame.vars[var] = iv
        with self.frame.cse.region():
            body()
        del self.frame.vars[var]
        nxt = b.add(iv, const(iv.type, 1), flags=["nsw"])
        b.branch(header)
        iv.add_incoming(nxt, b.block)
        b.position_at_end(exit_bb)

    def stmt_BufferStore(self, s: S.BufferStore) -> None:
        outer, self.float_flags = self.float_flags, FAST if _accumulates(s) else ()
        try:
            with self.frame.cse.statement():
                llvm_memory.store(self, s)
        finally:
            self.float_flags = outer

    def stmt_Allocate(self, s: S.Allocate) -> None:
        llvm_memory.allocate(self, s)

    def buffer_ptr(self, buf: S.Buffer) -> ir.Value:
        return llvm_memory.buffer_ptr(self, buf)

    # expressions --------------------------------------------------------------------------------------
    def expr(self, e: E.Expr) -> ir.Value:
        """The value of ``e``; pure integer arithmetic already emitted in a dominating region is reused
        (and, within one store's value, any load, call or arithmetic: :mod:`.cse`)."""
        if isinstance(e, IN_VALUE):
            cse = self.frame.cse
            key = cse.key(e, (id(self.mask), self.float_flags))   # a mask lives as long as the IR
            if key is not None:
                key = (self._index_depth > 0, key)
                v = cse.get(key)
                if v is None:
                    v = self._emit(e)
                    cse.put(key, v)
                return v
        return self._emit(e)

    def _emit(self, e: E.Expr) -> ir.Value:
        method = self._exprs.get(type(e))
        if method is None:
            if isinstance(e, E.BinaryOp):
                return self.expr_binary(e)
            raise CodegenError(f"the LLVM backend cannot compile the expression {type(e).__name__}: {e}")
        return method(e)

    def index_value(self, e: E.Expr) -> ir.Value:
        """An integer expression used for addressing or loop bounds (signed ops get ``nsw``)."""
        self._index_depth += 1
        try:
            return self.expr(e)
        finally:
            self._index_depth -= 1

    def offset(self, e: E.Expr) -> ir.Value:
        cse = self.frame.cse
        key = cse.key(e)
        v = cse.get(("i64", key)) if key is not None else None
        if v is None:
            v = to_i64(self.b, self.index_value(e), e.dtype)
            if key is not None:
                cse.put(("i64", key), v)
        return v

    def truth(self, e: E.Expr) -> ir.Value:
        return convert(self.b, self.expr(e), e.dtype, "bool")

    def expr_Var(self, e: E.Var) -> ir.Value:
        v = self.frame.vars.get(e)
        if v is None:
            raise CodegenError(f"variable {e.name} is not bound here (a size var missing from "
                               "LoweredFunc.size_vars, or a loop variable used outside its loop?)")
        return v

    def expr_Imm(self, e) -> ir.Value:
        value = float(dt.np_dtype(e.dtype).type(e.value)) if dt.element(e.dtype) == "bfloat16" else e.value
        return ir.Constant(ltype(e.dtype), value)

    def expr_Cast(self, e: E.Cast) -> ir.Value:
        return convert(self.b, self.expr(e.value), e.value.dtype, e.dtype)

    def expr_Not(self, e: E.Not) -> ir.Value:
        v = self.truth(e.a)
        return self.b.xor(v, const(v.type, 1))

    def expr_Select(self, e: E.Select) -> ir.Value:
        """Both arms evaluated and blended, except that an arm which reads memory (or divides by a
        variable) runs only where the condition holds: behind a branch for a scalar condition; for a
        vector one its loads are masked, behind an "any lane" branch unless they are all vector loads
        of the condition's width (``if_then_else`` guards: a padded window's edge).  A broadcast condition
        (the same in every lane: which input of a concatenate) is scalar, so its arms run behind one
        branch: masked loads whose masks are all false still cost their address's page walk (7 ms of
        the 8 of a blocked concat, whose idle arm points before its buffer)."""
        uniform = isinstance(e.cond, E.Broadcast)
        c = self.truth(e.cond.value if uniform else e.cond)
        safe = {structural_key(x) for x in collect(e.cond, E.BufferLoad)}
        arms = []
        for value, when in ((e.true_value, c), (e.false_value, None)):
            risky = _risky(value, safe)
            if not risky:
                arms.append(self.expr(value))
                continue
            when = self._within(when if when is not None else self.b.xor(c, const(c.type, 1)))
            if lanes_of(c) > 1 and all(type(x) is E.BufferLoad and dt.lanes(x.indices[0].dtype) == lanes_of(c)
                                       for x in risky):
                arms.append(self._masked(value, when))
            else:
                arms.append(self._guarded(value, when))
        t, f = unify(self.b, *arms)
        lanes = dt.lanes(e.dtype) if uniform else lanes_of(c)
        if lanes > lanes_of(t):
            t, f = splat(self.b, t, lanes), splat(self.b, f, lanes)
        return self.b.select(c, t, f)

    def _within(self, cond: ir.Value) -> ir.Value:
        """``cond`` and the lane mask of the enclosing arms: in nested selects a lane reads memory only
        where every enclosing condition holds (isl proves the accesses only there)."""
        if self.mask is None or lanes_of(self.mask) != lanes_of(cond):
            return cond
        return self.b.and_(self.mask, cond)

    def _masked(self, e: E.Expr, cond: ir.Value) -> ir.Value:
        """Evaluate ``e`` with every vector load masked by ``cond`` (no branch)."""
        saved, self.mask = self.mask, cond
        try:
            return self.expr(e)
        finally:
            self.mask = saved

    def _guarded(self, e: E.Expr, cond: ir.Value) -> ir.Value:
        """Evaluate ``e`` only if some lane of ``cond`` is true (else poison), loads masked by ``cond``."""
        b = self.b
        anyc = cond if lanes_of(cond) == 1 else self.intrinsic("vector.reduce.or", [cond], ret=I1)
        pre, saved = b.block, self.mask
        with b.if_then(anyc), self.frame.cse.region():
            self.mask = cond if lanes_of(cond) > 1 else saved
            try:
                v = self.expr(e)
            finally:
                self.mask = saved
            body = b.block
        phi = b.phi(v.type)
        phi.add_incoming(v, body)
        phi.add_incoming(ir.Constant(v.type, ir.Undefined), pre)
        return phi

    def expr_Call(self, e: E.Call) -> ir.Value:
        return llvm_math.emit_call(self, e)

    def expr_Let(self, e: E.Let) -> ir.Value:
        self.frame.vars[e.var] = self.index_value(e.value) if dt.is_int(e.var.dtype) else self.expr(e.value)
        try:
            with self.frame.cse.region():
                return self.expr(e.body)
        finally:
            del self.frame.vars[e.var]

    def expr_Broadcast(self, e: E.Broadcast) -> ir.Value:
        return splat(self.b, self.expr(e.value), e.lanes)

    def expr_Ramp(self, e: E.Ramp) -> ir.Value:
        t = ltype(e.base.dtype)
        vt = ir.VectorType(t, e.lanes)
        if isinstance(e.base, E.IntImm) and isinstance(e.stride, E.IntImm):
            return ir.Constant(vt, [e.base.value + i * e.stride.value for i in range(e.lanes)])
        flags = ["nsw"] if self._index_depth and not dt.is_unsigned(e.base.dtype) else []
        base = splat(self.b, self.expr(e.base), e.lanes)
        if isinstance(e.stride, E.IntImm):
            steps = ir.Constant(vt, [i * e.stride.value for i in range(e.lanes)])
        else:
            steps = self.b.mul(splat(self.b, self.expr(e.stride), e.lanes), ir.Constant(vt, list(range(e.lanes))),
                               flags=flags)
        return self.b.add(base, steps, flags=flags)

    def expr_binary(self, e) -> ir.Value:
        a, b = unify(self.b, self.expr(e.a), self.expr(e.b))
        t, elem = type(e), dt.element(e.a.dtype)
        if t in (E.And, E.Or):
            a, b = convert(self.b, a, e.a.dtype, "bool"), convert(self.b, b, e.b.dtype, "bool")
            return self.b.and_(a, b) if t is E.And else self.b.or_(a, b)
        if dt.is_float(elem):
            v = self._float_binary(t, a, b)
            return round_bf16(self.b, v) if elem == "bfloat16" and t in _ROUNDS else v
        return self._int_binary(t, a, b, e.b, dt.is_unsigned(elem) or dt.is_bool(elem))

    def _float_binary(self, t, a, b) -> ir.Value:
        bb = self.b
        if t in _ICMP:
            op = _ICMP[t]
            return bb.fcmp_unordered(op, a, b) if op == "!=" else bb.fcmp_ordered(op, a, b)
        simple = {E.Add: bb.fadd, E.Sub: bb.fsub, E.Mul: bb.fmul, E.Div: bb.fdiv, E.Mod: bb.frem}
        if t in simple:
            return simple[t](a, b, flags=self.float_flags)
        if t in (E.Min, E.Max):   # IEEE 754-2019 minimum/maximum: NaN propagates, -0.0 < +0.0 (nsz in a
            # reduction step: the sign of a zero is then either's, and max pooling stays vmaxps + a NaN blend)
            name = "minimum" if t is E.Min else "maximum"
            if isinstance(scalar_type(a.type), ir.HalfType):   # in float (exact): LLVM expands half's lane by lane
                wide = with_lanes(F32, lanes_of(a))
                v = self.intrinsic(name, [bb.fpext(a, wide), bb.fpext(b, wide)], flags=self.float_flags)
                return bb.fptrunc(v, a.type)
            return self.intrinsic(name, [a, b], flags=self.float_flags)
        if t in (E.FloorDiv, E.FloorMod):
            q = self.intrinsic("floor", [bb.fdiv(a, b, flags=self.float_flags)])
            return q if t is E.FloorDiv else bb.fsub(a, bb.fmul(q, b, flags=self.float_flags),
                                                     flags=self.float_flags)
        raise CodegenError(f"unsupported float operation {t.__name__}")

    def _int_binary(self, t, a, b, b_expr, unsigned: bool) -> ir.Value:
        bb = self.b
        if t in _ICMP:
            return (bb.icmp_unsigned if unsigned else bb.icmp_signed)(_ICMP[t], a, b)
        flags = ["nsw"] if self._index_depth and not unsigned else []
        if t is E.Add:
            return bb.add(a, b, flags=flags)
        if t is E.Sub:
            return bb.sub(a, b, flags=flags)
        if t is E.Mul:
            return bb.mul(a, b, flags=flags)
        if t in (E.Min, E.Max):
            name = ("u" if unsigned else "s") + ("min" if t is E.Min else "max")
            return self.intrinsic(name, [a, b])
        if t in (E.Div, E.Mod) or unsigned:
            div = t in (E.Div, E.FloorDiv)
            if unsigned:
                return bb.udiv(a, b) if div else bb.urem(a, b)
            return bb.sdiv(a, b) if div else bb.srem(a, b)
        if t in (E.FloorDiv, E.FloorMod):
            return self._floor_divmod(a, b, _const_value(b_expr), t is E.FloorDiv)
        raise CodegenError(f"unsupported integer operation {t.__name__}")

    def _floor_divmod(self, a, b, c, div: bool) -> ir.Value:
        """Floor division / modulo on signed integers (result of modulo has the divisor's sign)."""
        bb = self.b
        if c is not None and c > 0 and c & (c - 1) == 0:
            return bb.ashr(a, const(a.type, c.bit_length() - 1)) if div else bb.and_(a, const(a.type, c - 1))
        q, r = bb.sdiv(a, b), bb.srem(a, b)
        zero = const(a.type, 0)
        if c is not None and c > 0:
            adjust = bb.icmp_signed("<", r, zero)
        else:
            differ = bb.xor(bb.icmp_signed("<", r, zero), bb.icmp_signed("<", b, zero))
            adjust = bb.and_(bb.icmp_signed("!=", r, zero), differ)
        if div:
            return bb.sub(q, bb.zext(adjust, a.type))
        return bb.add(r, bb.select(adjust, b, zero))


def _const_value(e: E.Expr):
    if isinstance(e, E.Broadcast):
        e = e.value
    return e.value if isinstance(e, E.IntImm) else None


def _risky(e: E.Expr, safe: set) -> list:
    """What could fault if ``e`` were evaluated where it is not needed: memory reads (except those in
    ``safe``, structural keys of loads that run anyway) and integer divisions by a variable."""
    def risky(x) -> bool:
        if isinstance(x, E.BufferLoad):
            return structural_key(x) not in safe
        return isinstance(x, (E.Div, E.Mod, E.FloorDiv, E.FloorMod)) and dt.is_int(x.dtype) \
            and _const_value(x.b) in (None, 0)
    return collect(e, risky)


def codegen_llvm(func: S.LoweredFunc, target: Target) -> tuple[str, bool]:
    """LLVM IR text for ``func`` and whether it needs the OpenMP runtime."""
    cg = CodeGenLLVM(target, name=func.name)
    cg.add_function(func)
    return str(cg.module), cg.uses_threads


def _accumulates(s: S.BufferStore) -> bool:
    """Whether the store updates its element from its own old value (a reduction step)."""
    own = collect(s.value, lambda n: type(n) is E.BufferLoad and n.buffer is s.buffer)
    if not own:
        return False
    key = structural_key(s.indices)
    return any(structural_key(ld.indices) == key for ld in own)
