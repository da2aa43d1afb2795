"""Callbacks a tuner calls after each measured batch: ``callback(tuner, inputs, results)``."""
from __future__ import annotations

import os
import sys

from .record import append_records, make_record


class log_to_file:
    """Append each finished trial to the JSON-lines log at ``path``, flushed and fsynced before the
    tuner goes on (a kill loses nothing finished).  The tuner also reads the log back when it
    starts, to skip configs already measured, and keeps its study beside it (``path + ".study.db"``)."""

    def __init__(self, path, protocol: str = "json"):
        if protocol != "json":
            raise ValueError(f"log_to_file: protocol {protocol!r} is not supported; tiletune logs are JSON lines")
        self.path = os.fspath(path)

    def __call__(self, tuner, inputs, results) -> None:
        append_records(self.path, [make_record(i, r) for i, r in zip(inputs, results)])

    def __repr__(self) -> str:
        return f"log_to_file({self.path!r})"


_SI = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


class progress_bar:
    """A tqdm bar over ``total`` trials showing errors and the best speed so far, in
    ``si_prefix``FLOP/s (``"G"`` by default; AutoTVM's signature)."""

    def __init__(self, total: int, prefix: str = "", si_prefix: str = "G", file=None):
        if si_prefix not in _SI:
            raise ValueError(f"progress_bar: unknown si_prefix {si_prefix!r}; use one of {', '.join(_SI)}")
        self.total, self.prefix, self.si_prefix, self.file = total, prefix, si_prefix, file
        self._bar = None

    def _status(self, tuner) -> str:
        speed = tuner.best_gflops * 1e9 / _SI[self.si_prefix]
        return f"errors={tuner.errors} best={speed:.1f} {self.si_prefix}FLOP/s"

    def on_start(self, tuner, n_trial: int) -> None:
        """Called by the tuner before its first batch (trials already in the log count as done)."""
        from tqdm import tqdm
        self.close()
        self._bar = tqdm(total=self.total, desc=self.prefix or tuner.task.name, unit="trial",
                         file=self.file or sys.stderr, dynamic_ncols=True, leave=True, initial=tuner.trials_done)
        self._bar.set_postfix_str(self._status(tuner))

    def __call__(self, tuner, inputs, results) -> None:
        if self._bar is None:
            self.on_start(tuner, self.total)
            self._bar.n = tuner.trials_done - len(inputs)
        self._bar.update(len(inputs))
        self._bar.set_postfix_str(self._status(tuner), refresh=True)
        if tuner.trials_done >= self.total:
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


__all__ = ["log_to_file", "progress_bar"]
