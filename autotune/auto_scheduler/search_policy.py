"""``SketchPolicy``: evolutionary search over sketch points, ranked by the learned cost model.

One round (``continue_search_one_round(n, measurer)``, TVM's name): a population of random points from
the sketches plus mutations and crossovers of the best measured points is built into states, lowered
(no isl check) and scored by the policy's ``XGBModel`` on ``features.extract`` of the loop IR; a
second generation mutates the best scored.  The round measures the top ``n`` new states with the
``ProgramMeasurer`` (builder, runner and callbacks, open across rounds), an ``eps_greedy`` share drawn
at random from the rest, and the model is refit on every measurement.  Until the model is trained the
first round is the default point and random ones; a model pretrained on other tasks' records
(``XGBModel.update_from_file``, transfer) ranks the first round already (the default point first).
``preload(log)`` (``PreloadMeasuredStates``, an init-search callback) reads the task's trials of a log:
they count as measured and are never measured again (resume).  Candidates isl refuses when they are
built (an access out of bounds, a racing parallel or vector loop) cost one trial and are counted.
``run(options)`` is TVM's search: preload the options' log, then rounds until the trials are in it.

With a shared study (``share(storage, log)``; ``run`` joins ``TuningOptions.storage``, or SQLite beside
the log: ``storage.py``) each round first learns the trials other processes finished (model data and
best, not counted as this process's trials), skips candidates measured or claimed elsewhere, and
claims its batch before measuring it; a trial is logged before it is finished in the study.
"""
from __future__ import annotations

import random
import sys
import time

import numpy as np

from ..features import FAILED_VECTOR, extract
from ..measure import MeasureErrorNo, MeasureInput
from .compute_dag import key_hash
from .cost_model import XGBModel, features_of
from .measure import ProgramMeasurer
from .records import RecordToFile, load_records, steps_key
from .search_task import StateConfig, key_index, steps_index
from .storage import SharedSearch

REFUSALS = ("OutOfBoundsError", "ScheduleError")


def _is_refusal(result) -> bool:
    return result.error_no in (MeasureErrorNo.BUILD_ERROR, MeasureErrorNo.INSTANTIATION_ERROR) and \
        result.error_msg.startswith(REFUSALS)


class PreloadMeasuredStates:
    """TVM's init-search callback: ``SketchPolicy(task, init_search_callbacks=[PreloadMeasuredStates(log)])``
    makes the policy read its task's trials in ``log`` (``policy.preload``): they count as measured,
    are never measured again and train its cost model."""

    def __init__(self, filename: str):
        self.filename = str(filename)

    def __call__(self, policy) -> None:
        policy.preload(self.filename)


