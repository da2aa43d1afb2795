"""``ProgramMeasurer`` (TVM's name): a builder, a runner and the measure callbacks, open across rounds.

    measurer = auto_scheduler.ProgramMeasurer("local", "local", [auto_scheduler.RecordToFile(log)])
    try:
        for _ in range(rounds):
            inputs, results = policy.continue_search_one_round(16, measurer)
    finally:
        measurer.close()

The worker processes of the builder and the runner (and the runner's reference outputs) live until
``close``, so a task scheduler driving many policies batch by batch starts them once.
"""
from __future__ import annotations

from ..measure import measure_option


class ProgramMeasurer:
    """``ProgramMeasurer(builder, runner, callbacks, verbose=0)``: ``builder`` / ``runner`` are
    ``"local"`` or autotune's LocalBuilder / LocalRunner (``from_option`` takes a ``measure_option``)."""

    def __init__(self, builder="local", runner="local", callbacks=(), verbose: int = 0,
                 max_continuous_error: int | None = None):
        self.option = measure_option(builder, runner)
        self.callbacks = list(callbacks or ())
        self.verbose = verbose
        self.max_continuous_error = max_continuous_error

    @classmethod
    def from_option(cls, option, callbacks=(), verbose: int = 0) -> "ProgramMeasurer":
        """A measurer over an ``autotune.measure_option(builder, runner)`` (closed with it)."""
        self = cls.__new__(cls)
        self.option, self.callbacks, self.verbose, self.max_continuous_error = option, list(callbacks), verbose, None
        return self

    def build_and_run(self, inputs) -> list:
        """Build and run ``inputs`` (``MeasureInput``s): one ``MeasureResult`` each, in order."""
        return self.option.measure(list(inputs))

    def run_callbacks(self, policy, inputs, results) -> None:
        for cb in self.callbacks:
            cb(policy, inputs, results)

    def measure(self, task, policy, inputs) -> list:
        """TVM's ``Measure``: build, run, then the callbacks (the log first)."""
        results = self.build_and_run(inputs)
        self.run_callbacks(policy, inputs, results)
        return results

    def as_measure_option(self) -> "BorrowedOption":
        """This measurer as an ``autotune.measure_option`` for a template ``Tuner.tune``: it measures with
        the same builder and runner, and the tuner's ``close`` at the end of its tune leaves them open
        (this measurer's ``close`` ends them)."""
        return BorrowedOption(self)

    def close(self) -> None:
        close = getattr(self.option, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> "ProgramMeasurer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class BorrowedOption:
    """A measure option over a ``ProgramMeasurer``'s builder and runner that its borrower cannot close."""

    def __init__(self, measurer: ProgramMeasurer):
        self.measurer = measurer

    def measure(self, inputs) -> list:
        return self.measurer.build_and_run(inputs)

    def close(self) -> None:
        """Nothing: the measurer that lent it closes the builder and the runner."""


__all__ = ["ProgramMeasurer", "BorrowedOption"]
