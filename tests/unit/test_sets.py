"""Experiment sets (interleave reproduce): loading, resuming, aggregation, floors; simulated sets."""
import json
from pathlib import Path

import pytest

from harness import sets
from harness.errors import UsageError


def write_set(tmp_path, body):
    p = tmp_path / "s.yaml"
    p.write_text(body)
    return p


SPEC = str(Path(__file__).resolve().parents[2] / "experiments/demo.yaml")


def test_bad_set_files_name_the_key(tmp_path):
    with pytest.raises(UsageError, match="runs"):
        sets.load_set(write_set(tmp_path, "name: x\n"))
    with pytest.raises(UsageError, match=r"repeats: value 0"):
        sets.load_set(write_set(tmp_path, f"repeats: 0\nruns: [{{spec: {SPEC}, schedulers: [themis]}}]\n"))
    with pytest.raises(UsageError, match=r"floors\[0\]"):
        sets.load_set(write_set(tmp_path, f"runs: [{{spec: {SPEC}, schedulers: [themis]}}]\n"
                                          "floors: [{spec: demo, base: themis, other: x, metric: nope, min: 1}]\n"))
    with pytest.raises(UsageError, match="scheduler"):      # every spec x scheduler validated up front
        sets.load_set(write_set(tmp_path, f"runs: [{{spec: {SPEC}, schedulers: [bogus]}}]\n"))


def fake(spec, d, quiet=False, log=None):
    d.mkdir(parents=True)
    mean = 300.0 if spec.scheduler == "themis" else 250.0
    (d / "summary.json").write_text(json.dumps({
        "scheduler": spec.scheduler, "fidelity": {"ok": True}, "jobs": {},
        "totals": {"iteration_ms_mean": mean + spec.seed, "iteration_ms_p99": 400, "ecn_marks": 10,
                   "slowdown_mean": 1.0, "slowdown_p99": 1.2}}))
    fake.calls.append((spec.scheduler, spec.seed))


def test_execute_resumes_aggregates_and_checks_floors(tmp_path):
    st = sets.load_set(write_set(tmp_path, f"repeats: 2\nruns: [{{spec: {SPEC}, schedulers: [themis, themis+cassini]}}]\n"
                                           "floors: [{spec: demo, base: themis, other: themis+cassini, "
                                           "metric: iteration_ms_mean, min: 1.3}]\n"))
    fake.calls = []
    sets.execute(st, tmp_path / "out", fake, log=lambda m: None)
    assert sorted(fake.calls) == [("themis", 1), ("themis", 2), ("themis+cassini", 1), ("themis+cassini", 2)]
    fake.calls = []
    sets.execute(st, tmp_path / "out", fake, log=lambda m: None)      # complete runs are kept
    assert fake.calls == []
    table = sets.aggregate(st, tmp_path / "out")
    row = table["demo"]["schedulers"]["themis"]
    assert row["iteration_ms_mean"] == pytest.approx(301.5) and row["runs"] == 2
    assert table["demo"]["ratios"]["themis vs themis+cassini"]["iteration_ms_mean"] == pytest.approx(301.5 / 251.5, abs=1e-3)
    (f, got, ok), = sets.check_floors(st, table)
    assert not ok and got == pytest.approx(1.199, abs=1e-3)


def test_simulated_set_writes_complete_directories(tmp_path):
    st = sets.load_set(write_set(tmp_path, f"runs: [{{spec: {SPEC}, schedulers: [themis, themis+cassini], "
                                           "background: 0.0, label: demo-sim}]\n"))
    sets.execute(st, tmp_path / "o", sets.simulated_run, log=lambda m: None)
    md, _ = sets.write(st, tmp_path / "o", plots=False)
    assert "demo-sim | themis vs themis+cassini | 1.192x" in md
    assert not list((tmp_path / "o").rglob("*.partial"))
