"""Template-free auto-scheduling on the GPU: each kernel tuned with the GPU sketches, then timed beside
its torch peer (cuBLAS / cuDNN, TF32 off) in one run.

Kernels (issue 12): GEMM 1024^3 (torch.matmul: cuBLAS), conv2d 1x64x56x56 by 64 filters 3x3 pad 1
(torch conv2d: cuDNN), dense 128x768 by 3072 + bias + ReLU (torch linear + relu), batch matmul
12x128x64 by 12x128x64^T (torch.bmm), softmax 8192x1000 and layer norm 512x768 (torch; the GPU
sketch's default is one block per row, the reductions across its threads, one kernel; the search also
tries one thread per row).  For each: ``--trials``
measured trials (``LocalBuilder`` compiles with nvcc in parallel, ``LocalRunner`` checks each
candidate against the CPU-built reference and times it with CUDA events; records in ``--log-dir``,
so a rerun resumes), the best-so-far curve, then the untuned default point, the best record and the
peer checked against float64 on random data (outputs poisoned with NaN) and timed in interleaved
rounds with CUDA events; the ratio peer time / ours (> 1: ours is faster).

    python benchmarks/auto_schedule_cuda.py [--trials 200] [--only gemm,conv2d] [--log-dir DIR]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import autotune
import codegen
import tensorir as te
from autotune import auto_scheduler
from tensorir import topi


def gemm():
    A = te.placeholder((1024, 1024), name="A")
    B = te.placeholder((1024, 1024), name="B")
    k = te.reduce_axis((0, 1024), name="k")
    C = te.compute((1024, 1024), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C], lambda torch: (lambda a, b: torch.matmul(a, b)), "cuBLAS"


def conv2d():
    X = te.placeholder((1, 64, 56, 56), name="X")
    W = te.placeholder((64, 64, 3, 3), name="W")
    return [X, W, topi.nn.conv2d_nchw(X, W, 1, 1, 1)], \
        lambda torch: (lambda x, w: torch.nn.functional.conv2d(x, w, padding=1)), "cuDNN"


def dense():
    X = te.placeholder((128, 768), name="X")
    W = te.placeholder((3072, 768), name="W")
    b = te.placeholder((3072,), name="b")
    out = topi.nn.relu(topi.add(topi.nn.dense(X, W), b))
    return [X, W, b, out], lambda torch: (lambda x, w, bias: torch.relu(torch.nn.functional.linear(x, w, bias))), \
        "cuBLAS+relu"


def batch_matmul():
    A = te.placeholder((12, 128, 64), name="A")
    B = te.placeholder((12, 128, 64), name="B")
    return [A, B, topi.nn.batch_matmul(A, B)], lambda torch: (lambda a, b: torch.bmm(a, b.transpose(1, 2))), "cuBLAS"


def softmax():
    X = te.placeholder((8192, 1000), name="X")
    return [X, topi.nn.softmax(X)], lambda torch: (lambda x: torch.softmax(x, dim=1)), "torch"


def layer_norm():
    X = te.placeholder((512, 768), name="X")
    g = te.placeholder((768,), name="g")
    b = te.placeholder((768,), name="b")
    return [X, g, b, topi.nn.layer_norm(X, g, b, axis=[1])], \
        lambda torch: (lambda x, gamma, beta: torch.nn.functional.layer_norm(x, (768,), gamma, beta, 1e-5)), "torch"


KERNELS = {"gemm": gemm, "conv2d": conv2d, "dense": dense, "batch_matmul": batch_matmul, "softmax": softmax,
           "layer_norm": layer_norm}


def tune(name: str, tensors, trials: int, log: str, parallel: int):
    task = auto_scheduler.SearchTask(compute_dag=auto_scheduler.ComputeDAG(tensors), workload_key=name,
                                     target="cuda")
    if trials <= 0:
        return task, None, 0.0
    t0 = time.perf_counter()
    search = task.tune(auto_scheduler.TuningOptions(
        num_measure_trials=trials, num_measures_per_round=16, verbose=1,
        builder=autotune.LocalBuilder(n_parallel=parallel, timeout=120),
        runner=autotune.LocalRunner(number=10, repeat=3, min_repeat_ms=5, timeout=30),
        measure_callbacks=[auto_scheduler.RecordToFile(log)]))
    return task, search, time.perf_counter() - t0


def run(name: str, trials: int, log_dir: str, rounds: int, parallel: int) -> dict:
    from cuda_timing import alternate, event_seconds, rel_error, torch_fp32
    torch = torch_fp32()
    if not torch.cuda.is_available():
        raise SystemExit("auto_schedule_cuda.py: torch sees no CUDA device; run it on the GPU host")
    tensors, peer_of, peer_name = KERNELS[name]()
    log = os.path.join(log_dir, f"{name}.jsonl")
    task, search, wall = tune(name, tensors, trials, log, parallel)
    flop = task.flop
    print(f"\n== {name} ({flop / 1e9:.2f} GFLOP)")
    if search is not None:
        s = search.seconds
        print(f"   {search.trials_done} trials in the log, tuning {wall:.0f} s: search {s['search']:.0f} s, cost model "
              f"{s['model']:.0f} s, build+measure {s['measure']:.0f} s; isl refused {search.isl_refused}, invalid "
              f"points {search.invalid_points}")
        curve = [f"{n}:{c * 1e6:.1f}" for n, c in search.history[::max(1, len(search.history) // 10)]]
        if search.history:
            curve.append(f"{search.history[-1][0]}:{search.history[-1][1] * 1e6:.1f}")
        print(f"   best-so-far (trial:us, as measured by the runner): {' '.join(curve)}")
    shapes = [tuple(int(d.value) for d in t.shape) for t in tensors]
    n_in = sum(isinstance(t.op, te.PlaceholderOp) for t in tensors)
    gen = torch.Generator(device="cuda").manual_seed(0)
    ins = [torch.rand(sh, device="cuda", generator=gen) * 2 - 1 for sh in shapes[:n_in]]
    peer = peer_of(torch)
    want = peer(*[x.double() for x in ins])
    schedules = {"default": lambda: auto_scheduler.default_schedule(tensors, target="cuda")}
    if trials > 0:
        schedules["tuned"] = lambda: task.apply_best(log)
    fns = {}
    for label, make in schedules.items():
        try:
            s, args = make()
            t0 = time.perf_counter()
            mod = codegen.build(s, args, target="cuda", name=f"{name}_{label}")
            build_s = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001 - reported, the others still run
            print(f"   {label}: not built ({type(e).__name__}: {str(e)[:300]})")
            continue
        out = torch.full(shapes[-1], float("nan"), device="cuda")
        mod(*ins, out)
        err = rel_error(out, want)
        if not err < 1e-4:
            print(f"   {label}: WRONG ANSWER (relative error {err:.3g}); not timed")
            continue
        launch = mod.launcher(*ins, out)
        t = event_seconds(launch, 3)
        print(f"   {label}: block {mod.launch.block}, registers {mod.resource_usage['registers']}, shared "
              f"{mod.resource_usage['shared_bytes']} B, build {build_s:.1f} s, first timing {t * 1e6:.1f} us")
        fns[label] = launch
    fns[peer_name] = lambda: peer(*ins)
    times = alternate(fns, rounds=rounds, number=20)
    for label, t in times.items():
        extra = f"  {peer_name}/{label} = {times[peer_name] / t:.2f}x" if label != peer_name else ""
        print(f"   {label:>12}: {t * 1e6:10.1f} us  {flop / t / 1e12:7.2f} TFLOP/s{extra}")
    return {"times": times, "peer": peer_name}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=200, help="trials in each log when done (0: default points only)")
    p.add_argument("--only", default=",".join(KERNELS))
    p.add_argument("--log-dir", default="auto_schedule_cuda_logs")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--parallel", type=int, default=max(1, (os.cpu_count() or 2) - 2), help="nvcc builds at once")
    args = p.parse_args()
    try:
        import torch  # noqa: F401 - the peers and the timing
    except ImportError:
        raise SystemExit("auto_schedule_cuda.py needs torch with CUDA (the cuBLAS / cuDNN peers and "
                         "CUDA events)") from None
    os.makedirs(args.log_dir, exist_ok=True)
    summary = {}
    for name in args.only.split(","):
        summary[name] = run(name, args.trials, args.log_dir, args.rounds, args.parallel)
    print("\nratio peer time / ours (> 1: the auto-scheduled kernel is faster)")
    for name, r in summary.items():
        t, peer = r["times"], r["peer"]
        cells = [f"{k} {t[peer] / t[k]:.2f}x" for k in ("tuned", "default") if k in t]
        print(f"  {name:>13} vs {peer:<12}: " + (", ".join(cells) or "nothing built"))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
