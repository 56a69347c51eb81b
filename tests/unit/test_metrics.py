"""One results schema (harness.metrics): the emulator's summary and the simulator's have the same
keys, the same rounding, and unknown keys are refused."""
import numpy as np
import pandas as pd
import pytest

from harness import metrics, spec as spec_mod
from harness.replay import COLUMNS
from harness.runner import summarize
from harness.planners.schedule import schedule
from harness.simulate import simulate_spec
from harness.telemetry import COLUMNS as LINK_COLUMNS
from tests.helpers import ROOT
from agents.timing import Dilation


def test_job_entries_round_by_the_table_and_fill_what_is_not_measured():
    e = metrics.job(model="vgg19", iterations=10.4, iteration_ms_mean=300.123456, jct_s=1.23456, ecn_marks=7.6)
    assert list(e) == list(metrics.JOB)
    assert e["iterations"] == 10 and e["iteration_ms_mean"] == 300.12 and e["jct_s"] == 1.235
    assert e["ecn_marks"] == 8 and e["shift_error_ms_p50"] is None and e["iteration_ms_profile"] is None
    assert metrics.job(iteration_ms_profile=255)["iteration_ms_profile"] == 255     # an integer stays one
    with pytest.raises(KeyError, match="iteration_time"):
        metrics.job(iteration_time=3)
    with pytest.raises(KeyError):
        metrics.totals(mean=1)


def test_weighted_percentile_and_overhead():
    assert metrics.percentile([1, 2, 3, 4], 50, weights=[1, 1, 1, 1]) == 2
    assert metrics.percentile([1, 2, 3, 4], 99, weights=[0, 0, 0, 1]) == 4
    assert metrics.percentile([], 99) is None and metrics.mean([]) is None
    assert metrics.communication_overhead_s([(300.0, 255.0, 100), (None, 1.0, 5)]) == pytest.approx(4.5)


def fake_measurement(plan, it_s=0.3, n=10):
    rows = []
    for j in plan.jobs:
        for w in range(len(j.hosts)):
            for k in range(n):
                t = 3.0 + k * it_s
                rows.append((j.name, w, k, k, t, t + 0.1, t + 0.2, t + it_s, 0))
    iters = pd.DataFrame(rows, columns=COLUMNS)
    started = {j.name: {"hosts": j.hosts, "t0": 3.0, "at": 0.5, "first_slot": 0} for j in plan.jobs}
    ce1 = {(j.name, h): 4 for j in plan.jobs for h in j.hosts}
    agents = {(j.name, 0): {"realignments": 1, "timer_late_ms": {"p99": 1.0}} for j in plan.jobs}
    return iters, {"started": started, "ce0": {}, "ce1": ce1, "agents": agents, "idle": [0.9] * 10}


def test_emulated_and_simulated_summaries_share_one_schema():
    sp = spec_mod.load(ROOT / "experiments" / "demo.yaml")
    plan = schedule(sp)
    iters, m = fake_measurement(plan)
    emu = summarize(sp, plan, iters, pd.DataFrame(columns=LINK_COLUMNS), m, Dilation(1), sp.topology)
    sim = simulate_spec(sp)
    own = {"simulator", "simulated", "telemetry"}          # each backend's own section
    assert set(emu) - own == set(sim) - own
    assert list(emu["totals"]) == list(sim["totals"]) == list(metrics.TOTALS)
    for name in emu["jobs"]:
        assert list(emu["jobs"][name]) == list(sim["jobs"][name]) == list(metrics.JOB)
    a = emu["jobs"]["vgg19-a"]
    assert a["iteration_ms_mean"] == pytest.approx(300.0) and a["ecn_marks"] == 8 and a["alignment"] == "group"
    assert a["queue_s"] == pytest.approx(0.5) and a["realignments"] == 1


def test_program_jobs_share_one_schema_too():
    sp = spec_mod.load(ROOT / "experiments" / "echelon-tensor.yaml")
    sim = simulate_spec(sp)
    keys = list(metrics.JOB) + list(metrics.PROGRAM_JOB)
    assert all(list(v) == keys for v in sim["jobs"].values())
    assert list(sim["totals"]) == list(metrics.TOTALS)
    assert np.isfinite(sim["totals"]["iteration_ms_mean"])


def test_priority_marks_sum_the_switch_ports_per_level():
    from harness.metrics import priority_marks
    counters = {"s1-eth1": {"marked": 7, "marked_level": [5, 0, 2, 0, 0, 0, 0, 0]},
                "s2-eth3": {"marked": 4, "marked_level": [1, 0, 0, 3, 0, 0, 0, 0]},
                "s3-eth1": {"marked": 9}}                      # a FIFO port: no levels
    out = priority_marks(counters, 4)
    assert out["levels"] == {"0": 6, "1": 0, "2": 2, "3": 3} and "most urgent" in out["meaning"]


def test_a_spec_with_program_and_profile_jobs_totals_every_job():
    """experiments/echelon-mixed.yaml: the pipeline's steps (1.5 s) and VGG19's iterations (0.3 s)
    both count in the totals; each job keeps its own entry."""
    from harness.replay import FLOW_COLUMNS
    from harness.runner import add_step_metrics
    sp = spec_mod.load(ROOT / "experiments" / "echelon-mixed.yaml")
    plan = schedule(sp)
    assert [j.iteration_ms for j in plan.jobs][1] == sp.profiles["vgg19"].iteration_ms
    assert list(plan.flow_scheduler["jobs"]) == ["a"] and "b" in plan.flow_scheduler["model_note"]
    iters, m = fake_measurement(plan, n=5)
    a = iters.job == "a"
    iters.loc[a, "end"] = iters.loc[a, "start"] + 1.5
    flows = pd.DataFrame([("a", k, f["name"], f["src"], f["dst"], f["bytes"], 3.0 + k, 3.0 + k, 3.0 + k, 3.1 + k, None, 0)
                          for k in range(5) for f in plan.flow_scheduler["jobs"]["a"]["flows"]], columns=FLOW_COLUMNS)
    steady = {}
    s = summarize(sp, plan, iters, pd.DataFrame(columns=LINK_COLUMNS), m, Dilation(1), sp.topology, steady)
    add_step_metrics(s, plan, iters, flows, steady)
    assert s["jobs"]["a"]["iteration_ms_mean"] == pytest.approx(1500) and s["jobs"]["a"]["flows"] == 5 * 48
    assert s["jobs"]["b"]["iteration_ms_mean"] == pytest.approx(300) and "predicted_step_ms" not in s["jobs"]["b"]
    assert s["totals"]["iteration_ms_mean"] == pytest.approx(900)             # 4 steady of each
    assert s["totals"]["slowdown_mean"] == pytest.approx((1500 / 1320 + 300 / 298) / 2, rel=1e-3)
