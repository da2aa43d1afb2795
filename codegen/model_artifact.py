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
                     and ``files``: the sha256 and size (``{"sha256", "bytes"}``) of every other file.

Loading compiles nothing and runs nothing but the shared object the manifest digests (dlopen, JSON,
the ``.npy`` header; never pickle).  It trusts no byte it has not checked:

* a manifest without ``files``, or not listing every file above, is refused (an entry that is a bare
  sha256 string, as tiletune wrote before sizes were recorded, still loads);
* each file is read only if it resolves to a regular file inside the directory (a link inside it is
  followed; a link leaving it, a FIFO or a device is refused before it is opened: nothing blocks),
  reading no more than the size the manifest declares, and must match its sha256;
* ``manifest.json`` and ``graph.json`` must be JSON nested at most
  :data:`~codegen.safe_files.MAX_JSON_DEPTH` deep and match :mod:`codegen.artifact_schema` (a field
  of the wrong type is refused naming it);
* an artifact built for CPU features this host lacks is refused.

Every refusal is one :class:`ArtifactError` naming the file (and the field).
"""
from __future__ import annotations

import ctypes
import hashlib
import io
import json
import os
import shutil
import tempfile

import numpy as np
from numpy.lib import format as npy_format

from . import jit
from .artifact_schema import BOOL, COUNT, STR, ListOf, Record, Spec, check, graph_spec, manifest_spec, nullable
from .export import _dlopen, _link, build_info
from .model_codegen import entry_name
from .model_fallback import kernel_from_json, kernel_to_json
from .model_header import model_header
from .model_module import ModelModule
from .model_profile import memory
from .model_plan import RunList
from .safe_files import UnsafeFile, loads_json, read_regular, resolve_inside
from .model_plan_check import check_run_list
from .target import host, parse

GRAPH_FORMAT = "tiletune.model/1"
MANIFEST_FORMAT = "tiletune.manifest/1"
FILES = ("model.so", "graph.json", "weights.npy", "model.h")
MAX_JSON_BYTES = 64 << 20       # manifest.json, whose own size nothing declares
MANIFEST_SCHEMA = manifest_spec(FILES, {"target": STR, "triple": STR, "cpu_features": ListOf(STR)},
                                {"cpu": STR, "llvmlite": nullable(STR), "llvm": nullable(STR)})
GRAPH_SCHEMA = graph_spec({"target": STR}, {"copies_in_entry": BOOL,
                                            "entries": ListOf(Record({"symbol": STR, "steps": ListOf(COUNT)}))})
_NPY_HEADERS = {(1, 0): npy_format.read_array_header_1_0, (2, 0): npy_format.read_array_header_2_0}


class ArtifactError(ValueError):
    """A model artifact that cannot be loaded here (missing or corrupt file, CPU features, format)."""


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_entries(directory: str, names) -> dict:
    """``manifest.json``'s ``files``: the sha256 and size of each file of ``names``."""
    return {n: {"sha256": _sha256(os.path.join(directory, n)), "bytes": os.path.getsize(os.path.join(directory, n))}
            for n in names}


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
        run = lambda: ort.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"]).run(None, feeds)
    except ImportError:
        import onnx
        from onnx.reference import ReferenceEvaluator
        peer = f"onnx.reference {onnx.__version__}"
        run = lambda: ReferenceEvaluator(model).run(None, feeds)
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
        "memory_plan": memory(run),          # one kernel thread; stats() counts the module's
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
    files = file_entries(directory, FILES)
    with open(os.path.join(directory, "manifest.json"), "w") as f:
        json.dump(_manifest(m, files), f, indent=1)


def _safe(read, *args):
    """``read(*args)`` (a :mod:`codegen.safe_files` function), its refusal an :class:`ArtifactError`."""
    try:
        return read(*args)
    except UnsafeFile as e:
        raise ArtifactError(f"load_model: {e}") from None


