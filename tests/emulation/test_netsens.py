"""netsens in the emulator: a preemption planned by the simulator is carried out by the runner."""
import pytest
import json

import pandas as pd
import yaml

from tests.helpers import interleave

pytestmark = pytest.mark.root

SPEC = {
    "name": "preempt",
    "topology": {"name": "fattree"},
    "jobs": [{"name": f"dlrm{i}", "model": "dlrm", "workers": 3, "iterations": 100} for i in range(1, 9)]
    + [{"name": "roberta", "model": "roberta", "workers": 3, "iterations": 20, "arrival_s": 1}],
    "scheduler": "netsens",
    "netsens": {"timers": {"high": [1, 1]}, "preemption": True, "min_run_s": 2, "restart_s": 1, "max_preemptions": 1},
}


def test_a_planned_preemption_runs_as_two_segments(tmp_path):
    spec = tmp_path / "preempt.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    out = tmp_path / "run"
    p = interleave("run", str(spec), "--out", str(out), "--quiet", "--json", timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    s = json.loads(p.stdout)
    victims = [n for n, j in s["jobs"].items() if j.get("preemptions")]
    assert len(victims) == 1, s["jobs"]
    v = victims[0]
    seg = s["jobs"][v]["segments"]
    assert s["jobs"][v]["iterations"] == 100 and sum(x["iterations"] for x in seg) == 100
    it = pd.read_csv(out / "iterations.csv")
    w0 = it[(it.job == v) & (it.worker == 0)].sort_values("iteration")
    assert w0.iteration.tolist() == list(range(100))                  # numbered on across the restart
    first_end = w0[w0.iteration == seg[0]["iterations"] - 1].end.iloc[0]
    resumed = w0[w0.iteration == seg[0]["iterations"]].start.iloc[0]
    rob = it[(it.job == "roberta") & (it.worker == 0)]
    # the sensitive job ran on the victim's rack after the victim's first segment ended, and the
    # victim resumed on its new hosts only after the restart time
    assert s["jobs"]["roberta"]["hosts"] == seg[0]["hosts"]
    assert rob.start.min() >= first_end
    assert resumed >= first_end + 1.0
    assert seg[1]["hosts"] != seg[0]["hosts"] or resumed >= rob.end.max()
