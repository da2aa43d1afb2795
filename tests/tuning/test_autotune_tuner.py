"""Tuners: every strategy tunes a tiny GEMM without measuring a config twice; resume; history."""
from __future__ import annotations

import pytest

import autotune
from autotune.record import load_records
from autotune.templates.gemm_cpu import gemm_packed_template  # noqa: F401
from autotune.tuner import GATuner, GridSearchTuner, ModelTuner, OptunaTuner, RandomTuner


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    """Tiny kernels: a second thread only adds noise (workers inherit the environment)."""
    monkeypatch.setenv("TILETUNE_NUM_THREADS", "1")


def _option():
    return autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=2),
                                   runner=autotune.LocalRunner(number=1, repeat=2, timeout=10))


def _task(n=32):
    return autotune.task.create("gemm_packed_cpu", args=(n, n, n))


@pytest.mark.parametrize("cls", [RandomTuner, GridSearchTuner, GATuner, OptunaTuner, ModelTuner])
def test_tuner_measures_distinct_configs(cls, tmp_path):
    log = str(tmp_path / "t.jsonl")
    kwargs = {"min_train": 8} if cls is ModelTuner else {"pop_size": 8} if cls is GATuner else {}
    tuner = cls(_task(), seed=1, **kwargs)
    tuner.tune(n_trial=24, measure_option=_option(), callbacks=[autotune.callback.log_to_file(log)])
    recs = load_records(log)
    assert len(recs) == 24 == tuner.trials_done
    assert len({r.index for r in recs}) == 24
    assert tuner.best_index is not None and tuner.best_gflops > 0
    assert min(r.cost for r in recs) == tuner.best_cost
    study = tuner.study.study
    done = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE" and "config_index" in t.user_attrs]
    assert sorted(t.user_attrs["config_index"] for t in done) == sorted(r.index for r in recs)
    assert tuner.default_index() in {r.index for r in recs[:tuner.batch_size]}   # the default goes first
    assert (tmp_path / "t.jsonl.study.db").exists()


def test_resume_skips_what_the_log_holds(tmp_path):
    log = str(tmp_path / "r.jsonl")
    RandomTuner(_task(), seed=0).tune(n_trial=8, measure_option=_option(), callbacks=[autotune.callback.log_to_file(log)])
    first = [r.index for r in load_records(log)]
    again = RandomTuner(_task(), seed=0)           # same seed: proposes the same configs first
    again.tune(n_trial=16, measure_option=_option(), callbacks=[autotune.callback.log_to_file(log)])
    recs = load_records(log)
    assert [r.index for r in recs[:8]] == first
    assert len(recs) == 16 and len({r.index for r in recs}) == 16
    assert len(again.history) == 8 and again.trials_done == 16


def test_resume_without_the_study_file(tmp_path):
    log = str(tmp_path / "s.jsonl")
    RandomTuner(_task(), seed=0).tune(n_trial=8, measure_option=_option(), callbacks=[autotune.callback.log_to_file(log)])
    (tmp_path / "s.jsonl.study.db").unlink()
    OptunaTuner(_task(), seed=0).tune(n_trial=12, measure_option=_option(), callbacks=[autotune.callback.log_to_file(log)])
    recs = load_records(log)
    assert len(recs) == 12 and len({r.index for r in recs}) == 12


def test_model_tuner_warm_start_from_another_task(tmp_path):
    log = str(tmp_path / "h.jsonl")
    RandomTuner(_task(32), seed=0).tune(n_trial=24, measure_option=_option(),
                                        callbacks=[autotune.callback.log_to_file(log)])
    tuner = ModelTuner(_task(64), seed=0)
    tuner.load_history(load_records(log))
    assert tuner.model.is_trained and tuner.trials_done == 0 and not tuner.visited
    batch = tuner.next_batch(8)                    # chosen by the model, not at random
    assert len(set(batch)) == 8 and len(tuner.pool) > 8


def test_early_stopping(tmp_path):
    tuner = GridSearchTuner(_task())
    tuner.tune(n_trial=200, measure_option=_option(), early_stopping=8)
    assert tuner.trials_done < 200


def test_grid_search_over_given_indices_measures_exactly_those(tmp_path):
    log = str(tmp_path / "t.jsonl")
    task = _task()
    want = [len(task.config_space) - 1, 3, 0, 3]
    tuner = GridSearchTuner(task, indices=want)
    tuner.tune(n_trial=100, measure_option=_option(), callbacks=[autotune.callback.log_to_file(log)])
    assert [r.index for r in load_records(log)] == [want[0], 3, 0] and not tuner.has_next()
    with pytest.raises(ValueError, match="outside"):
        GridSearchTuner(task, indices=[len(task.config_space)])


def test_max_seconds_stops_after_the_batch_in_flight(tmp_path):
    tuner = GridSearchTuner(_task())
    tuner.tune(n_trial=200, measure_option=_option(), max_seconds=0)
    assert tuner.trials_done == tuner.batch_size

