"""EchelonFlow in emulation: two tensor-parallel jobs sharing links under echelon pacing follow the
flow scheduler's plan; a data-parallel program job runs next to a pipeline on priority queues;
re-planned priorities reach the flows; a profile job runs next to a program job. The two that hold a
step within 10 % of the plan's prediction re-measure the model's accuracy and run in
``make test-experiments`` (marker ``experiment``); the other two, in ``make test``, assert which flows
ran and with what priority.

Asserted on one run (20 steps per job; the first left out as warm-up): the results directory has
every flow (2 jobs x 20 steps x 7 layers x 4 ranks), each job's measured step time is within 10 % of
the plan's prediction, and the paced flows never arrive before the plan's last byte sent: the pacer
never sends ahead of the plan's curve, and the plan's last byte sent is its target minus the model's
latency of a flow over 6 hops (1 ms for timer slack).
How late they arrive is not bounded here: the plan is made with the calibrated model
(harness.sim.calibration, issue 17), which is slightly optimistic for these jobs, and a flow
released later than planned goes at once (the pacer's accuracy with free tokens:
tests/emulation/test_pacing.py). Measured on this machine kind (2026-12-04, this test's spec, 2
quiet runs with the model calibrated under telemetry): steps +1.0 to +2.6 % of the prediction;
median pacing error +1.0 to +3.2 ms with a median budget (target - release) of 4.7-5.5 ms. With
the first calibration of that day (3 runs): steps +3.5 to +5.7 %, pacing error +7.2 to +8.6 ms.
With the third fit (2026-12-05, one quiet run on the faster machine kind, at dilation 2): tensor
-0.3 / +0.6 %, pacing error +0.9 ms; pipeline + data-parallel -0.8 / 0.0 %.
The tests that assert the guard's verdict and the 10 % run at ``tests.helpers.TEST_DILATION`` (2):
undilated, a slower machine of this kind stepped 10.9-13.4 % off the prediction (2026-12-04, CI
and a quiet run); at 2 on it (two quiet runs each): tensor -1.1 to +1.5 %, pipeline +
data-parallel +0.3 to +1.0 %, busy seconds at most 4.3 % (limit 10 %).
"""
import pytest
import json

import pandas as pd
import yaml

from tests.helpers import ROOT, TEST_DILATION, interleave, run_kept

pytestmark = pytest.mark.root


def write_spec(tmp_path, spec_name, iterations, **changes):
    """experiments/``spec_name`` with job i at ``iterations[i]`` steps (or each at ``iterations``) and
    top-level keys replaced by ``changes``, written under ``tmp_path``."""
    raw = yaml.safe_load((ROOT / "experiments" / spec_name).read_text())
    raw.update(changes)
    for i, j in enumerate(raw["jobs"]):
        j["iterations"] = iterations[i] if isinstance(iterations, list) else iterations
    spec = tmp_path / spec_name
    spec.write_text(yaml.safe_dump(raw))
    return spec


def run_spec(tmp_path, spec_name, iterations, **changes):
    """Run ``write_spec``'s spec under fixed:echelon; returns (summary, results directory), having
    checked that the run succeeded (not the guard's verdict)."""
    out = tmp_path / "run"
    p = interleave("run", str(write_spec(tmp_path, spec_name, iterations, **changes)), "--scheduler", "fixed:echelon",
                   "--out", str(out), "--quiet", "--json", timeout=300)
    assert p.returncode == 0, f"run {out}: {p.stderr[-2000:]}"
    return json.loads(p.stdout), out


def run_echelon(tmp_path, spec_name, iterations, **changes):
    """``write_spec``'s spec at ``TEST_DILATION`` under fixed:echelon, kept by the fidelity guard
    (tests.helpers.run_kept), having checked that every job's step is within 10 % of the plan's
    prediction and never faster than with no communication."""
    spec = write_spec(tmp_path, spec_name, iterations, time_dilation=TEST_DILATION, **changes)
    s, out = run_kept(spec, tmp_path / "run", "--scheduler", "fixed:echelon", timeout=300)
    assert s["flow_scheduler"] == "echelon", f"run {out}: flow_scheduler {s['flow_scheduler']}"
    for name, j in s["jobs"].items():
        step, pred = j["iteration_ms_mean"], j["predicted_step_ms"]
        assert abs(step / pred - 1) <= 0.10, f"run {out}, job {name}: step {step:.1f} ms, predicted {pred:.1f} (within 10 %)"
        assert step >= j["iteration_ms_profile"], \
            f"run {out}, job {name}: step {step:.1f} ms under its no-communication {j['iteration_ms_profile']:.1f}"
    return s, out


