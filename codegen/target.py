"""Target strings such as ``"llvm -mcpu=znver5 -mattr=+avx2,+fma"`` and the :class:`Target` they denote.

Grammar: ``KIND [-key=value | -flag]...``.  Known keys: ``-mcpu`` (a CPU name, or for CUDA an arch),
``-mattr`` (comma separated ``+feature`` / ``-feature``); anything else is kept in ``options`` so other
backends (CUDA: ``-arch=sm_90``) can read it.  ``"llvm"`` alone means the host CPU with the host's
features; ``"llvm -mcpu=NAME"`` means that CPU with LLVM's default features for it.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import ClassVar

KINDS = ("llvm", "cuda", "c")


#: TVM's target keys by kind (``Target("cuda").keys == ("cuda", "gpu")``).
KEYS = {"llvm": ("cpu",), "c": ("cpu",), "cuda": ("cuda", "gpu")}


#: The features the kernel schedules ask about that ``-mcpu=NAME`` enables by default (LLVM's X86.td):
#: ``"llvm -mcpu=NAME"`` gets them, ``-mattr`` adds and removes, as LLVM itself does when it compiles.
_AVX2 = frozenset({"avx", "avx2", "fma", "f16c"})
_AVX512 = _AVX2 | {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}
_VNNI = _AVX512 | {"avx512vnni"}
_SPR = _VNNI | {"avxvnni", "avx512bf16", "avx512fp16", "amx-tile", "amx-int8", "amx-bf16"}
_ZEN4 = _VNNI | {"avx512bf16"}
#: What each of those features needs (LLVM's implications): ``-mattr=-avx512f`` also takes away every ``avx512*``,
#: ``-avx512bw`` the bfloat16 and float16 dots (LLVM aborts on an intrinsic its features lack).
_NEEDS: dict[str, tuple[str, ...]] = {
    "avx2": ("avx",), "fma": ("avx",), "f16c": ("avx",), "avx512f": ("avx2",), "avxvnni": ("avx2",),
    "avx512bf16": ("avx512bw",), "avx512fp16": ("avx512bw", "avx512dq", "avx512vl"),
    "amx-int8": ("amx-tile",), "amx-bf16": ("amx-tile",)}


def _needs(f: str) -> tuple[str, ...]:
    """The features ``f`` needs (directly)."""
    return _NEEDS.get(f, ("avx512f",) if f.startswith("avx512") and f != "avx512f" else ())


def _without(features: frozenset[str], removed: set[str]) -> frozenset[str]:
    """``features`` less ``removed`` and whatever needs a removed feature."""
    def gone(f: str) -> bool:
        return f in removed or any(gone(g) for g in _needs(f))
    return frozenset(f for f in features if not gone(f))


CPU_FEATURES: dict[str, frozenset[str]] = {
    **dict.fromkeys(("haswell", "broadwell", "skylake", "znver1", "znver2", "znver3", "x86-64-v3"), _AVX2),
    **dict.fromkeys(("alderlake", "raptorlake", "meteorlake", "arrowlake", "lunarlake", "gracemont",
                     "sierraforest", "grandridge"), _AVX2 | {"avxvnni"}),
    **dict.fromkeys(("skylake-avx512", "cannonlake", "x86-64-v4"), _AVX512),
    **dict.fromkeys(("cascadelake", "icelake-client", "icelake-server", "tigerlake", "rocketlake"), _VNNI),
    "cooperlake": _VNNI | {"avx512bf16"},
    **dict.fromkeys(("sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d"), _SPR),
    "znver4": _ZEN4, "znver5": _ZEN4 | {"avxvnni"},
}


class TargetKind(str):
    """A target's kind: the string itself, with TVM's ``target.kind.name``."""

    @property
    def name(self) -> str:
        return str(self)


@dataclass(frozen=True, init=False)
class Target:
    """A compilation target.  ``Target("llvm")``, ``Target("cuda -arch=sm_90", host="llvm")`` (TVM's
    spelling: a target string, read as :func:`parse` reads it) or the fields themselves."""
    kind: str = "llvm"
    mcpu: str = ""
    mattr: tuple[str, ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    host: "Target | None" = field(default=None, compare=False)  # TVM's target.host; not part of identity
    _scopes: ClassVar[list] = []

    def __init__(self, kind: "str | Target" = "llvm", mcpu: str = "", mattr: tuple = (), options: tuple = (),
                 host: "str | Target | None" = None, *, target: "str | Target | None" = None):
        kind = kind if target is None else target  # TVM's keyword: Target(target="llvm", host="llvm")
        if isinstance(kind, Target):
            kind, mcpu, mattr, options = kind.kind, kind.mcpu, kind.mattr, kind.options
        elif " " in kind.strip() or kind == "llvm" and not mcpu:  # a target string: parse it
            t = parse(kind.strip())
            kind, mcpu, mattr, options = t.kind, t.mcpu, mattr or t.mattr, options or t.options
        elif kind not in KINDS:
            raise ValueError(f"unknown target kind {kind!r}; expected one of {', '.join(KINDS)}")
        for name, value in (("kind", TargetKind(kind)), ("mcpu", mcpu), ("mattr", tuple(mattr)),
                            ("options", tuple(options))):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "host", host if host is None or isinstance(host, Target) else parse(host))

    @property
    def keys(self) -> tuple[str, ...]:
        return KEYS.get(self.kind, (str(self.kind),))

    @classmethod
    def current(cls, allow_none: bool = True) -> "Target | None":
        """The target of the innermost ``with Target(...):`` block, else None."""
        if not cls._scopes and not allow_none:
            raise ValueError("Target.current(): no target is set (use `with Target(...):`)")
        return cls._scopes[-1] if cls._scopes else None

    def __enter__(self) -> "Target":
        Target._scopes.append(self)
        return self

    def __exit__(self, *exc) -> None:
        Target._scopes.pop()

    def __str__(self) -> str:
        parts = [self.kind]
        if self.mcpu:
            parts.append(f"-mcpu={self.mcpu}")
        if self.mattr:
            parts.append("-mattr=" + ",".join(self.mattr))
        parts += [f"-{k}" if v == "" else f"-{k}={v}" for k, v in self.options]
        return " ".join(parts)

    def option(self, key: str, default: str | None = None) -> str | None:
        return dict(self.options).get(key, default)

    @property
    def features(self) -> frozenset[str]:
        """Enabled feature names (without the ``+``): the host's for the host, else the CPU's defaults
        (:data:`CPU_FEATURES`) with ``-mattr``'s ``+f`` added and ``-f`` removed."""
        plus = frozenset(a[1:] for a in self.mattr if a.startswith("+"))
        if self.kind != "llvm" or self._is_host_string():
            return plus
        return _without(CPU_FEATURES.get(self.mcpu, frozenset()) | plus, {a[1:] for a in self.mattr if a[0] == "-"})

    def _is_host_string(self) -> bool:
        """Whether this is :func:`host`'s own CPU and feature list (as ``"llvm"`` parses)."""
        h = host()
        return self.mcpu == h.mcpu and self.mattr == h.mattr

    def llvm_features(self) -> str:
        """The feature string for LLVM's target machine.

        For the host CPU described by :func:`host` this is the host's complete string, ``-feature``
        entries included, so nothing the host lacks can be switched on by the CPU's defaults.
        """
        if self.kind == "llvm" and self._is_host_string():
            return _host_features()
        return ",".join(self.mattr)

    @property
    def is_host(self) -> bool:
        return self.kind == "llvm" and self.mcpu == host().mcpu and self.features <= host().features


