"""CPU sketches and their holes: the schedule space of a DAG, derived from the DAG alone.

A *sketch* fixes the structure: which stages are inlined, tiled (Ansor's "SSRSRS": four levels of
spatial loops, two of reduction loops, ordered S0 S1 R0 S2 R1 S3), tiled into a ``local`` cache
(``cache_write``) or fused into their elementwise consumer (computed at the consumer's S1 loops),
split by ``rfactor``, computed at their consumer's outer loop, or left at the root.  Its *holes*
are numbers: tile lengths, unroll depth (the largest inner loop nest unrolled, Ansor's
``auto_unroll_max_step``), how many outer loops are fused into the parallel loop, vector length,
rfactor length and whether a reduction is computed at its consumer, whether a GEMM-like stage reads
its packable inputs repacked into panels (``P``, see ``analysis.packable_inputs``), the unrolling of
a simple stage's loop outside its vector loop (``S.u``) or of its reduction loop (``S.ru``) and its
rfactor length (``F``, 0: none).  A :class:`Point` is a sketch and its filled holes (a dict of JSON
values); :meth:`SketchSpace.build` turns it into a
:class:`~autotune.auto_scheduler.loop_state.State` whose steps are the record.

``SketchSpace.default()`` is the heuristic point used with no measurement: for GEMM-like stages
the packed panel and a register block of 8 rows x 32 lanes over the whole reduction
(``gemm_packed_cpu``'s shape), for others register tiles of 4 x (16 or 32) lanes accumulating in
a local cache; a parallel outer loop, unrolled inner loops.
"""
from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field

from .analysis import StageInfo, analyze
from .loop_state import State

UNROLL_STEPS = (0, 16, 64, 512)
MAX_SKETCHES = 16
VECTOR_LANES = 16            # float32 lanes of one AVX-512 register
MAX_VECTOR = 64
PACK_MIN_REDUCE = 256        # default point: pack panels only for reductions at least this long (measured:
                             # batch matmul with K = 64 is faster reading B in place)


@dataclass
class Point:
    """A sketch (index into ``SketchSpace.sketches``) with its holes filled."""
    sketch: int
    holes: dict = field(default_factory=dict)

    def copy(self) -> "Point":
        return Point(self.sketch, {k: list(v) if isinstance(v, list) else v for k, v in self.holes.items()})


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out + ([n] if n > 1 else [])


def _pick(rng: random.Random, options: list[int], cap: int) -> int:
    options = [d for d in options if d <= cap] or [1]
    return rng.choice(options)


