"""Candidate default tiles for the convolutions of a model, measured on this GPU beside the CUDA rule's.

For each convolution kernel of the model (``conv2d_kernel_cuda`` tasks of ``autotune.extract_tasks``),
the template's config with the default rule's tiles (``rule_tiles``) and each variant below are built
and measured like tuning trials (checked against the CPU, CUDA events; ``GridSearchTuner`` over exactly
those configs, into a scratch log), and the table of times is printed with the fastest per kernel.
This is how ``small_image_tiles`` (tensorir/graph/schedules/conv2d_direct.py) was chosen.

    python benchmarks/conv_defaults_cuda.py [--model resnet18] [--batch 32] [--log /tmp/conv_defaults.jsonl]
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def variants(N: int, F: int, OH: int, OW: int, C: int) -> dict[str, dict]:
    """Knob changes by name: ``rule`` (the default rule's tiles) and column tiles (each thread a column
    of up to 8 rows for 4 filters, threads over 8 filters x up to 16 columns) with variations."""
    from tensorir.graph.schedules.conv2d_direct import rule_tiles
    from tensorir.graph.schedules.helpers import largest_divisor
    rows, tx = largest_divisor(OH, 8), largest_divisor(OW, 16)
    cols = {"tile_f": [-1, 2, 8, 2], "tile_y": [-1, 1, 1, rows], "tile_x": [-1, 1, tx, 1],
            "tile_rc": [-1, largest_divisor(C, 2)], "double_buffer": True}
    return {"rule": {**rule_tiles(N, F, OH, OW, C), "double_buffer": False}, "cols": cols,
            "cols f4v": {**cols, "tile_f": [-1, 4, 8, 1]},
            "cols f64": {**cols, "tile_f": [-1, 2, 16, 2]},
            "cols rc4": {**cols, "tile_rc": [-1, largest_divisor(C, 4)]},
            "cols 4rows": {**cols, "tile_y": [-1, 1, 1, largest_divisor(OH, 4)]},
            "cols 2ty": {**cols, "tile_y": [-1, 1, 2, rows]} if OH % (2 * rows) == 0 else None,
            "32 threads": {**cols, "tile_f": [-1, 4, 8, 1], "tile_y": [-1, 2, 1, rows // 2],
                           "tile_x": [-1, 1, largest_divisor(OW, 4), 1]} if rows % 2 == 0 else None}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet18", choices=["resnet18"])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--log", default="/tmp/conv_defaults.jsonl", help="scratch log of the measurements")
    p.add_argument("--builders", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    args = p.parse_args()
    import autotune
    from autotune.kernel_templates import KernelTemplateTask
    from autotune.record import load_records
    from tensorir.schedule.space import FallbackConfig
    from autotune.tuner import GridSearchTuner
    from tensorir import graph
    from tensorir.graph import testing
    g, params = graph.from_onnx(testing.resnet18(batch=args.batch))
    tasks, weights = autotune.extract_tasks(g, params, target="cuda")
    measure = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=args.builders, timeout=60),
                                      runner=autotune.LocalRunner(number=10, repeat=3, min_repeat_ms=5, timeout=20))
    table = []
    for t, w in zip(tasks, weights):
        if not isinstance(t, KernelTemplateTask):
            continue
        out = t.compute_dag.tensors[-1]
        N, F, OH, OW = (int(d) for d in out.shape)
        C = int(next(x for x in t.compute_dag.tensors if len(x.shape) == 4 and int(x.shape[0]) == F).shape[1])
        cfg = FallbackConfig()
        t.instantiate(cfg)
        names, indices = [], []
        for name, change in variants(N, F, OH, OW, C).items():
            if change is None:
                continue
            knobs = {**cfg.knobs(), **change}
            try:
                i = t.config_space.index_from_values(knobs)
            except (ValueError, KeyError) as e:
                print(f"  {t.kernel_name} {name}: not in the space ({e})")
                continue
            names.append(name)
            indices.append(i)
        tuner = GridSearchTuner(t, indices=indices)
        tuner.batch_size = len(indices)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tuner.tune(n_trial=len(indices), measure_option=measure, callbacks=[autotune.callback.log_to_file(args.log)])
        got = {r.index: r for r in load_records(args.log) if r.key == (t.workload, t.target)}
        times = {n: (got[i].cost * 1e6 if i in got and got[i].result.ok else None) for n, i in zip(names, indices)}
        errors = {n: got[i].result.error_msg.splitlines()[0][:80] for n, i in zip(names, indices)
                  if i in got and not got[i].result.ok}
        table.append((f"{t.kernel_name} x{w}: {N}x{C}x{OH}x{OW} -> {F}", times))
        print(table[-1][0], {n: (round(v, 1) if v else None) for n, v in times.items()}, errors or "", flush=True)
    order = list(variants(1, 64, 8, 8, 8))
    names = sorted({n for _, times in table for n in times}, key=order.index)
    print("\n" + f"{'kernel':58s}" + "".join(f"{n:>11s}" for n in names) + "   fastest   (us)")
    for label, times in table:
        ok = {n: v for n, v in times.items() if v}
        print(f"{label:58s}" + "".join(f"{times[n]:11.1f}" if times.get(n) else f"{'-':>11s}" for n in names)
              + f"   {min(ok, key=ok.get) if ok else '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
