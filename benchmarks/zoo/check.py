"""The zoo's random inputs, the comparison with onnxruntime, and the classes of failure.

Used by ``benchmarks/real_models.py`` and ``benchmarks/zoo/diverge.py``.
"""
from __future__ import annotations

import math
import os
import re
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
OWN_PACKAGES = ("tensorir", "codegen", "autotune")

# ----------------------------------------------------------------------------------------------- inputs
def make_inputs(model_path: Path, spec: dict, seed: int, batch: int | None = None) -> dict:
    """Random inputs for the model's graph inputs: dtypes from the model, shapes, value ranges and
    fills from the manifest's ``spec`` (``{"shape", "range": [lo, hi)}`` or ``{"shape", "fill"}``);
    ``batch`` replaces the first dimension of every input whose first dimension is dynamic."""
    import numpy as np
    import onnx
    from onnx import helper
    m = onnx.load(str(model_path), load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(seed)
    out = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        if vi.name not in spec:
            raise KeyError(f"the manifest gives no shape for input {vi.name!r}")
        s = spec[vi.name]
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
        shape = tuple(s["shape"])
        dims = vi.type.tensor_type.shape.dim
        if batch and shape and dims and not dims[0].dim_value > 0:
            shape = (batch, *shape[1:])
        if "fill" in s:
            out[vi.name] = np.full(shape, s["fill"], dtype=dtype)
        elif s.get("pattern") == "bars":
            out[vi.name] = _bars(rng, shape, *s["range"]).astype(dtype)
        elif dtype.kind in "iu":
            lo, hi = s["range"]
            out[vi.name] = rng.integers(int(lo), int(hi), size=shape).astype(dtype)
        elif dtype.kind == "b":
            out[vi.name] = rng.integers(0, 2, size=shape).astype(bool)
        else:
            lo, hi = s.get("range", (0.0, 1.0))
            out[vi.name] = rng.uniform(lo, hi, size=shape).astype(dtype)
    return out


def _bars(rng, shape: tuple, lo: float, hi: float):
    """An NCHW image like printed text: dark bars in rows on a light background (values ``lo``..``hi``)
    with a little noise, the same in every channel (random noise leaves a text detector's output
    saturated near zero, where every implementation's rounding differs)."""
    import numpy as np
    h, w = shape[-2:]
    img = np.ones((h, w))
    for r in range(h // 16, h - h // 8, max(h // 8, 4)):
        for c in range(w // 32, w - w // 16, max(w // 24, 3)):
            if rng.random() < 0.8:
                img[r:r + max(h // 18, 2), c:c + int(rng.integers(1, max(w // 32, 2) + 1))] = 0.0
    img = lo + (hi - lo) * img + rng.normal(0, 0.02 * (hi - lo), shape)
    return np.broadcast_to(img, shape)


def compare(ours, ref) -> tuple[float, str | None]:
    """``(scaled error, problem)``: the max absolute difference over the output's largest finite
    magnitude (exact comparison for integer and bool outputs); ``problem`` names a shape, dtype or NaN
    mismatch."""
    import numpy as np
    ours, ref = np.asarray(ours), np.asarray(ref)
    if ours.shape != ref.shape:
        return math.inf, f"shape {ours.shape} vs onnxruntime {ref.shape}"
    if ref.dtype.kind in "iub":
        bad = int(np.count_nonzero(ours != ref))
        return (0.0 if not bad else math.inf), (f"{bad} of {ref.size} elements differ" if bad else None)
    if ours.dtype != ref.dtype:
        return math.inf, f"dtype {ours.dtype} vs onnxruntime {ref.dtype}"
    if ref.size == 0:
        return 0.0, None
    nan_ours, nan_ref = np.isnan(ours), np.isnan(ref)
    if (nan_ours != nan_ref).any():
        return math.inf, f"NaN in {int(nan_ours.sum())} elements, onnxruntime {int(nan_ref.sum())}"
    ok = ~nan_ref
    if not ok.any():
        return 0.0, None
    diff = np.abs(ours[ok].astype(np.float64) - ref[ok].astype(np.float64))
    if np.isinf(ref[ok]).any() or np.isinf(ours[ok]).any():
        same = (ours[ok] == ref[ok]) | (diff <= 0)
        finite = np.isfinite(ref[ok]) & np.isfinite(ours[ok])
        if not (same | finite).all():
            return math.inf, "infinities differ"
        diff = diff[finite]
    scale = float(np.max(np.abs(ref[ok][np.isfinite(ref[ok])]), initial=0.0))
    return float(np.max(diff, initial=0.0)) / max(scale, 1e-30), None


def half_eps(model) -> float:
    """The machine epsilon of the widest-spaced 16-bit float type (float16, bfloat16) the ONNX ``model``
    computes in (a graph input, output, initializer, annotated tensor, ``Cast`` or ``Constant`` of that
    type), else 0."""
    import numpy as np
    from ml_dtypes import bfloat16, finfo
    from onnx import TensorProto
    eps = {TensorProto.FLOAT16: float(np.finfo(np.float16).eps), TensorProto.BFLOAT16: float(finfo(bfloat16).eps)}
    g = model.graph
    types = [v.type.tensor_type.elem_type for v in (*g.input, *g.output, *g.value_info)]
    types += [t.data_type for t in g.initializer]
    for n in g.node:
        for a in n.attribute:
            types += [a.i] if a.name == "to" else [a.t.data_type] if a.name == "value" else []
    return max((eps[t] for t in types if t in eps), default=0.0)


# ------------------------------------------------------------------------------------ classification
def _own_frame(tb) -> str:
    """``file:line in function`` of the innermost traceback frame inside tiletune's packages."""
    where = ""
    for fs in traceback.extract_tb(tb):
        rel = os.path.relpath(fs.filename, ROOT)
        if rel.split(os.sep)[0] in OWN_PACKAGES:
            where = f"{rel}:{fs.lineno} in {fs.name}"
    return where


def _raised_deliberately(e: BaseException) -> bool:
    """True for tiletune's own exception classes, and for a builtin ``ValueError``/``NotImplementedError``
    raised by a ``raise`` statement in tiletune's code (its innermost frame)."""
    if type(e).__module__.split(".")[0] in OWN_PACKAGES:
        return True
    frames = traceback.extract_tb(e.__traceback__)
    if not frames or not isinstance(e, (ValueError, NotImplementedError)):
        return False
    last = frames[-1]
    own = os.path.relpath(last.filename, ROOT).split(os.sep)[0] in OWN_PACKAGES
    return own and (last.line or "").lstrip().startswith("raise")


_WRAPPED = re.compile(r"kernel (\S+): (RecursionError|TypeError|KeyError|AttributeError|IndexError|"
                      r"AssertionError|ZeroDivisionError|NameError|UnboundLocalError|OverflowError|"
                      r"MemoryError|StopIteration|LLVMException|RuntimeError): ([^;]*)")


def classify(e: BaseException) -> dict:
    """``{"status", "error", "where"}`` for an exception raised by an import, build or run."""
    msg = str(e).strip()
    first = msg.splitlines()[0] if msg else ""
    where = _own_frame(e.__traceback__)
    if _raised_deliberately(e):
        wrapped = _WRAPPED.search(msg)
        if wrapped:   # build_model's "no native kernel" summary around a raw error of one kernel
            return {"status": "INTERNAL", "error": f"{wrapped.group(2)} in kernel {wrapped.group(1)}: "
                    f"{wrapped.group(3).rstrip(')')[:200]} (wrapped in {type(e).__name__})", "where": where}
        return {"status": "refused", "error": f"{type(e).__name__}: {first[:300]}", "where": where}
    return {"status": "INTERNAL", "error": f"{type(e).__name__}: {first[:300]}", "where": where}
