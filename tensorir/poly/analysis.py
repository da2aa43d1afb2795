"""What isl proves about a lowered loop nest before any code is generated.

* every read and write stays inside its buffer for all sizes (``OutOfBoundsError`` with a
  counterexample otherwise);
* no ``parallel`` loop carries a dependence and no ``vectorize`` makes lanes race
  (``ScheduleError`` naming the stage, the axis and the dependence), nor does a loop bound to GPU
  threads or blocks (``poly/threads.py``);
* every element of an intermediate buffer is written before it is read, so a ``compute_at`` that
  places a producer too late is refused.

``analyze(s, args)`` returns the analysis; ``print`` shows domains, schedule, accesses and the
read-after-write, write-after-read and write-after-write dependences in isl syntax.
"""
from __future__ import annotations

from typing import Sequence

import islpy as isl

from .errors import isl_boundary
from . import PolyProgram, Statement, aff, buffer_name
from .split import disjoint_by_split
from ..schedule import ScheduleError
from ..stmt import For, LoweredFunc, PARALLEL, VECTORIZED
from ..visitor import collect
from ..expr import Var
from ..printer import display_names, expr_text


class OutOfBoundsError(ScheduleError):
    """A read or write that can leave its buffer; the message names the tensor, the index and a
    point where it happens."""