@functools.cache
def _host_features() -> str:
    import llvmlite.binding as llvm
    return llvm.get_host_cpu_features().flatten()


@functools.cache
def host() -> Target:
    """The machine running this process, with its enabled features (sorted, as LLVM lists them)."""
    import llvmlite.binding as llvm
    enabled = tuple(f for f in _host_features().split(",") if f.startswith("+"))
    return Target("llvm", llvm.get_host_cpu_name(), enabled)


def parse(target: "str | Target | None" = None) -> Target:
    """Parse a target string (``None`` or ``"llvm"`` means the host)."""
    if target is None:
        return host()
    if isinstance(target, Target):
        return target
    if not isinstance(target, str):
        raise TypeError(f"target must be a string or Target, got {type(target).__name__}")
    words = target.split()
    if not words:
        raise ValueError("empty target string")
    kind, rest = words[0], words[1:]
    if kind not in KINDS:
        raise ValueError(f"unknown target kind {kind!r} in {target!r}; expected one of {', '.join(KINDS)}")
    mcpu, mattr, options = "", (), []
    for w in rest:
        if not w.startswith("-"):
            raise ValueError(f"target option {w!r} in {target!r} must start with '-'")
        key, _, value = w.lstrip("-").partition("=")
        if key == "mcpu":
            mcpu = value
        elif key == "mattr":
            mattr = tuple(_feature(f, target) for f in value.split(",") if f)
        else:
            options.append((key, value))
    if kind == "llvm" and not mcpu:
        h = host()
        mcpu, mattr = h.mcpu, mattr or h.mattr
    return Target(kind, mcpu, mattr, tuple(options))


def _feature(f: str, target: str) -> str:
    if f[0] not in "+-":
        f = "+" + f
    if len(f) < 2:
        raise ValueError(f"empty feature name in {target!r}")
    return f


def cpu_target_info(target) -> dict:
    """What the kernel schedules ask of a CPU target (``tensorir.graph.schedules.registry.TARGET_INFO``): its
    enabled features, a target string read as :func:`parse` reads it (``"llvm"`` alone: the host's)."""
    return {"features": parse(target if isinstance(target, Target) else str(target)).features}


def _register() -> None:
    from tensorir.graph.schedules.registry import TARGET_INFO
    TARGET_INFO["llvm"] = cpu_target_info


_register()
