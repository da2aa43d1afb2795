"""``topi.nn.upsampling``: ``H`` and ``W`` scaled by ``scale_h`` / ``scale_w`` through ``image.resize2d``."""
from __future__ import annotations

from ..image.resize import resize2d
from ..math import check_tensor
from ..utils import get_const_int
from .pooling import spatial_axes


def upsampling(data, scale_h, scale_w, layout: str = "NCHW", method: str = "nearest_neighbor",
               align_corners: bool = False, output_shape=None):
    """Nearest (``"nearest_neighbor"``) or ``"bilinear"`` upsampling; sizes ``round(n * scale)``."""
    check_tensor("upsampling", "data", data)
    h, w = spatial_axes("upsampling", data, layout, 2)
    size = (round(get_const_int(data.shape[h]) * scale_h), round(get_const_int(data.shape[w]) * scale_w))
    if method not in ("nearest_neighbor", "bilinear", "bicubic"):
        raise ValueError(f"upsampling: method must be 'nearest_neighbor' or 'bilinear', got {method!r}")
    return resize2d(data, (0.0, 0.0, 0.0, 0.0), size, layout,
                    "linear" if method == "bilinear" else method,
                    "align_corners" if align_corners else "asymmetric")


__all__ = ["upsampling"]