class Analysis:
    def __init__(self, func: LoweredFunc):
        self.func = func
        self.program = PolyProgram(func.body, list(func.size_vars))  # isl failures name their stage (poly.py)
        self.stage_of_loop = dict(dict(func.attrs).get("loop_stage", {}))
        self.write_first = set(dict(func.attrs).get("write_before_read", ()))
        stage_of_buffer = dict(dict(func.attrs).get("buffer_stage", {}))  # "T.v0" -> stage "T"
        for st in self.program.statements:
            st.stage = stage_of_buffer.get(st.stage, st.stage)
        self.names = display_names(func.body)
        for st in self.program.statements:  # a store into another operation's buffer (a scan's update)
            if st.store is not None and st.store.buffer in self.write_first and st.loops:
                st.stage = self.stage_of_loop.get(st.loops[-1].loop_var, st.stage)
        # accesses with an index isl cannot represent (data-dependent): proven in the other dimensions
        self.unverified = [(st, a) for st in self.program.statements for a in st.accesses if a.opaque_dims]

    # -- the three checks --------------------------------------------------------------------------
    def verify(self) -> None:
        """Run the checks; an isl failure in one is a ``ScheduleError`` naming the stage and the
        check (inner boundaries), or all the stages (this one)."""
        from .threads import check_scan_threads, check_thread_loops
        with isl_boundary("proving the schedule safe", self._stages):
            self.check_in_bounds()
            self.check_loops()
            self.check_reads_after_writes()
            with isl_boundary("checking that the steps of a scan pass no data between GPU threads", self._stages):
                check_scan_threads(self)
            check_thread_loops(self)

    def check_in_bounds(self) -> None:
        ctx = self.program.context()
        boxes: dict = {}
        for st in self.program.statements:
            with isl_boundary("proving its reads and writes inside their buffers", st.stage):
                self._check_in_bounds(st, ctx, boxes)

    def _check_in_bounds(self, st: Statement, ctx: isl.Set, boxes: dict) -> None:
        for a in st.accesses:
            key = (a.buffer, a.opaque_dims)
            box = boxes.get(key)
            if box is None:
                box = boxes[key] = self._box(a.buffer, a.opaque_dims)
            if box is None:  # a shape isl cannot represent
                continue
            bad = a.relation.intersect_params(ctx).subtract_range(box)
            if not bad.is_empty():
                raise OutOfBoundsError(self._oob_message(st, a, bad))

    def check_loops(self) -> None:
        for loop in collect(self.func.body, For):
            if loop.kind in (PARALLEL, VECTORIZED):
                stage = self.stage_of_loop.get(loop.loop_var) or self._stage_inside(loop)
                with isl_boundary(f"checking that axis {loop.loop_var.name} carries no dependence", stage):
                    self._check_loop(loop)

    def check_reads_after_writes(self) -> None:
        """Every read of an intermediate buffer (or of a state written before it is read) has a write
        before it; reads of the arguments are not asked about (a smaller flow problem for isl)."""
        args = set(self.func.buffers)

        def asked(buf) -> bool:
            return buf not in args or buf in self.write_first
        if not any(asked(a.buffer) for st in self.program.statements for a in st.accesses if not a.is_write):
            return
        flow = self._flow(sink_write=False, source_write=True, keep=asked)
        with isl_boundary("proving every read of an intermediate buffer comes after its write", self._stages):
            self._check_missing_sources(flow, args)

    def _check_missing_sources(self, flow, args: set) -> None:
        missing = flow.get_must_no_source().intersect_params(self.program.context())
        if missing.is_empty():
            return
        maps = missing.get_map_list()
        for m in (maps.get_at(k) for k in range(maps.n_map())):
            name = m.get_tuple_name(isl.dim_type.out)
            buf = next((a.buffer for st in self.program.statements for a in st.accesses
                        if buffer_name(a.buffer) == name), None)
            if buf is None or (buf in args and buf not in self.write_first):
                continue
            st = self._statement(m.get_tuple_name(isl.dim_type.in_))
            point = _describe(m.wrap().sample_point())
            if buf.scope == "local" and any(f.kind == "thread" for f in st.loops):
                raise ScheduleError(
                    f"stage {st.stage} reads {buf.name}, a local buffer (each GPU thread has its own copy), at an "
                    f"element its own thread has not computed (at {point}; the thread indices are the thr "
                    f"dimensions): bind {buf.name}'s axes so that each thread computes the elements it reads, or "
                    f"place it in shared memory")
            if buf in self.write_first:
                raise ScheduleError(
                    f"stage {st.stage} reads {buf.name} at an element not computed yet (at {point}): the "
                    f"update of a scan may only read earlier steps of its state (state[t - 1, ...])")
            raise ScheduleError(
                f"stage {st.stage} reads {buf.name} before it is computed (at {point}): "
                f"compute_at places stage {buf.name} after this read; attach it at an enclosing loop")

    # -- dependences ---------------------------------------------------------------------------------
    def dependences(self) -> dict[str, isl.UnionMap]:
        flows = {"read-after-write": (False, True), "write-after-read": (True, False), "write-after-write": (True, True)}
        out = {}
        for kind, (sink_write, source_write) in flows.items():
            flow = self._flow(sink_write=sink_write, source_write=source_write)
            with isl_boundary(f"computing the {kind} dependences", self._stages):
                out[kind] = flow.get_must_dependence() if source_write else flow.get_may_dependence()
        return out

    def _flow(self, sink_write: bool, source_write: bool, keep=None):
        p = self.program
        sink, source = p.access_map(sink_write, keep=keep), p.access_map(source_write, keep=keep)
        with isl_boundary("computing the flow of values between stages", self._stages,
                          message=lambda text: self._unbounded_message(text) if "unbounded" in text else None):
            info = isl.UnionAccessInfo.from_sink(sink)
            info = info.set_must_source(source) if source_write else info.set_may_source(source)
            return info.set_schedule_map(_padded_schedule(p)).compute_flow()

    def _stages(self) -> str:
        """The stages of the function (for a failure of a question about all of them)."""
        return ", ".join(dict.fromkeys(st.stage for st in self.program.statements)) or "?"

    def _stage_inside(self, loop: For) -> str:
        return next((st.stage for st in self.program.statements if any(f is loop for f in st.loops)), "?")

    def _unbounded_message(self, isl_text: str = "") -> str:
        """isl's flow analysis failed: the stages whose loops isl cannot represent, the likely cause."""
        loops = {}
        for st in self.program.statements:
            for f in st.loops:
                if aff(f.extent) is None:
                    loops.setdefault(st.stage, []).append(f"{self.names.get(f.loop_var, f.loop_var.name)} "
                                                          f"(extent {f.extent})")
        where = "; ".join(f"stage {stage}: loop {', '.join(dict.fromkeys(ls))}" for stage, ls in loops.items()) \
            or f"stages {self._stages()}: a loop bound or condition isl cannot represent"
        said = f" (isl: {isl_text})" if isl_text else ""
        return (f"the isl analysis cannot bound the iteration domain ({where}){said}, so it cannot prove the "
                "schedule free of races and of reads before writes: refused. Constant sizes, or split(factor=...) "
                "instead of nparts / fuse over symbolic extents, keep loop bounds affine")

    # -- helpers ---------------------------------------------------------------------------------------
    def _box(self, buf, skip: tuple = ()) -> isl.Set | None:
        """The buffer's index space; dimensions in ``skip`` are left unconstrained."""
        dims, cons = [], []
        for d, extent in enumerate(buf.shape):
            a = aff(extent)
            if a is None:
                return None
            dims.append(f"x{d}")
            if d not in skip:
                cons.append(f"0 <= x{d} < {a}")
        body = " and ".join(cons) or "1 = 1"
        return isl.Set(f"{self.program.prefix()}{{ {buffer_name(buf)}[{', '.join(dims)}] : {body} }}")

    def _oob_message(self, st: Statement, a, bad: isl.Map) -> str:
        pt = bad.wrap().sample_point()
        names = [self.names.get(f.loop_var, f.loop_var.name) for f in st.loops]
        n_in = len(names)
        coords = [int(pt.get_coordinate_val(isl.dim_type.set, k).to_python()) for k in range(n_in + len(a.indices))]
        params = [(v.name, int(pt.get_coordinate_val(isl.dim_type.param, k).to_python()))
                  for k, v in enumerate(self.program.params + self.program._extra_params)]
        where = ", ".join(f"{n} = {c}" for n, c in list(zip(names, coords)) + params) or "always"
        idx = ", ".join(expr_text(i, self.names) for i in a.indices)
        elem = ", ".join(str(c) for c in coords[n_in:])
        shape = ", ".join(expr_text(x) for x in a.buffer.shape)
        kind = "write" if a.is_write else "read"
        return (f"stage {st.stage}: out-of-bounds {kind} of tensor {a.buffer.name}: index "
                f"{a.buffer.name}[{idx}] reaches {a.buffer.name}[{elem}] outside its shape [{shape}] "
                f"(counterexample: {where})")

    def _statement(self, name: str) -> Statement:
        return next(s for s in self.program.statements if s.name == name)

    def _check_loop(self, loop: For) -> None:
        inside = [st for st in self.program.statements if any(f is loop for f in st.loops)]
        stage = self.stage_of_loop.get(loop.loop_var) or self._stage_inside(loop)
        for w_st in inside:
            for w in (a for a in w_st.accesses if a.is_write):
                if any(f is loop for f in self.program.alloc_loops.get(w.buffer, ())):
                    continue  # private to each iteration
                for x_st in inside:
                    for x in (a for a in x_st.accesses if a.buffer is w.buffer):
                        found = _carried(w_st, w, x_st, x, loop, self.names)
                        if found is None:
                            continue
                        if loop.kind == VECTORIZED and _invariant_store(w_st, loop):
                            continue  # a reduction over the lanes: lowered as a scalar loop
                        write_first, example = found
                        kind = "write-after-write" if x.is_write else \
                            "read-after-write" if write_first else "write-after-read"
                        what = "parallelize" if loop.kind == PARALLEL else "vectorize"
                        w_idx = ", ".join(expr_text(i, self.names) for i in w.indices)
                        x_idx = ", ".join(expr_text(i, self.names) for i in x.indices)
                        if w.opaque_dims or x.opaque_dims:
                            if disjoint_by_split(loop.loop_var, [(w.indices, w_st.loops), (x.indices, x_st.loops)],
                                                 self.program.params):
                                continue  # blocks of a split by a symbolic factor
                            raise ScheduleError(
                                f"stage {stage}: cannot {what} axis {loop.loop_var.name}: isl cannot prove its "
                                f"iterations touch different elements of {w.buffer.name} ({w.buffer.name}[{w_idx}] "
                                f"and {x.buffer.name}[{x_idx}]): an index is not affine (a loop variable times a "
                                "symbolic size, a division by one, or a loaded value). A constant split factor or "
                                "nparts keeps it affine")
                        raise ScheduleError(
                            f"stage {stage}: cannot {what} axis {loop.loop_var.name}: it carries a {kind} "
                            f"dependence on {w.buffer.name} between {w.buffer.name}[{w_idx}] and "
                            f"{x.buffer.name}[{x_idx}] ({example})")


