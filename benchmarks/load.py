"""A competing load for timings: ``n`` processes busy on the cores, switched on and off between blocks.

Each process multiplies two 192x192 float64 matrices in a loop with one BLAS thread (CPU and cache
traffic, like another model running).  The processes start stopped (``SIGSTOP``); :meth:`Load.on` and
:meth:`Load.off` continue and stop them, so quiet and loaded blocks alternate in one run without paying
for process starts::

    with Load(2) as load:
        load.on(); ...time loaded...; load.off(); ...time quiet...
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

_BUSY = ("import numpy as np\n"
         "a = np.random.default_rng(0).standard_normal((192, 192))\n"
         "while True:\n    a = a @ a; a /= np.abs(a).max()\n")


class Load:
    """``n`` busy processes, stopped until :meth:`on` (a context manager that kills them on exit)."""

    def __init__(self, n: int):
        self.n = n
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> Load:
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        for _ in range(self.n):
            self.procs.append(subprocess.Popen([sys.executable, "-c", _BUSY], env=env))
        time.sleep(0.5 if self.n else 0)       # numpy imported before the first stop
        self.off()
        return self

    def _signal(self, sig: int) -> None:
        for p in self.procs:
            p.send_signal(sig)

    def on(self) -> None:
        self._signal(signal.SIGCONT)
        time.sleep(0.1 if self.n else 0)        # the scheduler has seen them run

    def off(self) -> None:
        self._signal(signal.SIGSTOP)

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            p.kill()
            p.wait()
