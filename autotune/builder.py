"""``LocalBuilder``: configs to shared objects in parallel worker processes.

Each job instantiates the template with its config, compiles it with ``codegen.build`` for the task's
target and exports a shared object into the builder's temporary directory (for ``cuda`` targets: a
cubin compiled by nvcc in the worker, plus a JSON description; no GPU is needed).  A template that rejects
the config (or whose schedule is invalid) gives ``INSTANTIATION_ERROR``; a compile or link failure
``BUILD_ERROR``; a build that outlives ``timeout`` (its worker is killed) ``BUILD_TIMEOUT``.
"""
from __future__ import annotations

import os
import time
import traceback
import uuid

from codegen.module import available_cpus

from .measure import BuildResult, MeasureErrorNo
from .worker import OK, TIMEOUT, WorkerPool


def build_job(p: dict) -> dict:
    """Runs in a worker: ``{"task", "index", "dir"}`` -> ``{"error_no", "path", "msg", "seconds"}``; a config
    given as data (``"config"``: an auto-scheduler candidate's steps) is instantiated instead of the index."""
    from .task import Task
    from .template import safe_name
    t0 = time.perf_counter()
    try:
        task = Task.from_payload(p["task"])
        s, args = task.instantiate(p["index"] if p.get("config") is None else p["config"])
    except Exception as e:  # noqa: BLE001 - the config is invalid, whatever the template raised
        return {"error_no": int(MeasureErrorNo.INSTANTIATION_ERROR), "path": "",
                "msg": f"{type(e).__name__}: {e}", "seconds": time.perf_counter() - t0}
    try:
        import codegen
        from codegen.build import build_library
        name = f"{safe_name(task.name)}_{p['index']}"
        stem = os.path.join(p["dir"], f"{name}_{uuid.uuid4().hex[:8]}")
        if is_cuda_target(task.target):
            path = export_cuda(codegen.build(s, args, target=task.target, name=name), stem)
        else:           # the runner loads the shared object: no JIT here
            path = stem + ".so"
            build_library(s, args, task.target, path, name=name)
    except Exception as e:  # noqa: BLE001 - any build failure is a BUILD_ERROR result
        tb = traceback.format_exc(limit=4)
        return {"error_no": int(MeasureErrorNo.BUILD_ERROR), "path": "",
                "msg": f"{type(e).__name__}: {e}\n{tb}", "seconds": time.perf_counter() - t0}
    return {"error_no": 0, "path": path, "msg": "", "seconds": time.perf_counter() - t0}


def is_cuda_target(target: str) -> bool:
    return str(target).split()[0] == "cuda" if str(target).strip() else False


def export_cuda(mod, stem: str) -> str:
    """Compile a CUDA candidate to a cubin with nvcc (no GPU needed) and export it as ``stem.cubin``
    (plus ``.json`` and ``.cu``, see ``CUDAModule.export_library``): the runner loads it without
    rebuilding.  Raises when nvcc is missing or fails."""
    from codegen.cuda.nvcc import nvcc_path
    if nvcc_path() is None:
        raise RuntimeError("building for CUDA needs nvcc on PATH (or CUDA_HOME/bin)")
    path = stem + ".cubin"
    mod.export_library(path)
    return path


class LocalBuilder:
    """Builds in ``n_parallel`` worker processes (default: the CPU count), each build at most
    ``timeout`` seconds.  AutoTVM's signature; of its other options only the defaults are accepted
    (``build_func="default"``; ``do_fork`` is ignored: workers are fresh processes, never forks)."""

    def __init__(self, timeout: float = 10.0, n_parallel: int | None = None, build_kwargs=None,
                 build_func="default", do_fork: bool = False, runtime=None):
        for option, value, default in (("build_kwargs", build_kwargs, None), ("build_func", build_func, "default"),
                                       ("runtime", runtime, None)):
            if value != default:
                raise ValueError(f"LocalBuilder: {option}={value!r} is not supported (candidates are built with "
                                 "codegen.build for the task's target)")
        self.n_parallel = n_parallel or available_cpus()
        self.timeout = timeout
        self._pool: WorkerPool | None = None

    def build(self, inputs) -> list[BuildResult]:
        if self._pool is None:
            self._pool = WorkerPool(self.n_parallel, scratch="tiletune_build_")
        jobs = [("autotune.builder:build_job", {"task": inp.task.payload(), "index": inp.config.index,
                                                 "config": getattr(inp.config, "payload", None),   # data configs
                                                 "dir": self._pool.dir}) for inp in inputs]
        out = []
        for o in self._pool.map(jobs, self.timeout):
            if o.status == OK:
                v = o.value
                out.append(BuildResult(v["path"], MeasureErrorNo(v["error_no"]), v["msg"], v["seconds"]))
            elif o.status == TIMEOUT:
                out.append(BuildResult("", MeasureErrorNo.BUILD_TIMEOUT, o.message, o.seconds))
            else:
                out.append(BuildResult("", MeasureErrorNo.BUILD_ERROR, o.message, o.seconds))
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __repr__(self) -> str:
        return f"LocalBuilder(n_parallel={self.n_parallel}, timeout={self.timeout})"


__all__ = ["LocalBuilder", "build_job"]
