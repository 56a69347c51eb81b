"""Program jobs (pipeline / tensor / data_parallel blocks) in specs, the flow scheduler's plan, and its agent configs."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import spec as spec_mod
from harness.errors import UsageError
from harness.planners import flowplan
from harness.planners.schedule import schedule

ROOT = Path(__file__).resolve().parents[2]
PIPE = {"schedule": "gpipe", "micro_batches": 8, "forward_ms": 40, "backward_ms": 80, "activation_mb": 160}


def pipeline_spec(flow="fair", block=None, **kw):
    raw = {"name": "p", "topology": {"name": "fattree"}, "scheduler": "fixed", "flow_scheduler": flow,
           "jobs": [{"name": "a", "model": "gpt2", "workers": 4, "hosts": ["h1", "h7", "h13", "h19"],
                     "iterations": 5, "pipeline": dict(block or PIPE)},
                    {"name": "b", "model": "gpt2", "workers": 4, "hosts": ["h2", "h8", "h14", "h20"],
                     "iterations": 5, "pipeline": dict(block or PIPE)}]}
    raw.update(kw)
    return spec_mod.from_mapping(raw, "t.yaml")


@pytest.mark.parametrize("change,key", [
    ({"flow_scheduler": "pfabric"}, "flow_scheduler"),
    ({"block": {**PIPE, "schedule": "zb-v"}}, "jobs[0].pipeline.schedule"),
    ({"block": {**PIPE, "micro_batches": 0}}, "jobs[0].pipeline.micro_batches"),
    ({"block": {**PIPE, "stages": 4}}, "jobs[0].pipeline.stages"),
    ({"block": {k: v for k, v in PIPE.items() if k != "forward_ms"}}, "jobs[0].pipeline.forward_ms"),
    ({"scheduler": "themis"}, "scheduler"),
    ({"background": {"load": 0.5}}, "background.load"),
])
def test_bad_program_specs_name_the_key(change, key):
    change = dict(change)
    flow = change.pop("flow_scheduler", "fair")
    with pytest.raises(UsageError) as e:
        pipeline_spec(flow, **change)
    assert str(e.value).startswith(f"t.yaml: {key}:"), str(e.value)


DP = {"buckets": 4, "forward_ms": 500, "backward_ms": 1000, "allreduce_mb": 1600}


@pytest.mark.parametrize("block,key,allowed", [
    ({**DP, "buckets": 0}, "jobs[1].data_parallel.buckets", "in [1, 1024]"),
    ({**DP, "buckets": 2.5}, "jobs[1].data_parallel.buckets", "whole number"),
    ({k: v for k, v in DP.items() if k != "allreduce_mb"}, "jobs[1].data_parallel.allreduce_mb", "a number"),
    ({**DP, "layers": 3}, "jobs[1].data_parallel.layers", "unknown key"),
])
def test_bad_data_parallel_blocks_name_the_key(block, key, allowed):
    raw = {"name": "p", "topology": {"name": "fattree"}, "scheduler": "fixed", "jobs": [
        {"name": "a", "model": "gpt2", "workers": 4, "hosts": ["h1", "h7", "h13", "h19"], "pipeline": PIPE},
        {"name": "b", "model": "gpt2", "workers": 4, "hosts": ["h2", "h8", "h14", "h20"], "data_parallel": block}]}
    with pytest.raises(UsageError) as e:
        spec_mod.from_mapping(raw, "t.yaml")
    assert str(e.value).startswith(f"t.yaml: {key}:") and allowed in str(e.value), str(e.value)


def test_a_job_has_one_program_block():
    raw = {"scheduler": "fixed", "jobs": [{"model": "gpt2", "workers": 2, "hosts": ["h1", "h7"], "pipeline": PIPE,
                                           "data_parallel": DP}]}
    with pytest.raises(UsageError, match=r"jobs\[0\]\.data_parallel: .*one of pipeline, tensor or data_parallel"):
        spec_mod.from_mapping(raw, "t.yaml")


def test_data_parallel_job_next_to_a_pipeline():
    sp = spec_mod.load(ROOT / "experiments/echelon-dp.yaml")
    b = sp.jobs[1]
    assert (b.kind, b.is_program) == ("data_parallel", True)
    e = flowplan.step_of(b)
    assert e.is_coflow and len(e.flows) == 16
    assert {f.bytes for f in e.flows} == {1600e6 / 4 / 4}                # a bucket's ring: one flow per rank
    progs = flowplan.programs(e, 4)
    assert [op["op"] for op in progs[2]] == ["F", "B:0", "B:1", "B:2", "B:3", "U"]
    assert [len(op["outputs"]) for op in progs[2]] == [0, 1, 1, 1, 1, 0]
    assert len(progs[2][-1]["inputs"]) == 4                           # the update waits for every bucket
    fp = schedule(sp).flow_scheduler
    assert fp["jobs"]["b"]["kind"] == "data_parallel"
    assert fp["jobs"]["b"]["ideal_step_s"] == pytest.approx(1.5)
    assert fp["jobs"]["b"]["predicted"]["step_s"] > 1.5              # the last bucket's ring ends the step


def test_flow_schedulers_need_program_jobs_and_mixed_jobs_need_fixed():
    with pytest.raises(UsageError, match="flow_scheduler: 'echelon'"):
        spec_mod.from_mapping({"jobs": [{"model": "vgg16"}], "flow_scheduler": "echelon"}, "t.yaml")
    raw = {"scheduler": "fixed", "jobs": [
        {"model": "gpt2", "workers": 2, "hosts": ["h1", "h7"], "pipeline": PIPE},
        {"model": "vgg16", "workers": 2, "hosts": ["h2", "h8"]}]}
    assert [j.is_program for j in spec_mod.from_mapping(raw, "t.yaml").jobs] == [True, False]
    with pytest.raises(UsageError, match=r"^t\.yaml: scheduler: 'themis' is not allowed \(fixed with program jobs"):
        spec_mod.from_mapping({**raw, "scheduler": "themis"}, "t.yaml")


def test_scheduler_override_names_the_flow_scheduler():
    s = spec_mod.load(ROOT / "experiments/echelon-gpipe.yaml", scheduler="fixed:coflow")
    assert (s.scheduler, s.flow_scheduler) == ("fixed", "coflow")
    with pytest.raises(UsageError, match="flow_scheduler"):
        spec_mod.load(ROOT / "experiments/echelon-gpipe.yaml", scheduler="fixed:fastest")


def test_programs_give_every_flow_one_producer_and_one_consumer():
    job = pipeline_spec().jobs[0]
    e = flowplan.step_of(job)
    progs = flowplan.programs(e, 4)
    produced = [i for w, ops in progs.items() for op in ops for i in op["outputs"]]
    consumed = [i for w, ops in progs.items() for op in ops for i in op["inputs"]]
    assert sorted(produced) == sorted(consumed) == list(range(len(e.flows)))
    for w, ops in progs.items():
        assert len(ops) == 16                                           # 8 forwards, 8 backwards
        for op in ops:
            assert all(e.flows[i].src == w for i in op["outputs"]) and all(e.flows[i].dst == w for i in op["inputs"])
    assert progs[0][0]["inputs"] == []                                  # stage 0 starts the step
    t = spec_mod.from_mapping({"scheduler": "fixed", "jobs": [{"model": "gpt2", "workers": 2, "hosts": ["h1", "h7"],
                               "tensor": {"layers": 3, "layer_ms": 10, "allreduce_mb": 8}}]}, "t.yaml").jobs[0]
    tp = flowplan.programs(flowplan.step_of(t), 2)
    assert [op["op"] for op in tp[0]] == [op["op"] for op in tp[1]] == ["L:0", "L:1", "L:2"]
    assert [len(op["inputs"]) for op in tp[1]] == [0, 1, 1]             # each layer waits for its all-reduce


def test_plan_paces_only_under_coflow_and_echelon():
    fair = schedule(pipeline_spec("fair")).flow_scheduler
    ech = schedule(pipeline_spec("echelon")).flow_scheduler
    assert fair["period_s"] == ech["period_s"]                          # one grid for every policy
    assert all(f["schedule"] is None for f in fair["jobs"]["a"]["flows"])
    for f in ech["jobs"]["a"]["flows"]:
        assert f["schedule"][-1][1] == 1.0 and f["target_s"] >= f["schedule"][-1][0]
    assert ech["jobs"]["a"]["predicted"]["step_s"] >= ech["jobs"]["a"]["ideal_step_s"]
    # the grid leaves room: 1.25 x the slowest step under fair sharing (the grid is set on one step
    # per job, the prediction is the steady state's: the model's late wake-ups are drawn anew)
    slowest = max(v["predicted"]["step_s"] for v in fair["jobs"].values())
    assert fair["period_s"] == pytest.approx(1.25 * slowest, rel=0.01)


def test_agent_config_scales_bytes_and_dilates_time():
    sp = pipeline_spec("echelon")
    fp = schedule(sp).flow_scheduler
    cfg = flowplan.agent_config(sp.jobs[0], fp, scale=1e-3, dilation=2.0)
    f0, p0 = cfg["flows"][0], fp["jobs"]["a"]["flows"][0]
    assert f0["bytes"] == 160_000 and f0["target_s"] == pytest.approx(2 * p0["target_s"])
    assert [t for t, _x in f0["schedule"]] == pytest.approx([2 * t for t, _x in p0["schedule"]])
    assert cfg["period_s"] == pytest.approx(2 * fp["period_s"]) and cfg["programs"]["0"][0]["dur_s"] == 0.08


def test_simulate_cli_on_a_pipeline_spec():
    out = {}
    for flow in ("fair", "echelon"):
        p = subprocess.run([sys.executable, "-m", "harness.cli", "simulate", "experiments/echelon-1f1b.yaml",
                            "--scheduler", f"fixed:{flow}", "--json"], capture_output=True, text=True, cwd=ROOT)
        assert p.returncode == 0, p.stderr
        out[flow] = json.loads(p.stdout)
        assert out[flow]["flow_scheduler"] == flow and "mean ECT" in p.stderr
    t = {k: v["totals"] for k, v in out.items()}
    assert t["echelon"]["iteration_ms_mean"] < t["fair"]["iteration_ms_mean"]
    assert t["echelon"]["ect_ms_mean"] < t["fair"]["ect_ms_mean"]
    assert t["fair"]["iteration_ms_mean"] >= out["fair"]["jobs"]["a"]["iteration_ms_profile"]


def test_fixed_cassini_searches_a_shift_that_the_model_prefers():
    sp = spec_mod.load(ROOT / "experiments/echelon-tensor.yaml", scheduler="fixed+cassini:fair")
    sp.cassini["candidates"] = 5
    p = schedule(sp).to_dict()
    scores = p["params"]["shift_search_ms"]
    shift = p["jobs"][1]["time_shift_ms"]
    assert p["jobs"][0]["time_shift_ms"] == 0.0 and len(scores) == 5
    assert scores[shift] == min(scores.values()) < scores[0.0]        # interleaving the steps beats colliding
    pred = p["flow_scheduler"]["jobs"]
    assert sum(v["predicted"]["step_s"] for v in pred.values()) / 2 * 1000 == pytest.approx(scores[shift], abs=1e-3)
    raw = {"scheduler": "fixed+cassini", "jobs": [{"model": "gpt2", "workers": 2, "pipeline": PIPE}]}
    with pytest.raises(UsageError, match=r"jobs\[0\]\.hosts"):                 # placement stays pinned
        spec_mod.from_mapping(raw, "t.yaml")
    with pytest.raises(UsageError, match="fixed\\+cassini only with program jobs"):
        spec_mod.from_mapping({"scheduler": "fixed+cassini", "jobs": [{"model": "vgg16", "hosts": ["h1", "h2"]}]}, "t.yaml")


def test_echelon_on_priority_queues_orders_the_jobs_then_their_flows_by_offset():
    from agents.wire import PRIORITY_LEVELS
    ech = schedule(pipeline_spec("echelon", link={"sharing": "priority"})).flow_scheduler
    assert ech["priorities"] == PRIORITY_LEVELS and ech["mechanism"] == {                  # the default mechanism
        "chosen": "priority", "rule": "priority", "predicted_step_ms": ech["mechanism"]["predicted_step_ms"]}
    a, b = ({f["name"]: f for f in ech["jobs"][j]["flows"]} for j in ("a", "b"))
    # two jobs on four levels: the job going first in a step takes levels 0-1, the other 2-3, and
    # they take turns (one level per step of the grid, in turn)
    assert a["act:0:0"]["priority"] == [0, 2] and b["act:0:0"]["priority"] == [2, 0]
    # within its two levels a job's flows go by offset: GPipe, 4 stages x 8 micro-batches, activations
    # offset 0-0.36 s and gradients 0.48-1.2 s, bins of 0.6 s
    assert a["grad:1:0"]["priority"] == [1, 3] and a["grad:3:7"]["priority"] == [0, 2]
    assert {p for f in a.values() for p in f["priority"]} == set(range(PRIORITY_LEVELS))
    assert all(f["schedule"] is None and f["target_s"] is None for f in a.values())     # priorities, not pacing
    for f, g in zip(ech["jobs"]["a"]["flows"], ech["jobs"]["a"]["flows"][1:]):
        if f["d_s"] < g["d_s"]:
            assert f["priority"] <= g["priority"]
    # no priorities without priority queues, nor under fair / coflow on them
    assert all(f["priority"] is None for f in schedule(pipeline_spec("echelon")).flow_scheduler["jobs"]["a"]["flows"])
    for flow in ("fair", "coflow"):
        fp = schedule(pipeline_spec(flow, link={"sharing": "priority"})).flow_scheduler
        assert fp["priorities"] is None and all(f["priority"] is None for f in fp["jobs"]["b"]["flows"])


def test_echelon_on_priority_queues_takes_the_mechanism_the_model_finds_faster():
    """``auto`` plays priorities and pacing in the model and keeps the smaller mean step; each forced
    mechanism gives the same prediction as under auto, and its flows carry only that mechanism. On
    two micro-batches a step (the model's cost grows with the flows; the two mechanisms still
    predict different steps, 780 and 758 ms)."""
    small = {**PIPE, "micro_batches": 2}
    def mean_step(fp):
        return round(1000 * sum(j["predicted"]["step_s"] for j in fp["jobs"].values()) / len(fp["jobs"]), 3)
    forced = {m: schedule(pipeline_spec("echelon", block={**small, "schedule": "1f1b"}, link={"sharing": "priority"},
                                        echelon_mechanism=m)).flow_scheduler for m in ("priority", "pacing")}
    auto = schedule(pipeline_spec("echelon", block={**small, "schedule": "1f1b"}, link={"sharing": "priority"},
                                  echelon_mechanism="auto")).flow_scheduler
    preds = auto["mechanism"]["predicted_step_ms"]
    assert set(preds) == {"priority", "pacing"} and auto["mechanism"]["rule"] == "auto"
    for m, fp in forced.items():
        assert fp["mechanism"] == {"chosen": m, "rule": m, "predicted_step_ms": {m: preds[m]}}
        assert abs(mean_step(fp) - preds[m]) <= 0.002            # per-job rounding to the microsecond
    best = min(preds, key=preds.get)
    assert auto["mechanism"]["chosen"] == best and abs(mean_step(auto) - preds[best]) <= 0.002
    paced = forced["pacing"]["jobs"]["a"]["flows"]
    assert forced["pacing"]["priorities"] is None
    assert all(f["priority"] is None and f["schedule"] and f["target_s"] is not None for f in paced)
    assert all(f["schedule"] is None and f["priority"] for f in forced["priority"]["jobs"]["a"]["flows"])
    # with replan, auto plays priorities only; echelon on FIFO ports paces, whatever the default
    replanned = schedule(pipeline_spec("echelon", small, link={"sharing": "priority"}, echelon_mechanism="auto",
                                       replan={"every_steps": 2})).flow_scheduler["mechanism"]
    assert (replanned["chosen"], list(replanned["predicted_step_ms"])) == ("priority", ["priority"])
    fifo = schedule(pipeline_spec("echelon", small)).flow_scheduler["mechanism"]
    assert (fifo["chosen"], fifo["rule"]) == ("pacing", None)
    # fair and coflow have one mechanism each, and no choice to record
    for flow, m in (("fair", "none"), ("coflow", "pacing")):
        fp = schedule(pipeline_spec(flow, small, link={"sharing": "priority"})).flow_scheduler
        assert fp["mechanism"]["chosen"] == m and fp["mechanism"]["rule"] is None


@pytest.mark.parametrize("change,allowed", [
    ({"echelon_mechanism": "ecn"}, "priority | pacing | auto"),
    ({"echelon_mechanism": "priority"}, "priority only with link.sharing priority"),
    ({"echelon_mechanism": "pacing", "link": {"sharing": "priority"}, "replan": {"every_steps": 2}},
     "priority or auto with replan"),
])
def test_bad_echelon_mechanisms_name_the_key(change, allowed):
    with pytest.raises(UsageError) as e:
        pipeline_spec("echelon", **change)
    assert str(e.value).startswith("t.yaml: echelon_mechanism:") and allowed in str(e.value), str(e.value)


def test_flow_priorities_of_a_step_whose_flows_share_one_offset():
    from workloads import echelon
    e = echelon.tensor_parallel("t", 2, 0.04, 1e6, ranks=2)     # two flows, both feeding layer 1
    assert set(flowplan.flow_priorities(e)) == {0}
    assert set(flowplan.flow_priorities(e, position=1, jobs=2)) == {2}


def test_more_jobs_than_levels_share_levels_in_order():
    from workloads import echelon
    e = echelon.tensor_parallel("t", 3, 0.04, 1e6, ranks=2)
    firsts = [flowplan.flow_priorities(e, position=k, jobs=5, levels=4)[0] for k in range(5)]
    assert firsts == [0, 0, 1, 2, 3]
    rot = flowplan.step_priorities(e, rank=1, jobs=3)
    assert [r[0] for r in rot] == [1, 0, 2]       # step k: the job at rank k goes first


def test_program_and_profile_jobs_share_a_spec_under_fixed_only():
    raw = spec_mod.read_yaml(ROOT / "experiments/echelon-mixed.yaml")
    sp = spec_mod.from_mapping(raw, "t.yaml")
    assert [j.is_program for j in sp.jobs] == [True, False]
    with pytest.raises(UsageError, match=r"^t\.yaml: scheduler: 'fixed\+cassini' is not allowed \(fixed with program"):
        spec_mod.from_mapping({**raw, "scheduler": "fixed+cassini"}, "t.yaml")
    from harness.simulate import simulate_spec
    with pytest.raises(UsageError, match=r"^t\.yaml: jobs\[1\]: 'b' is not allowed .*emulator only"):
        simulate_spec(sp)
