"""The registry of kernel schedules: one entry per (anchor op, target kind), TVM's topi strategies' shape.

An entry is ``schedule(cfg, kt) -> Schedule`` (``kt``: a :class:`~tensorir.graph.lower_te.KernelTE`).  With
a :class:`~tensorir.schedule.space.FallbackConfig` it is the untuned default (its ``name`` is the rule that
build manifests and tuning logs record, ``{"default": name}``); an entry with a config space also takes a
config of that space (``space(cfg, kt)``: the knobs defined on ``cfg``, their fallback values the default's
choices fitted to the space), tuned as the template ``template`` (:mod:`autotune.kernel_templates`) on
kernels its ``fits(kt)`` accepts (it returns why not, or None; a kernel it refuses is tuned in the space of the
next of the target's entries, :func:`schedule_entries`, that fits it: the narrower rule it runs).  Kernels whose anchor has no entry take the
target's entry registered for ``None`` (injective schedules).  An entry may ``require`` CPU features (LLVM's
names, ``{"avx512vnni"}``): it serves targets that have them all, before the anchor's entries requiring less
(the instruction set is part of the entry's key; the target's ``-mattr``, or the host's, decides).

An entry has a ``version`` (1 unless registered otherwise): bump it when a change makes its default or its
space generate different code for the same kernel and config.  Tuning records carry the version of the
rule they were measured under (``autotune.record``), and records of an older version are not deployed.

While an entry schedules a kernel, :func:`target_info` gives the facts its target's backend registered
(:data:`TARGET_INFO`: a CUDA target's arch, shared memory limit and ``-allow_tf32``), which tensorir
cannot compute itself.
"""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable
from dataclasses import dataclass

from ...schedule import Schedule, Stage
from ...schedule.space import FallbackConfig
from ..lower_te import KernelTE

TARGETS = ("llvm", "cuda")
Rule = Callable[[Schedule, KernelTE, Stage], None]     # a pattern rule: schedules the stages of ``s`` from ``out``


@dataclass(frozen=True)
class ScheduleEntry:
    """``schedule(cfg, kt)``: the kernel's schedule under ``cfg`` (see the module)."""
    name: str
    target: str
    anchor_ops: tuple
    schedule: Callable
    template: str | None = None
    fits: Callable | None = None
    space: Callable | None = None
    requires: frozenset = frozenset()
    version: int = 1


#: (target kind, anchor op) -> its entries, those requiring the most features first
_ENTRIES: dict[tuple[str, str | None], list[ScheduleEntry]] = {}
#: target kind -> ``info(target) -> dict`` of facts about the target (registered by its backend:
#: ``codegen.cuda`` gives ``arch``, ``shared_limit``, ``allow_tf32``; ``codegen.target`` a CPU's ``features``)
TARGET_INFO: dict[str, Callable] = {}
_SCHEDULING: contextvars.ContextVar = contextvars.ContextVar("scheduling_target", default=None)


def target_info(target=None) -> dict:
    """The backend's facts about ``target`` (default: the target of the kernel being scheduled); ``{}``
    where none are known."""
    target = _SCHEDULING.get() if target is None else target
    info = TARGET_INFO.get(target_kind(target)) if target is not None else None
    return info(target) if info is not None else {}


@contextlib.contextmanager
def scheduling(target):
    """Within it, ``target`` is the target of the kernel being scheduled (:func:`target_info`'s default): set
    by :func:`kernel_schedule`, and by a tuning template around its config space (the same facts in both)."""
    token = _SCHEDULING.set(target)
    try:
        yield
    finally:
        _SCHEDULING.reset(token)


def scheduling_target():
    """The target of the kernel being scheduled (None outside :func:`kernel_schedule`)."""
    return _SCHEDULING.get()


def target_kind(target) -> str:
    """``"cuda"`` for a CUDA target (a ``Target`` or its string), else ``"llvm"`` (the CPU)."""
    kind = getattr(target, "kind", None) or str(target).split()[0]
    return "cuda" if kind == "cuda" else "llvm"


