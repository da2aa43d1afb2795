"""Whether a CUDA task can be measured here, asked before tuning so that a machine without a GPU
costs no trials (the runner would record every one as ``DEVICE_UNAVAILABLE``)."""
from __future__ import annotations

import functools
import importlib.util
import json
import subprocess
import sys

from ..builder import is_cuda_target


def cuda_unmeasurable(target: str, runner) -> str:
    """Why the local runner cannot measure CUDA candidates here ("" when it can, when ``target`` is not
    CUDA, or when the runner is not the local one and so may run elsewhere)."""
    from ..runner import LocalRunner
    if not is_cuda_target(target) or not (runner is None or runner == "local" or isinstance(runner, LocalRunner)):
        return ""
    return _local_cuda_problem()


@functools.lru_cache(maxsize=1)
def _local_cuda_problem() -> str:
    if importlib.util.find_spec("pycuda") is None:
        return "pycuda is not installed (CUDA candidates are built but cannot be measured)"
    # as the runner asks it: in another process, so that this one never initializes CUDA
    code = "import json, autotune.runner as r; print(json.dumps(r.cuda_device_job({})))"
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              check=False)
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError, OSError):
        return ""                   # undecided: the runner reports per trial
    return "" if answer.get("ok") else str(answer.get("msg", "no CUDA device"))


__all__ = ["cuda_unmeasurable"]
