"""The best and second-best records of some tasks of MODEL's LOG timed again, 3 times each, with tune-model's
runner settings.  Usage: remeasure.py MODEL LOG NAME=D,.. KERNEL[@WEIGHT],..  (KERNEL@W: a kernel-name prefix
and the task's weight)."""
import sys
import warnings

from autotune import LocalBuilder, LocalRunner, extract_tasks, measure_option
from autotune.auto_scheduler.compute_dag import key_hash
from autotune.auto_scheduler.search_task import StateConfig
from autotune.measure import MeasureInput
from autotune.record import records_of
from tensorir import graph

model, log, shape, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")
k, v = shape.split("=")
g, params = graph.from_onnx(model, {k: tuple(int(x) for x in v.split(","))})
tasks, weights = extract_tasks(g, params)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    recs = [r for r in records_of(log) if r.result.ok and r.workload[0] == "auto_scheduler"]
opt = measure_option(builder=LocalBuilder(n_parallel=2), runner=LocalRunner(number=4, repeat=3))


def wanted(name: str, w: int) -> bool:
    return any(name == n.split("@")[0] or (n.endswith(f"@{w}") and name.startswith(n.split("@")[0])) for n in names)


for t, w in zip(tasks, weights):
    if not hasattr(t, "workload_key") or not wanted(t.kernel_name, w):
        continue
    mine = sorted([r for r in recs if key_hash(r.workload[1][0]) == key_hash(t.workload_key)], key=lambda r: r.cost)
    for label, r in zip(("best", "2nd"), mine[:2]):
        cfg = t.default_config() if "default" in r.knobs else StateConfig(tuple(r.knobs["steps"]))
        costs = [opt.measure([MeasureInput(t, cfg)])[0].cost for _ in range(3)]
        print(f"{t.kernel_name[:50]:50s} w{w} {label}: recorded {r.cost * 1e3:.4f} ms (of {len(mine)}), "
              f"again {', '.join(f'{c * 1e3:.4f}' for c in costs)} ms", flush=True)