class SketchSpace:
    """The sketches of a DAG and the operations of the search on their points."""

    def __init__(self, dag, target=None):
        self.dag = dag
        self.infos: list[StageInfo] = analyze(dag)
        #: tiled stage -> the tensor intrinsic its tensorized sketches use (``tensorize.match`` on ``target``)
        self.intrins, self.keep = {}, {}       # ... and the inline stages it reads kept at the root when tensorized
        if target is not None:
            from .tensorize import match
            for i in self.infos:
                m = match(dag, self.infos, i, target) if i.kind == "tile" else None
                if m is not None:
                    self.intrins[i.index], self.keep[i.index] = m.intrin, m.keep
        tiles = [i.index for i in self.infos if i.kind == "tile" and i.host is None]
        # per unfused tiled stage: tiled into a local cache (True) or directly (False), cache first; per
        # tensorizable stage (key "TS<stage>"): its intrinsic's name or None, tensorized first
        self.cache_stages = tiles
        choices = [(k, (True, False)) for k in tiles] + [(f"TS{k}", (m.name, None)) for k, m in self.intrins.items()]
        self.sketches = [dict(zip([k for k, _ in choices], c)) for c in itertools.product(*[o for _, o in choices])]
        self.sketches = self.sketches[:MAX_SKETCHES]

    def block_extents(self, info: StageInfo) -> tuple[list, list]:
        """The extents the tensorized holes (``X``) of ``info`` tile: its intrinsic's axes counted in blocks."""
        m = self.intrins[info.index]
        sp, rd = list(info.spatial), list(info.reduce)
        for ext, t in ((sp, m.spatial), (rd, m.reduce)):
            for d, x in enumerate(t):
                ext[len(ext) - len(t) + d] //= x
        return sp, rd

    # -- holes ---------------------------------------------------------------------------------------------
    def sample(self, rng: random.Random) -> Point:
        p = Point(rng.randrange(len(self.sketches)))
        for info in self.infos:
            k = info.index
            if info.kind == "tile":
                for a, e in enumerate(info.spatial):
                    last = a == len(info.spatial) - 1
                    l3 = _pick(rng, [d for d in divisors(e) if not last or d % 8 == 0] or divisors(e),
                               MAX_VECTOR if last else 8)
                    l2 = _pick(rng, divisors(e // l3), 8)
                    l1 = _pick(rng, divisors(e // l3 // l2), 32)
                    p.holes[f"T{k}.s{a}"] = [l1, l2, l3]
                for a, e in enumerate(info.reduce):
                    p.holes[f"T{k}.r{a}"] = [_pick(rng, divisors(e), 16)]
                p.holes[f"T{k}.u"] = rng.choice(UNROLL_STEPS)
                p.holes[f"T{k}.p"] = rng.randint(1, len(info.spatial))
                if info.packs:
                    p.holes[f"P{k}"] = rng.randint(0, 1)
                if k in self.intrins:
                    self._sample_blocks(info, p, rng)
            elif info.kind == "rfactor":
                p.holes[f"F{k}"] = _pick(rng, [d for d in divisors(info.reduce[-1]) if d >= 4] or [1], 128)
            elif info.kind == "simple" and info.guest is None:
                self._sample_simple(info, p, rng)
        return p

    def _sample_blocks(self, info: StageInfo, p: Point, rng: random.Random) -> None:
        """The holes ``X`` of a tensorized stage: tiles in intrinsic blocks on its axes (``block_extents``), at
        most 4 x 8 blocks (register accumulators) in the innermost level."""
        k = info.index
        sp, rd = self.block_extents(info)
        for a, e in enumerate(sp):
            l3 = _pick(rng, divisors(e), 4 if a == len(sp) - 1 else 8)
            l2 = _pick(rng, divisors(e // l3), 4)
            p.holes[f"X{k}.s{a}"] = [_pick(rng, divisors(e // l3 // l2), 32), l2, l3]
        for a, e in enumerate(rd):
            p.holes[f"X{k}.r{a}"] = [_pick(rng, divisors(e), 16)]
        p.holes[f"X{k}.u"] = rng.choice(UNROLL_STEPS)
        p.holes[f"X{k}.p"] = rng.randint(1, len(sp))

    def _sample_simple(self, info: StageInfo, p: Point, rng: random.Random) -> None:
        k = info.index
        if info.guests:
            p.holes[f"A{k}"] = rng.randint(0, 1)
        p.holes[f"S{k}.p"] = rng.randint(0, len(info.spatial))
        if info.reduce:
            p.holes[f"S{k}.ru"] = _pick(rng, divisors(info.reduce[-1]), 16)
            if info.op.num_outputs == 1 and info.reduce[-1] >= 16:
                p.holes[f"F{k}"] = rng.choice([0, _pick(rng, [d for d in divisors(info.reduce[-1]) if d >= 4], 64)])
        elif info.spatial:
            v = p.holes[f"S{k}.v"] = _pick(rng, [d for d in divisors(info.spatial[-1])
                                                 if d in (1, 4, 8, 16, 32, 64)], 64)
            p.holes[f"S{k}.u"] = _pick(rng, divisors(info.spatial[-1] // v), 8)

    def default(self) -> Point:
        """The heuristic point: no measurement, used for every kernel without a record."""
        p = Point(0)
        for info in self.infos:
            k = info.index
            if info.kind == "tile":
                (_register_block if info.packs else _cache_tile)(info, p)
                p.holes[f"T{k}.p"] = _parallel_depth(info.spatial, [e // math.prod(p.holes[f"T{k}.s{a}"])
                                                                    for a, e in enumerate(info.spatial)])
                if k in self.intrins:
                    sp, rd = self.block_extents(info)
                    _dot_block(k, sp, rd, p)
            elif info.kind == "rfactor":
                p.holes[f"F{k}"] = _best(info.reduce[-1], (16, 8, 4, 2))
            elif info.kind == "simple" and info.guest is None:
                if info.guests:       # measured: reductions at the root beat them at the consumer's loop
                    p.holes[f"A{k}"] = 0
                if not info.reduce and info.spatial:
                    p.holes[f"S{k}.v"] = _best(info.spatial[-1], (16, 8, 4))
                p.holes[f"S{k}.p"] = _parallel_depth(info.spatial, info.spatial[:-1] if not info.reduce
                                                     else info.spatial)
        return p

    def mutate(self, p: Point, rng: random.Random) -> Point:
        """One hole changed: a prime factor moved between two tile levels, or a choice resampled."""
        q = p.copy()
        if not q.holes or rng.random() < 0.05:
            q.sketch = rng.randrange(len(self.sketches))
            return q
        key = rng.choice(sorted(q.holes))
        info = self.infos[int(key[1:].split(".")[0])]
        if key[0] in "TX" and (".s" in key or ".r" in key):
            sp, rd = self.block_extents(info) if key[0] == "X" else (info.spatial, info.reduce)
            extent = (sp if ".s" in key else rd)[int(key.split(".")[1][1:])]
            q.holes[key] = _move_factor(extent, q.holes[key], rng)
        else:
            fresh = self.sample(rng).holes
            if key in fresh:
                q.holes[key] = fresh[key]
        return q

    def crossover(self, a: Point, b: Point, rng: random.Random) -> Point:
        """Per stage, the holes of one parent or the other (same sketch as ``a``)."""
        q = a.copy()
        if a.sketch != b.sketch:
            return q
        for k in {key[1:].split(".")[0] for key in a.holes}:
            if rng.random() < 0.5:
                for key in a.holes:
                    if key[1:].split(".")[0] == k and key in b.holes:
                        q.holes[key] = b.holes[key]
        return q

    # -- building ------------------------------------------------------------------------------------------
    def build(self, p: Point) -> State:
        """The state of point ``p`` (raises ``ScheduleError`` if a step is refused)."""
        from .sketch_rules import build_state
        return build_state(self, p)


def make_space(dag, target: str = "llvm") -> SketchSpace:
    """The sketch space of ``dag`` for ``target``: the GPU sketches (``sketch_rules_gpu``) for CUDA, after the
    tensor-core one (``sketch_rules_tc``) where it fits."""
    if str(target).split()[:1] == ["cuda"]:
        from tensorir.schedule import ScheduleError
        from .sketch_rules_gpu import GPUSketchSpace
        from .sketch_rules_tc import TensorCoreSketchSpace, tensor_core_gemm
        gemm = tensor_core_gemm(dag, target)
        if gemm is None:
            return GPUSketchSpace(dag)
        try:
            inner = GPUSketchSpace(dag)
        except ScheduleError:
            inner = None
        return TensorCoreSketchSpace(dag, gemm, inner)
    return SketchSpace(dag, target)


def _register_block(info: StageInfo, p: Point) -> None:
    """GEMM-like stages (an input worth packing): the input packed into panels of 32 columns (if the
    reduction is long enough for the panel's stream to pay for its copy) and a
    register block of 8 rows x 32 lanes accumulated over the whole reduction, its 4-long inner
    reduction loop and rows unrolled (``gemm_packed_cpu``'s shape); 16 x 4 blocks per outer tile."""
    k, n = info.index, len(info.spatial)
    for a, e in enumerate(info.spatial):
        if a == n - 1:
            l3 = _best(e, (32, 16, 64, 8))
            p.holes[f"T{k}.s{a}"] = [_best(e // l3, (4, 2)), 1, l3]
        elif a == n - 2:
            l3 = _best(e, (8, 4, 6, 2, 3))
            rest = e // l3          # row blocks per tile, leaving the outer loop >= 2 for threads
            p.holes[f"T{k}.s{a}"] = [_best(rest, [x for x in (16, 8, 4, 2) if rest // x >= 2]), 1, l3]
        else:
            p.holes[f"T{k}.s{a}"] = [1, 1, 1]
    for a, e in enumerate(info.reduce):
        p.holes[f"T{k}.r{a}"] = [_best(e, (4, 2, 3)) if a == len(info.reduce) - 1 else 1]
    p.holes[f"T{k}.u"] = 64
    p.holes[f"P{k}"] = int(math.prod(info.reduce) >= PACK_MIN_REDUCE)


def _dot_block(k: int, sp: list, rd: list, p: Point) -> None:
    """A tensorized stage (extents in intrinsic blocks): a register block of up to 8 rows (the axis before the
    intrinsic's columns) x 2 column blocks, accumulated over the whole reduction 4 blocks a step (on its last
    reduce axis of more than one block); row tiles of up
    to 16 blocks (``gemm_packed_cpu``'s shape in ``vpdpbusd`` blocks)."""
    n = len(sp)
    for a, e in enumerate(sp):
        if a == n - 1 or a < n - 3:
            p.holes[f"X{k}.s{a}"] = [1, 1, 1]
        elif a == n - 2:
            p.holes[f"X{k}.s{a}"] = [1, 1, _best(e, (2,))]
        else:
            l3 = _best(e, (8, 4, 6, 2, 3))
            rest = e // l3
            p.holes[f"X{k}.s{a}"] = [_best(rest, [x for x in (16, 8, 4, 2) if rest // x >= 2]), 1, l3]
    steps = max((a for a, e in enumerate(rd) if e > 1), default=-1)      # the reduce axis unrolled in the block
    for a, e in enumerate(rd):
        p.holes[f"X{k}.r{a}"] = [_best(e, (4, 2)) if a == steps else 1]
    p.holes[f"X{k}.u"] = 64
    p.holes[f"X{k}.p"] = _parallel_depth(sp, [e // math.prod(p.holes[f"X{k}.s{a}"]) for a, e in enumerate(sp)])


def _cache_tile(info: StageInfo, p: Point) -> None:
    """Other tiled stages (convolutions): register tiles of 4 x (16 or 32) lanes accumulating in an
    L1-sized local tile."""
    k, n = info.index, len(info.spatial)
    for a, e in enumerate(info.spatial):
        if a == n - 1:
            l3 = _best(e, (32, 16, 8, 4, 2))
            p.holes[f"T{k}.s{a}"] = [1, _best(e // l3, (4, 2)), l3]
        elif a == n - 2:
            l3 = _best(e, (4, 2, 3))
            rest = e // l3          # rows per local tile, leaving the outer loop >= 2 for threads
            p.holes[f"T{k}.s{a}"] = [1, _best(rest, [x for x in (16, 8, 4, 2) if rest // x >= 2]), l3]
        else:
            p.holes[f"T{k}.s{a}"] = [1, 1, 1]
    for a, e in enumerate(info.reduce):
        p.holes[f"T{k}.r{a}"] = [_best(e, (8, 4, 3, 2)) if a == len(info.reduce) - 1 else 1]
    p.holes[f"T{k}.u"] = 16


def _best(n: int, prefs) -> int:
    for x in prefs:
        if n % x == 0:
            return x
    return 1


def _parallel_depth(extents: list[int], outer: list[int]) -> int:
    """How many outer loops to fuse for a parallel loop with enough iterations (>= 4 per core)."""
    from codegen.module import available_cpus
    want, total = 4 * available_cpus(), 1
    for d, e in enumerate(outer):
        total *= e
        if total >= want:
            return d + 1
    return len(outer) or (1 if extents else 0)


def _move_factor(extent: int, lengths: list[int], rng: random.Random) -> list[int]:
    """Move one prime factor between two of the levels (the outermost level is implicit)."""
    levels = [extent // math.prod(lengths)] + list(lengths)
    src = [i for i, x in enumerate(levels) if x > 1]
    if not src:
        return list(lengths)
    i = rng.choice(src)
    j = rng.choice([x for x in range(len(levels)) if x != i])
    f = rng.choice(_prime_factors(levels[i]))
    levels[i] //= f
    levels[j] *= f
    return levels[1:]


__all__ = ["SketchSpace", "Point", "divisors", "UNROLL_STEPS", "make_space"]
