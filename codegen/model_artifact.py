"""``ModelModule.export_library(directory)`` and ``codegen.load_model(directory)``.

The artifact directory:

* ``model.so``       every kernel and the run entries (:mod:`codegen.model_codegen`), linked by the
                     system C compiler (``$CC`` or ``cc``) as :mod:`codegen.export` links kernels.
* ``graph.json``     the run list (:class:`~codegen.model_plan.RunList`): inputs, outputs, steps with
                     their symbols and planned places, index checks, output copies, the memory plan and
                     the weight offsets; plus the entry symbols, and each reference-fallback step's body
                     graph (:mod:`codegen.model_fallback`).
* ``weights.npy``    one ``uint8`` array: the weights blob laid out as planned (loads with
                     ``allow_pickle=False``; its data starts after the ``.npy`` header).
* ``model.h``        the C interface (:mod:`codegen.model_header`).
* ``manifest.json``  provenance: versions, target and CPU features, source model (sha256, opset,
                     producer), shape bindings, passes, kernels with their fused nodes and schedule
                     origin, fallback steps, memory plan, compile time, parity against a peer runtime,
                     and the sha256 of every other file.

Loading compiles nothing (dlopen, json, ``np.load``); it refuses an artifact built for CPU features
this host lacks, and names the file that is missing or corrupt.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import tempfile

import numpy as np

from . import jit
from .export import _dlopen, _link, build_info
from .model_codegen import entry_name
from .model_fallback import kernel_from_json, kernel_to_json
from .model_header import model_header
from .model_module import ModelModule
from .model_plan import RunList
from .model_plan_check import check_run_list
from .target import host, parse

GRAPH_FORMAT = "tiletune.model/1"
MANIFEST_FORMAT = "tiletune.manifest/1"
FILES = ("model.so", "graph.json", "weights.npy", "model.h")


class ArtifactError(ValueError):
    """A model artifact that cannot be loaded here (missing or corrupt file, CPU features, format)."""


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _graph_json(m: ModelModule) -> dict:
    segments = m.run_list.segments()
    d = {"format": GRAPH_FORMAT, "name": m.meta.get("name", "model"), "target": m.meta["target"],
         "entries": [{"symbol": entry_name(k, len(segments)), "steps": seg} for k, seg in enumerate(segments)],
         "copies_in_entry": m.run_list.copies_in_entry, **m.run_list.to_json()}
    for step, js in zip(m.run_list.steps, d["steps"]):
        if not step.native:      # the reference fallback runs its body graph
            js["body"] = kernel_to_json(step.body)
    return d


def _parity(m: ModelModule, seed: int = 0) -> dict | None:
    """Largest absolute and relative error of ``m`` against onnxruntime (else ``onnx.reference``) on
    seeded random inputs; None when the graph did not come from an ONNX model."""
    source = m.meta.get("source")
    model = getattr(source, "model", None)
    if model is None:
        return None
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, dtype, shape in m.run_list.inputs:
        kind = np.dtype(dtype).kind
        feeds[name] = (rng.standard_normal(shape).astype(dtype) if kind == "f" else
                       rng.integers(0, 2, shape).astype(dtype) if kind == "b" else np.zeros(shape, dtype))
    try:
        import onnxruntime as ort
        peer = f"onnxruntime {ort.__version__}"
        run = lambda: ort.InferenceSession(model.SerializeToString(),  # noqa: E731
                                           providers=["CPUExecutionProvider"]).run(None, feeds)
    except ImportError:
        import onnx
        from onnx.reference import ReferenceEvaluator
        peer = f"onnx.reference {onnx.__version__}"
        run = lambda: ReferenceEvaluator(model).run(None, feeds)  # noqa: E731
    try:
        want = run()
    except Exception as e:  # noqa: BLE001  (the peer cannot run the model: recorded, not fatal)
        m.set_input(**feeds)
        return {"peer": peer, "seed": seed, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
    got = m(**feeds)
    outs = []
    for name, g, w in zip(m.output_names, got, want):
        w = np.asarray(w)
        err = np.abs(g.astype(np.float64) - w.astype(np.float64))
        scale = float(np.abs(w).max()) if w.size else 0.0
        outs.append({"output": name, "max_abs_error": float(err.max()) if err.size else 0.0,
                     "max_rel_error": float(err.max()) / scale if err.size and scale > 0 else 0.0})
    return {"peer": peer, "seed": seed, "inputs": "standard normal (floats), zeros (integers)",
            "max_abs_error": max((o["max_abs_error"] for o in outs), default=0.0),
            "max_rel_error": max((o["max_rel_error"] for o in outs), default=0.0), "outputs": outs}


def _needs_profile(m: ModelModule) -> bool:
    return m.last_profile is None and not m.run_list.copies_in_entry and len(m._set) == len(m._inputs)


def _manifest(m: ModelModule, files: dict) -> dict:
    run = m.run_list
    parity = _parity(m)
    if _needs_profile(m):
        m.profile(repeat=5, quiet=True)      # the fallback steps' share of run time (inputs from _parity)
    prof = m.last_profile
    source = m.meta.get("source")
    tgt = parse(m.meta["target"])
    return {
        "format": MANIFEST_FORMAT, **m.meta.get("build", build_info()),
        "target": str(tgt), "triple": jit.triple(), "cpu": tgt.mcpu, "cpu_features": sorted(tgt.features),
        "source": source.to_json() if source is not None else None,
        "shape_bindings": {n: list(s) for n, _, s in run.inputs},
        "passes": m.meta.get("passes", []),
        "kernels": [{"kernel": s.kernel, "symbol": s.symbol, "native": s.native, "nodes": s.nodes,
                     "schedule": s.schedule or {"kind": "reference-fallback"}} for s in run.steps],
        "fallback": [{"kernel": s.kernel, "nodes": s.nodes,
                      "share_of_run_time": None if prof is None else prof.share(i)}
                     for i, s in enumerate(run.steps) if not s.native],
        "memory_plan": {"workspace_bytes": run.memory.peak, "naive_bytes": run.memory.naive},
        "weights_bytes": run.weights_bytes,
        "compile_seconds": m.meta.get("compile_seconds"),
        "parity": parity,
        "files": files,
    }


def export_model(m: ModelModule, directory: str) -> None:
    """Write the artifact of ``m`` into ``directory`` (created if needed)."""
    if m._ir is None:
        raise ValueError("export_library: this model was loaded from an artifact; copy its directory instead")
    graph_json = _graph_json(m)     # first: a fallback body that cannot be stored fails before writing
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    tgt = parse(m.meta["target"])
    with tempfile.TemporaryDirectory(prefix="tiletune_model_") as tmp:
        obj = os.path.join(tmp, "model.o")
        with open(obj, "wb") as f:
            f.write(jit.emit_object(m._ir, tgt))
        _link(obj, os.path.join(tmp, "model.so"), any(s.parallel for s in m.run_list.steps))
        shutil.move(os.path.join(tmp, "model.so"), os.path.join(directory, "model.so"))
    with open(os.path.join(directory, "graph.json"), "w") as f:
        json.dump(graph_json, f, indent=1)
    np.save(os.path.join(directory, "weights.npy"), np.asarray(m.weights), allow_pickle=False)
    with open(os.path.join(directory, "model.h"), "w") as f:
        f.write(model_header(m.run_list, m.meta.get("name", "model")))
    files = {name: _sha256(os.path.join(directory, name)) for name in FILES}
    with open(os.path.join(directory, "manifest.json"), "w") as f:
        json.dump(_manifest(m, files), f, indent=1)


def _read_json(directory: str, name: str, fmt: str) -> dict:
    path = os.path.join(directory, name)
    try:
        with open(path) as f:
            d = json.load(f)
    except FileNotFoundError:
        raise ArtifactError(f"load_model: {path} is missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ArtifactError(f"load_model: {path} is corrupt (not JSON: {e})") from None
    if not isinstance(d, dict) or d.get("format") != fmt:
        raise ArtifactError(f"load_model: {path} is not a {fmt} file (format {d.get('format') if isinstance(d, dict) else None!r})")
    return d


def check_files(directory: str, manifest: dict, files) -> None:
    """Every file of ``files`` is present and matches the sha256 the manifest records for it."""
    for name in files:
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            raise ArtifactError(f"load_model: {path} is missing")
        want = manifest.get("files", {}).get(name)
        if want is not None and _sha256(path) != want:
            raise ArtifactError(f"load_model: {path} is corrupt (its sha256 differs from manifest.json's)")


def load_weights(directory: str, run: RunList) -> np.ndarray:
    """``weights.npy`` of an artifact: the uint8 blob of ``run.weights_bytes`` (never pickle)."""
    wpath = os.path.join(directory, "weights.npy")
    try:
        weights = np.load(wpath, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise ArtifactError(f"load_model: {wpath} is corrupt: {e}") from None
    if weights.dtype != np.uint8 or weights.ndim != 1 or weights.size != run.weights_bytes:
        raise ArtifactError(f"load_model: {wpath} holds {weights.dtype}{list(weights.shape)}, expected "
                            f"uint8[{run.weights_bytes}] (graph.json)")
    return weights


def check_cpu(manifest: dict, where: str) -> None:
    """Refuse an artifact compiled for CPU features (or another architecture) this host lacks."""
    triple = manifest.get("triple")
    if triple and triple.split("-")[0] != jit.triple().split("-")[0]:
        raise ArtifactError(f"load_model: {where} was built for {triple}; this host is {jit.triple()}")
    missing = sorted(set(manifest.get("cpu_features", ())) - host().features)
    if missing:
        raise ArtifactError(f"load_model: {where} was built for CPU features this host lacks: {', '.join(missing)} "
                            f"(built for {manifest.get('cpu')!r}, this host is {host().mcpu!r}); rebuild it here "
                            "or build with target=\"llvm -mcpu=...\" for the older CPU")


def load_model(directory: str) -> ModelModule:
    """Load a model artifact written by ``export_library`` (no compilation)."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise ArtifactError(f"load_model: {directory} is not a directory")
    from .model_cuda_artifact import is_cuda_artifact, load_cuda_model
    if is_cuda_artifact(directory):      # a model built for target="cuda"
        return load_cuda_model(directory)
    manifest = _read_json(directory, "manifest.json", MANIFEST_FORMAT)
    check_cpu(manifest, directory)
    check_files(directory, manifest, FILES)
    graph = _read_json(directory, "graph.json", GRAPH_FORMAT)
    try:
        run = RunList.from_json(graph)
    except (KeyError, TypeError, ValueError) as e:
        raise ArtifactError(f"load_model: {os.path.join(directory, 'graph.json')} is corrupt: {e!r}") from None
    weights = load_weights(directory, run)
    so = os.path.join(directory, "model.so")
    try:
        lib = _dlopen(os.path.abspath(so))
    except OSError as e:
        raise ArtifactError(f"load_model: {so} does not load: {e}") from None

    def address(symbol: str) -> int:
        try:
            return ctypes.cast(lib[symbol], ctypes.c_void_p).value
        except AttributeError:
            raise ArtifactError(f"load_model: {so} has no symbol {symbol!r} (graph.json names it)") from None

    check_run_list(run, f"load_model: {os.path.join(directory, 'graph.json')}", ArtifactError, address)
    meta = {"name": graph.get("name", "model"), "target": graph["target"], "manifest": manifest,
            "passes": manifest.get("passes", []), "compile_seconds": manifest.get("compile_seconds"),
            "build": {k: manifest.get(k) for k in ("tiletune", "llvmlite", "llvm")}, "source": None,
            "loaded_from": directory}
    for step, js in zip(run.steps, graph["steps"]):
        if not step.native:
            try:
                step.body = kernel_from_json(js["body"])
            except (KeyError, TypeError, ValueError, IndexError) as e:
                raise ArtifactError(f"load_model: {os.path.join(directory, 'graph.json')} is corrupt: fallback "
                                    f"kernel {step.kernel}: {e!r}") from None
    return ModelModule(run, weights, address, keepalive=lib, meta=meta)
