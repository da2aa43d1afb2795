"""``LocalRunner``: check and time each built kernel in a worker process.

Before the first candidate of a task the runner prepares its data once (in the worker, with a long
timeout): random inputs and the expected outputs, from the template's ``reference`` function or else
from the template's fallback config built in that process; both are saved as ``.npz`` (no pickle).

Each candidate then runs in the (reused) worker: outputs are NaN-poisoned, the kernel runs once and
is compared with the reference (``WRONG_ANSWER`` if it disagrees), then timed: ``repeat`` times
``number`` runs, ``number`` growing until a repeat lasts ``min_repeat_ms``; with
``enable_cpu_cache_flush`` a buffer larger than the last-level cache is written before each repeat.
CUDA candidates (cubins from the builder) are checked and timed on the GPU with CUDA events in the
same worker; where pycuda or a GPU is missing every CUDA trial records ``DEVICE_UNAVAILABLE``.
A kernel that crashes kills its worker (``RUNTIME_ERROR``), one that hangs past ``timeout`` is killed
(``RUN_TIMEOUT``); the next candidate gets a fresh worker.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
import warnings

import numpy as np

from .measure import MeasureErrorNo, MeasureResult, _short
from .worker import OK, TIMEOUT, WorkerPool

_cache: dict[str, dict] = {}      # per worker process: reference file -> arrays


def _llc_bytes() -> int:
    try:
        text = open("/sys/devices/system/cpu/cpu0/cache/index3/size").read().strip()
        return int(text[:-1]) * 1024 * (1024 if text.endswith("M") else 1) if text[-1] in "KM" else int(text)
    except (OSError, ValueError, IndexError):
        return 32 << 20


def _random_input(rng, shape, dtype: str) -> np.ndarray:
    if dtype.startswith("float"):
        return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    if dtype == "bool":
        return rng.random(size=shape) < 0.5
    return rng.integers(0, 16, size=shape).astype(dtype)


def _shapes(sig) -> list[tuple]:
    out = []
    for a in sig.args:
        if not all(isinstance(d, int) for d in a.shape):
            raise ValueError(f"argument {a.name} has a symbolic shape {a.shape_str()}: tuning needs constant shapes")
        out.append(tuple(a.shape))
    return out


def reference_job(p: dict) -> dict:
    """In a worker: write inputs and expected outputs of a task to ``p["file"]`` (``.npz``).

    Expected outputs come from the template's reference function, else from its fallback config
    built here; with neither (the fallback config is invalid) none are written and candidates run
    unchecked."""
    import codegen
    from codegen.signature import Signature
    from tensorir import lower
    from tensorir.schedule.space import FallbackConfig
    from .task import Task
    from .template import safe_name
    task = Task.from_payload(p["task"])
    try:
        s, tensors = task.instantiate(FallbackConfig())
        fallback, why = (s, tensors), ""
    except Exception as e:  # noqa: BLE001 - an invalid fallback config: use the candidate for the shapes
        fallback, why = None, f"{type(e).__name__}: {e}"
        s, tensors = task.instantiate(p["index"])
    sig = Signature.from_func(lower(s, tensors))
    rng = np.random.default_rng(p["seed"])
    arrays = [None if a.written else _random_input(rng, shp, a.dtype) for a, shp in zip(sig.args, _shapes(sig))]
    inputs = [x for x in arrays if x is not None]
    written = [a for a in sig.args if a.written]
    if task.template.reference is not None:
        ref_fn = task.template.reference
        extra = {"args": task.args} if getattr(ref_fn, "wants_args", False) else {}
        expected = ref_fn(*[x.copy() for x in inputs], **extra)
        expected = list(expected) if isinstance(expected, (list, tuple)) else [expected]
        source = "reference function"
    elif fallback is not None:
        target = getattr(task, "reference_target", task.target)     # an untuned CUDA DAG runs on the CPU
        mod = codegen.build(*fallback, target=target, name=f"{safe_name(task.name)}_reference")
        expected = [np.full(shp, np.nan if _floating(a.dtype) else 0x5A, a.dtype)   # int8 kernels' outputs
                    for a, shp in zip(sig.args, _shapes(sig)) if a.written]
        it = iter(expected)
        mod(*[x.copy() if x is not None else next(it) for x in arrays])
        source = "fallback config"
    else:
        expected, source = [], f"none: no reference function and the fallback config fails ({why})"
    if expected and len(expected) != len(written):
        raise ValueError(f"the reference of {task.name} returns {len(expected)} outputs, the kernel writes "
                         f"{len(written)}")
    payload = {f"in{i}": x for i, x in enumerate(inputs)}
    for i, (a, e) in enumerate(zip(written, expected)):
        payload[f"out{i}"] = np.asarray(e, dtype=a.dtype)
    np.savez(p["file"], **payload)
    return {"source": source}


def _load(path: str) -> dict:
    if path not in _cache:
        with np.load(path, allow_pickle=False) as z:
            ins = [z[f"in{i}"] for i in range(sum(k.startswith("in") for k in z.files))]
            outs = [z[f"out{i}"] for i in range(sum(k.startswith("out") for k in z.files))]
        _cache.clear()
        _cache[path] = {"in": ins, "out": outs}
    return _cache[path]


def _floating(dtype) -> bool:
    """numpy's floats and bfloat16 (ml_dtypes: numpy kind "V")."""
    return np.dtype(dtype).kind == "f" or np.dtype(dtype).name == "bfloat16"