def _invariant_store(st: Statement, loop: For) -> bool:
    return st.store is not None and loop.loop_var not in collect(st.store.indices, Var)


def _carried(w_st: Statement, w, x_st: Statement, x, loop: For, names: dict,
             extra: tuple = ()) -> tuple[bool, str] | None:
    """Instances of the two accesses in different iterations of ``loop`` (same iterations of the
    loops around it, and the constraints ``extra`` over ``a<k>`` / ``b<k>``, the loops of the
    write's and the other's statement) that touch one element: (whether the write's iteration
    comes first, an example), or None."""
    rel = w.relation.apply_range(x.relation.reverse())
    level = next(k for k, f in enumerate(w_st.loops) if f is loop)
    a = [f"a{k}" for k in range(len(w_st.loops))]
    b = [f"b{k}" for k in range(len(x_st.loops))]
    same = [f"a{k} = b{k}" for k in range(level)] + list(extra)
    for order in (f"a{level} < b{level}", f"a{level} > b{level}"):
        cons = " and ".join(same + [order])
        m = isl.Map(f"{{ {w_st.name}[{', '.join(a)}] -> {x_st.name}[{', '.join(b)}] : {cons} }}")
        hit = rel.intersect(m.align_params(rel.get_space()))
        if hit.is_empty():
            continue
        pt = hit.wrap().sample_point()
        n = len(w_st.loops)
        va = [int(pt.get_coordinate_val(isl.dim_type.set, k).to_python()) for k in range(n)]
        vb = [int(pt.get_coordinate_val(isl.dim_type.set, n + k).to_python()) for k in range(len(x_st.loops))]
        it = lambda st, v: ", ".join(f"{names.get(f.loop_var, f.loop_var.name)}={c}"
                                     for f, c in zip(st.loops, v))
        return order.startswith(f"a{level} <"), f"e.g. iterations ({it(w_st, va)}) and ({it(x_st, vb)})"
    return None


