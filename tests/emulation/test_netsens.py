"""netsens in the emulator: a preemption planned by the simulator is carried out by the runner.

Eight DLRM jobs fill the fat-tree's 24 hosts; RoBERTa arrives at 1 s and, after its 1 s locality
timer, takes a DLRM job's rack: the plan (``interleave schedule`` of this spec) preempts dlrm1 after 13
of its ``DLRM_ITERATIONS`` iterations and resumes it at 4.5 s on the hosts dlrm2 frees."""
import pytest
import json

import pandas as pd
import yaml

from tests.helpers import interleave

pytestmark = pytest.mark.root

DLRM_ITERATIONS = 30
SPEC = {
    "name": "preempt",
    "topology": {"name": "fattree"},
    "jobs": [{"name": f"dlrm{i}", "model": "dlrm", "workers": 3, "iterations": DLRM_ITERATIONS} for i in range(1, 9)]
    + [{"name": "roberta", "model": "roberta", "workers": 3, "iterations": 20, "arrival_s": 1}],
    "scheduler": "netsens",
    "netsens": {"timers": {"high": [1, 1]}, "preemption": True, "min_run_s": 2, "restart_s": 1, "max_preemptions": 1},
}


def test_a_planned_preemption_runs_as_two_segments(tmp_path):
    spec = tmp_path / "preempt.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    out = tmp_path / "run"
    p = interleave("run", str(spec), "--out", str(out), "--quiet", "--json", timeout=300)
    assert p.returncode == 0, f"run {out}: {p.stderr[-2000:]}"
    s = json.loads(p.stdout)
    victims = [n for n, j in s["jobs"].items() if j.get("preemptions")]
    assert len(victims) == 1, f"run {out}: preempted jobs {victims} (one expected)"
    v = victims[0]
    seg = s["jobs"][v]["segments"]
    assert s["jobs"][v]["iterations"] == DLRM_ITERATIONS == sum(x["iterations"] for x in seg), (v, seg)
    it = pd.read_csv(out / "iterations.csv")
    w0 = it[(it.job == v) & (it.worker == 0)].sort_values("iteration")
    assert w0.iteration.tolist() == list(range(DLRM_ITERATIONS))      # numbered on across the restart
    first_end = w0[w0.iteration == seg[0]["iterations"] - 1].end.iloc[0]
    resumed = w0[w0.iteration == seg[0]["iterations"]].start.iloc[0]
    rob = it[(it.job == "roberta") & (it.worker == 0)]
    # the sensitive job ran on the victim's rack after the victim's first segment ended, and the
    # victim resumed on its new hosts only after the restart time
    assert s["jobs"]["roberta"]["hosts"] == seg[0]["hosts"]
    assert rob.start.min() >= first_end
    assert resumed >= first_end + 1.0
    assert seg[1]["hosts"] != seg[0]["hosts"] or resumed >= rob.end.max()