class SketchPolicy:
    """TVM's search policy: ``task.tune(options, search_policy=SketchPolicy(task, program_cost_model=...))``.

    ``program_cost_model``: an ``auto_scheduler.XGBModel`` (possibly pretrained with
    ``update_from_file``, possibly shared by the policies of several tasks) or an
    ``autotune.cost_model.CostModel`` (default: a fresh model); ``params``: ``population`` (random
    points per round, 48), ``elites`` (best measured points mutated, 8), ``eps_greedy`` (share of each
    round drawn at random, 0.1); ``init_search_callbacks``: run on the new policy
    (``PreloadMeasuredStates``).

    One round is ``continue_search_one_round(n, measurer)`` with a ``ProgramMeasurer``; ``run(options)``
    loops over rounds; ``share(storage, log)`` joins the study that processes tuning this task on one
    storage share."""

    def __init__(self, task, program_cost_model=None, params: dict | None = None, seed: int | None = None,
                 verbose: int = 1, init_search_callbacks=None):
        params = dict(params or {})
        unknown = set(params) - {"population", "elites", "eps_greedy"}
        if unknown:
            raise ValueError(f"SketchPolicy: unknown params {sorted(unknown)} (population, elites, eps_greedy)")
        self.task = task
        self.population, self.elites = int(params.get("population", 48)), int(params.get("elites", 8))
        self.eps = float(params.get("eps_greedy", 0.1))
        self.seed = seed
        self.verbose = verbose
        self.measured: dict[str, float] = {}           # steps key -> cost (inf: failed)
        self.points: dict[str, object] = {}             # steps key -> Point (measured here)
        self.X: list[np.ndarray] = []                   # this task's rows (also in the model)
        self.costs: list[float] = []
        model = program_cost_model if program_cost_model is not None else XGBModel(seed=0)
        self.model = model if isinstance(model, XGBModel) else XGBModel(model=model)
        self.group = key_hash(task.workload_key)
        self.isl_refused = 0        # candidates the isl analysis refused at build time
        self.invalid_points = 0     # sketch points whose steps a schedule primitive refused
        self.seconds = {"search": 0.0, "model": 0.0, "measure": 0.0}
        self.best_cost, self.best_steps = float("inf"), None
        self.history: list[tuple[int, float]] = []      # (trial, best cost so far)
        self.trials_done = 0        # trials of this process's log (read back and measured)
        self.learned = 0            # trials other processes finished, learned from the shared study
        self.rounds = 0             # rounds measured by this policy
        self.exhausted = False      # the last round found no new candidate
        self.shared: SharedSearch | None = None
        self._busy: set[int] = set()                    # steps hashes claimed or finished elsewhere
        self._unshared: list[tuple[list, object]] = []  # preloaded trials to put into a study joined later
        self._rng = random.Random(0 if seed is None else seed)
        for cb in init_search_callbacks or ():
            cb(self)

    # -- the loop ---------------------------------------------------------------------------------------
    def run(self, opts):
        """Search until ``opts.num_measure_trials`` trials of this task are in the log (TVM's ``Search``)."""
        from .workload_registry import save_task_payloads
        self._rng = random.Random(opts.seed if self.seed is None else self.seed)
        logs = [cb.filename for cb in opts.measure_callbacks if isinstance(cb, RecordToFile)]
        if self.shared is None:
            shared = SharedSearch.open(self.task, opts, logs[0] if logs else None)
            if shared is not None:
                self._join(shared)
        for log in logs:
            self.preload(log)
        if logs:
            save_task_payloads(logs[0], [self.task])
        resumed = self.trials_done
        target = opts.num_measure_trials
        measurer = ProgramMeasurer(opts.builder, opts.runner, opts.measure_callbacks, opts.verbose)
        stale, lost = 0, 0
        try:
            while self.trials_done < target:
                n = min(opts.num_measures_per_round, target - self.trials_done)
                before = self.best_cost
                inputs, _ = self.continue_search_one_round(n, measurer)
                if not inputs:
                    lost += 1
                    if self.exhausted or lost >= 5:     # nothing new, or peers took every candidate 5 times
                        break
                    continue
                lost = 0
                stale = stale + 1 if self.best_cost >= before else 0
                if opts.verbose:
                    print(f"[auto_scheduler] {self.task.desc}: trials {self.trials_done}/{target}, best "
                          f"{self.best_cost * 1e3:.4f} ms ({self._gflops():.1f} GFLOPS), isl refused {self.isl_refused}"
                          + (f", {self.learned} learned from peers" if self.learned else ""), file=sys.stderr)
                if opts.early_stopping and stale * opts.num_measures_per_round >= opts.early_stopping:
                    break
        finally:
            measurer.close()
        if opts.verbose:
            s = self.seconds
            print(f"[auto_scheduler] {self.task.desc}: {self.trials_done - resumed} measured, {resumed} from the log, "
                  f"{self.learned} from peers; search {s['search']:.1f} s, cost model {s['model']:.1f} s, "
                  f"build+measure {s['measure']:.1f} s; isl refused {self.isl_refused}, invalid sketch points "
                  f"{self.invalid_points}", file=sys.stderr)
        return self

    def continue_search_one_round(self, num_measure: int, measurer) -> tuple[list, list]:
        """One round (TVM's name): learn what peers finished, propose ``num_measure`` new candidates,
        claim them (with a shared study), measure them with ``measurer`` (a ``ProgramMeasurer``: its
        callbacks log them before they are finished in the study), learn the results and refit the cost
        model.  Returns ``(inputs, results)``; both empty when no candidate was left (``exhausted``) or
        peers claimed them all."""
        t0 = time.perf_counter()
        self._sync()
        batch = self._propose(num_measure, self._rng, first=self.rounds == 0 and not self.measured)
        self.seconds["search"] += time.perf_counter() - t0
        self.exhausted = not batch
        if not batch:
            return [], []
        inputs = [MeasureInput(self.task, StateConfig(tuple(state.to_json()))) for _, state, _ in batch]
        claims = self._claim(inputs)
        if claims is not None:
            batch = [b for b, i in zip(batch, inputs) if i.config.index in claims]
            inputs = [i for i in inputs if i.config.index in claims]
            if not batch:
                return [], []
        t0 = time.perf_counter()
        try:
            results = measurer.build_and_run(inputs)
        except BaseException:
            for tid in (claims or {}).values():     # unmeasured: let peers (or a rerun) take them
                self.shared.release(tid)
            raise
        self.seconds["measure"] += time.perf_counter() - t0
        try:
            measurer.run_callbacks(self, inputs, results)       # the log first: a finished trial is logged
        finally:
            for inp, res in zip(inputs, results):
                if claims is not None:
                    self.shared.finish(claims[inp.config.index], res)
        for (point, state, vec), inp, res in zip(batch, inputs, results):
            self._add(steps_key(inp.config.payload), vec, res.cost, point, state)
            self.isl_refused += _is_refusal(res)
        self._fit()
        self.rounds += 1
        return inputs, results

    def share(self, storage, log: str | None = None, study_name: str | None = None, stale_after: float = 3600.0):
        """Join the study of this task on ``storage`` (an optuna storage URL or object) as the process
        logging to ``log``: candidates are claimed before they are measured, peers' trials are learned."""
        self._join(SharedSearch(self.task, storage, study_name, log, stale_after))
        return self

    def _join(self, shared: SharedSearch) -> None:
        self.shared = shared
        busy = shared.busy()
        for steps, result in self._unshared:
            if steps_index(steps) not in busy:
                shared.record_known(steps, result)
        self._unshared = []

    def preload(self, log) -> int:
        """Read this task's trials in ``log`` (TVM's ``PreloadMeasuredStates``): they count as measured
        trials, are never measured again and train the cost model; a shared study lacking them gets
        them.  Returns how many were new."""
        busy = self.shared.busy() if self.shared is not None else set()
        new = 0
        for rec in load_records([str(log)], self.task.workload_key):
            if rec.target != self.task.target:
                continue
            key = steps_key(rec.knobs["steps"])
            if key in self.measured:
                continue
            self._add(key, self._features(rec.knobs["steps"]), rec.cost)
            new += 1
            if self.shared is None:
                self._unshared.append((rec.knobs["steps"], rec.result))
            elif rec.index not in busy:
                self.shared.record_known(rec.knobs["steps"], rec.result)
        if new:
            self._fit()
        return new

    def _fit(self) -> None:
        t0 = time.perf_counter()
        self.model.fit()
        self.seconds["model"] += time.perf_counter() - t0

    def _claim(self, inputs) -> dict[int, int] | None:
        """Claim the batch in the shared study: ``{steps hash: trial id}`` won (None: no study)."""
        if self.shared is None:
            return None
        won = self.shared.claim([i.config for i in inputs])
        self._busy |= {i.config.index for i in inputs if i.config.index not in won}
        return won

    def _sync(self) -> None:
        """Learn the trials peers finished (model data and best) and skip what they are measuring."""
        if self.shared is None:
            return
        known = {key_index(k) for k in self.measured}
        new = self.shared.foreign(known)
        for steps, result in new:
            self._add(steps_key(steps), self._features(steps), result.cost, own=False)
        self.learned += len(new)
        self._busy = self.shared.busy() - known
        if new:
            self._fit()

    def _gflops(self) -> float:
        return self.task.flop / self.best_cost / 1e9 if np.isfinite(self.best_cost) and self.task.flop else 0.0

    def _add(self, key: str, vec, cost: float, point=None, state=None, own: bool = True) -> None:
        self.measured[key] = cost
        self.trials_done += own
        if point is not None:
            self.points[key] = point
        self.X.append(vec)
        self.costs.append(cost)
        self.model.add(vec, cost, self.group)
        if cost < self.best_cost:
            self.best_cost, self.best_steps = cost, key
        self.history.append((len(self.measured), self.best_cost))

    def _features(self, steps) -> np.ndarray:
        try:
            return features_of(self.task, steps)
        except Exception:  # noqa: BLE001 - a record that no longer replays scores as failed
            return FAILED_VECTOR

    # -- candidates ----------------------------------------------------------------------------------------
    def _elite_points(self) -> list:
        ranked = sorted((c, k) for k, c in self.measured.items() if k in self.points and np.isfinite(c))
        return [self.points[k] for _, k in ranked[:self.elites]]

    def _candidates(self, points, seen: set, limit: int | None = None) -> list:
        """Build, dedupe and featurize points: [(point, state, features)], the first ``limit`` of them."""
        from tensorir.schedule import ScheduleError
        out = []
        for p in points:
            if limit is not None and len(out) >= limit:
                break
            try:
                state = self.task.space.build(p)
            except (ScheduleError, ValueError, TypeError, KeyError, IndexError):
                self.invalid_points += 1
                continue
            key = state.key()
            if key in seen or key in self.measured or (self._busy and key_index(key) in self._busy):
                continue
            seen.add(key)
            try:
                vec = extract(state.lower(check=False, expand=False))
            except Exception:  # noqa: BLE001 - a state that does not lower is refused here
                self.invalid_points += 1
                continue
            out.append((p, state, vec))
        return out

    def _propose(self, n: int, rng: random.Random, first: bool) -> list:
        pol, seen = self.task.space, set()
        if not self.model.is_trained:
            points = ([pol.default()] if first else []) + [pol.sample(rng) for _ in range(4 * n)]
            return self._candidates(points, seen, limit=n)
        default = self._candidates([pol.default()], seen) if first else []   # pretrained: default first
        n -= len(default)
        elites = self._elite_points()
        points = [pol.sample(rng) for _ in range(self.population)]
        for e in elites:
            points += [pol.mutate(e, rng) for _ in range(3)]
            points.append(pol.crossover(e, rng.choice(elites), rng))
        pool = self._candidates(points, seen)
        scored = self._score(pool)
        children = []
        for p, _, _ in scored[:self.population // 4]:
            children += [pol.mutate(p, rng), pol.mutate(pol.mutate(p, rng), rng)]
        pool = self._score(scored + self._candidates(children, seen))
        n_random = int(round(self.eps * n))
        chosen = pool[:n - n_random]
        rest = pool[n - n_random:]
        chosen += rng.sample(rest, min(n_random, len(rest)))
        return default + chosen

    def _score(self, pool: list) -> list:
        if not pool:
            return []
        t0 = time.perf_counter()
        scores = self.model.predict_features(np.array([v for _, _, v in pool]))
        self.seconds["model"] += time.perf_counter() - t0
        order = np.argsort(-scores, kind="stable")
        return [pool[i] for i in order]


__all__ = ["SketchPolicy", "PreloadMeasuredStates"]