def _describe(pt) -> str:
    return str(pt).strip("{} ")


def _padded_schedule(p: PolyProgram) -> isl.UnionMap:
    """Schedules of one common dimension (isl's flow analysis compares them lexicographically)."""
    width = max((s.schedule.dim(isl.dim_type.out) for s in p.statements), default=0)
    out = isl.UnionMap("{ }")
    for s in p.statements:
        m = s.schedule
        extra = width - m.dim(isl.dim_type.out)
        if extra:
            m = m.add_dims(isl.dim_type.out, extra)
            for k in range(width - extra, width):
                m = m.fix_val(isl.dim_type.out, k, 0)
        out = out.union(isl.UnionMap.from_map(m))
    return out


def analyze(s, args: Sequence, name: str = "default_function") -> Analysis:
    """The isl analysis of a schedule (``print`` it to see domains and dependences)."""
    from ..lower import loop_nest
    return Analysis(loop_nest(s, args, name))


def format_analysis(a: Analysis) -> str:
    lines = [f"// context: {a.program.context()}"]
    for st in a.program.statements:
        lines.append(f"// {st.name} ({st.stage}): domain {st.domain}")
        lines.append(f"//   schedule {st.schedule}")
        for acc in st.accesses:
            lines.append(f"//   {'write' if acc.is_write else 'read '} {acc.relation}")
    for kind, dep in a.dependences().items():
        lines.append(f"// {kind}: {dep}")
    for st, acc in a.unverified:
        idx = ", ".join(expr_text(i, a.names) for i in acc.indices)
        lines.append(f"// unverified (index not affine): {st.name} {acc.buffer.name}[{idx}]")
    return "\n".join(lines)


Analysis.__str__ = format_analysis  # type: ignore[assignment]
