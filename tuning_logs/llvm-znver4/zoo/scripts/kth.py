"""What the estimate would have been had each task counted the k-th least timing of its log (k=1: as tuned),
with the run's calibrated outside, against the run's deploy check; no new measurement.
Usage: kth.py LOG TUNE_TXT (the full log, with its .tasks.jsonl; tune-model's output)."""
import collections
import json
import re
import statistics
import sys

log, txt = sys.argv[1], sys.argv[2]
out = open(txt).read()
rows = re.findall(r"^(\S+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+[\d.]+%", out, re.M)    # the table, in task order
outside = float(re.search(r"outside them (-?[\d.]+) ms\) after", out).group(1))
est = float(re.search(r"estimated model latency ([\d.]+) ms \(kernels", out).group(1))
deployed = float(re.search(r"deployed: the model from the log takes ([\d.]+)", out).group(1))
keys = [json.loads(line)["workload_key"] for line in open(log + ".tasks.jsonl")]   # the searched tasks, in order
costs = collections.defaultdict(list)
for line in open(log):
    d = json.loads(line)
    if d["result"]["error_no"]:
        continue
    w = d["workload"]
    costs[w[1][0] if w[0] == "auto_scheduler" else json.dumps(w)].append(statistics.median(d["result"]["costs"]))
for v in costs.values():
    v.sort()
templates = {k: v for k, v in costs.items() if k not in keys}
total, i = collections.Counter(), 0
for name, weight, trials, best in rows:
    if i < len(keys) and keys[i].startswith(name[:56]):
        v, i = costs[keys[i]], i + 1
    else:       # a template task: the workload with this least cost and number of trials
        v = min(templates.values(), key=lambda v: (abs(v[0] * 1e3 - float(best)) > 5e-5, abs(len(v) - int(trials))))
    for k in (1, 2, 3):
        total[k] += int(weight) * v[min(k, len(v)) - 1] * 1e3
print(f"{log}: estimate {est:.4f} (kernels {total[1]:.4f} recomputed) deployed {deployed:.4f} "
      f"miss {(deployed - est) / deployed:+.1%}")
for k in (2, 3):
    e = total[k] + outside
    print(f"   k={k}: kernels {total[k]:.4f} estimate {e:.4f} miss {(deployed - e) / deployed:+.1%}")
