"""DAGs of the auto-scheduler tests, each with an independent numpy reference of its output."""
from __future__ import annotations

import numpy as np

import tensorir as te
from tensorir import topi


def gemm(n=64, m=48, k=32):
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return [A, B, C], lambda a, b: a @ b


def conv2d():
    X = te.placeholder((1, 8, 10, 10), name="X")
    W = te.placeholder((16, 8, 3, 3), name="W")

    def ref(x, w):
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((1, 16, 10, 10), np.float64)
        for dy in range(3):
            for dx in range(3):
                out += np.einsum("nchw,fc->nfhw", xp[:, :, dy:dy + 10, dx:dx + 10], w[:, :, dy, dx])
        return out
    return [X, W, topi.nn.conv2d_nchw(X, W, 1, 1, 1)], ref


def softmax():
    X = te.placeholder((32, 40), name="X")

    def ref(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return [X, topi.nn.softmax(X)], ref


def layer_norm():
    X = te.placeholder((16, 48), name="X")
    g = te.placeholder((48,), name="g")
    b = te.placeholder((48,), name="b")

    def ref(x, gamma, beta):
        mu = x.mean(axis=1, keepdims=True)
        return (x - mu) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5) * gamma + beta
    return [X, g, b, topi.nn.layer_norm(X, g, b, axis=[1])], ref


def dense_bias_relu():
    X = te.placeholder((16, 32), name="X")
    W = te.placeholder((24, 32), name="W")
    b = te.placeholder((24,), name="b")
    return [X, W, b, topi.nn.relu(topi.add(topi.nn.dense(X, W), b))], lambda x, w, bias: np.maximum(x @ w.T + bias, 0)


def batch_matmul():
    A = te.placeholder((3, 16, 8), name="A")
    B = te.placeholder((3, 24, 8), name="B")
    return [A, B, topi.nn.batch_matmul(A, B)], lambda a, b: np.einsum("bik,bjk->bij", a, b)


def row_sum():
    A = te.placeholder((4, 1024), name="A")
    k = te.reduce_axis((0, 1024), name="k")
    return [A, te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="S")], lambda a: a.sum(axis=1)


def full_sum():
    """Two reduction axes and no spatial one: rfactor of the innermost."""
    A = te.placeholder((16, 256), name="A")
    return [A, topi.sum(A)], lambda a: np.asarray(a.sum(dtype=np.float64))


def max_pool():
    X = te.placeholder((1, 4, 8, 8), name="X")
    return [X, topi.nn.pool2d(X, (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), "max")], \
        lambda x: x.reshape(1, 4, 4, 2, 4, 2).max(axis=(3, 5))


def two_outputs():
    """An inlined stage read by two outputs."""
    X = te.placeholder((16, 24), name="X")
    E = topi.exp(X)
    return [X, topi.add(E, 1.0), topi.multiply(E, 2.0)], lambda x: (np.exp(x) + 1, np.exp(x) * 2)


def argmax():
    """A tuple reduction (two outputs of one operation)."""
    X = te.placeholder((8, 32), name="X")
    return [X, topi.argmax(X, axis=1)], lambda x: x.argmax(axis=1).astype("int32")


ALL = [gemm, conv2d, softmax, layer_norm, dense_bias_relu, batch_matmul, row_sum, full_sum, max_pool, two_outputs,
       argmax]