def read_json(directory: str, name: str, fmt: str, spec: Spec, data: bytes | None = None) -> dict:
    """``directory/name`` (read now, or its bytes ``data``): JSON of format ``fmt`` matching ``spec``."""
    path = os.path.join(directory, name)
    if data is None:
        data = _safe(read_regular, directory, name, None, MAX_JSON_BYTES)
    d = _safe(loads_json, data, path)
    if not isinstance(d, dict) or d.get("format") != fmt:
        raise ArtifactError(f"load_model: {path} is not a {fmt} file (format {d.get('format') if isinstance(d, dict) else None!r})")
    check(d, spec, f"load_model: {path}", ArtifactError)
    return d


def read_files(directory: str, manifest: dict, names) -> dict[str, bytearray]:
    """The bytes of each file of ``names``, of the size and sha256 the (checked) manifest records."""
    out = {}
    for name in names:
        entry = manifest["files"][name]
        digest, size = (entry, None) if isinstance(entry, str) else (entry["sha256"], entry["bytes"])
        out[name] = data = _safe(read_regular, directory, name, size)
        if hashlib.sha256(data).hexdigest() != digest:
            raise ArtifactError(f"load_model: {os.path.join(directory, name)} is corrupt (its sha256 differs from "
                                "manifest.json's)")
    return out


def load_weights(path: str, data: bytearray, run: RunList) -> np.ndarray:
    """The ``weights.npy`` file ``path`` from its bytes ``data``: the uint8 blob of ``run.weights_bytes``
    (a view of ``data``; only the header is parsed, so nothing can unpickle)."""
    head = io.BytesIO(bytes(data[:1 << 16]))
    try:
        read_header = _NPY_HEADERS.get(npy_format.read_magic(head))
        if read_header is None:
            raise ValueError("an .npy version other than 1.0 and 2.0")
        shape, _, dtype = read_header(head)
    except (ValueError, OSError, EOFError, SyntaxError) as e:
        raise ArtifactError(f"load_model: {path} is corrupt: {e}") from None
    if dtype != np.uint8 or len(shape) != 1 or shape[0] != run.weights_bytes:
        raise ArtifactError(f"load_model: {path} holds {dtype}{list(shape)}, expected "
                            f"uint8[{run.weights_bytes}] (graph.json)")
    if len(data) - head.tell() != run.weights_bytes:
        raise ArtifactError(f"load_model: {path} is corrupt: {len(data) - head.tell()} bytes of data, its header "
                            f"declares {run.weights_bytes}")
    return np.frombuffer(data, np.uint8, run.weights_bytes, head.tell())


def read_manifest(directory: str) -> dict:
    """The checked ``manifest.json`` of the artifact ``directory`` (CPU or CUDA), as ``load_model`` reads it."""
    from .model_cuda_artifact import MANIFEST_FORMAT as CUDA_FORMAT, MANIFEST_SCHEMA as CUDA_SCHEMA, is_cuda_artifact
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise ArtifactError(f"load_model: {directory} is not a directory")
    cuda = is_cuda_artifact(directory)
    return read_json(directory, "manifest.json", CUDA_FORMAT if cuda else MANIFEST_FORMAT,
                     CUDA_SCHEMA if cuda else MANIFEST_SCHEMA)


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
    manifest = read_json(directory, "manifest.json", MANIFEST_FORMAT, MANIFEST_SCHEMA)
    check_cpu(manifest, directory)
    files = read_files(directory, manifest, FILES)
    graph = read_json(directory, "graph.json", GRAPH_FORMAT, GRAPH_SCHEMA, files["graph.json"])
    try:
        run = RunList.from_json(graph)
    except (KeyError, TypeError, ValueError, IndexError) as e:      # the schema let something through
        raise ArtifactError(f"load_model: {os.path.join(directory, 'graph.json')} is corrupt: {e!r}") from None
    weights = load_weights(os.path.join(directory, "weights.npy"), files["weights.npy"], run)
    so = os.path.join(directory, "model.so")
    try:
        lib = _dlopen(_safe(resolve_inside, directory, "model.so"))    # the file whose digest was checked
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
