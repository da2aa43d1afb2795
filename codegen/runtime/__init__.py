"""The model runtime: compiled models as modules (TVM's graph-executor interface) and their artifacts.

* :mod:`.base`         ``ModelModuleBase``: ``set_input`` / ``run`` / ``get_output``, their checks, the
                       threading contract, ``profile``, ``stats``, ``export_library``.
* :mod:`.cpu`          ``ModelModule`` (``GraphModule``): buffers in host memory, one native call a run.
* :mod:`.cuda`         ``CUDAModelModule``: device buffers per thread, streams, CUDA graphs
                       (:mod:`.cuda_device` holds the GPU state).
* :mod:`.profile`      per-kernel times and the memory summary.
* :mod:`.fallback`     reference-fallback steps: run through the evaluator, stored as JSON.
* :mod:`.artifact`     the artifact skeleton (write, check, load; ``load_model``), with its per-target parts
                       :mod:`.artifact_cpu` (``model.so``, ``model.h`` from :mod:`.header`) and
                       :mod:`.artifact_cuda` (``model.cubin``).

The trust layer under the artifacts is :mod:`codegen.artifact_schema` and :mod:`codegen.safe_files`.
"""
from __future__ import annotations

from .artifact import ArtifactError, load_model, read_manifest
from .artifact_cpu import CPU_ARTIFACT
from .artifact_cuda import CUDA_ARTIFACT
from .base import ModelModuleBase
from .cpu import GraphModule, ModelModule
from .cuda import CUDAModelModule

__all__ = ["ArtifactError", "CPU_ARTIFACT", "CUDA_ARTIFACT", "CUDAModelModule", "GraphModule", "ModelModule",
           "ModelModuleBase", "load_model", "read_manifest"]
