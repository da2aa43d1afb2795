"""A model artifact: ``m.export_library(directory)`` and ``codegen.load_model(directory)``, one skeleton
with per-target parts (:class:`Artifact`; :mod:`.artifact_cpu` and :mod:`.artifact_cuda` fill it in).

Every artifact directory holds ``graph.json`` (the run list, :class:`~codegen.model.plan.RunList`, and
what the target adds), ``weights.npy`` (one ``uint8`` array: the weights blob laid out as planned; it
loads with ``allow_pickle=False``, its data starts after the ``.npy`` header), the target's code files
and ``manifest.json``: provenance (versions, target, source model with its sha256, opset and producer,
shape bindings, passes, kernels with their fused nodes and schedule origin, fallback steps, memory plan,
compile time) and ``files``: the sha256 and size (``{"sha256", "bytes"}``) of every other file.

Loading compiles nothing and runs nothing but the code the manifest digests (JSON, the ``.npy`` header;
never pickle).  It trusts no byte it has not checked:

* a manifest without ``files``, or not listing every file of the target, is refused (an entry that is a
  bare sha256 string, as tiletune wrote before sizes were recorded, still loads);
* each file is read only if it resolves to a regular file inside the directory (a link inside it is
  followed; a link leaving it, a FIFO or a device is refused before it is opened: nothing blocks),
  reading no more than the size the manifest declares, and must match its sha256;
* ``manifest.json`` and ``graph.json`` must be JSON nested at most
  :data:`~codegen.safe_files.MAX_JSON_DEPTH` deep and match :mod:`codegen.artifact_schema` (a field
  of the wrong type is refused naming it);
* the target checks that this host can run it (CPU features, the GPU's compute capability).

Every refusal is one :class:`ArtifactError` naming the file (and the field).
"""
from __future__ import annotations

import hashlib
import io
import json
import os

import numpy as np
from numpy.lib import format as npy_format

from tensorir.graph.host_tail import HostTail

from ..artifact_schema import Spec, check
from ..export import build_info
from ..model.plan import RunList
from ..model.precision import kernel_precision
from ..safe_files import UnsafeFile, file_sha256, loads_json, read_regular

MAX_JSON_BYTES = 64 << 20       # manifest.json, whose own size nothing declares
_NPY_HEADERS = {(1, 0): npy_format.read_array_header_1_0, (2, 0): npy_format.read_array_header_2_0}


class ArtifactError(ValueError):
    """A model artifact that cannot be loaded here (missing or corrupt file, CPU features, format)."""


# -- the trust layer's calls ------------------------------------------------------------------------------------
def file_entries(directory: str, names) -> dict:
    """``manifest.json``'s ``files``: the sha256 and size of each file of ``names``."""
    return {n: {"sha256": file_sha256(os.path.join(directory, n)), "bytes": os.path.getsize(os.path.join(directory, n))}
            for n in names}


def safe_read(read, *args):
    """``read(*args)`` (a :mod:`codegen.safe_files` function), its refusal an :class:`ArtifactError`."""
    try:
        return read(*args)
    except UnsafeFile as e:
        raise ArtifactError(f"load_model: {e}") from None


def read_json(directory: str, name: str, fmt: str, spec: Spec, data: bytes | None = None) -> dict:
    """``directory/name`` (read now, or its bytes ``data``): JSON of format ``fmt`` matching ``spec``."""
    path = os.path.join(directory, name)
    if data is None:
        data = safe_read(read_regular, directory, name, None, MAX_JSON_BYTES)
    d = safe_read(loads_json, data, path)
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
        out[name] = data = safe_read(read_regular, directory, name, size)
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


def parsed(directory: str, build):
    """``build()``, which reads checked ``graph.json`` data; what the schema let through and still does not
    parse is an :class:`ArtifactError` naming the file."""
    try:
        return build()
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise ArtifactError(f"load_model: {os.path.join(directory, 'graph.json')} is corrupt: {e!r}") from None


