"""The CPU model artifact (:class:`~codegen.runtime.cpu.ModelModule`; the skeleton is :mod:`.artifact`):

* ``model.so``       every kernel and the run entry (:mod:`codegen.model.entries`), linked by the
                     system C compiler (``$CC`` or ``cc``) as :mod:`codegen.export` links kernels.
* ``graph.json``     the run list: inputs, outputs, steps with their symbols and planned places, index
                     checks, output copies, the control-flow program, the memory plan and the weight
                     offsets; plus the entry symbol, and each reference-fallback step's body graph
                     (:mod:`.fallback`).
* ``weights.npy``    the weights blob.
* ``model.h``        the C interface (:mod:`.header`).
* ``manifest.json``  provenance (see :mod:`.artifact`) plus the target's triple and CPU features, and
                     the parity against a peer runtime.

Loading dlopens the shared object the manifest digests; an artifact built for CPU features (or an
architecture) this host lacks is refused.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import tempfile

import numpy as np

from tensorir import dtype as dt

from .. import jit
from ..artifact_schema import BOOL, COUNT, STR, ListOf, Record, graph_spec, manifest_spec, nullable
from ..export import _dlopen, _link
from ..model.entries import ABI, ABI_VERSION, RUN
from ..model.plan import RunList
from ..model.plan_check import check_run_list
from ..safe_files import resolve_inside
from ..runnable import lacking, lacks_message
from ..target import parse
from .artifact import Artifact, ArtifactError, load_weights, parsed, register, safe_read
from .cpu import ModelModule
from .fallback import kernel_from_json, kernel_to_json
from .header import model_header
from .profile import memory


def _parity(m: ModelModule, seed: int = 0) -> dict | None:
    """Largest absolute and relative error of ``m`` against onnxruntime (else ``onnx.reference``) on
    seeded random inputs; None when the graph did not come from an ONNX model; ``{"not_run": why}`` where this
    host may not run ``m``'s code (a CPU feature it lacks)."""
    source = m.meta.get("source")
    model = getattr(source, "model", None)
    if model is None:
        return None
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, dtype, shape in m.run_list.inputs:
        kind = "f" if dt.is_float(dtype) else np.dtype(dtype).kind
        feeds[name] = (rng.standard_normal(shape).astype(dtype) if kind == "f" else
                       rng.integers(0, 2, shape).astype(dtype) if kind == "b" else np.zeros(shape, dtype))
    try:
        import onnxruntime as ort
        peer = f"onnxruntime {ort.__version__}"
        run = lambda: ort.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"]).run(None, feeds)
    except ImportError:
        import onnx
        from onnx.reference import ReferenceEvaluator
        peer = f"onnx.reference {onnx.__version__}"
        run = lambda: ReferenceEvaluator(model).run(None, feeds)
    if why := m.not_runnable():         # compiled for another CPU: never run here
        return {"peer": peer, "seed": seed, "not_run": why}
    try:
        want = run()
    except Exception as e:  # noqa: BLE001  (the peer cannot run the model: recorded, not fatal)
        m.set_input(**feeds)
        return {"peer": peer, "seed": seed, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
    got = m(**feeds)
    outs = []
    for name, g, w in zip(m.output_names, got, want):
        w = np.asarray(w)
        if g.shape != w.shape:       # a host tail's output: another number of boxes than the peer's
            outs.append({"output": name, "shape": list(g.shape), "peer_shape": list(w.shape)})
            continue
        err = np.abs(g.astype(np.float64) - w.astype(np.float64))
        scale = float(np.abs(w).max()) if w.size else 0.0
        outs.append({"output": name, "max_abs_error": float(err.max()) if err.size else 0.0,
                     "max_rel_error": float(err.max()) / scale if err.size and scale > 0 else 0.0})
    return {"peer": peer, "seed": seed, "inputs": "standard normal (floats), zeros (integers)",
            "max_abs_error": max((o.get("max_abs_error", 0.0) for o in outs), default=0.0),
            "max_rel_error": max((o.get("max_rel_error", 0.0) for o in outs), default=0.0), "outputs": outs}


def check_cpu(manifest: dict, where: str) -> None:
    """Refuse an artifact compiled for CPU features (or another architecture) this host lacks."""
    triple = manifest.get("triple")
    if triple and triple.split("-")[0] != jit.triple().split("-")[0]:
        raise ArtifactError(f"load_model: {where} was built for {triple}; this host is {jit.triple()}")
    missing = lacking(manifest.get("cpu_features", ()))
    if missing:
        kernels = [(k["kernel"], (k.get("schedule") or {}).get("isa", ())) for k in manifest.get("kernels", ())]
        raise ArtifactError(lacks_message(f"load_model: {where}", missing, manifest.get("cpu"), kernels)
                            + "; rebuild it here or build with target=\"llvm -mcpu=...\" for the older CPU")


class CPUArtifact(Artifact):
    graph_format = "tiletune.model/1"
    manifest_format = "tiletune.manifest/1"
    files = ("model.so", "graph.json", "weights.npy", "model.h")
    manifest_schema = manifest_spec(files, {"target": STR, "triple": STR, "cpu_features": ListOf(STR)},
                                    {"cpu": STR, "llvmlite": nullable(STR), "llvm": nullable(STR)})
    graph_schema = graph_spec({"target": STR}, {"copies_in_entry": BOOL, "fallback_callback": BOOL,
                                                "entries": ListOf(Record({"symbol": STR, "steps": ListOf(COUNT)}))})
    module_class = ModelModule
    build_keys = ("tiletune", "llvmlite", "llvm")

    # -- writing -----------------------------------------------------------------------------------------------
    def prepare(self, m: ModelModule) -> dict:
        """graph.json; a loaded model (no IR) or a fallback body that cannot be stored is refused."""
        if m._ir is None:
            raise ValueError("export_library: this model was loaded from an artifact; copy its directory instead")
        run = m.run_list
        d = {"format": self.graph_format, "name": m.meta.get("name", "model"), "target": m.meta["target"],
             "entries": [{"symbol": RUN, "steps": [i for i, s in enumerate(run.steps) if s.native]}],
             "fallback_callback": bool(run.fallback_steps), **run.to_json()}
        for step, js in zip(m.run_list.steps, d["steps"]):
            if not step.native:      # the reference fallback runs its body graph
                js["body"] = kernel_to_json(step.body)
        return d

    def write_code(self, m: ModelModule, directory: str) -> None:
        with tempfile.TemporaryDirectory(prefix="tiletune_model_") as tmp:
            obj = os.path.join(tmp, "model.o")
            with open(obj, "wb") as f:
                f.write(jit.emit_object(m._ir, parse(m.meta["target"])))
            _link(obj, os.path.join(tmp, "model.so"), m.run_list.threaded)
            shutil.move(os.path.join(tmp, "model.so"), os.path.join(directory, "model.so"))
        with open(os.path.join(directory, "model.h"), "w") as f:
            f.write(model_header(m.run_list, m.meta.get("name", "model"), m.tail))

    def manifest_parts(self, m: ModelModule) -> tuple[dict, dict]:
        parity = _parity(m)
        if m.last_profile is None and m.run_list.fallback_steps and m.not_runnable() is None and \
                len(m._thread_state().set) == m.get_num_inputs():
            m.profile(repeat=5, quiet=True)      # the fallback steps' share of run time (inputs from _parity)
        tgt = parse(m.meta["target"])
        return ({"target": str(tgt), "triple": jit.triple(), "cpu": tgt.mcpu, "cpu_features": sorted(tgt.features)},
                {"parity": parity})

    def memory_plan(self, run: RunList) -> dict:
        return memory(run)          # one kernel thread; stats() counts the module's

    # -- loading -----------------------------------------------------------------------------------------------
    def check_host(self, manifest: dict, directory: str) -> None:
        check_cpu(manifest, directory)

    def module(self, directory: str, manifest: dict, files: dict, graph: dict) -> ModelModule:
        where = f"load_model: {os.path.join(directory, 'graph.json')}"
        run = parsed(directory, lambda: RunList.from_json(graph))
        weights = load_weights(os.path.join(directory, "weights.npy"), files["weights.npy"], run)
        so = os.path.join(directory, "model.so")
        try:
            lib = _dlopen(safe_read(resolve_inside, directory, "model.so"))    # the file whose digest was checked
        except OSError as e:
            raise ArtifactError(f"load_model: {so} does not load: {e}") from None

        def address(symbol: str) -> int:
            try:
                return ctypes.cast(lib[symbol], ctypes.c_void_p).value
            except AttributeError:
                raise ArtifactError(f"load_model: {so} has no symbol {symbol!r} (graph.json names it)") from None

        check_run_list(run, where, ArtifactError, address)
        if (run.program is not None or run.fallback_steps) and not _runs_whole_program(lib):
            raise ArtifactError(f"load_model: {so} runs its control flow or fallback steps per segment (exported by "
                                "an earlier tiletune); export the model again")
        for step, js in zip(run.steps, graph["steps"]):
            if not step.native:
                try:
                    step.body = kernel_from_json(js["body"])
                except (KeyError, TypeError, ValueError, IndexError) as e:
                    raise ArtifactError(f"{where} is corrupt: fallback kernel {step.kernel}: {e!r}") from None
        return ModelModule(run, weights, address, keepalive=lib, meta=self.loaded_meta(directory, manifest, graph))


def _runs_whole_program(lib) -> bool:
    """Whether the library's run entry runs the whole run list (:data:`~codegen.model.entries.ABI`)."""
    try:
        return ctypes.c_int32.in_dll(lib, ABI).value == ABI_VERSION
    except ValueError:
        return False


CPU_ARTIFACT = register(CPUArtifact())

__all__ = ["CPU_ARTIFACT", "CPUArtifact", "check_cpu"]
