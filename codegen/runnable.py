"""Whether native code compiled for a CPU target may run on this host, checked before it does.

Code compiled for CPU features the host lacks (AVX-512, VNNI, AVX512-BF16, AMX ...) stops the process with
SIGILL at its first such instruction: no Python error, nothing to recover (a pytest worker dies with "Fatal
Python error: Illegal instruction", a server with every request in it).  Compiling for another CPU is
legitimate (the code inspected, ``export_library`` for the machine that will run it), so building succeeds and
*running* is refused: :class:`~codegen.module.Module` (``codegen.build``, ``load_module``) and
:class:`~codegen.runtime.cpu.ModelModule` (``codegen.build_model``, ``load_model``) make one :class:`HostCheck`
when they are made, and a native entry of theirs runs only after it, so a call, ``time_evaluator``, a tuner's
measurement and ``profile`` alike raise :class:`CPUFeatureError` naming the features this host lacks, the
kernel or model, and (a model) the kernels whose instruction sets name them.  ``load_model`` refuses such an
artifact before it loads (:func:`lacks_message`, the same words, as ``ArtifactError``).  Code whose kernels run
AMX tiles also asks Linux for the tile state before its first call (:func:`codegen.amx.request_amx`).

What the host has is :func:`host_features` (LLVM's list of this CPU's features); what code needs is its
target's :attr:`~codegen.target.Target.features` (a ``-mcpu``'s table entry plus and minus ``-mattr``); a
feature the host's list does not name (a misspelt or unknown one) counts as lacking.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from .target import Target, host, parse


class CPUFeatureError(RuntimeError):
    """Native code compiled for CPU features (or an architecture) this host lacks was about to run; its subclass
    :class:`~codegen.amx.AMXError`: the features are AMX's, or Linux refused this process the tile state."""


def host_features() -> frozenset[str]:
    """The CPU features of this host (LLVM's names, without the ``+``)."""
    return host().features


def lacking(features: Iterable[str]) -> list[str]:
    """Those of ``features`` this host lacks, sorted."""
    return sorted(set(features) - host_features())


def lacks_message(where: str, missing: Sequence[str], built_for: str,
                  kernels: Iterable[tuple[str, Sequence[str]]] = ()) -> str:
    """``where was built for CPU features this host lacks: ...``, naming for each missing feature the first of
    ``kernels`` (``(kernel name, its schedule's isa)``) whose instruction set names it and how many do."""
    kernels = list(kernels)
    used = {f: [k for k, isa in kernels if f in isa] for f in missing}
    note = "".join(f"; {f} runs {len(ks)} kernel(s) ({ks[0]}, ...)" for f, ks in used.items() if ks)
    return (f"{where} was built for CPU features this host lacks: {', '.join(missing)} "
            f"(built for {built_for!r}, this host is {host().mcpu!r}{note})")


@dataclass(frozen=True)
class HostCheck:
    """What must hold before native code compiled for a target runs here: a call raises
    :class:`CPUFeatureError` (:class:`~codegen.amx.AMXError` where AMX is among the missing features) when the
    host lacks some of the target's features, else asks for the AMX tile state when ``amx`` names the code that
    runs tile instructions; nothing otherwise."""
    where: str                      # "kernel NAME", "model 'NAME'"
    missing: tuple[str, ...]        # the target's features this host lacks (or its other architecture)
    message: str = ""               # the refusal, when something is missing
    amx: str | None = None          # what runs AMX tile instructions (asks for the tile state first)

    @property
    def runs_here(self) -> bool:
        return not self.missing

    @property
    def needed(self) -> bool:
        """Whether a call must run the check (anything missing, or AMX tiles)."""
        return bool(self.missing) or self.amx is not None

    @property
    def reason(self) -> str | None:
        """Why the code does not run here (``"this host lacks avx512bf16, avx512f"``), else None."""
        return f"this host lacks {', '.join(self.missing)}" if self.missing else None

    def __call__(self) -> None:
        from . import amx
        if self.missing:
            raise (amx.AMXError if amx.needs_amx(self.missing) else CPUFeatureError)(self.message)
        if self.amx is not None:
            amx.request_amx(self.amx)

    def guarded(self, fn: Callable) -> Callable:
        """``fn``, preceded on every call by this check where one is :attr:`needed`."""
        if not self.needed:
            return fn

        def call(*args):
            self()
            return fn(*args)
        return call


def host_check(target: "Target | str", where: str, kernels: Iterable[tuple[str, Sequence[str]]] = (),
               amx_code: str | None = None) -> HostCheck:
    """The :class:`HostCheck` of code compiled for ``target`` (``where`` names it; ``kernels``, a model's
    ``(kernel, isa)`` pairs, say which kernels need a missing feature; ``amx_code`` names what runs tiles)."""
    from . import jit
    tgt = parse(target)
    arch, here = (tgt.option("mtriple") or jit.triple()).split("-")[0], jit.triple().split("-")[0]
    if arch != here:
        return HostCheck(where, (f"the {arch} architecture",), f"{where} was built for {tgt} and cannot run on this "
                         f"{here} host", amx_code)
    missing = tuple(lacking(tgt.features))
    if not missing:
        return HostCheck(where, (), amx=amx_code)
    extra = [a for a in tgt.mattr if a[1:] in missing]     # what -mattr added beyond the CPU's own
    built_for = " ".join([tgt.mcpu or "llvm", *(["-mattr=" + ",".join(extra)] if extra else [])])
    return HostCheck(where, missing, lacks_message(where, missing, built_for, kernels) + ": running it here would "
                     "stop the process (SIGILL); build it for this host (target=\"llvm\") or run it on a CPU that "
                     "has them", amx_code)


__all__ = ["CPUFeatureError", "HostCheck", "host_check", "host_features", "lacking", "lacks_message"]
