"""``OptunaTuner``: optuna's own samplers (TPE by default) choose the knobs.

Each suggestion is an optuna trial asked from the task's study with one integer parameter per knob;
the tuner base claims it like any other trial, so the sampler learns from every measurement in the
study, including those of other tuners and processes.  A suggestion that repeats a measured config
is completed at once with the known cost (no measurement), so the sampler moves on.
"""
from __future__ import annotations

from .study import TuningStudy
from .tuner import Tuner

SAMPLERS = ("tpe", "random", "cmaes", "qmc")


def make_sampler(name, seed=None):
    import optuna
    if not isinstance(name, str):
        return name
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, constant_liar=True, multivariate=True)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    if name == "qmc":
        return optuna.samplers.QMCSampler(seed=seed, warn_independent_sampling=False)
    raise ValueError(f"unknown optuna sampler {name!r}; use one of {', '.join(SAMPLERS)} or a sampler object")


class OptunaTuner(Tuner):
    def __init__(self, task, sampler="tpe", **kwargs):
        super().__init__(task, **kwargs)
        self.sampler = make_sampler(sampler, self.seed)
        self.known: dict[int, float] = {}

    def _make_study(self, storage, log: str | None = None) -> TuningStudy:
        return TuningStudy(self.task, storage, self.study_name, sampler=self.sampler, log=log)

    def update(self, inputs, results) -> None:
        for inp, r in zip(inputs, results):
            self.known[inp.config.index] = r.cost

    def next_batch(self, batch_size: int) -> list[int]:
        from optuna.trial import TrialState
        study, out = self.study, []
        for _ in range(4 * batch_size):
            if len(out) >= batch_size:
                break
            trial = study.study.ask(study.distributions)
            idx = study.index_of_params(trial.params)
            if not self.task.config_space.is_index_valid(idx):      # a combination the space's filter refuses
                study.release(trial._trial_id)
                continue
            if idx in self.visited or idx in self.asked:
                if idx in self.known:
                    study.storage.set_trial_user_attr(trial._trial_id, "copy_of_config", idx)
                    study.storage.set_trial_state_values(trial._trial_id, TrialState.COMPLETE, [self.known[idx]])
                else:
                    study.release(trial._trial_id)
                continue
            self.asked[idx] = trial._trial_id
            out.append(idx)
        return out


__all__ = ["OptunaTuner", "make_sampler"]
