"""Measurement: what a trial measures and what comes back.

``measure_option(builder=LocalBuilder(...), runner=LocalRunner(...))`` pairs a builder (configs to
shared objects, in parallel worker processes) with a runner (each shared object checked and timed in
a worker process).  A failure is a :class:`MeasureErrorNo` in the result, never an exception: a
config that fails to instantiate or build, crashes, hangs or computes a wrong answer costs one trial.
"""
from __future__ import annotations

import enum
import statistics
import time
from dataclasses import dataclass, field


class MeasureErrorNo(enum.IntEnum):
    NO_ERROR = 0
    INSTANTIATION_ERROR = 1     # the template rejected the config (or raised while scheduling)
    BUILD_ERROR = 2             # lowering, code generation or linking failed
    RUNTIME_ERROR = 4           # the kernel crashed (signal) or the runner failed
    WRONG_ANSWER = 5            # the first run disagreed with the reference
    BUILD_TIMEOUT = 6
    RUN_TIMEOUT = 7
    UNKNOWN_ERROR = 8
    DEVICE_UNAVAILABLE = 9      # the target's device cannot run here (a CUDA build without pycuda or a GPU)


@dataclass(frozen=True)
class MeasureInput:
    task: object                # autotune.task.Task
    config: object              # tensorir.schedule.space.ConfigEntity


@dataclass(frozen=True)
class MeasureResult:
    """``costs``: seconds per run, one per repeat (empty unless ``error_no`` is NO_ERROR)."""
    costs: tuple
    error_no: MeasureErrorNo
    all_cost: float             # wall seconds this trial took (build + run)
    timestamp: float
    error_msg: str = ""

    @property
    def ok(self) -> bool:
        return self.error_no == MeasureErrorNo.NO_ERROR

    @property
    def cost(self) -> float:
        """Median seconds per run; infinity for a failed trial."""
        return statistics.median(self.costs) if self.ok and self.costs else float("inf")

    @staticmethod
    def failed(error_no: MeasureErrorNo, msg: str, all_cost: float = 0.0) -> "MeasureResult":
        return MeasureResult((), MeasureErrorNo(error_no), all_cost, time.time(), _short(msg))


@dataclass(frozen=True)
class BuildResult:
    path: str                   # the shared object ("" on failure)
    error_no: MeasureErrorNo
    error_msg: str
    seconds: float


def _short(msg: str, limit: int = 2000) -> str:
    msg = (msg or "").strip()
    return msg if len(msg) <= limit else msg[:limit // 2] + "\n...\n" + msg[-limit // 2:]


@dataclass
class MeasureOption:
    builder: object
    runner: object
    _closed: bool = field(default=False, repr=False)

    def measure(self, inputs: list[MeasureInput]) -> list[MeasureResult]:
        """Build then run ``inputs``; one result each, in order."""
        builds = self.builder.build(inputs)
        return self.runner.run(inputs, builds)

    def close(self) -> None:
        self.builder.close()
        self.runner.close()


def measure_option(builder=None, runner=None) -> MeasureOption:
    """The builder and runner a tuner measures with: objects, or ``"local"`` for ``LocalBuilder()`` /
    ``LocalRunner()`` with their defaults (as AutoTVM accepts); None also means the local default."""
    from .builder import LocalBuilder
    from .runner import LocalRunner
    return MeasureOption(_local(builder, "builder", "build", LocalBuilder),
                         _local(runner, "runner", "run", LocalRunner))


def _local(value, role: str, method: str, cls):
    """``value`` as a builder / runner object: ``"local"`` and None make a default ``cls``."""
    if value is None or value == "local":
        return cls()
    if isinstance(value, str):
        raise ValueError(f"measure_option: invalid {role} {value!r}; use \"local\" or a {cls.__name__}(...)")
    if not callable(getattr(value, method, None)):
        raise TypeError(f"measure_option: the {role} must be \"local\" or a {cls.__name__}(...), got {value!r}")
    return value


__all__ = ["MeasureErrorNo", "MeasureInput", "MeasureResult", "BuildResult", "MeasureOption", "measure_option"]
