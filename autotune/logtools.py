"""Reading tuning logs for people: summaries, best-so-far curves, plots (``tiletune logs ...``)."""
from __future__ import annotations

import os
from collections import Counter

from .measure import MeasureErrorNo
from .record import Record, best_by_key, records_of
from .template import workload_str


def _short_target(target: str) -> str:
    return target.split(" -mattr")[0]


def best_so_far(records: list[Record]) -> list[float]:
    """GFLOP/s of the best valid record among the first 1, 2, ... records (in log order)."""
    out, best = [], 0.0
    for r in records:
        best = max(best, r.gflops)
        out.append(best)
    return out


def trials_to_reach(curve: list[float], level: float) -> int | None:
    """The number of trials after which ``curve`` first reaches ``level`` (None if never)."""
    for n, v in enumerate(curve, 1):
        if v >= level:
            return n
    return None


def summary(records: list[Record]) -> str:
    """One block per (workload, target): trials, errors by kind, the best config and its speed."""
    groups: dict[tuple, list[Record]] = {}
    for r in records:
        groups.setdefault(r.key, []).append(r)
    best = best_by_key(records)
    lines = []
    for key, rs in groups.items():
        workload, target = key
        errors = Counter(r.result.error_no.name for r in rs if not r.result.ok)
        lines.append(f"{workload_str(workload)}  on {_short_target(target)}")
        lines.append(f"  trials {len(rs)}, valid {len(rs) - sum(errors.values())}"
                     + (", errors: " + ", ".join(f"{k} {v}" for k, v in sorted(errors.items())) if errors else ""))
        b = best.get(key)
        if b is None:
            lines.append("  no valid measurement")
            continue
        speed = f"{b.gflops:.1f} GFLOP/s" if b.flop else ""
        lines.append(f"  best   {b.cost * 1e3:.4f} ms {speed} (config {b.index}, trial "
                     f"{rs.index(b) + 1 if b in rs else '?'} of {len(rs)})")
        lines.append("  knobs  " + ", ".join(f"{k}={v}" for k, v in b.knobs.items()))
        toolchain = b.toolchain or {}
        lines.append(f"  tiletune {b.version or '?'}, llvmlite {toolchain.get('llvmlite', '?')}, "
                     f"LLVM {toolchain.get('llvm', '?')}")
    return "\n".join(lines)


def show_table(records: list[Record], limit: int = 20) -> str:
    """The fastest ``limit`` valid records of each problem, one per line."""
    out = []
    groups: dict[tuple, list[Record]] = {}
    for r in records:
        groups.setdefault(r.key, []).append(r)
    for key, rs in groups.items():
        ok = sorted((r for r in rs if r.result.ok), key=lambda r: r.cost)[:limit]
        if not ok:
            continue
        out.append(f"top {len(ok)} of {workload_str(key[0])}:")
        out.append(f"  {'index':>8s} {'ms':>10s} {'GFLOP/s':>9s}  knobs")
        for r in ok:
            out.append(f"  {r.index:8d} {r.cost * 1e3:10.4f} {r.gflops:9.1f}  "
                       + ", ".join(f"{k}={v}" for k, v in r.knobs.items()))
    return "\n".join(out)


def model_progress(log: str) -> list[tuple[int, float, float]]:
    """The model-tuning progress of ``log`` (``tiletune tune-model``'s sidecar ``LOG.progress.jsonl``):
    ``(total trials, seconds, estimated model latency in seconds)`` per batch once every task has a
    measurement (the warm-up's partial sums are left out); empty if there is none."""
    from .task_scheduler import read_progress
    return read_progress(log, complete_only=True)


LEGEND_LINES = 10          # more curves than this in the GFLOP/s panel: no legend


def _short(text: str, width: int = 48) -> str:
    """A legend label: a template task over a whole DAG (its JSON) would fill the figure."""
    return text if len(text) <= width else text[:width - 3] + "..."


def plot(logs: list[str], out: str, title: str | None = None, format: str | None = None) -> str:
    """Draw best-so-far GFLOP/s against trials for each log (one line per log and problem) to a PNG (or
    ``format``, default from ``out``'s extension); logs written by model tuning also get the estimated
    model latency against trials and against time."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("tiletune logs plot needs matplotlib: pip install 'tiletune[plots]'") from None
    progress = {path: model_progress(path) for path in logs}
    progress = {p: c for p, c in progress.items() if c}
    if progress:
        fig, (ax, ax_trials, ax_time) = plt.subplots(1, 3, figsize=(17, 4.2), dpi=120)
        for path, curve in progress.items():
            label = os.path.basename(path)
            ax_trials.plot([c[0] for c in curve], [c[2] * 1e3 for c in curve], label=label, linewidth=1.5)
            ax_time.plot([c[1] / 60 for c in curve], [c[2] * 1e3 for c in curve], label=label, linewidth=1.5)
        for a, xlabel in ((ax_trials, "trials (all tasks)"), (ax_time, "tuning time (min)")):
            a.set_xlabel(xlabel)
            a.set_ylabel("estimated model latency (ms)")
            a.set_title("model latency")
            a.grid(alpha=0.3)
            a.legend(fontsize=7)
    else:
        fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    lines = 0
    for path in logs:
        groups: dict[tuple, list[Record]] = {}
        for r in records_of(path):
            groups.setdefault(r.key, []).append(r)
        for key, rs in groups.items():
            label = os.path.basename(path) + ("" if len(groups) == 1 else f" {_short(workload_str(key[0]))}")
            curve = best_so_far(rs)
            ax.plot(range(1, len(curve) + 1), curve, label=label, linewidth=1.5)
            lines += 1
    ax.set_xlabel("trials")
    ax.set_ylabel("best GFLOP/s so far")
    ax.set_title(title or ("tuning progress" if lines <= LEGEND_LINES else f"tuning progress, {lines} problems"))
    ax.grid(alpha=0.3)
    if lines <= LEGEND_LINES:       # a model's dozens of tasks would bury the curves
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, format=format)
    plt.close(fig)
    return out


def error_name(code: int) -> str:
    return MeasureErrorNo(code).name


__all__ = ["best_so_far", "trials_to_reach", "summary", "show_table", "plot", "model_progress"]
