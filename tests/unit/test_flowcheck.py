"""harness.flowcheck: a run's flows against the model's, flow by flow. A run made of the model's own
timeline shows no lag; the jobs' drift is the release of each flow after the first job's."""
import json

import pandas as pd
import yaml

from harness import flowcheck, spec as spec_mod
from harness.routing import compute_routes
from harness.planners import flowplan
from tests.helpers import ROOT


def model_run(tmp_path, drift_s=0.0):
    """A results directory whose flows.csv is the model's steady step of experiments/echelon-tensor.yaml
    (fair sharing) in each of 4 steps, job b's flows released ``drift_s`` later than the model's."""
    raw = yaml.safe_load((ROOT / "experiments" / "echelon-tensor.yaml").read_text())
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw))
    sp = spec_mod.load(tmp_path / "spec.yaml")
    routes = compute_routes(sp.topology)
    plan = flowplan.schedule_programs(sp, routes)
    plan.write(tmp_path / "schedule.json")
    fs = plan.flow_scheduler
    res = flowplan.steady_steps(sp, routes, {j.name: j.hosts for j in sp.jobs}, {}, fs["period_s"], "fair")
    rows = []
    for step in range(4):
        ref = 1.0 + step * fs["period_s"]
        for job, r in res.items():
            late = drift_s if job == "b" else 0.0
            for name, rel in r["release_s"].items():
                rows.append({"job": job, "step": step, "flow": name, "reference": ref, "release": ref + rel + late,
                             "finish": ref + r["finish_s"][name] + late})
    pd.DataFrame(rows).to_csv(tmp_path / "flows.csv", index=False)
    return tmp_path


def test_a_run_that_follows_the_model_shows_no_lag(tmp_path):
    df = flowcheck.compare(model_run(tmp_path))
    assert len(df) == 2 * 7 * 4                 # 2 jobs x 7 layers x 4 ranks, one turn
    assert (df.lag_ms.abs() <= 0.05 + 1e-9).all()           # one rounding to 0.1 ms
    assert ((df.emulated_ms - df.model_ms).abs() <= 0.1 + 1e-9).all()


def test_the_jobs_drift_is_measured_against_the_first_job(tmp_path):
    df = flowcheck.compare(model_run(tmp_path, drift_s=0.005))
    b = df[df.job == "b"]
    # both columns rounded to 0.1 ms: their difference within 0.1 ms of the truth, plus float error
    assert ((b.emulated_after_first_ms - b.model_after_first_ms - 5.0).abs() <= 0.1 + 1e-9).all()
    assert ((b.lag_ms - 5.0).abs() <= 0.05 + 1e-9).all()
    assert df[df.job == "a"].model_after_first_ms.isna().all()


def test_a_directory_without_flows_is_one_line_exit_2(tmp_path, capsys):
    assert flowcheck.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no flows.csv" in err
