"""Echelon's priorities re-planned from measured arrivals (harness.planners.replan): the spec block,
the rule, the runner's reader and writer, and the agents' use of the tables (agents.stage)."""
import json

import pytest
from hypothesis import given, strategies as st

from harness import spec as spec_mod
from harness.errors import UsageError
from harness.replay import FLOW_COLUMNS
from harness.planners import replan
from agents.stage import Worker
from agents.wire import PRIORITY_LEVELS

PIPE = {"schedule": "gpipe", "micro_batches": 2, "forward_ms": 40, "backward_ms": 80, "activation_mb": 16}


def raw_spec(**kw):
    raw = {"name": "p", "topology": {"name": "fattree"}, "scheduler": "fixed", "flow_scheduler": "echelon",
           "link": {"rate_mbps": 50, "sharing": "priority"},
           "jobs": [{"name": n, "model": "gpt2", "workers": 2, "hosts": hosts, "iterations": 5, "pipeline": dict(PIPE)}
                    for n, hosts in (("a", ["h1", "h7"]), ("b", ["h2", "h8"]))]}
    raw.update(kw)
    return raw


def test_the_block_takes_defaults_and_reaches_the_plan():
    s = spec_mod.from_mapping(raw_spec(replan={"every_steps": 3}), "t.yaml")
    assert s.replan == {"every_steps": 3, "window_steps": replan.KEYS["window_steps"]}
    assert spec_mod.from_mapping(raw_spec(), "t.yaml").replan is None


@pytest.mark.parametrize("change,key", [
    ({"replan": {"every_steps": 0}}, "replan.every_steps"),
    ({"replan": {"every_steps": 1.5}}, "replan.every_steps"),
    ({"replan": {"window_steps": True}}, "replan.window_steps"),
    ({"replan": {"often": 2}}, "replan.often"),
    ({"replan": [2]}, "replan"),
    ({"replan": {}, "flow_scheduler": "coflow"}, "replan"),
    ({"replan": {}, "link": {"rate_mbps": 50}}, "replan"),
])
def test_a_bad_block_is_one_line_naming_the_key(change, key):
    with pytest.raises(UsageError) as e:
        spec_mod.from_mapping(raw_spec(**change), "t.yaml")
    line = str(e.value)
    assert "\n" not in line and f"t.yaml: {key}:" in line, line


def rows(job_flows, step, rel, dur, late=0.0):
    """Flows rows of one step: reference 10 * step, each flow released at ``rel[name]`` after it and
    on the wire ``dur[name]``."""
    out = []
    for name in job_flows:
        ref = 10.0 * step
        out.append({"flow": name, "step": step, "reference": ref, "release": ref + rel[name],
                    "start": ref + rel[name], "finish": ref + rel[name] + dur[name] + late})
    return out


FLOWS = [{"name": "x", "d_s": 0.1}, {"name": "y", "d_s": 0.2}, {"name": "z", "d_s": 0.3}]


def test_the_job_most_behind_goes_first_and_its_flows_by_measured_laxity():
    jobs = {"a": FLOWS, "b": FLOWS}
    # a: z released late and slow (least laxity), x early; b: on time
    rel_a, dur_a = {"x": 0.0, "y": 0.05, "z": 0.25}, {"x": 0.01, "y": 0.05, "z": 0.1}
    rel_b, dur_b = {"x": 0.0, "y": 0.1, "z": 0.2}, {"x": 0.01, "y": 0.01, "z": 0.01}
    new = replan.plan(jobs, {"a": rows("xyz", 1, rel_a, dur_a), "b": rows("xyz", 1, rel_b, dur_b)})
    lag_a, prio_a = new["a"]
    lag_b, prio_b = new["b"]
    assert lag_a == pytest.approx(0.05) and lag_b == pytest.approx(-0.09)
    # laxity a: x 0.09, y 0.10, z -0.05 -> z most urgent; a has levels 0-1, b 2-3
    assert prio_a == [1, 1, 0]
    assert min(prio_b) >= 2
    # b behind instead: b first
    new = replan.plan(jobs, {"a": rows("xyz", 1, rel_b, dur_b), "b": rows("xyz", 1, rel_a, dur_a)})
    assert max(new["b"][1]) <= 1 and min(new["a"][1]) >= 2


def test_a_job_without_arrivals_of_every_flow_keeps_the_plans_order_by_offset():
    new = replan.plan({"a": FLOWS}, {"a": rows("xy", 1, {"x": 0.2, "y": 0.0}, {"x": 0.0, "y": 0.0})})
    assert new["a"][1] == [0, 2, 3]
    assert replan.plan({"a": FLOWS}, {})["a"] == (0.0, [0, 2, 3])


