"""``CUDAModelModule.export_library(directory)`` and loading it (``codegen.load_model`` dispatches here
when the directory holds ``model.cubin``).

* ``model.cubin``    every kernel, compiled once by nvcc for the model's arch.
* ``model.cu``       the CUDA source (for reading; loading does not need it).
* ``graph.json``     the run list (:class:`~codegen.model_plan.RunList`) and each kernel's launch
                     (grid, block, shared bytes, signature, vector alignment).
* ``weights.npy``    the weights blob (``uint8``), uploaded once at the first run.
* ``manifest.json``  provenance: tiletune, nvcc version, arch, the GPU it was exported on (name,
                     compute capability, driver; None without one), source model, shape bindings,
                     passes, kernels with their fused nodes and schedules, memory plan, compile time,
                     sha256 and size of every other file.

Loading compiles nothing; it checks the files as :mod:`codegen.model_artifact` does (regular files
inside the directory, sizes and digests, JSON depth, the schema), refuses a cubin for another compute
capability than the present GPU's (when one is visible) and names the file that is missing or corrupt.
"""
from __future__ import annotations

import json
import os

import numpy as np

from .artifact_schema import CUDA_KERNEL, OBJECT, STR, ListOf, graph_spec, manifest_spec, nullable
from .export import build_info
from .model_artifact import ArtifactError, file_entries, load_weights, read_files, read_json
from .model_plan import RunList
from .model_plan_check import check_run_list

GRAPH_FORMAT = "tiletune.cuda_model/1"
MANIFEST_FORMAT = "tiletune.cuda_manifest/1"
FILES = ("model.cubin", "model.cu", "graph.json", "weights.npy")
MANIFEST_SCHEMA = manifest_spec(FILES, {}, {"target": nullable(STR), "arch": STR, "gpu": OBJECT, "ptxas_log": STR,
                                            "nvcc": nullable(STR)})
GRAPH_SCHEMA = graph_spec({"arch": STR, "kernels": ListOf(CUDA_KERNEL)},
                          {"target": nullable(STR), "nvcc_options": ListOf(STR)})


def gpu_info() -> dict:
    """Name, compute capability and driver version of GPU 0 (None each without pycuda or a GPU)."""
    info = {"name": None, "compute_capability": None, "driver": None}
    try:
        import pycuda.driver as drv
        drv.init()
        if drv.Device.count():
            dev = drv.Device(int(os.environ.get("TILETUNE_CUDA_DEVICE", "0")))
            major, minor = dev.compute_capability()
            v = drv.get_driver_version()
            info = {"name": dev.name(), "compute_capability": f"{major}.{minor}",
                    "driver": f"{v // 1000}.{(v % 1000) // 10}"}
    except Exception:  # noqa: BLE001 - no pycuda, no driver, no device
        pass
    return info


def export_cuda_model(m, directory: str) -> None:
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    cubin = m.cubin
    graph = {"format": GRAPH_FORMAT, "name": m.meta.get("name", "model"), "target": m.meta.get("target"),
             "arch": m.arch, "nvcc_options": list(m.options),
             "kernels": [k.to_json() for k in m.kernels.values()], **m.run_list.to_json()}
    with open(os.path.join(directory, "model.cubin"), "wb") as f:
        f.write(cubin)
    with open(os.path.join(directory, "model.cu"), "w") as f:
        f.write(m.source)
    with open(os.path.join(directory, "graph.json"), "w") as f:
        json.dump(graph, f, indent=1)
    np.save(os.path.join(directory, "weights.npy"), np.asarray(m.weights), allow_pickle=False)
    run = m.run_list
    source = m.meta.get("source")
    manifest = {
        "format": MANIFEST_FORMAT, **m.meta.get("build", build_info("cuda")),
        "target": m.meta.get("target"), "arch": m.arch, "gpu": gpu_info(),
        "ptxas_log": m._binaries.get("cubin", (b"", ""))[1],
        "source": source.to_json() if source is not None else None,
        "shape_bindings": {n: list(s) for n, _, s in run.inputs},
        "passes": m.meta.get("passes", []),
        "kernels": [{"kernel": s.kernel, "symbol": s.symbol, "native": True, "nodes": s.nodes, "schedule": s.schedule}
                    for s in run.steps],
        "fallback": [],
        "memory_plan": {"workspace_bytes": run.memory.peak, "naive_bytes": run.memory.naive},
        "weights_bytes": run.weights_bytes, "compile_seconds": m.meta.get("compile_seconds"),
        "files": file_entries(directory, FILES),
    }
    with open(os.path.join(directory, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


def is_cuda_artifact(directory: str) -> bool:
    return os.path.lexists(os.path.join(os.fspath(directory), "model.cubin"))


def load_cuda_model(directory: str):
    """A :class:`~codegen.model_cuda_module.CUDAModelModule` from ``export_library``'s files (no nvcc)."""
    from .model_cuda import CUDAKernel
    from .model_cuda_module import CUDAModelModule
    directory = os.fspath(directory)
    manifest = read_json(directory, "manifest.json", MANIFEST_FORMAT, MANIFEST_SCHEMA)
    files = read_files(directory, manifest, FILES)
    graph = read_json(directory, "graph.json", GRAPH_FORMAT, GRAPH_SCHEMA, files["graph.json"])
    present = gpu_info()["compute_capability"]
    arch = graph["arch"]
    if present is not None and arch.startswith("sm_") and arch[3:].rstrip("a") != present.replace(".", ""):
        raise ArtifactError(f"load_model: {directory} holds a cubin for {arch}; this GPU is sm_{present.replace('.', '')} "
                            "(rebuild with target=\"cuda -arch=...\")")
    try:
        run = RunList.from_json(graph)
        kernels = {k["symbol"]: CUDAKernel.from_json(k) for k in graph["kernels"]}
    except (KeyError, TypeError, ValueError, IndexError) as e:      # the schema let something through
        raise ArtifactError(f"load_model: {os.path.join(directory, 'graph.json')} is corrupt: {e!r}") from None
    where = f"load_model: {os.path.join(directory, 'graph.json')}"
    for i, step in enumerate(run.steps):     # each step's buffers are those its kernel was lowered for
        if step.symbol not in kernels or step.signature != kernels[step.symbol].buffers:
            raise ArtifactError(f"{where}: step {i} (kernel {step.kernel}) does not match the signature of "
                                f"kernel {step.symbol!r}")
    check_run_list(run, where, ArtifactError)
    weights = load_weights(os.path.join(directory, "weights.npy"), files["weights.npy"], run)
    cubin = bytes(files["model.cubin"])
    try:
        source = files["model.cu"].decode("utf-8")
    except UnicodeDecodeError as e:
        raise ArtifactError(f"load_model: {os.path.join(directory, 'model.cu')} is corrupt (not UTF-8: {e})") from None
    meta = {"name": graph.get("name", "model"), "target": graph.get("target"), "manifest": manifest,
            "passes": manifest.get("passes", []), "compile_seconds": manifest.get("compile_seconds"),
            "build": {k: manifest.get(k) for k in ("tiletune", "nvcc")}, "source": None, "loaded_from": directory}
    return CUDAModelModule(run, weights, kernels, source, arch, tuple(graph.get("nvcc_options", ())), meta=meta,
                           cubin=cubin, ptxas_log=manifest.get("ptxas_log", ""))


__all__ = ["export_cuda_model", "gpu_info", "is_cuda_artifact", "load_cuda_model"]