def target_features(target) -> frozenset:
    """The CPU features a target enables: a ``Target``'s ``features``, else what the backend reads in a target
    string (``"llvm"`` alone: the host's), else the string's ``-mattr=+...``."""
    features = getattr(target, "features", None)
    if features is None and isinstance(target, str) and target_kind(target) == "llvm":
        features = target_info(target).get("features")
    if features is not None:
        return frozenset(features)
    words = [w for w in str(target).split() if w.startswith("-mattr=")]
    return frozenset(f[1:] for w in words for f in w[len("-mattr="):].split(",") if f.startswith("+"))


def vectors_256_only() -> bool:
    """Whether the kernel being scheduled targets AVX2 without AVX-512: 256-bit vectors, 16 registers (not 32 zmm),
    the register tiles sized for that."""
    target = scheduling_target()
    features = target_features(target) if target is not None else frozenset()
    return "avx2" in features and "avx512f" not in features


def register_schedule(*anchor_ops: str | None, target: str = "llvm", name: str | None = None,
                      template: str | None = None, fits: Callable | None = None, space: Callable | None = None,
                      requires: tuple = (), version: int = 1):
    """Register ``default(cfg, kt)`` as the schedule of kernels anchored by ``anchor_ops`` on ``target``
    (``None``: kernels without an entry; a later registration with the same ``requires`` replaces an earlier
    one) for targets with the CPU features ``requires``; with ``space`` (and ``fits``, ``template``) a config
    other than the fallback one schedules a kernel ``fits`` accepts with ``space(cfg, kt)``; ``version``: see the
    module."""
    if target not in TARGETS:
        raise ValueError(f"register_schedule: target {target!r} is not one of {TARGETS}")
    if space is not None and (fits is None or template is None):
        raise ValueError(f"register_schedule {name or ''} {anchor_ops}: a space needs fits= and template=")

    def deco(default: Callable) -> Callable:
        def tuned(cfg, kt: KernelTE) -> Schedule:
            return default(cfg, kt) if cfg.is_fallback or fits(kt) is not None else space(cfg, kt)
        entry = ScheduleEntry(name or default.__name__, target, tuple(anchor_ops), default if space is None else tuned,
                              template, fits, space, frozenset(requires), version)
        for op in anchor_ops:
            others = [e for e in _ENTRIES.get((target, op), ()) if e.requires != entry.requires]
            _ENTRIES[target, op] = sorted(others + [entry], key=lambda e: -len(e.requires))
        return default
    return deco


def rule_registrar(target: str, apply: Callable):
    """``register_rule(*anchor_ops, **space)``: a decorator registering ``rule(s, kt, out)`` as the ``target``
    entry (named after the rule) of kernels anchored by ``anchor_ops``, applied by ``apply(kt, rule)``;
    ``space``: :func:`register_schedule`'s ``template``, ``fits`` and ``space``."""
    def register_rule(*anchor_ops: str | None, **space):   # space: also ``requires``
        def deco(rule: Rule) -> Rule:
            register_schedule(*anchor_ops, target=target, name=rule.__name__, **space)(lambda cfg, kt: apply(kt, rule))
            return rule
        return deco
    return register_rule


def schedule_entries(anchor_op: str | None, target="llvm") -> list[ScheduleEntry]:
    """The entries that may schedule kernels anchored by ``anchor_op`` on ``target``, preferred first: the
    anchor's whose required features the target has (most features first), else the target's entries for
    kernels without one."""
    kind, features = target_kind(target), target_features(target)
    for key in ((kind, anchor_op), (kind, None)):
        if entries := [e for e in _ENTRIES.get(key, ()) if e.requires <= features]:
            return entries
    return []


def schedule_entry(anchor_op: str | None, target="llvm") -> ScheduleEntry:
    """The entry scheduling kernels anchored by ``anchor_op`` on ``target`` (the first of
    :func:`schedule_entries`)."""
    entries = schedule_entries(anchor_op, target)
    if not entries:
        raise KeyError(f"no {target_kind(target)} schedule for {anchor_op}")
    return entries[0]


