"""``TVMModelTuner``: :class:`ModelTuner` called with AutoTVM's ``XGBTuner`` arguments; ``XGBTuner`` is its
TVM name.  No XGBoost runs.

AutoTVM's ``XGBTuner`` fits XGBoost to loop features and searches with simulated annealing;
tiletune's :class:`~autotune.tuner.ModelTuner` fits extremely randomized trees (scikit-learn) to loop-IR
features with a rank-oriented target and picks from a candidate pool (see ``model_tuner.py``).  The
options are AutoTVM's and are checked, but the model's own choices stand: ``feature_type``,
``loss_type``, ``optimizer``, ``num_threads`` and ``log_interval`` do not change what it does;
``diversity_filter_ratio`` sets ModelTuner's ``diversity``.
"""
from __future__ import annotations

from .model_tuner import ModelTuner

FEATURE_TYPES = ("itervar", "knob", "curve")
LOSS_TYPES = ("reg", "rank", "rank-binary")


class TVMModelTuner(ModelTuner):
    def __init__(self, task, plan_size: int = 64, feature_type: str = "itervar", loss_type: str = "reg",
                 num_threads: int | None = None, optimizer="sa", diversity_filter_ratio=None, log_interval: int = 50,
                 **kwargs):
        if feature_type not in FEATURE_TYPES:
            raise ValueError(f"XGBTuner: feature_type {feature_type!r} is not one of {', '.join(FEATURE_TYPES)}")
        if loss_type not in LOSS_TYPES:
            raise ValueError(f"XGBTuner: loss_type {loss_type!r} is not one of {', '.join(LOSS_TYPES)}")
        if optimizer != "sa":
            raise ValueError("XGBTuner: only optimizer='sa' is accepted (ModelTuner chooses from its own "
                             "candidate pool)")
        if diversity_filter_ratio is not None:
            kwargs.setdefault("diversity", max(1, int(diversity_filter_ratio)))
        super().__init__(task, **kwargs)
        self.plan_size, self.feature_type, self.loss_type = plan_size, feature_type, loss_type


XGBTuner = TVMModelTuner  # AutoTVM's name, for ports

__all__ = ["TVMModelTuner", "XGBTuner"]
