"""``topi.nn.group_norm``: normalization over groups of channels (and ``axes``), then a per-channel
scale and shift.  float16 data computes in float32, as TVM's."""
from __future__ import annotations

from ... import reduce as R
from ...expr import cast, const
from ...intrin import rsqrt
from ...tensor import Tensor, compute, reduce_axis
from ..math import check_tensor


def group_norm(data: Tensor, gamma: Tensor, beta, num_groups: int, channel_axis: int, axes, epsilon: float = 1e-5
               ) -> Tensor:
    """``(x - mean) / sqrt(var + epsilon) * gamma[c] + beta[c]`` with the statistics over the channels
    of ``c``'s group and ``axes`` (which exclude ``channel_axis``)."""
    check_tensor("group_norm", "data", data)
    nd = data.ndim
    ca = channel_axis % nd
    axes = sorted(a % nd for a in axes)
    if ca in axes:
        raise ValueError("group_norm: axes must exclude the channel axis")
    c = int(data.shape[ca])
    if num_groups < 1 or c % num_groups:
        raise ValueError(f"group_norm: {num_groups} groups do not divide the {c} channels of {data.name}")
    per = c // num_groups
    count = per
    for a in axes:
        count *= int(data.shape[a])
    work = "float32" if data.dtype == "float16" else data.dtype
    stat_shape = [num_groups if d == ca else 1 if d in axes else data.shape[d] for d in range(nd)]

    def x(*i):
        v = data(*i)
        return v if v.dtype == work else cast(work, v)

    def over_group(fn, name):
        def f(*o):
            k = reduce_axis((0, per), name="kc")
            rvs = {a: reduce_axis((0, data.shape[a]), name=f"k{a}") for a in axes}
            idx = [o[d] * per + k.var if d == ca else rvs[d].var if d in axes else o[d] for d in range(nd)]
            return R.sum(fn(idx, o), axis=[k] + list(rvs.values()))
        return compute(stat_shape, f, name=name, tag="group_norm")

    mean = over_group(lambda idx, o: x(*idx), "T_group_mean_sum")
    inv = const(1.0 / count, work)

    def stat(t, i):
        return t(*[i[d] // per if d == ca else 0 if d in axes else i[d] for d in range(nd)])
    var = over_group(lambda idx, o: (x(*idx) - mean(*o) * inv) * (x(*idx) - mean(*o) * inv), "T_group_var_sum")

    def out(*i):
        y = (x(*i) - stat(mean, i) * inv) * rsqrt(stat(var, i) * inv + const(epsilon, work))
        y = y * cast(work, gamma(i[ca])) if gamma.dtype != work else y * gamma(i[ca])
        if beta is not None:
            y = y + (cast(work, beta(i[ca])) if beta.dtype != work else beta(i[ca]))
        return y if work == data.dtype else cast(data.dtype, y)
    return compute(data.shape, out, name="T_group_norm", tag="group_norm")
