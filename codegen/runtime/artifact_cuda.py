"""The CUDA model artifact (:class:`~codegen.runtime.cuda.CUDAModelModule`; the skeleton is :mod:`.artifact`;
``codegen.load_model`` takes a directory holding ``model.cubin`` for one):

* ``model.cubin``    every kernel, compiled once by nvcc for the model's arch.
* ``model.cu``       the CUDA source (for reading; loading does not need it).
* ``graph.json``     the run list (:class:`~codegen.model.plan.RunList`) and each kernel's launch
                     (grid, block, shared bytes, signature, vector alignment).
* ``weights.npy``    the weights blob (``uint8``), uploaded once at the first run.
* ``manifest.json``  provenance (see :mod:`.artifact`) plus nvcc's version, the arch, the GPU it was
                     exported on (name, compute capability, driver; None without one) and ptxas's log.

Loading compiles nothing; it checks the files as every artifact's are, refuses a cubin for another
compute capability than the present GPU's (when one is visible) and names the file that is missing or
corrupt.
"""
from __future__ import annotations

import os

from ..artifact_schema import CUDA_KERNEL, OBJECT, STR, ListOf, graph_spec, manifest_spec, nullable
from ..model.plan import RunList
from ..model.plan_check import check_run_list
from .artifact import Artifact, ArtifactError, load_weights, parsed, register
from .cuda import CUDAModelModule


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


class CUDAArtifact(Artifact):
    kind = "cuda"
    graph_format = "tiletune.cuda_model/1"
    manifest_format = "tiletune.cuda_manifest/1"
    files = ("model.cubin", "model.cu", "graph.json", "weights.npy")
    manifest_schema = manifest_spec(files, {}, {"target": nullable(STR), "arch": STR, "gpu": OBJECT, "ptxas_log": STR,
                                                "nvcc": nullable(STR)})
    graph_schema = graph_spec({"arch": STR, "kernels": ListOf(CUDA_KERNEL)},
                              {"target": nullable(STR), "nvcc_options": ListOf(STR)})
    marker = "model.cubin"
    module_class = CUDAModelModule
    build_keys = ("tiletune", "nvcc")

    # -- writing -----------------------------------------------------------------------------------------------
    def prepare(self, m: CUDAModelModule) -> dict:
        """graph.json, once the cubin is compiled (it needs nvcc)."""
        _ = m.cubin                    # nvcc now (refused without it), before any file is written
        return {"format": self.graph_format, "name": m.meta.get("name", "model"), "target": m.meta.get("target"),
                "arch": m.arch, "nvcc_options": list(m.options),
                "kernels": [k.to_json() for k in m.kernels.values()], **m.run_list.to_json()}

    def write_code(self, m: CUDAModelModule, directory: str) -> None:
        with open(os.path.join(directory, "model.cubin"), "wb") as f:
            f.write(m.cubin)
        with open(os.path.join(directory, "model.cu"), "w") as f:
            f.write(m.source)

    def manifest_parts(self, m: CUDAModelModule) -> tuple[dict, dict]:
        return ({"target": m.meta.get("target"), "arch": m.arch, "gpu": gpu_info(),
                 "ptxas_log": m._binaries.get("cubin", (b"", ""))[1]}, {})

    # -- loading -----------------------------------------------------------------------------------------------
    def module(self, directory: str, manifest: dict, files: dict, graph: dict) -> CUDAModelModule:
        from ..model.cuda import CUDAKernel
        present = gpu_info()["compute_capability"]
        arch = graph["arch"]
        if present is not None and arch.startswith("sm_") and arch[3:].rstrip("a") != present.replace(".", ""):
            raise ArtifactError(f"load_model: {directory} holds a cubin for {arch}; this GPU is "
                                f"sm_{present.replace('.', '')} (rebuild with target=\"cuda -arch=...\")")
        run, kernels = parsed(directory, lambda: (RunList.from_json(graph),
                                                  {k["symbol"]: CUDAKernel.from_json(k) for k in graph["kernels"]}))
        where = f"load_model: {os.path.join(directory, 'graph.json')}"
        for i, step in enumerate(run.steps):     # each step's buffers are those its kernel was lowered for
            if step.symbol not in kernels or step.signature != kernels[step.symbol].buffers:
                raise ArtifactError(f"{where}: step {i} (kernel {step.kernel}) does not match the signature of "
                                    f"kernel {step.symbol!r}")
        check_run_list(run, where, ArtifactError)
        weights = load_weights(os.path.join(directory, "weights.npy"), files["weights.npy"], run)
        try:
            source = files["model.cu"].decode("utf-8")
        except UnicodeDecodeError as e:
            raise ArtifactError(f"load_model: {os.path.join(directory, 'model.cu')} is corrupt (not UTF-8: {e})") from None
        return CUDAModelModule(run, weights, kernels, source, arch, tuple(graph.get("nvcc_options", ())),
                               meta=self.loaded_meta(directory, manifest, graph), cubin=bytes(files["model.cubin"]),
                               ptxas_log=manifest.get("ptxas_log", ""))


CUDA_ARTIFACT = register(CUDAArtifact())

__all__ = ["CUDA_ARTIFACT", "CUDAArtifact", "gpu_info"]