@pytest.mark.experiment
def test_echelon_pacing_follows_the_plan(tmp_path):
    _s, out = run_echelon(tmp_path, "echelon-tensor.yaml", 20)
    flows = pd.read_csv(out / "flows.csv")
    assert len(flows) == 2 * 20 * 7 * 4
    # the plan's arrival (target) is its last byte sent plus the model's latency over 6 links (every
    # flow here crosses pods; harness.sim.calibration)
    fs = json.loads((out / "schedule.json").read_text())["flow_scheduler"]
    lat = 6 * fs["hop_latency_s"] + fs["model"]["flow_latency_s"]
    f = flows[flows.step > 0]
    early = f.target - lat - f.finish
    assert (early <= 0.001).all(), f"run {out}: {int((early > 0.001).sum())} flows arrived before the plan's last byte (latest by {early.max() * 1000:.1f} ms; at most 1 ms)"


@pytest.mark.experiment
def test_a_data_parallel_job_runs_next_to_a_pipeline_on_priority_queues(tmp_path):
    """experiments/echelon-dp.yaml (6 steps) on priority ports under echelon by priorities: every flow of both
    jobs arrives, each data-parallel rank's step ends only after every bucket sent to it arrived
    (the optimizer step waits for all), flows carry priorities, and each job's step is within 10 %
    of the plan's prediction (measured 2026-12-04, one run: +2.1 % pipeline, +0.3 % data-parallel;
    the set's 3 repeats: model 0.5-0.8 % below the emulated mean, results/echelon/README.md)."""
    s, out = run_echelon(tmp_path, "echelon-dp.yaml", 6, link={"rate_mbps": 50, "sharing": "priority"},
                         echelon_mechanism="priority")
    a, b = s["jobs"]["a"], s["jobs"]["b"]
    assert (a["flows"], b["flows"]) == (48 * 6, 16 * 6)
    assert (a["flows_prioritized"], b["flows_prioritized"]) == (48, 16)
    flows = pd.read_csv(out / "flows.csv")
    iters = pd.read_csv(out / "iterations.csv")
    last = flows[flows.job == "b"].groupby(["dst", "step"]).finish.max()
    ends = iters[iters.job == "b"].set_index(["worker", "iteration"]).end
    for (w, k), t in last.items():
        assert ends[(w, k)] >= t, (w, k)


def test_re_planned_priorities_reach_the_flows_from_the_step_they_name(tmp_path):
    """experiments/echelon-gpipe.yaml (6 steps) on priority ports under echelon with ``replan:
    {every_steps: 2}`` (harness.planners.replan): the runner re-plans from the receivers'
    arrivals at least twice, every agent loads the tables, and every flow of a step from a table's
    ``from_step`` on carries that table's level (flows.csv's priority: the level its sender put in
    the DSCP), the plan's own levels before. What is asserted is which level each flow carried, not
    how fast the steps went, so the fidelity guard's verdict is not required here (measured
    2026-12-04 on a machine whose guard flagged every run: 576 of 576 flows carried their table's
    level)."""
    s, out = run_spec(tmp_path, "echelon-gpipe.yaml", 6, link={"rate_mbps": 50, "sharing": "priority"},
                      replan={"every_steps": 2})
    assert s["replan"]["plans"] >= 2 and s["replan"]["agents_loaded_min"] >= 1, s["replan"]
    plan = json.loads((out / "schedule.json").read_text())["flow_scheduler"]
    tables = pd.read_csv(out / "replans.csv")
    flows = pd.read_csv(out / "flows.csv")
    assert flows.priority.notna().all()
    checked = 0
    for job, d in plan["jobs"].items():
        index = {f["name"]: i for i, f in enumerate(d["flows"])}
        mine = tables[tables.job == job].sort_values("from_step")
        for r in flows[flows.job == job].itertuples():
            applies = mine[mine.from_step <= r.step]
            if len(applies):
                checked += 1
                assert int(applies.iloc[-1].priority.split()[index[r.flow]]) == r.priority, r
            else:
                assert r.priority in d["flows"][index[r.flow]]["priority"], r
    # tables from steps 3 and 5 (after steps 0-1 and 2-3 complete): both jobs' flows in steps 3-5
    assert checked >= 2 * 48 * 2, f"run {out}: {checked} flows in re-planned steps"


def test_a_profile_job_runs_next_to_a_program_job(tmp_path):
    """experiments/echelon-mixed.yaml (pipeline a: 4 steps; VGG19 b, replayed from its profile: 20
    iterations) on priority ports under echelon by priorities: both jobs run every iteration, every flow of the
    pipeline arrives with a priority, and the totals count both jobs (their mean lies between the
    two jobs' means). Which jobs ran and what was counted is asserted, not their speed, so the
    fidelity guard's verdict is not required here."""
    s, out = run_spec(tmp_path, "echelon-mixed.yaml", [4, 20], link={"rate_mbps": 50, "sharing": "priority"},
                      echelon_mechanism="priority")
    a, b = s["jobs"]["a"], s["jobs"]["b"]
    assert (a["iterations"], b["iterations"]) == (4, 20), f"run {out}: iterations a {a['iterations']}, b {b['iterations']}"
    assert a["flows"] == 4 * 48 and a["flows_prioritized"] == 48
    assert pd.read_csv(out / "flows.csv").priority.notna().all()
    lo, hi = sorted((a["iteration_ms_mean"], b["iteration_ms_mean"]))
    assert lo < s["totals"]["iteration_ms_mean"] < hi
