"""Where the estimate misses: build MODEL from LOG, then per step its recorded cost (measured alone by the
tuner), its profile median (repeated in place, hot) and its time in model order (one pass = one call's
steps, each timed once; median over passes), and the whole call.  Usage: gap.py MODEL LOG NAME=D,.. ..."""
import json
import statistics
import sys
import time
import warnings

import codegen
from autotune import apply_history_best
from codegen.model.precision import seeded_inputs
from tensorir import graph

model, log, shapes = sys.argv[1], sys.argv[2], sys.argv[3:]
shape_dict = {k: tuple(int(x) for x in v.split(",")) for k, v in (s.split("=") for s in shapes)}
g, params = graph.from_onnx(model, shape_dict)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    with apply_history_best(log):
        m = codegen.build_model(g, params=params)
inputs = seeded_inputs(m)
steps = m.run_list.steps


def recorded(s) -> float:
    o = s.schedule or {}
    return (o.get("record") or {}).get("cost", o.get("cost", float("nan")))


for rep in range(2):
    prof = m.profile(repeat=20, quiet=True, **inputs)
    fns = [m.kernel_function(i) for i in range(len(steps))]
    m.run(**inputs)
    clock, passes = time.perf_counter, []
    for _ in range(30):
        t = []
        for fn in fns:
            t0 = clock()
            fn()
            t.append(clock() - t0)
        passes.append(t)
    order = [statistics.median(p[i] for p in passes) for i in range(len(steps))]
    calls = []
    for _ in range(30):
        t0 = clock()
        m.run(**inputs)
        calls.append(clock() - t0)
    total = statistics.median(calls)
    rec = [recorded(s) for s in steps]
    print(f"{'#':>3} {'kernel':<40} {'kind':<8} {'alone':>8} {'hot':>8} {'order':>8} hot/al ord/al")
    for i, s in enumerate(steps):
        print(f"{i:>3} {s.kernel[:40]:<40} {(s.schedule or {}).get('kind', '?')[:8]:<8} {rec[i] * 1e3:8.4f} "
              f"{prof.kernels[i][2] * 1e3:8.4f} {order[i] * 1e3:8.4f} {prof.kernels[i][2] / rec[i]:5.2f} {order[i] / rec[i]:5.2f}")
    a = sum(r for r in rec if r == r)
    print(f"pass {rep}: alone {a * 1e3:.4f}  hot {prof.kernel_sum * 1e3:.4f}  order {sum(order) * 1e3:.4f}  "
          f"profile total {prof.total * 1e3:.4f}  call {total * 1e3:.4f} ms; outside(hot) {prof.overhead * 1e3:.4f}  "
          f"call-order {(total - sum(order)) * 1e3:.4f}")
    print(json.dumps({"alone": a, "hot": prof.kernel_sum, "order": sum(order), "total": total}))