def _typed(a: np.ndarray, dtype) -> np.ndarray:
    """``a`` as read from the ``.npz`` in ``dtype``: numpy saves bfloat16 (ml_dtypes) as 2-byte void."""
    dtype = np.dtype(dtype)
    return a.view(dtype) if a.dtype.kind == "V" and a.dtype != dtype and a.dtype.itemsize == dtype.itemsize else a


def _mismatch(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str:
    if not _floating(got.dtype):
        bad = int(np.count_nonzero(got != want))
        return f"{bad} of {got.size} elements differ" if bad else ""
    if got.dtype.itemsize == 2:     # 16-bit floats: float32 sums in another order may round one step apart
        import ml_dtypes
        rtol = max(rtol, float(ml_dtypes.finfo(got.dtype).eps))
    got, want = got.astype(np.float64), _typed(want, got.dtype).astype(np.float64)
    scale = float(np.max(np.abs(want[np.isfinite(want)]), initial=0.0)) or 1.0
    with np.errstate(invalid="ignore"):
        err = np.abs(got - want)
        ok = (err <= atol * scale + rtol * np.abs(want)) | (np.isnan(want) & np.isnan(got))
    bad = int(ok.size - np.count_nonzero(ok))
    if not bad:
        return ""
    nans = int(np.count_nonzero(np.isnan(got) & ~np.isnan(want)))
    return f"{bad} of {got.size} elements differ ({nans} never written), max error {np.nanmax(err):.3g}"


_flush_buffer: np.ndarray | None = None


def cuda_device_job(p: dict) -> dict:
    """In a worker: whether CUDA candidates can run here (pycuda importable, a GPU visible)."""
    try:
        import pycuda.driver as drv
    except ImportError as e:
        return {"ok": False, "msg": f"pycuda is not installed ({e}); CUDA candidates are built but not measured"}
    try:
        drv.init()
        n = drv.Device.count()
    except Exception as e:  # noqa: BLE001 - no driver
        return {"ok": False, "msg": f"the CUDA driver is unavailable ({type(e).__name__}: {e})"}
    if n == 0:
        return {"ok": False, "msg": "no CUDA device is visible"}
    return {"ok": True, "msg": drv.Device(int(os.environ.get("TILETUNE_CUDA_DEVICE", "0"))).name()}


def _run_cuda(mod, p: dict) -> dict:
    """In a worker: check and time the loaded CUDA candidate on the GPU (CUDA events)."""
    data = _load(p["ref"])
    sig = mod.signature
    arrays, outs = _arguments(sig, data)
    mod(*arrays)
    wrong = _wrong_answer(p, sig, outs, data)
    if wrong:
        return wrong
    prof = mod.time_evaluator(number=max(1, p["number"]), repeat=max(1, p["repeat"]),
                              min_repeat_ms=p["min_repeat_ms"])(*arrays)
    return {"error_no": 0, "costs": list(prof.results), "msg": ""}


def _remove(path: str) -> None:
    """Delete a built candidate and the files beside it."""
    for suffix in ("", ".json", ".ll", ".cu"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)


def _arguments(sig, data: dict) -> tuple[list, list]:
    """Fresh copies of the reference inputs and poisoned outputs, in call order."""
    ins, outs, arrays = iter(data["in"]), [], []
    for a, shp in zip(sig.args, _shapes(sig)):
        if a.written:
            outs.append(np.full(shp, np.nan if _floating(a.dtype) else 0, a.dtype))
            arrays.append(outs[-1])
        else:
            arrays.append(_typed(next(ins), a.dtype).copy())
    return arrays, outs


def _wrong_answer(p: dict, sig, outs: list, data: dict) -> dict | None:
    """A WRONG_ANSWER result when an output differs from the reference, else None."""
    if p["check"] and data["out"]:
        for k, (got, want) in enumerate(zip(outs, data["out"])):
            msg = _mismatch(got, want, p["rtol"], p["atol"])
            if msg:
                return {"error_no": int(MeasureErrorNo.WRONG_ANSWER), "costs": [],
                        "msg": f"output {k} ({[a for a in sig.args if a.written][k].name}): {msg}"}
    return None


def run_job(p: dict) -> dict:
    """In a worker: check and time the shared object ``p["path"]`` (or a CUDA cubin on the GPU), then
    pause ``p["cooldown"]`` seconds."""
    try:
        return _check_and_time(p)
    finally:
        if p.get("cooldown", 0) > 0:
            time.sleep(p["cooldown"])


def _check_and_time(p: dict) -> dict:
    import codegen
    global _flush_buffer
    try:
        mod = codegen.load_module(p["path"])
    finally:
        _remove(p["path"])
    if p["path"].endswith(".cubin"):
        return _run_cuda(mod, p)
    data = _load(p["ref"])
    sig = mod.signature
    arrays, outs = _arguments(sig, data)
    fn, cargs = mod.native_function, mod.pack_args(arrays)
    fn(*cargs)
    wrong = _wrong_answer(p, sig, outs, data)
    if wrong:
        return wrong
    if p["flush"] and _flush_buffer is None:
        _flush_buffer = np.zeros(2 * _llc_bytes() // 4, np.float32)
    number, results, clock = max(1, p["number"]), [], time.perf_counter
    while len(results) < p["repeat"]:
        if p["flush"]:
            _flush_buffer += 1.0
        t0 = clock()
        for _ in range(number):
            fn(*cargs)
        elapsed = clock() - t0
        if elapsed * 1e3 < p["min_repeat_ms"]:
            number = max(int(p["min_repeat_ms"] / 1e3 / max(elapsed / number, 1e-9)) + 1, int(number * 1.618) + 1)
            continue
        results.append(elapsed / number)
    return {"error_no": 0, "costs": results, "msg": ""}


class LocalRunner:
    """Times kernels in one reused worker process (so measurements never overlap).

    ``number`` runs per repeat (more if a repeat is shorter than ``min_repeat_ms``), ``repeat``
    repeats (the cost is their median), ``timeout`` seconds per candidate, a pause of
    ``cooldown_interval`` seconds after each candidate, optional cache flush, and a correctness check
    of the first run unless ``check_correctness=False``.  AutoTVM's signature and order
    (``module_loader`` must stay None); ``cooldown_interval`` defaults to 0, not 0.1."""

    def __init__(self, timeout: float = 10.0, number: int = 4, repeat: int = 3, min_repeat_ms: float = 0,
                 cooldown_interval: float = 0.0, enable_cpu_cache_flush: bool = False, module_loader=None, *,
                 check_correctness: bool = True, seed: int = 0):
        if module_loader is not None:
            raise ValueError("LocalRunner: module_loader is not supported (the runner loads the exported "
                             "shared object or cubin itself)")
        self.cooldown = cooldown_interval
        self.number, self.repeat, self.min_repeat_ms = number, repeat, min_repeat_ms
        self.timeout, self.flush, self.check, self.seed = timeout, enable_cpu_cache_flush, check_correctness, seed
        self._pool: WorkerPool | None = None
        self._refs: dict[str, tuple[str, str]] = {}      # task key -> (npz file, error message)
        self._cuda: dict | None = None                    # the worker's answer to cuda_device_job

    def _cuda_device(self) -> dict:
        """Asked once, in the worker (the tuner's own process never initializes CUDA)."""
        if self._cuda is None:
            o = self._pool.map([("autotune.runner:cuda_device_job", {})], 60.0)[0]
            self._cuda = o.value if o.status == OK else {"ok": False, "msg": f"checking for a GPU failed: {o.message}"}
            if not self._cuda["ok"]:
                warnings.warn(f"tiletune: CUDA candidates cannot be measured here: {self._cuda['msg']}")
        return self._cuda

    def _reference(self, task, index: int) -> tuple[str, str]:
        key = json.dumps(task.payload(), sort_keys=True)
        if key not in self._refs:
            path = os.path.join(self._pool.dir, hashlib.sha1(key.encode()).hexdigest()[:16] + ".npz")
            job = ("autotune.runner:reference_job", {"task": task.payload(), "file": path, "seed": self.seed,
                                                      "index": index})
            o = self._pool.map([job], max(120.0, 10 * self.timeout))[0]
            if o.status == OK and o.value["source"].startswith("none"):
                warnings.warn(f"{task!r}: candidates run unchecked, reference {o.value['source']}")
            self._refs[key] = (path, "") if o.status == OK else \
                ("", f"preparing the reference of {task!r} failed ({o.status}): {o.message}")
        return self._refs[key]

    def run(self, inputs, builds) -> list[MeasureResult]:
        if self._pool is None:
            self._pool = WorkerPool(1, recycle_after=200, scratch="tiletune_run_")
        results: list[MeasureResult | None] = [None] * len(inputs)
        jobs, where = [], []
        for i, (inp, b) in enumerate(zip(inputs, builds)):
            if b.error_no != MeasureErrorNo.NO_ERROR:
                results[i] = MeasureResult((), b.error_no, b.seconds, time.time(), _short(b.error_msg))
                continue
            if b.path.endswith(".cubin"):
                dev = self._cuda_device()
                if not dev["ok"]:
                    results[i] = MeasureResult((), MeasureErrorNo.DEVICE_UNAVAILABLE, b.seconds, time.time(),
                                               _short(dev["msg"]))
                    _remove(b.path)
                    continue
            ref, err = self._reference(inp.task, inp.config.index)
            if err:
                results[i] = MeasureResult((), MeasureErrorNo.RUNTIME_ERROR, b.seconds, time.time(), _short(err))
                continue
            info = inp.task.template
            jobs.append(("autotune.runner:run_job", {
                "path": b.path, "ref": ref, "number": self.number, "repeat": self.repeat,
                "min_repeat_ms": self.min_repeat_ms, "flush": self.flush, "check": self.check,
                "rtol": info.rtol, "atol": info.atol, "cooldown": self.cooldown}))
            where.append((i, b.seconds))
        for (i, build_s), o in zip(where, self._pool.map(jobs, self.timeout) if jobs else []):
            total = build_s + o.seconds
            if o.status == OK:
                v = o.value
                results[i] = MeasureResult(tuple(v["costs"]), MeasureErrorNo(v["error_no"]), total, time.time(),
                                           _short(v["msg"]))
            elif o.status == TIMEOUT:
                results[i] = MeasureResult((), MeasureErrorNo.RUN_TIMEOUT, total, time.time(), o.message)
            else:
                results[i] = MeasureResult((), MeasureErrorNo.RUNTIME_ERROR, total, time.time(), _short(o.message))
        return results  # type: ignore[return-value]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        self._refs.clear()

    def __repr__(self) -> str:
        return (f"LocalRunner(timeout={self.timeout}, number={self.number}, repeat={self.repeat}, "
                f"min_repeat_ms={self.min_repeat_ms}, cooldown_interval={self.cooldown}, "
                f"enable_cpu_cache_flush={self.flush})")


__all__ = ["LocalRunner", "run_job", "reference_job"]
