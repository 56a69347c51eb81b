"""EchelonFlow in emulation: two tensor-parallel jobs sharing links under echelon pacing follow the
flow scheduler's plan.

Asserted on one run (20 steps per job; the first left out as warm-up): the results directory has
every flow (2 jobs x 20 steps x 7 layers x 4 ranks), each job's measured step time is within 10 % of
the plan's prediction, and the paced flows arrive between the plan's last byte sent and their target
plus 5 % of the median flow's time budget (the bound of tests/emulation/test_pacing.py, where a lone
flow with free tokens is held to 5 % on both sides). The lower bound is physical: the pacer never
sends ahead of the plan's curve, and the plan's last byte sent is its target minus 6 hops of
store-and-forward latency, which a flow's bytes may take or not (1 ms for timer slack). Measured on
this machine kind (2026-12-02, this test's spec, 5 quiet runs): steps -1.0 to +0.5 % of the
prediction, median pacing error -3.0 to -4.8 ms for a median budget of 16.7-19.3 ms (40 KB flows
mostly find tokens at each hop, so they take less than the plan's latency bound).
"""
import pytest
import json

import pandas as pd
import yaml

from tests.helpers import ROOT, interleave

pytestmark = pytest.mark.root


def test_echelon_pacing_follows_the_plan(tmp_path):
    raw = yaml.safe_load((ROOT / "experiments/echelon-tensor.yaml").read_text())
    for j in raw["jobs"]:
        j["iterations"] = 20
    spec = tmp_path / "tp.yaml"
    spec.write_text(yaml.safe_dump(raw))
    out = tmp_path / "run"
    p = interleave("run", str(spec), "--scheduler", "fixed:echelon", "--out", str(out), "--quiet", "--json",
                   timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    s = json.loads(p.stdout)
    assert s["flow_scheduler"] == "echelon" and s["fidelity"]["ok"], s["fidelity"]
    flows = pd.read_csv(out / "flows.csv")
    assert len(flows) == 2 * 20 * 7 * 4
    for name, j in s["jobs"].items():
        assert abs(j["iteration_ms_mean"] / j["predicted_step_ms"] - 1) <= 0.10, (name, j)
        assert j["iteration_ms_mean"] >= j["iteration_ms_profile"]        # never faster than no communication
    # the plan's arrival (target) is its last byte sent plus 6 links of store-and-forward latency
    # (every flow here crosses pods); measured, small flows arrive between the two
    lat = 6 * json.loads((out / "schedule.json").read_text())["flow_scheduler"]["hop_latency_s"]
    f = flows[flows.step > 0]
    err, budget = (f.finish - f.target).median(), (f.target - f.release).median()
    assert -lat - 0.001 <= err <= 0.05 * budget, (err, lat, budget)