@given(st.lists(st.floats(-1, 1), min_size=1, max_size=30), st.integers(0, 2), st.integers(1, 3))
def test_levels_stay_in_the_jobs_block_and_follow_the_keys(keys, pos, jobs):
    from harness.planners.flowplan import levels_by
    pos = min(pos, jobs - 1)
    lv = levels_by(keys, pos, jobs, PRIORITY_LEVELS)
    per = max(1, PRIORITY_LEVELS // jobs)
    base = min(PRIORITY_LEVELS - per, pos * PRIORITY_LEVELS // jobs)
    assert all(base <= x < base + per for x in lv)
    for i in range(len(keys)):
        for j in range(len(keys)):
            if keys[i] < keys[j]:
                assert lv[i] <= lv[j]


def write_rows(path, job, rs, tail=""):
    with open(path, "a") as f:
        for r in rs:
            v = {"job": job, "src": 0, "dst": 1, "bytes": 1000, "target": "", "priority": "", **r}
            f.write(",".join(str(v[c]) for c in FLOW_COLUMNS) + "\n")
        f.write(tail)


def test_the_runner_re_plans_every_n_complete_steps_and_the_agents_use_the_tables(tmp_path):
    decision = {"jobs": {"a": {"flows": FLOWS}}}
    clock = iter(range(100))
    rp = replan.Replanner({"every_steps": 2, "window_steps": 2}, decision, tmp_path, FLOW_COLUMNS, lambda: next(clock))
    rel, dur = {"x": 0.0, "y": 0.0, "z": 0.0}, {"x": 0.3, "y": 0.01, "z": 0.01}
    f = tmp_path / "a.w1.csv.flows"
    write_rows(f, "a", rows("xyz", 0, rel, dur) + rows("xyz", 1, rel, dur))
    assert rp.tick() is None                        # one step after warm-up
    write_rows(f, "a", rows("xyz", 2, rel, dur)[:2], tail="a,2,z,0,1,10")      # step 2: half a row of z
    assert rp.tick() is None and rp.log.steps["a"][2][-1]["flow"] == "y"
    write_rows(f, "a", [], tail="00,20.0,20.0,20.0,20.01,,\n")
    new = rp.tick()
    assert new["a"][1] == [0, 3, 3]                 # x: laxity 0.1 - 0.3 < 0 -> first
    doc = json.loads(rp.path("a").read_text())
    assert doc == {"version": 1, "from_step": 2 + replan.LEAD_STEPS, "priority": [0, 3, 3]}
    assert rp.tick() is None                        # next plan after 2 more steps
    assert [r["version"] for r in rp.records] == [1] and rp.records[0]["from_step"] == 4
    s = rp.summary()
    assert s["plans"] == 1 and s["cpu_ms_total"] >= s["cpu_ms_mean"] >= 0

    w = Worker({"flows": [{"name": n, "src": 0, "dst": 1, "bytes": 1, "priority": [1, 2]} for n in "xyz"],
                "programs": {"1": []}, "replan_path": str(rp.path("a"))}, 1)
    assert [w.priority(3, 0), w.priority(4, 0)] == [2, 1]           # the plan's rotation
    w.load_replan()
    w.load_replan()                                                 # the same version once
    assert w.replans_loaded == 1
    assert [w.priority(3, 0), w.priority(4, 0), w.priority(9, 1)] == [2, 0, 3]


def test_a_job_that_completed_its_steps_does_not_hold_the_next_plan_back(tmp_path):
    decision = {"jobs": {"a": {"flows": FLOWS}, "b": {"flows": FLOWS}}}
    rp = replan.Replanner({"every_steps": 2, "window_steps": 2}, decision, tmp_path, FLOW_COLUMNS, lambda: 0.0,
                          steps={"a": 3, "b": 10})
    same = {"x": 0.0, "y": 0.0, "z": 0.0}
    write_rows(tmp_path / "a.w1.csv.flows", "a", [r for k in range(3) for r in rows("xyz", k, same, same)])
    write_rows(tmp_path / "b.w1.csv.flows", "b", [r for k in range(5) for r in rows("xyz", k, same, same)])
    assert rp.tick() is not None                   # a done with 3 steps; b has 4 after warm-up
    assert rp.records[-1]["version"] == 1 and rp.next_at == 4 + 2
    write_rows(tmp_path / "b.w1.csv.flows", "b", [r for k in range(5, 7) for r in rows("xyz", k, same, same)])
    assert rp.tick() is not None and rp.version == 2
