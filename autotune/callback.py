"""Callbacks a tuner calls after each measured batch: ``callback(tuner, inputs, results)``."""
from __future__ import annotations

import os
import sys

from .record import append_records, make_record


class log_to_file:
    """Append each finished trial to the JSON-lines log at ``path``, flushed and fsynced before the
    tuner goes on (a kill loses nothing finished).  The tuner also reads the log back when it
    starts, to skip configs already measured, and keeps its study beside it (``path + ".study.db"``)."""

    def __init__(self, path):
        self.path = os.fspath(path)

    def __call__(self, tuner, inputs, results) -> None:
        append_records(self.path, [make_record(i, r) for i, r in zip(inputs, results)])

    def __repr__(self) -> str:
        return f"log_to_file({self.path!r})"


class progress_bar:
    """A tqdm bar over ``total`` trials showing errors and the best GFLOP/s so far."""

    def __init__(self, total: int, prefix: str = "", file=None):
        self.total, self.prefix, self.file = total, prefix, file
        self._bar = None

    def on_start(self, tuner, n_trial: int) -> None:
        """Called by the tuner before its first batch (trials already in the log count as done)."""
        from tqdm import tqdm
        self.close()
        self._bar = tqdm(total=self.total, desc=self.prefix or tuner.task.name, unit="trial",
                         file=self.file or sys.stderr, dynamic_ncols=True, leave=True, initial=tuner.trials_done)
        self._bar.set_postfix_str(f"errors={tuner.errors} best={tuner.best_gflops:.1f} GFLOP/s")

    def __call__(self, tuner, inputs, results) -> None:
        if self._bar is None:
            self.on_start(tuner, self.total)
            self._bar.n = tuner.trials_done - len(inputs)
        self._bar.update(len(inputs))
        self._bar.set_postfix_str(f"errors={tuner.errors} best={tuner.best_gflops:.1f} GFLOP/s", refresh=True)
        if tuner.trials_done >= self.total:
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


__all__ = ["log_to_file", "progress_bar"]
