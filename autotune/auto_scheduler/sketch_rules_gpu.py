"""GPU sketches (target ``cuda``): Ansor's "SSSRRSRS" multi-level tiling and its holes.

A reduction with data reuse (GEMM, convolution) is computed into a ``local`` cache (``cache_write``)
at the ``threadIdx`` loops of the stage that writes the result (the cache's copy, or the elementwise
consumer it is fused into, in which case the copy is inlined).  That stage's spatial loops are split
in four levels: block, virtual thread, thread, per-thread; the local stage splits the per-thread
part once more and its reductions in three levels, ordered ``R0 R1 S3 R2 S4``: with the outer three
levels of the consumer that makes the five spatial and three reduction levels of Ansor's sketch.
Each input of the reduction is read through a ``shared`` cache computed at the last ``R0`` loop (a
block-wide tile of ``R1 * R2`` of each reduction axis) and fetched cooperatively: its loops fused
and split by the thread counts of the block's ``.x`` / ``.y`` / ``.z`` axes, each part bound to its axis.

Loops of a level are bound per axis, not fused (``blockIdx``/``threadIdx`` ``.x`` for the innermost
axis, ``.y`` the next, ``.z`` the remaining outer ones fused; one ``vthread`` per axis): tiletune's
bound inference gives constant per-thread regions that way, where a fused thread index leaves
``min``/``max`` expressions in every index.

Every other root stage (injective outputs, reductions without reuse) is fused, split by a sampled
thread count and bound to ``blockIdx.x`` / ``threadIdx.x``: one thread per output element (one per
output row for a reduction).  Reductions that feed one such output (softmax, layer norm) are computed
per thread at its ``threadIdx.x`` loop, in ``local`` memory.

Ansor's *cross-thread reduction* sketch (sketch 0 where some root stage reduces at least a warp's
worth of elements per output, :func:`cross_thread_stages`; the per-thread sketch above is sketch 1):
a reduction at the root gets one block per output (its spatial loops fused, ``blockIdx.x``), its
reduction loops fused and split by the block's thread count, the inner part bound to ``threadIdx.x``
(the backend reduces across the threads: warp shuffles and shared memory).  An output whose rows
feed such reductions (softmax's max and exp-sum, layer norm's sums) gets one block per row: the
reductions are computed at the block loop, reduced across the threads as above, and the row's
elements strided over the same ``threadIdx.x``, so the whole operator is one kernel.  A reduction
with reuse that has fewer outputs than elements to reduce per output (a dense with few rows and a long
``k``) is reduced the same way instead of tiled, its elementwise consumer one block per element.  A
reduction to a scalar (no spatial loop, any length; :func:`attach_scalar_reductions`: with its 0-d
elementwise output, ``sum / n``) has only this sketch: one block (``blockIdx.x`` on a unit loop, TVM's
``fuse()`` of no axes) whose threads reduce every element; from :data:`PARTIALS_MIN` elements also
the *partial sums* sketch: ``rfactor`` by the outermost reduction loop split into ``S{k}.b`` slices,
one block per slice reducing it across threads into a global array (a kernel of its own), then the
one block reduces those sums (two kernels).

Holes (``Point.holes``): ``T{k}.s{a}`` = ``[vthread, threads, S3, S4]`` lengths of spatial axis ``a``
(the block level is what remains), ``T{k}.r{a}`` = ``[R1, R2]``, ``T{k}.u`` the
``auto_unroll_max_step`` pragma, ``T{k}.f`` the vector length of the cooperative fetch (1, 2, 4; the
result is stored in vectors of ``S4`` of the innermost axis when that is 2 or 4); ``S{k}.t`` the
threads per block of the simple root stages (one count for all); ``S{k}.x`` the threads per block of
a cross-thread root stage ``k`` (32 to 1024 and at most the longest row; multiples of 32 preferred,
others allowed); ``S{k}.b`` the blocks of partial sums (:data:`PARTIALS`).
Sampling, mutation and crossover keep every point within :data:`LIMITS` (threads per block,
``threadIdx.z``, shared memory, virtual threads, outputs per thread) and give each thread at least one
fetch vector per shared tile; ``build`` refuses a point outside them, naming the stage.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

from tensorir import dtype as dt
from tensorir.arith import const_bounds
from tensorir.expr import TensorLoad
from tensorir.schedule import ScheduleError
from tensorir.visitor import collect

from .analysis import analyze, effective_readers
from .loop_state import State
from .sketch import Point, SketchSpace, _move_factor, divisors

UNROLL_STEPS_GPU = (0, 16, 64, 512, 1024)
VECTOR = (2, 4)                               # vector lengths of global / shared accesses (float2, float4)
FETCH_VECTORS = (1, 2, 4)
THREAD_CAPS = (32, 64, 128, 256, 512)         # the sampled bound on threads per block of a tiled stage
SIMPLE_THREADS = (32, 64, 128, 256, 512, 1024)
WARP = 32
ODD_THREADS = 0.25                            # how often a sampled cross-thread count is not a multiple of 32
PARTIALS = (8, 16, 32, 64, 128, 256, 512, 1024)   # blocks of partial sums of a long reduction to a scalar
PARTIALS_MIN = 1 << 14                        # the elements from which a scalar reduction has that sketch


@dataclass(frozen=True)
class GPULimits:
    threads: int = 1024              # threads per block
    shared_bytes: int = 48 * 1024    # static shared memory per block
    vthreads: int = 8                # virtual threads per block (their product)
    thread_z: int = 64               # threadIdx.z extent
    per_thread: int = 64             # outputs one thread keeps in registers (vthread * S3 * S4)


LIMITS = GPULimits()


def supports_cross_thread_reduction(target: str = "cuda") -> bool:
    """Hook: whether the backend reduces across the threads of a block (``threadIdx`` bound to a
    reduction loop, tensorir/lower/thread_allreduce.py): the cross-thread reduction sketch."""
    return True


def cross_thread_stages(infos) -> list:
    """The root stages the cross-thread sketch gives one block per output (row): reductions of at least
    a warp's worth of elements per output or to a scalar, and outputs whose attached reductions
    (``guests``) are, or that are scalars; a
    reduction with reuse (a dense with few rows and a long ``k``) when it has fewer outputs than
    elements to reduce per output (Ansor's test), at the root or in its elementwise consumer."""
    def long(i) -> bool:
        return math.prod(i.reduce) >= WARP
    out = []
    for info in infos:
        if info.attach is not None:
            continue
        if info.kind == "tile" and info.spatial:
            if long(info) and math.prod(info.spatial) < math.prod(info.reduce):
                host = infos[info.host] if info.host is not None else info
                if not host.guests:
                    out.append(host)
        elif info.kind != "simple" or info.guest is not None:
            continue
        elif info.reduce and not info.guests and (long(info) or not info.spatial) or \
                info.guests and not info.reduce and (any(long(infos[g]) for g in info.guests) or not info.spatial):
            out.append(info)
    return out


def attach_scalar_reductions(infos, dag):
    """``infos`` with each reduction to a scalar whose one reader is a 0-d output (``sum / n``) planned
    as that output's guest: both in one block, the output computed by its threads from the result."""
    outputs = {t.op for t in dag.outputs}
    for info in infos:
        if info.kind != "simple" or not info.reduce or info.spatial or info.op in outputs or info.attach is not None:
            continue
        eff = effective_readers(infos, info.index)
        if len(eff) == 1:
            c = infos[eff[0]]
            if c.kind == "simple" and c.op in outputs and not c.spatial and not c.reduce and c.guest is None:
                info.attach = c.index
                c.guests.append(info.index)
    return infos


def _guests(info) -> list[int]:
    """The reductions computed in a cross-thread root stage's block."""
    return sorted(info.guests) + ([info.guest] if info.guest is not None else [])


def thread_cap(info, infos) -> int:
    """The most threads of a cross-thread stage's block: its longest row (reduction or elementwise; the
    backend launches no more threads than that), at least a warp, at most the block limit."""
    if _guests(info):
        rows = [math.prod(infos[g].reduce) for g in _guests(info)] + [math.prod(info.spatial[_depth(info, infos):])]
    else:
        rows = [math.prod(info.reduce)]
    return min(LIMITS.threads, max(WARP, max(rows)))


# -- the space -------------------------------------------------------------------------------------------------
class GPUSketchSpace(SketchSpace):
    """The GPU sketches of a DAG and their holes: the cross-thread reduction sketch (0) where
    :func:`cross_thread_stages` finds a stage for it, and the per-thread one (the plan of every other
    stage is fixed)."""

    def __init__(self, dag, limits: GPULimits = LIMITS):
        super().__init__(dag)
        self.limits = limits
        self.infos = attach_scalar_reductions(analyze(dag, rfactor=False), dag)
        self.cache_stages = []
        self._check_plan()
        self.cross = cross_thread_stages(self.infos) if supports_cross_thread_reduction() else []
        self.partials = {i.index: r for i in self.cross if (r := _partial_sums(i, self.infos)) is not None}
        per_thread = all(i.spatial or not i.reduce and not i.guests for i in self.root_stages())
        self.sketches = ([{"cross_thread": True}] if self.cross else []) + \
            ([{"cross_thread": True, "partials": True}] if self.partials else []) + \
            ([{}] if per_thread or not self.cross else [])

    def has_partials(self, sketch: int) -> bool:
        return bool(self.sketches[sketch].get("partials"))

    def is_cross_thread(self, sketch: int) -> bool:
        return bool(self.sketches[sketch].get("cross_thread"))

    def _check_plan(self) -> None:
        outputs = {t.op for t in self.dag.outputs}
        kinds = {i.op: i.kind for i in self.infos}
        for info in self._tiled():
            for t in info.op.input_tensors:
                if kinds[t.op] not in ("placeholder", "inline"):
                    raise ScheduleError(f"stage {info.name}: reads {t.op.name}, a {kinds[t.op]} stage computed in the "
                                        "same kernel by other blocks; the GPU sketch tiles reductions of inputs and "
                                        "inlined stages only")
        for info in self.infos:
            if info.kind in ("placeholder", "inline") or info.op in outputs:
                continue
            if info.kind == "tile" and info.host is not None or info.kind == "simple" and info.attach is not None:
                continue
            raise ScheduleError(f"stage {info.name}: the GPU sketch computes an intermediate {info.kind} stage only "
                                "inside its consumer's threads (one elementwise consumer of its shape, or the rows "
                                "of one output); this DAG needs it in global memory between kernels")

    def _tiled(self, sketch: int | None = None):
        """The tiled stages (with a sketch: not those it reduces across threads)."""
        skip = {g for i in self.cross for g in [i.index, *_guests(i)]} \
            if sketch is not None and self.is_cross_thread(sketch) else set()
        return [i for i in self.infos if i.kind == "tile" and i.index not in skip]

    def root_stages(self, sketch: int | None = None):
        """The simple stages at the root: one thread per element of their fused outer loops (with a
        sketch: not those it reduces across threads)."""
        skip = {i.index for i in self.cross} if sketch is not None and self.is_cross_thread(sketch) else set()
        return [i for i in self.infos if i.kind in ("simple", "rfactor") and i.guest is None and i.attach is None
                and i.index not in skip]

    # -- sampling ----------------------------------------------------------------------------------------------
    def sample(self, rng: random.Random) -> Point:
        return self._sample(rng.randrange(len(self.sketches)), rng)

    def _sample(self, sketch: int, rng: random.Random) -> Point:
        p = Point(sketch)
        for info in self._tiled(sketch):
            cap = rng.choice(THREAD_CAPS)
            warp = min(32, math.prod(info.spatial))
            for attempt in range(96):        # at least a warp per block if the first tries find one
                h = _sample_tile(info, rng, cap)
                if self.fits(info, h) and (attempt >= 64 or _threads(info, h) >= warp):
                    break
            else:
                h = _smallest_tile(info)
            p.holes.update(h)
            p.holes[f"T{info.index}.u"] = rng.choice(UNROLL_STEPS_GPU)
            p.holes[f"T{info.index}.f"] = rng.choice(self._fetch_vectors(info, h))
        roots = self.root_stages(sketch)
        if roots:       # one thread count for every root stage: they share blockIdx.x / threadIdx.x
            total = math.prod(roots[0].spatial[:_bound_depth(roots[0], self.infos)])
            p.holes[f"S{roots[0].index}.t"] = rng.choice([t for t in SIMPLE_THREADS if t < 2 * total] or [32])
        if self.is_cross_thread(sketch):
            for info in self.cross:
                p.holes[f"S{info.index}.x"] = _sample_threads(thread_cap(info, self.infos), rng)
        if self.has_partials(sketch):
            for k, red in self.partials.items():
                p.holes[f"S{k}.b"] = rng.choice([b for b in PARTIALS if b <= red.reduce[0]])
        return p

    def default(self) -> Point:
        """The heuristic point (``_default_tile``), unrolled up to 512 steps, the widest fetch vector that
        fits; simple stages: up to 128 threads per block; the cross-thread sketch where there is one, a
        power of two of threads near a quarter of the row (32 to 512)."""
        p = Point(0)
        for info in self._tiled(0):
            h = _default_tile(info)
            if not self.fits(info, h):
                h = _smallest_tile(info)
            p.holes.update(h)
            p.holes[f"T{info.index}.u"] = 512
            p.holes[f"T{info.index}.f"] = max(self._fetch_vectors(info, h))
        roots = self.root_stages(0)
        if roots:
            total = math.prod(roots[0].spatial[:_bound_depth(roots[0], self.infos)])
            p.holes[f"S{roots[0].index}.t"] = min(128, max(32, 1 << (total - 1).bit_length()))
        if self.is_cross_thread(0):
            for info in self.cross:
                quarter = max(thread_cap(info, self.infos) // 4, 1)
                p.holes[f"S{info.index}.x"] = min(512, max(WARP, 1 << (quarter - 1).bit_length()))
        return p

    def mutate(self, p: Point, rng: random.Random) -> Point:
        """One hole changed within the limits: a prime factor moved between two levels of a tile, or the
        unroll step or thread count resampled (the point itself if no try fits)."""
        for _ in range(16):
            q = p.copy()
            if not q.holes:
                return q
            key = rng.choice(sorted(q.holes))
            k = int(key[1:].split(".")[0])
            info = self.infos[k]
            if ".s" in key or ".r" in key:
                a = int(key.split(".")[1][1:])
                extent = (info.spatial if ".s" in key else info.reduce)[a]
                q.holes[key] = _move_factor(extent, q.holes[key], rng)
            elif key.endswith(".u"):
                q.holes[key] = rng.choice(UNROLL_STEPS_GPU)
            elif key.endswith(".f"):
                q.holes[key] = rng.choice(FETCH_VECTORS)
            elif key.endswith(".x"):
                q.holes[key] = _mutate_threads(q.holes[key], thread_cap(info, self.infos), rng)
            else:
                q.holes[key] = self._sample(p.sketch, rng).holes[key]
            if q.holes != p.holes and all(self.fits(i, q.holes) for i in self._tiled(p.sketch)):
                return q
        return p.copy()

    def crossover(self, a: Point, b: Point, rng: random.Random) -> Point:
        q = super().crossover(a, b, rng)
        return q if all(self.fits(i, q.holes) for i in self._tiled(a.sketch)) else a.copy()

    def _fetch_vectors(self, info, h: dict) -> list[int]:
        return [f for f in FETCH_VECTORS if f == 1 or self.fits(info, {**h, f"T{info.index}.f": f})]

    # -- limits ------------------------------------------------------------------------------------------------
    def fits(self, info, h: dict) -> bool:
        return not self.violations(info, h)

    def violations(self, info, h: dict) -> list[str]:
        """What a tile point exceeds of the limits (empty: it fits)."""
        lim, k, n = self.limits, info.index, len(info.spatial)
        sp = [h[f"T{k}.s{a}"] for a in range(n)]
        threads = _threads(info, h)
        out = []
        if threads > lim.threads:
            out.append(f"{threads} threads per block (> {lim.threads})")
        tz = math.prod(s[1] for s in sp[:max(n - 2, 0)])
        if tz > lim.thread_z:
            out.append(f"threadIdx.z extent {tz} (> {lim.thread_z})")
        vt = math.prod(s[0] for s in sp)
        if vt > lim.vthreads:
            out.append(f"{vt} virtual threads (> {lim.vthreads})")
        if math.prod(s[0] * s[2] * s[3] for s in sp) > lim.per_thread:
            out.append(f"more than {lim.per_thread} outputs per thread")
        smem = shared_bytes(info, h)
        if smem > lim.shared_bytes:
            out.append(f"{smem} bytes of shared memory per block (> {lim.shared_bytes})")
        vec = h.get(f"T{k}.f", 1)
        tiles = shared_tiles(info, h)
        small = [t.name for t, (e, _) in tiles.items() if e < threads * vec]
        if small:     # the cooperative fetch gives every thread at least one element (vector)
            out.append(f"shared tile of {', '.join(small)} smaller than the block's {threads} threads x {vec}")
        ragged = [t.name for t, (_, row) in tiles.items() if row % vec]
        if ragged:
            out.append(f"shared tile rows of {', '.join(ragged)} not a multiple of the fetch vector {vec}")
        return out

    # -- building ------------------------------------------------------------------------------------------------
    def build(self, p: Point) -> State:
        for info in self._tiled(p.sketch):
            bad = self.violations(info, p.holes)
            if bad:
                raise ScheduleError(f"stage {info.name}: GPU tile {', '.join(bad)}")
        if self.is_cross_thread(p.sketch):
            for info in self.cross:
                t = p.holes[f"S{info.index}.x"]
                if not 1 <= t <= self.limits.threads:
                    raise ScheduleError(f"stage {info.name}: {t} threads per block (1 to {self.limits.threads})")
        return build_gpu_state(self, p)


def _sample_threads(cap: int, rng: random.Random) -> int:
    """A cross-thread block size in 32..cap: a multiple of 32 mostly, any count sometimes."""
    if rng.random() < ODD_THREADS and cap > WARP:
        return rng.randint(WARP, cap)
    return WARP * rng.randint(1, cap // WARP)


def _mutate_threads(t: int, cap: int, rng: random.Random) -> int:
    """A neighbouring block size in 32..cap: doubled, halved, a warp more or less, or resampled."""
    moves = [2 * t, t // 2, t + WARP, t - WARP, -(-t // WARP) * WARP, _sample_threads(cap, rng)]
    return min(cap, max(WARP, rng.choice(moves)))


def shared_tiles(info, h: dict) -> dict:
    """``{input: (elements, innermost extent)}`` of each input's block tile in shared memory: the hull
    of its accesses with the spatial axes over the block tile and the reductions over ``R1 * R2``."""
    k, op = info.index, info.op
    ranges = {}
    for a, iv in enumerate(op.axis):
        ranges[iv.var] = (0, math.prod(h[f"T{k}.s{a}"]) - 1)
    for a, iv in enumerate(op.reduce_axis):
        ranges[iv.var] = (0, math.prod(h[f"T{k}.r{a}"]) - 1)
    hulls: dict = {}
    for load in collect(op.bodies, TensorLoad):
        box = [const_bounds(i, ranges) for i in load.indices]
        old = hulls.get(load.tensor, box)
        hulls[load.tensor] = [(min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(old, box)]
    return {t: (int(math.prod(hi - lo + 1 for lo, hi in box)), int(box[-1][1] - box[-1][0] + 1) if box else 1)
            for t, box in hulls.items()}


def shared_bytes(info, h: dict) -> int:
    """Bytes of shared memory of the block tile of a tiled stage."""
    return sum(n * max(dt.bits(t.dtype) // 8, 1) for t, (n, _) in shared_tiles(info, h).items())


def _threads(info, h: dict) -> int:
    return math.prod(h[f"T{info.index}.s{a}"][1] for a in range(len(info.spatial)))


def _sample_tile(info, rng: random.Random, cap: int) -> dict:
    k, n = info.index, len(info.spatial)
    h, budget = {}, cap
    for a in reversed(range(n)):
        e = info.spatial[a]
        t = rng.choice([d for d in divisors(e) if d <= min(budget, 32 if a == n - 1 else 16)] or [1])
        budget //= t
        rest = e // t
        v = rng.choice([d for d in divisors(rest) if d <= 4])
        rest //= v
        s4 = rng.choice([d for d in divisors(rest) if d <= 8])
        s3 = rng.choice([d for d in divisors(rest // s4) if d <= 4])
        h[f"T{k}.s{a}"] = [v, t, s3, s4]
    for a, e in enumerate(info.reduce):
        r2 = rng.choice([d for d in divisors(e) if d <= 8])
        r1 = rng.choice([d for d in divisors(e // r2) if d <= 8])
        h[f"T{k}.r{a}"] = [r1, r2]
    return h


def _best(n: int, prefs) -> int:
    return next((x for x in prefs if n % x == 0), 1)


def _default_tile(info) -> dict:
    """Threads on the three innermost spatial axes (16 x 8 x 4 where they divide), two virtual threads
    and 4 outputs per thread on long axes: 64x128 output tiles of 8x8 per thread for a large GEMM
    (the hand schedule's); reduction slices of 16 of the long reduction axes, short ones (filter
    windows) whole."""
    k, n = info.index, len(info.spatial)
    h = {}
    for a, e in enumerate(info.spatial):
        depth = n - 1 - a               # 0: innermost
        if depth > 2:
            h[f"T{k}.s{a}"] = [1, 1, 1, 1]
            continue
        t = _best(e, ((16, 8, 4, 2) if e >= 256 else (8, 4, 2), (8, 4, 2), (4, 2))[depth])
        rest = e // t
        v = 2 if rest >= 32 and rest % 2 == 0 else 1
        h[f"T{k}.s{a}"] = [v, t, 1, _best(rest // v, (4, 2)) if rest // v >= 4 else 1]
    for a, e in enumerate(info.reduce):
        if e <= 7:
            h[f"T{k}.r{a}"] = [1, e]
        else:
            r2 = _best(e, (8, 4, 2))
            h[f"T{k}.r{a}"] = [_best(e // r2, (2,)), r2]
    return h


def _smallest_tile(info) -> dict:
    h = {f"T{info.index}.s{a}": [1, 1, 1, 1] for a in range(len(info.spatial))}
    h.update({f"T{info.index}.r{a}": [1, 1] for a in range(len(info.reduce))})
    return h


# -- steps -------------------------------------------------------------------------------------------------------
def build_gpu_state(space: GPUSketchSpace, p: Point) -> State:
    state = State(space.dag)
    infos, h = space.infos, p.holes
    roots = space.root_stages(p.sketch)
    cross = {i.index for i in space.cross} if space.is_cross_thread(p.sketch) else set()
    tiled = {i.index for i in space._tiled(p.sketch)}
    for info in reversed(infos):
        if info.index in cross:
            _cross_thread_reduction(state, info, infos, h[f"S{info.index}.x"], h.get(f"S{info.index}.b"))
        elif info.index in tiled:
            _multi_level_tile(state, info, infos, h)
        elif any(r.index == info.index for r in roots):
            _simple(state, info, infos, h, h[f"S{roots[0].index}.t"])
    for info in infos:
        if info.kind == "inline":
            state.compute_inline(state.stage_id(info.op))
    return state


def _localize(state: State, op) -> object:
    """Compute ``op`` into a ``local`` cache and inline the copy back into its readers; the cache stage."""
    stage = state.stages[state.stage_id(op)]
    lid = state.cache_write(state.stage_id(stage), "local")
    local = state.stages[lid]
    state.compute_inline(state.stage_id(stage))
    return local


def _bind_level(state: State, stage, loops: list, kind: str) -> object:
    """Bind one level's loops (outer to inner axis): the innermost ``.x``, the next ``.y``, the rest
    fused into ``.z``; returns the innermost bound loop."""
    sid = state.stage_id(stage)
    groups = [loops[:-2], loops[-2:-1], loops[-1:]] if len(loops) > 2 else [[], loops[:-1], loops[-1:]]
    last = None
    for axis, group in zip("zyx", groups):
        if group:
            last = state.fuse(sid, group)
            state.bind(sid, last, f"{kind}.{axis}")
    return last


def _multi_level_tile(state: State, info, infos, h) -> None:
    k, n = info.index, len(info.spatial)
    spatial = [h[f"T{k}.s{a}"] for a in range(n)]
    reduce = [h[f"T{k}.r{a}"] for a in range(len(info.reduce))]
    inputs = [t.op for t in info.op.input_tensors]
    if info.host is not None:
        local = _localize(state, info.op)
        out = state.stages[state.stage_id(infos[info.host].op)]
    else:
        lid = state.cache_write(state.stage_id(info.op), "local")
        local, out = state.stages[lid], state.stages[lid + 1]
    # the writing stage: block / vthread / thread / per-thread
    oid = state.stage_id(out)
    B, V, T, I = [], [], [], []
    for a, iv in enumerate(state.leaves(oid)[:n]):
        v, t, s3, s4 = spatial[a]
        parts = state.split(oid, iv, [v, t, s3, s4] if a == n - 1 and s3 > 1 and s4 in VECTOR else [v, t, s3 * s4])
        B.append(parts[0])
        V.append(parts[1])
        T.append(parts[2])
        I.extend(parts[3:])
    state.reorder(oid, B + V + T + I)
    if spatial[-1][3] in VECTOR:          # the result stored as float2 / float4
        state.vectorize(oid, I[-1])
    top = _bind_level(state, out, B, "blockIdx")
    for x in V:
        state.bind(oid, x, "vthread")
    thread = _bind_level(state, out, T, "threadIdx")
    state.pragma(oid, top, "auto_unroll_max_step", h[f"T{k}.u"])
    state.pragma(oid, top, "unroll_explicit", 0)
    # the local stage: R0 R1 S3 R2 S4
    state.compute_at(state.stage_id(local), oid, thread)
    lid = state.stage_id(local)
    leaves = state.leaves(lid)
    S3, S4, R = [], [], [[], [], []]
    for a, iv in enumerate(leaves[:n]):
        x, y = state.split(lid, iv, [spatial[a][3]])
        S3.append(x)
        S4.append(y)
    for a, iv in enumerate(leaves[n:]):
        for lvl, x in enumerate(state.split(lid, iv, reduce[a])):
            R[lvl].append(x)
    state.reorder(lid, R[0] + R[1] + S3 + R[2] + S4)
    # shared caches of the inputs at the last R0 loop, fetched by all threads of the block
    for op in dict.fromkeys(inputs):
        sid = state.cache_read(state.stage_id(op), "shared", [state.stage_id(local)])
        shared = state.stages[sid]
        state.compute_at(sid, state.stage_id(local), R[0][-1])
        _cooperative_fetch(state, shared, spatial, h.get(f"T{k}.f", 1))


def _cooperative_fetch(state: State, shared, spatial: list, vector: int) -> None:
    """The shared tile's loops fused and split over the block's threads, bound like the writing
    stage's thread loops (``.x`` the innermost axis' threads, ``.y`` the next, ``.z`` the rest);
    ``vector`` consecutive elements per thread and step, vectorized."""
    sid = state.stage_id(shared)
    n = len(spatial)
    counts = [math.prod(s[1] for s in spatial[:max(n - 2, 0)]), spatial[-2][1] if n > 1 else 1, spatial[-1][1]]
    leaves = state.leaves(sid)
    if vector > 1:          # the innermost axis split first, so the vector is contiguous in the row
        last, vec = state.split(sid, leaves[-1], [vector])
        leaves = leaves[:-1] + [last]
        state.vectorize(sid, vec)
    loops = [state.fuse(sid, leaves)]
    for axis, c in zip("xyz", reversed(counts)):
        if axis == "x" or (axis == "y" and n > 1) or (axis == "z" and n > 2):
            rest, inner = state.split(sid, loops[0], [c])
            loops[0] = rest
            state.bind(sid, inner, f"threadIdx.{axis}")


def _bound_depth(info, infos) -> int:
    """How many outer loops of a simple root stage are fused and bound (its guests' rows, else all)."""
    return len(infos[info.guests[0]].spatial) if info.guests else len(info.spatial)


def _simple(state: State, info, infos, h, threads: int) -> None:
    """One thread per element of the fused outer loops (the guests' rows, else all spatial loops; a
    0-d output: a unit loop); the attached reductions computed per thread in ``local`` memory."""
    guests = [infos[g] for g in sorted(info.guests)]
    stage = state.stages[state.stage_id(info.op)]
    locals_ = [_localize(state, g.op) for g in guests]
    sid = state.stage_id(stage)
    leaves = state.leaves(sid)[:len(info.spatial)]
    fused = state.fuse(sid, leaves[:_bound_depth(info, infos)])
    bx, tx = state.split(sid, fused, [threads])
    state.bind(sid, bx, "blockIdx.x")
    state.bind(sid, tx, "threadIdx.x")
    for local in locals_:
        state.compute_at(state.stage_id(local), state.stage_id(stage), tx)


def _cross_thread_reduction(state: State, info, infos, threads: int, partials: int | None = None) -> None:
    """One block per output (row) of a root stage (one block for a scalar): a reduction's fused
    reduction loops split by ``threads``, the inner part bound to ``threadIdx.x``; an output with
    attached reductions computes them at its block loop, reduced the same way, and strides its row
    over the same threads.  ``partials``: the scalar reduction first sums ``partials`` slices in as
    many blocks (its own kernel, :func:`_partial_sum_kernel`), the block then reduces those sums."""
    if partials:
        _partial_sum_kernel(state, infos[_guests(info)[0]] if _guests(info) else info, threads, partials)
    sid = state.stage_id(info.op)
    leaves = state.leaves(sid)
    depth = _depth(info, infos)
    rows, rest = leaves[:depth], leaves[depth:]
    block = state.fuse(sid, rows)       # no rows (a reduction to a scalar): a unit loop, one block
    state.bind(sid, block, "blockIdx.x")
    _over_threads(state, sid, rest, threads)
    for g in _guests(info):
        gid = state.stage_id(infos[g].op)
        state.compute_at(gid, sid, block)
        _over_threads(state, gid, state.leaves(gid)[len(infos[g].spatial):], threads)


def _partial_sums(info, infos):
    """The reduction to a scalar of a cross-thread root stage (itself, or its guest) when it is long
    enough for partial sums in several blocks (:data:`PARTIALS_MIN` elements, an outermost reduction
    axis of at least the fewest :data:`PARTIALS`); else None."""
    red = infos[_guests(info)[0]] if len(_guests(info)) == 1 else info
    if red.spatial or not red.reduce or math.prod(red.reduce) < PARTIALS_MIN or red.reduce[0] < PARTIALS[0]:
        return None
    return red


def _partial_sum_kernel(state: State, red, threads: int, blocks: int) -> None:
    """``rfactor`` of ``red`` by its outermost reduction loop split into ``blocks`` slices: the partial
    sums a root stage in global memory (a kernel of its own: a block per slice, the slice's loops fused
    and strided over ``threads`` of ``threadIdx.x``); ``red`` then reduces them."""
    rid = state.stage_id(red.op)
    outer, _ = state.split(rid, state.leaves(rid)[0], [-(-red.reduce[0] // blocks)])
    pid = state.rfactor(rid, outer)
    leaves = state.leaves(pid)
    state.bind(pid, leaves[0], "blockIdx.x")
    _over_threads(state, pid, leaves[1:], threads)


def _depth(info, infos) -> int:
    """How many outer loops of a cross-thread root stage are fused into its block loop."""
    return len(info.spatial) if info.reduce or info.guest is not None else _bound_depth(info, infos)


def _over_threads(state: State, sid: int, loops: list, threads: int) -> None:
    """``loops`` fused, split by ``threads``, the inner part bound to ``threadIdx.x``."""
    if loops:
        _, inner = state.split(sid, state.fuse(sid, loops), [threads])
        state.bind(sid, inner, "threadIdx.x")


__all__ = ["LIMITS", "UNROLL_STEPS_GPU", "GPULimits", "GPUSketchSpace", "attach_scalar_reductions", "build_gpu_state",
           "cross_thread_stages", "shared_bytes", "supports_cross_thread_reduction"]