def isa_missing(anchor_op: str | None, target="llvm") -> list[str]:
    """The CPU features ``target`` lacks of ``anchor_op``'s entries preferred to the one it takes: why its
    kernels run a more generic entry (``[]``: the first one registered)."""
    kind, features = target_kind(target), target_features(target)
    missing: set = set()
    for e in _ENTRIES.get((kind, anchor_op), ()):
        if e.requires <= features:
            break
        missing |= e.requires - features
    return sorted(missing)


def template_entries(template: str) -> list[ScheduleEntry]:
    """The entries whose config space is tuned as ``template``."""
    return list({id(e): e for es in _ENTRIES.values() for e in es if e.template == template}.values())


def default_rule_name(anchor_op: str | None, target="llvm") -> str:
    """The name of the default schedule of a kernel anchored by ``anchor_op`` on ``target``."""
    return schedule_entry(anchor_op, target).name


def rule_version(name: str, target="llvm") -> int | None:
    """The version of the ``target`` entry named ``name`` (the highest if several serve it), None if none is."""
    kind = target_kind(target)
    versions = [e.version for (k, _), es in _ENTRIES.items() if k == kind for e in es if e.name == name]
    return max(versions, default=None)


def template_version(template: str) -> int | None:
    """The version of the entries whose space is tuned as ``template`` (the highest), None if none is."""
    return max((e.version for e in template_entries(template)), default=None)


def precision(kt: KernelTE) -> str | None:
    """The element type the kernel's anchor computes on (its first input's), None without an anchor."""
    if not kt.anchor_op:
        return None
    if kt.kernel is None:                  # a DAG without its graph kernel (a tuning task's): its first input
        return kt.inputs[0].dtype if kt.inputs else None
    node = next((n for n in kt.kernel.body.nodes if n.op == kt.anchor_op), None)
    return None if node is None or not node.inputs else node.inputs[0].type.dtype


def kernel_schedule(kt: KernelTE, target="llvm", cfg=None) -> tuple[Schedule, dict]:
    """``(schedule, origin)`` of kernel ``kt`` on ``target``: its default (``cfg`` None or a fallback
    config; origin ``{"kind": "default", "rule": name}``) or ``cfg``'s schedule of the entry's space
    (origin ``{"kind": "config", "rule", "template", "config_index"}``).  An origin also names the anchor's
    ``precision`` and, for an entry requiring CPU features, the ``isa`` it uses (``["avx512vnni"]``; a rule that
    used fewer features sets ``Schedule.isa``); one taken because the target lacks the features of a preferred
    entry names them, ``isa_missing`` (:func:`isa_missing`; a rule that took a plain form for want of features
    sets ``Schedule.isa_missing``)."""
    entry = schedule_entry(kt.anchor_op, target)
    cfg = FallbackConfig() if cfg is None else cfg
    with scheduling(target):
        s = entry.schedule(cfg, kt)
    extra = {"precision": precision(kt)} if kt.anchor_op else {}
    isa = entry.requires if s.isa is None else s.isa
    if isa:
        extra["isa"] = sorted(isa)
    if missing := sorted({*isa_missing(kt.anchor_op, target), *s.isa_missing}):
        extra["isa_missing"] = missing
    if cfg.is_fallback or entry.space is None or entry.fits(kt) is not None:
        return s, {"kind": "default", "rule": entry.name, **extra}
    return s, {"kind": "config", "rule": entry.name, "template": entry.template,
               "config_index": getattr(cfg, "index", None), **extra}


__all__ = ["Rule", "ScheduleEntry", "TARGETS", "TARGET_INFO", "default_rule_name", "isa_missing", "kernel_schedule",
           "register_schedule", "rule_registrar", "rule_version",
           "template_version", "schedule_entries", "schedule_entry", "scheduling_target", "target_features", "target_info",
           "target_kind",
           "template_entries"]
