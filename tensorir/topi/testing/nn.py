"""numpy references for softmax, matmuls and normalizations (TVM's ``topi.testing`` names)."""
from __future__ import annotations

import numpy as np


def softmax_python(a_np, axis: int = 1) -> np.ndarray:
    e = np.exp(a_np - np.max(a_np, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax_python(a_np, axis: int = 1) -> np.ndarray:
    m = np.max(a_np, axis=axis, keepdims=True)
    return a_np - m - np.log(np.sum(np.exp(a_np - m), axis=axis, keepdims=True))


def batch_matmul(x, y, out_dtype=None, trans_x: bool = False, trans_y: bool = True) -> np.ndarray:
    """x (B, M, K), y (B, N, K) by default; a batch of 1 broadcasts."""
    xx = x.transpose(0, 2, 1) if trans_x else x
    yy = y.transpose(0, 2, 1) if trans_y else y
    return np.matmul(xx, yy).astype(out_dtype or x.dtype)


def dense(x, y, bias=None, use_bias: bool = False, use_relu: bool = False, out_dtype=None) -> np.ndarray:
    out = x @ y.T
    if use_bias or bias is not None:
        out = out + bias
    if use_relu:
        out = np.maximum(out, 0)
    return out.astype(out_dtype or x.dtype)


def layer_norm_python(data, gamma, beta, axis, epsilon: float = 1e-5) -> np.ndarray:
    axis = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    mean = np.mean(data, axis, keepdims=True)
    var = np.var(data, axis, keepdims=True)
    out = (data - mean) / np.sqrt(var + epsilon) * gamma
    return out + beta if beta is not None else out


def batch_norm(x, gamma, beta, moving_mean, moving_var, axis: int, epsilon: float, center: bool, scale: bool,
               training: bool = False, momentum=None) -> list:
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    out = (x - moving_mean.reshape(shape)) / np.sqrt(moving_var.reshape(shape) + epsilon)
    out = out * gamma.reshape(shape) if scale else out
    out = out + beta.reshape(shape) if center else out
    return [out, moving_mean, moving_var]


__all__ = ["softmax_python", "log_softmax_python", "batch_matmul", "dense", "layer_norm_python", "batch_norm"]
