"""Steps of a model from its log: in place (the planned buffers), on the same data in fresh aligned buffers,
and on fresh uniform random data (the tuner's); median of 200 calls and the runner's loop (4 calls x 3).
Usage: place.py MODEL LOG NAME=D,.. I,J,..  (step indices)."""
import ctypes
import statistics
import sys
import time
import warnings

import numpy as np

import codegen
from autotune import apply_history_best
from codegen.model.precision import seeded_inputs
from codegen.runtime.cpu import aligned_empty
from tensorir import graph

model, log, shape, idx = sys.argv[1], sys.argv[2], sys.argv[3], [int(x) for x in sys.argv[4].split(",")]
k, v = shape.split("=")
g, params = graph.from_onnx(model, {k: tuple(int(x) for x in v.split(","))})
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    with apply_history_best(log):
        m = codegen.build_model(g, params=params)
m.run(**seeded_inputs(m))


def med(fn, n=200):
    fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def loop(fn, number=4, repeat=3):
    fn()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t0) / number)
    return statistics.median(out)


def fresh(a, data):
    b = aligned_empty(a.nbytes).view(a.dtype).reshape(a.shape)
    b[...] = data
    return b


rng = np.random.default_rng(0)
for i in idx:
    step = m.run_list.steps[i]
    views = [m.view(a) for a in step.call_args]
    fn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(views))(m._address(step.symbol))
    same = [fresh(a, a) for a in views]
    rand = [fresh(a, rng.uniform(-1, 1, a.shape).astype(a.dtype) if a.dtype.kind == "f" else a) for a in views]
    offs = [hex(a.ctypes.data % 4096) for a in views]
    sub = [int(np.sum((a != 0) & (np.abs(a) < np.finfo(np.float32).tiny))) if a.dtype == np.float32 else 0
           for a in views]
    zeros = [round(float(np.mean(a == 0)), 2) for a in views]
    print(i, step.kernel[:50], [a.shape for a in views], "offs", offs, "subnormal", sub, "zeros", zeros)
    for name, arrs in (("in place", views), ("same data fresh", same), ("random fresh", rand)):
        ptrs = [a.ctypes.data for a in arrs]
        f = lambda ptrs=ptrs: fn(*ptrs)
        print(f"   {name:16s} median {med(f) * 1e3:.4f} ms  loop4x3 {loop(f) * 1e3:.4f} ms")
    print("   recorded", (step.schedule.get("record") or {}).get("cost", step.schedule.get("cost")))
