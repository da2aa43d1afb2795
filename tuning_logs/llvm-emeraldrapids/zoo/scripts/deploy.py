"""The deploy check of tune-model, alone: build NAME from its log, profile, estimate from the progress file;
JSON (profile, stats) to OUT/deploy/NAME.json."""
import json
import os
import sys

sys.path[:0] = ["."]
name, shapes, out = sys.argv[1], sys.argv[2:-1], sys.argv[-1]
import glob  # noqa: E402

import codegen  # noqa: E402
from autotune import apply_history_best  # noqa: E402
from codegen.model.precision import seeded_inputs  # noqa: E402
from tensorir import graph  # noqa: E402

f = glob.glob(f"diag/cputune/zoo/{name}/*.onnx")[0]
log = f"diag/cputune/logs/{name}.jsonl"
shape_dict = {}
for s in shapes:
    k, v = s.split("=")
    shape_dict[k] = tuple(int(x) for x in v.split(","))
g, params = graph.from_onnx(f, shape_dict)
prog = [json.loads(x) for x in open(log + ".progress.jsonl")]
est = prog[-1]["latency"]
with apply_history_best(log):
    m = codegen.build_model(g, params=params)
prof = m.profile(repeat=20, quiet=True, **seeded_inputs(m))
prof2 = m.profile(repeat=20, quiet=True, **seeded_inputs(m))
print(prof)
for p in (prof, prof2):
    print(f"{name}: deployed {p.total * 1e3:.4f} ms; kernels in place {p.kernel_sum * 1e3:.4f} ms, outside "
          f"{p.overhead * 1e3:.4f} ms; estimate {est * 1e3:.4f} ms misses {(p.total - est) / p.total:+.1%}; "
          f"trials {prog[-1]['trial']} seconds {prog[-1]['seconds']:.0f}", flush=True)
os.makedirs(out, exist_ok=True)
json.dump({"estimate_ms": est * 1e3, "profile": prof.to_json(), "profile2": prof2.to_json(),
           "stats": m.stats()}, open(f"{out}/{name}.json", "w"), indent=1, default=str)
