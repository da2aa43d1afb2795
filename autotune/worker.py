"""Worker processes that may crash or hang without taking the tuner down.

A :class:`WorkerPool` keeps ``n`` fresh Python processes, started with ``subprocess`` and talking
over two pipes.  Never forked (an OpenMP runtime does not survive a fork), and unlike
multiprocessing's spawn they do not import the main script: a template defined there travels to
them by value, so scripts need no ``__main__`` guard (see :mod:`autotune.shipping`).

Each job is ``(function path, payload)``; the worker imports the function, says it has started the job,
calls it with the payload and sends back its (plain data) result.  A job that outlives its timeout, counted
from that start, gets its worker killed: a fresh worker's start and its imports (seconds on a loaded machine:
after a crash, a 3 s run timeout took the next good candidate for a hung one) are not the job's, and have
their own limit (:data:`START_SECONDS`).  A worker that dies (a segfaulting kernel) shows as end-of-file on its
pipe.  Either way the job's
outcome says so and a fresh worker starts on demand, so the next job runs normally.  Workers die
with their parent (``PR_SET_PDEATHSIG``), so a killed tuner leaves no hung kernel behind.
"""
from __future__ import annotations

import ctypes
import importlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

WORKER_ENV = "TILETUNE_WORKER"

OK, ERROR, TIMEOUT, DIED = "ok", "error", "timeout", "died"
STARTED = "started"         # the worker's word that it has the job's function and calls it now
#: how long a worker may take to start a job (a fresh process's imports), beyond the job's own timeout
START_SECONDS = 60.0


@dataclass
class Outcome:
    status: str            # OK, ERROR (the function raised), TIMEOUT or DIED
    value: Any = None      # the function's result when OK
    message: str = ""      # what went wrong otherwise
    seconds: float = 0.0   # wall time of the job


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(1, signal.SIGKILL)      # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def in_worker() -> bool:
    """Whether this process is a tiletune worker."""
    return os.environ.get(WORKER_ENV) == "1"


def _child(read_fd: int, write_fd: int, parent_pid: int) -> None:
    """Entry point of a worker process (see :meth:`_Worker.start`)."""
    _die_with_parent()
    if os.getppid() != parent_pid:        # the parent died before prctl took effect
        return
    _serve(Connection(read_fd, writable=False), Connection(write_fd, readable=False))


def _serve(inbox, outbox) -> None:
    """Answer jobs from ``inbox`` on ``outbox`` until the parent closes the pipe."""
    functions: dict[str, Any] = {}
    while True:
        try:
            path, payload = inbox.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        fn = None
        try:
            fn = functions.get(path)
            if fn is None:
                module, _, name = path.partition(":")
                fn = functions[path] = getattr(importlib.import_module(module), name)
        except BaseException:  # noqa: BLE001 - report everything, the tuner decides
            reply = (ERROR, traceback.format_exc(limit=8))
        try:
            outbox.send((STARTED, None))        # the job's clock starts here
        except (BrokenPipeError, OSError):
            return
        if fn is not None:
            try:
                reply = (OK, fn(payload))
            except BaseException:  # noqa: BLE001 - report everything, the tuner decides
                reply = (ERROR, traceback.format_exc(limit=8))
        try:
            outbox.send(reply)
        except (BrokenPipeError, OSError):
            return


def _signal_name(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


class _Worker:
    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.inbox = self.outbox = None       # what we send to / receive from the worker
        self.jobs_done = 0

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        paths = [p for p in sys.path if p] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        env = dict(os.environ, **{WORKER_ENV: "1", "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))})
        code = (f"from autotune.worker import _child; _child({to_child_r}, {from_child_w}, {os.getpid()})")
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=(to_child_r, from_child_w), env=env,
                                         stdin=subprocess.DEVNULL)
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self.inbox = Connection(to_child_w, readable=False)
        self.outbox = Connection(from_child_r, writable=False)
        self.jobs_done = 0

    @property
    def exitcode(self):
        return None if self.proc is None else self.proc.poll()

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for c in (self.inbox, self.outbox):
            if c is not None:
                c.close()
        self.proc = self.inbox = self.outbox = None


class WorkerPool:
    """``n`` reusable worker processes; :meth:`map` runs jobs on them with a per-job timeout.

    ``recycle_after``: restart a worker after that many jobs (loaded kernels accumulate).
    ``scratch``: a prefix for a temporary directory ``self.dir`` that the jobs share (built kernels,
    reference data), removed by :meth:`close`."""

    def __init__(self, n: int = 1, recycle_after: int = 0, scratch: str | None = None):
        self.workers = [_Worker() for _ in range(max(1, n))]
        self.recycle_after = recycle_after
        self.dir = tempfile.mkdtemp(prefix=scratch) if scratch else None

    def map(self, jobs: list[tuple[str, Any]], timeout: float) -> list[Outcome]:
        """Run ``jobs`` (function path ``"module:name"``, payload) and return their outcomes in order.
        The timeout of a job counts from when its worker started it (its function imported); a worker gets
        ``START_SECONDS`` more to get there (a fresh process's imports)."""
        outcomes: list[Outcome | None] = [None] * len(jobs)
        pending = list(range(len(jobs)))[::-1]
        running: dict[int, tuple[int, float, bool]] = {}   # worker number -> (job, time sent or started, started)
        while pending or running:
            for w, worker in enumerate(self.workers):
                if w in running or not pending:
                    continue
                if not worker.alive() or (self.recycle_after and worker.jobs_done >= self.recycle_after):
                    worker.kill()
                    worker.start()
                job = pending.pop()
                try:
                    worker.inbox.send(jobs[job])
                except (BrokenPipeError, OSError):
                    worker.kill()
                    pending.append(job)
                    continue
                running[w] = (job, time.monotonic(), False)
            now = time.monotonic()
            deadline = min(t + (timeout if started else timeout + START_SECONDS) for _, t, started in running.values())
            handles = {self.workers[w].outbox: w for w in running}    # EOF when the worker dies
            ready = wait(list(handles), timeout=max(0.0, deadline - now))
            now = time.monotonic()
            for h in ready:
                w = handles[h]
                outcome = self._receive(w, running, now)
                if outcome is not None:
                    outcomes[running.pop(w)[0]] = outcome
            for w, (job, t, started) in list(running.items()):
                if now - t >= (timeout if started else timeout + START_SECONDS):
                    self.workers[w].kill()
                    outcomes[job] = Outcome(TIMEOUT, message=f"no result after {timeout:g} s; worker killed" if started
                                            else f"the worker did not start the job in {timeout + START_SECONDS:g} s; "
                                                 "worker killed", seconds=now - t)
                    del running[w]
        return outcomes  # type: ignore[return-value]

    def _receive(self, w: int, running: dict, now: float) -> Outcome | None:
        """What worker ``w`` sent: its job's outcome, or None while the job runs (it said it started)."""
        job, t, _ = running[w]
        worker = self.workers[w]
        try:
            while worker.outbox.poll():
                status, value = worker.outbox.recv()
                if status == STARTED:
                    t = now
                    running[w] = (job, t, True)
                    continue
                worker.jobs_done += 1
                return Outcome(status, value if status == OK else None, "" if status == OK else value, now - t)
            return None
        except (EOFError, OSError):         # the worker died
            try:
                worker.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
            outcome = Outcome(DIED, message=f"worker process {_signal_name(worker.exitcode)}", seconds=now - t)
            worker.kill()
            return outcome

    def close(self) -> None:
        for worker in self.workers:
            worker.kill()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


__all__ = ["WorkerPool", "Outcome", "OK", "ERROR", "TIMEOUT", "DIED", "in_worker"]
