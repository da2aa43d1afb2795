"""Tuning logs: round trips, provenance, corrupt lines, best/merge, and the logs commands."""
from __future__ import annotations

import json
import time
import warnings

import pytest

import autotune
from autotune.cli import main
from autotune.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autotune.record import (CorruptLogWarning, append_records, load_records, make_record, merge,
                             pick_best)
from autotune.templates.gemm_cpu import gemm_packed_template  # noqa: F401


def _records(n=5, size=64, start=0):
    task = autotune.task.create("gemm_packed_cpu", args=(size, size, size))
    out = []
    for k in range(n):
        i = start + 37 * k
        res = MeasureResult((1e-3 * (k + 1), 1.1e-3 * (k + 1)), MeasureErrorNo.NO_ERROR, 0.5, time.time() + k) if k != 2 \
            else MeasureResult.failed(MeasureErrorNo.WRONG_ANSWER, "output 0 differs")
        out.append(make_record(MeasureInput(task, task.config_space.get(i)), res))
    return task, out


def test_roundtrip_and_provenance(tmp_path):
    task, recs = _records()
    log = tmp_path / "a.jsonl"
    append_records(log, recs[:3])
    append_records(log, recs[3:])
    back = load_records(log)
    assert [r.to_json() for r in back] == [r.to_json() for r in recs]
    line = json.loads(log.read_text().splitlines()[0])
    assert line["format"] == "tiletune.record/1" and line["tiletune"]
    assert line["workload"] == ["gemm_packed_cpu", [64, 64, 64]]
    assert line["target"].startswith("llvm -mcpu=") and "-mattr=" in line["target"]
    assert set(line["toolchain"]) == {"llvmlite", "llvm"}
    assert line["config"]["index"] == recs[0].index and "tile_y" in line["config"]["knobs"]
    assert set(line["result"]) >= {"costs", "error_no", "all_cost", "timestamp"}
    assert back[2].result.error_no == MeasureErrorNo.WRONG_ANSWER and back[2].result.costs == ()


def test_corrupt_and_truncated_lines_skipped_with_one_warning(tmp_path):
    _, recs = _records()
    log = tmp_path / "b.jsonl"
    append_records(log, recs[:2])
    with open(log, "a") as f:
        f.write("not json at all\n")
        f.write('{"format": "tiletune.record/99", "x": 1}\n')
        f.write('{"format": "tiletune.record/1", "workload": 5}\n')
        f.write('12\n[1, 2]\n')
    append_records(log, recs[2:4])
    with open(log, "a") as f:
        f.write(recs[4].dumps()[:40])              # torn by a kill in the middle of a write
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        back = load_records(log)
    assert len(back) == 4
    msgs = [str(x.message) for x in w if issubclass(x.category, CorruptLogWarning)]
    assert len(msgs) == 1 and "skipped 6 corrupt or truncated line(s)" in msgs[0]
    append_records(log, recs[4:])                  # appending after a torn line starts a new line
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert len(load_records(log)) == 5


def test_loading_executes_nothing(tmp_path):
    log = tmp_path / "evil.jsonl"
    log.write_text('{"format": "tiletune.record/1", "workload": ["__import__(\'os\').system(\'touch x\')", []]}\n'
                   "cos\nsystem\n(S'touch x'\ntR.\n")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert load_records(log) == []


def test_pick_best_and_merge(tmp_path):
    _, a = _records(5, 64, 0)
    _, b = _records(4, 128, 3)
    append_records(tmp_path / "a.jsonl", a)
    append_records(tmp_path / "b.jsonl", b)
    best = pick_best([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")], str(tmp_path / "best.jsonl"))
    assert len(best) == 2 and {r.cost for r in best} == {min(r.cost for r in a), min(r.cost for r in b)}
    merged = merge([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), str(tmp_path / "a.jsonl")],
                   str(tmp_path / "all.jsonl"))
    assert len(merged) == 9 and len(load_records(tmp_path / "all.jsonl")) == 9


def test_a_config_measured_again_counts_at_its_latest_measurement(tmp_path):
    """The deploy check of ``tune-model`` logs a kernel and its default again at their times in place: the
    deployment, ``pick_best`` and ``merge`` count each config at its latest record, not at a lucky low one of
    the tune (a config timed at 1 ms, then 3 ms: the one at 2 ms wins)."""
    import dataclasses
    task, recs = _records(2)
    lucky, other = recs
    again = dataclasses.replace(lucky, result=MeasureResult((3e-3,), MeasureErrorNo.NO_ERROR, 0.0,
                                                            other.result.timestamp + 1))
    log = tmp_path / "log.jsonl"
    append_records(log, [lucky, other, again])
    with autotune.apply_history_best(str(log)) as ctx:
        assert ctx.best_record(task.workload).index == other.index and len(ctx.best[task.workload]) == 2
    assert [r.index for r in pick_best(str(log), str(tmp_path / "best.jsonl"))] == [other.index]
    merged = merge([str(log)], str(tmp_path / "all.jsonl"))
    assert [(r.index, r.cost) for r in merged] == [(lucky.index, 3e-3), (other.index, other.cost)]


def test_logs_commands(tmp_path, capsys):
    _, a = _records(5, 64, 0)
    log = str(tmp_path / "a.jsonl")
    append_records(log, a)
    assert main(["logs", "show", log, "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "gemm_packed_cpu(64, 64, 64)" in out and "trials 5" in out and "WRONG_ANSWER 1" in out
    assert "GFLOP/s" in out and "top 3" in out
    assert main(["logs", "best", log, "-o", str(tmp_path / "best.jsonl")]) == 0
    assert len(load_records(tmp_path / "best.jsonl")) == 1
    assert main(["logs", "merge", log, log, "-o", str(tmp_path / "m.jsonl")]) == 0
    assert len(load_records(tmp_path / "m.jsonl")) == 5
    pytest.importorskip("matplotlib")
    png = str(tmp_path / "curve.png")
    assert main(["logs", "plot", log, "-o", png]) == 0
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