# -- the skeleton -----------------------------------------------------------------------------------------------
class Artifact:
    """One target's artifact: its files and formats, and how to write and load it.  :meth:`export` and
    :meth:`load` are the skeleton; a target says what its code files are (:meth:`prepare`,
    :meth:`write_code`), what its manifest adds (:meth:`manifest_parts`, :meth:`memory_plan`), whether
    this host can run it (:meth:`check_host`) and how the module is made from the checked files
    (:meth:`module`)."""

    kind = "llvm"                          # codegen.export.build_info's compiler kind
    graph_format: str
    manifest_format: str
    files: tuple[str, ...]                 # every file but manifest.json, as manifest.json lists them
    manifest_schema: Spec
    graph_schema: Spec
    marker: str | None = None              # a file only this target writes (None: the default target)
    module_class: type
    build_keys: tuple[str, ...]            # the manifest's build fields a loaded module's meta keeps

    # -- writing -----------------------------------------------------------------------------------------------
    def export(self, m, directory: str) -> None:
        """Write the artifact of ``m`` into ``directory`` (created if needed)."""
        graph = self.prepare(m)            # first: what cannot be stored fails before a file is written
        if m.tail is not None:             # the host tail as data: its ONNX model's bytes (tensorir/graph/host_tail.py)
            graph["host_tail"] = m.tail.to_json()
        directory = os.fspath(directory)
        os.makedirs(directory, exist_ok=True)
        self.write_code(m, directory)
        with open(os.path.join(directory, "graph.json"), "w") as f:
            json.dump(graph, f, indent=1)
        np.save(os.path.join(directory, "weights.npy"), np.asarray(m.weights), allow_pickle=False)
        files = file_entries(directory, self.files)
        with open(os.path.join(directory, "manifest.json"), "w") as f:
            json.dump(self.manifest(m, files), f, indent=1)

    def prepare(self, m) -> dict:
        """The ``graph.json`` of ``m``, after every check that can refuse it."""
        raise NotImplementedError

    def write_code(self, m, directory: str) -> None:
        """Write the target's files other than ``graph.json`` and ``weights.npy``."""
        raise NotImplementedError

    def manifest(self, m, files: dict) -> dict:
        """``manifest.json`` of ``m`` whose other files are ``files`` (:func:`file_entries`)."""
        head, tail = self.manifest_parts(m)
        run, prof, source = m.run_list, m.last_profile, m.meta.get("source")
        return {
            "format": self.manifest_format, **m.meta.get("build", build_info(self.kind)), **head,
            "source": source.to_json() if source is not None else None,
            "shape_bindings": {n: list(s) for n, _, s in run.inputs},
            "passes": m.meta.get("passes", []),
            "constants": m.meta.get("constants"),
            "kernels": [{"kernel": s.kernel, "symbol": s.symbol, "native": s.native, "nodes": s.nodes,
                         "schedule": s.schedule or {"kind": "reference-fallback"},
                         "precision": kernel_precision(s.body)} for s in run.steps],
            "precision": m.meta.get("precision"),
            "fallback": [{"kernel": s.kernel, "nodes": s.nodes,
                          "share_of_run_time": None if prof is None else prof.share(i)}
                         for i, s in enumerate(run.steps) if not s.native],
            "memory_plan": self.memory_plan(run),
            "weights_bytes": run.weights_bytes,
            "compile_seconds": m.meta.get("compile_seconds"),
            "host_tail": m.tail.manifest() if m.tail is not None else None,
            **tail,
            "files": files,
        }

    def manifest_parts(self, m) -> tuple[dict, dict]:
        """The target's manifest fields after the build info, and before ``files``."""
        return {}, {}

    def memory_plan(self, run: RunList) -> dict:
        return {"workspace_bytes": run.memory.peak, "naive_bytes": run.memory.naive}

    # -- loading -----------------------------------------------------------------------------------------------
    def read_manifest(self, directory: str) -> dict:
        return read_json(directory, "manifest.json", self.manifest_format, self.manifest_schema)

    def load(self, directory: str):
        """The module of the artifact ``directory`` (no compilation)."""
        manifest = self.read_manifest(directory)
        self.check_host(manifest, directory)
        files = read_files(directory, manifest, self.files)
        graph = read_json(directory, "graph.json", self.graph_format, self.graph_schema, files["graph.json"])
        m = self.module(directory, manifest, files, graph)
        if "host_tail" in graph:           # parsed, not run
            m.tail = parsed(directory, lambda: HostTail.from_json(graph["host_tail"]))
        return m

    def check_host(self, manifest: dict, directory: str) -> None:
        """Refuse an artifact this host cannot run (before its files are read)."""

    def module(self, directory: str, manifest: dict, files: dict, graph: dict):
        raise NotImplementedError

    def loaded_meta(self, directory: str, manifest: dict, graph: dict) -> dict:
        """A loaded module's ``meta``: name, target, the manifest and what it records of the build."""
        return {"name": graph.get("name", "model"), "target": graph.get("target"), "manifest": manifest,
                "passes": manifest.get("passes", []), "constants": manifest.get("constants"), "compile_seconds": manifest.get("compile_seconds"),
                "build": {k: manifest.get(k) for k in self.build_keys}, "source": None, "loaded_from": directory}


ARTIFACTS: list[Artifact] = []     # every target's (registered by artifact_cpu, artifact_cuda)


def register(artifact: Artifact) -> Artifact:
    ARTIFACTS.append(artifact)
    return artifact


def artifact_for(m) -> Artifact:
    """The artifact of model module ``m``'s target."""
    for a in ARTIFACTS:
        if isinstance(m, a.module_class):
            return a
    raise TypeError(f"export_library: no artifact is registered for {type(m).__name__}")


def artifact_in(directory: str) -> Artifact:
    """The target's artifact that ``directory`` holds: the one whose marker file is there, else the default."""
    if not os.path.isdir(directory):
        raise ArtifactError(f"load_model: {directory} is not a directory")
    marked = [a for a in ARTIFACTS if a.marker and os.path.lexists(os.path.join(directory, a.marker))]
    return marked[0] if marked else next(a for a in ARTIFACTS if a.marker is None)


def load_model(directory: str):
    """Load a model artifact written by ``export_library`` (no compilation): a
    :class:`~codegen.runtime.cpu.ModelModule` or :class:`~codegen.runtime.cuda.CUDAModelModule`."""
    directory = os.fspath(directory)
    return artifact_in(directory).load(directory)


def read_manifest(directory: str) -> dict:
    """The checked ``manifest.json`` of the artifact ``directory`` (CPU or CUDA), as ``load_model`` reads it."""
    directory = os.fspath(directory)
    return artifact_in(directory).read_manifest(directory)


__all__ = ["ARTIFACTS", "Artifact", "ArtifactError", "artifact_for", "artifact_in", "file_entries", "load_model",
           "load_weights", "parsed", "read_files", "read_json", "read_manifest", "register", "safe_read"]
