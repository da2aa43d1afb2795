"""Tuners: the base owns the loop, each strategy chooses the next batch and learns from results.

``ModelTuner`` (the default: a learned cost model; ``XGBTuner``, AutoTVM's name, is ``TVMModelTuner``: it
takes AutoTVM's arguments, and runs no XGBoost),
``RandomTuner``, ``GridSearchTuner``, ``GATuner`` and ``OptunaTuner`` (optuna's samplers).  All run over an
optuna study (see :mod:`autotune.tuner.study`).
"""
from .ga_tuner import GATuner
from .grid_tuner import GridSearchTuner
from .model_tuner import ModelTuner
from .optuna_tuner import OptunaTuner
from .random_tuner import RandomTuner
from .study import TuningStudy
from .tuner import Tuner, TuningStoppedWarning
from .tvm_model_tuner import TVMModelTuner, XGBTuner

TUNERS = {"model": ModelTuner, "random": RandomTuner, "grid": GridSearchTuner, "ga": GATuner, "optuna": OptunaTuner}


def get_tuner(name: str):
    """The tuner class for a name in ``TUNERS``."""
    try:
        return TUNERS[name]
    except KeyError:
        raise ValueError(f"unknown tuner {name!r}; use one of {', '.join(TUNERS)}") from None


__all__ = ["Tuner", "ModelTuner", "TVMModelTuner", "XGBTuner", "RandomTuner", "GridSearchTuner", "GATuner",
           "OptunaTuner", "TuningStudy", "TuningStoppedWarning", "TUNERS", "get_tuner"]
