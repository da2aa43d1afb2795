"""numpy reference for pooling (TVM's ``topi.testing.poolnd_python``): a loop over output cells, each
window gathered with its padding explicit, so it shares no index arithmetic with ``topi.nn.pool2d``."""
from __future__ import annotations

import itertools

import numpy as np


def _lowest(dtype):
    """Max pooling's padding: -inf for floats (topi.nn.pool pads with it), the minimum for integers."""
    return -np.inf if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min


def poolnd_python(np_data, kernel, strides, dilation, padding_before, padding_after, pool_type,
                  count_include_pad: bool = True, ceil_mode: bool = False, dtype: str = "float32",
                  layout: str | None = None) -> np.ndarray:
    """N-d max/avg pooling over the trailing ``len(kernel)`` axes (or ``layout``'s D, H, W)."""
    nd = len(kernel)
    axes = [layout.index(c) for c in "DHW"[3 - nd:]] if layout else list(range(np_data.ndim - nd, np_data.ndim))
    x = np.moveaxis(np_data, axes, list(range(np_data.ndim - nd, np_data.ndim)))
    spatial = x.shape[-nd:]
    out_shape = []
    for n, k, s, d, pb, pa in zip(spatial, kernel, strides, dilation, padding_before, padding_after):
        span = (k - 1) * d + 1
        size = n + pb + pa - span
        out_shape.append((size + s - 1) // s + 1 if ceil_mode else size // s + 1)
    out = np.zeros(x.shape[:-nd] + tuple(out_shape), dtype=np.float64)
    for cell in itertools.product(*[range(o) for o in out_shape]):
        taps, in_padded = [], 0
        for offs in itertools.product(*[range(k) for k in kernel]):
            pos = [c * s - pb + t * d for c, s, pb, t, d in zip(cell, strides, padding_before, offs, dilation)]
            inside = all(0 <= p < n for p, n in zip(pos, spatial))
            within_pad = all(-pb <= p < n + pa for p, n, pb, pa in zip(pos, spatial, padding_before, padding_after))
            if inside:
                taps.append(x[(..., *pos)].astype(np.float64))
            elif within_pad:
                in_padded += 1
        if pool_type == "max":
            val = np.max(taps, axis=0) if taps else np.full(x.shape[:-nd], _lowest(dtype))
        else:
            total = np.sum(taps, axis=0) if taps else np.zeros(x.shape[:-nd])
            val = total / max(len(taps) + (in_padded if count_include_pad else 0), 1)
        out[(..., *cell)] = val
    return np.moveaxis(out, list(range(out.ndim - nd, out.ndim)), axes).astype(dtype)


def pool2d_ref(np_data, kernel, stride, dilation, padding, pool_type, ceil_mode=False, layout="NCHW",
               count_include_pad=True) -> np.ndarray:
    """``topi.nn.pool2d``'s arguments, ``padding`` (top, left, bottom, right)."""
    return poolnd_python(np_data, kernel, stride, dilation, padding[:2], padding[2:], pool_type, count_include_pad,
                         ceil_mode, str(np_data.dtype), layout)


def adaptive_pool(np_data, out_size, pool_type: str, layout: str = "NCHW") -> np.ndarray:
    """Adaptive max/avg pooling over H and W of an NCHW or NHWC array."""
    x = np.moveaxis(np_data, [layout.index("H"), layout.index("W")], [-2, -1])
    h, w = x.shape[-2:]
    oh, ow = out_size
    out = np.zeros(x.shape[:-2] + (oh, ow), dtype=np_data.dtype)
    f = np.max if pool_type == "max" else np.mean
    for i in range(oh):
        for j in range(ow):
            ys, ye = (i * h) // oh, -(-((i + 1) * h) // oh)
            xs, xe = (j * w) // ow, -(-((j + 1) * w) // ow)
            out[..., i, j] = f(x[..., ys:ye, xs:xe], axis=(-2, -1))
    return np.moveaxis(out, [-2, -1], [layout.index("H"), layout.index("W")])


__all__ = ["poolnd_python", "pool2d_ref", "adaptive_pool"]
