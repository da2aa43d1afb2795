"""Default schedules of the anchors this package adds, in the registry of :mod:`tensorir.graph.schedules`
(replace an entry to tune): ``nn.conv2d_transpose`` is tiled like ``nn.conv2d`` (NCHW output, one
reduction stage); 3-d pooling is scheduled like the other reductions."""
from __future__ import annotations

from ..schedules import SCHEDULE_RULES, schedule_conv2d, schedule_reduction

SCHEDULE_RULES.setdefault("nn.conv2d_transpose", schedule_conv2d)
for _op in ("nn.max_pool3d", "nn.avg_pool3d"):
    SCHEDULE_RULES.setdefault(_op, schedule_reduction)
