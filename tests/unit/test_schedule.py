"""interleave schedule: placement policies, the contract's JSON, traces, bad input."""
import json
import subprocess
import sys

import pytest

from harness.errors import UsageError
from harness.schedulers.placement import Themis, candidates
from harness.planners.schedule import schedule
from harness.spec import from_mapping
from tests.helpers import ROOT


def spec(**kw):
    base = {"topology": {"name": "fattree"}, "scheduler": "themis+cassini"}
    base.update(kw)
    return from_mapping(base, "t.yaml")


def test_two_vgg16_on_a_dumbbell_interleave():
    s = spec(topology={"name": "dumbbell", "hosts_per_side": 2},
             jobs=[{"name": "a", "model": "vgg16", "hosts": ["h1", "h3"]},
                   {"name": "b", "model": "vgg16", "hosts": ["h2", "h4"]}])
    out = schedule(s).to_dict()
    shifts = {j["name"]: j["time_shift_ms"] for j in out["jobs"]}
    # VGG16 is Up 114 of 255 ms: any relative offset in [114, 141] keeps the Up phases apart
    assert 114 <= (shifts["b"] - shifts["a"]) % 255 <= 141
    assert {l["id"] for l in out["links"]} == {"s1>s2", "s2>s1"}
    assert all(l["score"] == pytest.approx(1.0) for l in out["links"])
    assert out["affinity_graph"]["loop_free"] is True


def test_themis_alone_scores_the_collision():
    s = spec(topology={"name": "dumbbell", "hosts_per_side": 2}, scheduler="themis",
             jobs=[{"name": "a", "model": "vgg16", "hosts": ["h1", "h3"]},
                   {"name": "b", "model": "vgg16", "hosts": ["h2", "h4"]}])
    out = schedule(s).to_dict()
    assert all(j["time_shift_ms"] == 0 for j in out["jobs"])
    assert all(l["score"] < 0.8 for l in out["links"])


def test_fixed_uses_the_spec_shift():
    s = spec(topology={"name": "dumbbell", "hosts_per_side": 2}, scheduler="fixed",
             jobs=[{"name": "a", "model": "vgg16", "hosts": ["h1", "h3"]},
                   {"name": "b", "model": "vgg16", "hosts": ["h2", "h4"], "time_shift_ms": 120}])
    out = schedule(s).to_dict()
    assert [j["time_shift_ms"] for j in out["jobs"]] == [0, 120]


def test_candidates_keep_worker_counts_and_rack_counts():
    s = spec(jobs=[{"name": "a", "model": "vgg16", "workers": 4}, {"name": "b", "model": "bert", "workers": 2}])
    topo = s.topology
    rack_of = {h: topo.edge_of(h) for h in topo.hosts}
    cands = candidates(Themis(), s.jobs, topo, s.profiles, topo.hosts, n=10, seed=3)
    assert 2 <= len(cands) <= 10 and len({json.dumps(c, sort_keys=True) for c in cands}) == len(cands)
    for c in cands:
        assert len(c["a"]) == 4 and len(c["b"]) == 2 and not set(c["a"]) & set(c["b"])
        assert len({rack_of[h] for h in c["a"]}) == 2 and len({rack_of[h] for h in c["b"]}) == 1


def test_pinned_hosts_are_respected_by_every_policy():
    for policy in ("themis", "pollux", "random"):
        s = spec(scheduler=policy, jobs=[{"name": "a", "model": "vgg16", "hosts": ["h5", "h20"]},
                                         {"name": "b", "model": "vgg16", "workers": 3}])
        out = schedule(s).to_dict()
        a = next(j for j in out["jobs"] if j["name"] == "a")
        assert a["hosts"] == ["h5", "h20"]


def test_cassini_prefers_compatible_sharing():
    # four jobs of 4 workers on the fat-tree: CASSINI's chosen candidate is at least as good as the base
    s = spec(seed=2, jobs=[{"name": f"j{i}", "model": m, "workers": 4}
                           for i, m in enumerate(["vgg16", "wideresnet101", "vgg19", "roberta"])])
    out = schedule(s).to_dict()
    e = out["epochs"][0]
    scores = [x for x in e["candidate_scores"] if x is not None]
    assert e["score"] == pytest.approx(max(scores), abs=1e-3)
    for j in out["jobs"]:
        assert 0 <= j["time_shift_ms"] < j["iteration_ms"]


def test_poisson_trace_of_20_jobs_on_the_fattree():
    s = spec(trace={"kind": "poisson", "jobs": 20, "load": 0.9, "iterations_scale": 0.1})
    out = schedule(s).to_dict()
    assert len(out["jobs"]) == 20
    assert all(0 <= j["time_shift_ms"] < j["iteration_ms"] for j in out["jobs"])
    assert all(j["placed_at_s"] >= j["arrival_s"] for j in out["jobs"])
    # at no time do two running jobs hold the same host
    for a in out["jobs"]:
        for b in out["jobs"]:
            if a["name"] < b["name"] and a["placed_at_s"] < b["finish_est_s"] and b["placed_at_s"] < a["finish_est_s"]:
                assert not set(a["hosts"]) & set(b["hosts"])
    assert schedule(s).to_dict() == out          # seeded: reproducible


def test_traces_are_seeded():
    a = spec(trace={"kind": "poisson", "jobs": 10, "load": 0.8}, seed=4).jobs
    b = spec(trace={"kind": "poisson", "jobs": 10, "load": 0.8}, seed=4).jobs
    c = spec(trace={"kind": "poisson", "jobs": 10, "load": 0.8}, seed=5).jobs
    assert a == b and a != c
    d = spec(trace={"kind": "dynamic", "jobs": 3, "arriving": ["dlrm", "resnet50"], "arrival_s": 20}).jobs
    assert [j.arrival_s for j in d] == [0, 0, 0, 20, 20] and [j.model for j in d[3:]] == ["dlrm", "resnet50"]


@pytest.mark.parametrize("kw,key", [
    ({"jobs": [{"model": "vgg16", "workers": 30}]}, "jobs[0].workers"),
    ({"jobs": [{"model": "vgg16", "hosts": ["h1", "h99"]}]}, "jobs[0].hosts"),
    ({"jobs": [{"model": "vgg16", "hosts": ["h1", "h2"]}, {"model": "vgg16", "hosts": ["h2", "h3"]}]}, "jobs[1].hosts"),
    ({"jobs": [{"model": "alexnet"}]}, "jobs[0].model"),
    ({"jobs": [{"model": "toy"}], "profiles": {"toy": {"iteration_ms": 100, "phases": []}}}, "profiles.toy.phases"),
    ({"jobs": [{"model": "toy"}], "profiles": {"toy": {"iteration_ms": 0, "phases": [
        {"start_ms": 0, "duration_ms": 1, "gbps": 1}]}}}, "profiles.toy.iteration_ms"),
    ({"jobs": [{"model": "toy"}], "profiles": {"toy": {"iteration_ms": 100, "phases": [
        {"start_ms": 50, "duration_ms": 60, "gbps": 1}]}}}, "profiles.toy.phases[0]"),
    ({"jobs": [{"model": "vgg16", "time_shift_ms": 300}]}, "jobs[0].time_shift_ms"),
    ({"jobs": [{"model": "vgg16"}], "scheduler": "magic"}, "scheduler"),
    ({"jobs": [{"model": "vgg16"}], "link": {"rate_mbps": 0}}, "link.rate_mbps"),
    ({"jobs": [{"model": "vgg16"}], "topology": {"name": "fattree", "hosts_per_edge": 0}}, "topology.hosts_per_edge"),
    ({"jobs": [{"model": "vgg16"}], "colour": "red"}, "colour"),
    ({"jobs": [{"model": "vgg16"}], "background": {"lod": 0.3}}, "background.lod"),
    ({}, "jobs/trace"),
])
def test_bad_specs_name_the_key(kw, key):
    with pytest.raises(UsageError) as e:
        spec(**kw)
    assert f": {key}" in str(e.value) and str(e.value).startswith("t.yaml")


def test_schedule_cli_json_and_exit_statuses(tmp_path):
    good = tmp_path / "s.yaml"
    good.write_text("topology: {name: dumbbell}\njobs:\n  - {name: a, model: vgg16, hosts: [h1, h3]}\n"
                    "  - {name: b, model: vgg16, hosts: [h2, h4]}\nscheduler: themis+cassini\n")
    p = subprocess.run([sys.executable, "-m", "harness.cli", "schedule", str(good), "--json"],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert {"scheduler", "jobs", "links", "affinity_graph", "candidates_considered"} <= set(doc)
    bad = tmp_path / "bad.yaml"
    bad.write_text("jobs:\n  - {model: vgg16, workers: 0}\n")
    p = subprocess.run([sys.executable, "-m", "harness.cli", "schedule", str(bad)], capture_output=True,
                       text=True, cwd=ROOT)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "jobs[0].workers: 0 is not allowed" in p.stderr
    p = subprocess.run([sys.executable, "-m", "harness.cli", "schedule", str(tmp_path / "none.yaml")],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2 and "no such file" in p.stderr


def test_poisson_arrivals_follow_the_load():
    # rate = load * hosts / (E[workers] * E[duration]); check the mean gap over many jobs
    import numpy as np
    from workloads.profiles import builtins
    s = spec(trace={"kind": "poisson", "jobs": 400, "load": 0.8, "iterations_scale": 0.1}, seed=9)
    arrivals = np.array([j.arrival_s for j in s.jobs])
    gaps = np.diff(arrivals)
    mean_it = np.mean([p.iteration_ms for p in builtins().values()]) / 1000
    expected_gap = 1 / (0.8 * 24 / (3 * mean_it * 600 * 0.1))
    assert abs(gaps.mean() / expected_gap - 1) < 0.15          # 399 exponential gaps: sd of mean ~5 %
    assert all(2 <= j.workers <= 4 and 20 <= j.iterations <= 100 for j in s.jobs)


def test_bursty_arrivals_keep_the_load():
    """``burst: N``: N jobs per instant, bursts N times further apart; ``burst: 1`` is the plain trace."""
    import numpy as np
    base = {"kind": "poisson", "jobs": 400, "load": 0.8, "iterations_scale": 0.1}
    plain = [j.arrival_s for j in spec(trace=base, seed=9).jobs]
    assert [j.arrival_s for j in spec(trace={**base, "burst": 1}, seed=9).jobs] == plain
    bursty = np.array([j.arrival_s for j in spec(trace={**base, "burst": 10}, seed=9).jobs])
    instants, sizes = np.unique(bursty, return_counts=True)
    assert len(instants) == 40 and set(sizes) == {10}
    # 39 exponential gaps between bursts: sd of their mean ~16 %; the expected gap is 10 plain ones
    assert abs(np.diff(instants).mean() / (10 * np.diff(plain).mean()) - 1) < 0.5
    with pytest.raises(UsageError, match="trace.burst: 0"):
        spec(trace={**base, "burst": 0})
    with pytest.raises(UsageError, match="trace.burst: 3 .*only for kind: poisson"):
        spec(trace={"kind": "snapshot", "jobs": 4, "burst": 3})


def test_time_dilation_in_spec():
    assert spec(jobs=[{"model": "vgg16"}], time_dilation=2).time_dilation == 2
    with pytest.raises(UsageError, match="time_dilation: 0.5"):
        spec(jobs=[{"model": "vgg16"}], time_dilation=0.5)


def test_telemetry_periods_are_model_time():
    """The controller's polling periods stretch with time dilation like every other time of a spec
    (in the one-CPU guest the polling, not the traffic, took the CPU)."""
    from harness.runner import telemetry_periods
    from harness.telemetry import CE_PERIOD_MS, PERIOD_MS
    from agents.timing import Dilation
    plain = spec(jobs=[{"model": "vgg16"}])
    assert telemetry_periods(plain, Dilation(plain.time_dilation)) == (PERIOD_MS, CE_PERIOD_MS)
    dilated = spec(jobs=[{"model": "vgg16"}], time_dilation=8, telemetry={"period_ms": 1000})
    assert telemetry_periods(dilated, Dilation(dilated.time_dilation)) == (8000.0, 8 * CE_PERIOD_MS)


def test_cassini_memo_changes_no_decision_and_forgets_finished_jobs():
    """The memo of per-job demands and per-group solutions (cassini.link_demands) gives every
    candidate the same evaluation as computing afresh, and holds nothing of a job once forgotten."""
    from harness import spec as spec_mod
    from harness.routing import compute_routes
    from harness.schedulers import cassini
    from harness.schedulers.policy import EpochPolicy
    spec = spec_mod.load(ROOT / "experiments/poisson20-fattree.yaml", scheduler="themis+cassini")
    routes = compute_routes(spec.topology)
    ep = EpochPolicy(spec, routes)
    running = {}
    for job in spec.jobs[:6]:
        placed, _epoch = ep.place(0.0, [job], running)
        running.update(placed)
    profiles_of = {n: ep.profiles_of[n] for n in running}
    fresh = [cassini.evaluate({n: running[n]}, profiles_of, routes, ep.capacity, ep.params) for n in running]
    fresh.append(cassini.evaluate(running, profiles_of, routes, ep.capacity, ep.params))
    memoised = [cassini.evaluate({n: running[n]}, profiles_of, routes, ep.capacity, ep.params, memo=ep.memo)
                for n in running]
    memoised.append(cassini.evaluate(running, profiles_of, routes, ep.capacity, ep.params, memo=ep.memo))
    assert [(e.score, e.shifts, e.link_scores) for e in memoised] == [(e.score, e.shifts, e.link_scores) for e in fresh]
    assert any(k[0] == "group" for k in ep.memo)
    gone = next(iter(running))
    ep.forget(gone)
    about = lambda k: {k[1]} if k[0] == "demands" else {x[0] for x in k[1]}  # noqa: E731
    assert ep.memo and not [k for k in ep.memo if gone in about(k)]


def test_a_shift_no_scheduler_uses_is_refused_and_a_free_job_shows_no_shift():
    with pytest.raises(UsageError) as e:
        spec(topology={"name": "dumbbell", "hosts_per_side": 2}, scheduler="themis",
             jobs=[{"name": "a", "model": "vgg16"}, {"name": "b", "model": "vgg16", "time_shift_ms": 120}])
    assert "jobs[1].time_shift_ms: 120" in str(e.value) and "no effect under scheduler themis: only fixed" in str(e.value)
    from harness.cli import render_schedule
    out = schedule(spec(topology={"name": "dumbbell", "hosts_per_side": 2}, scheduler="themis",
                        jobs=[{"name": "a", "model": "vgg16"}, {"name": "b", "model": "resnet50"}]))
    assert {j.alignment for j in out.jobs} == {"free"}
    rows = [line.split() for line in render_schedule(out).splitlines()[2:4]]
    assert [(r[0], r[3], r[4]) for r in rows] == [("a", "free", "-"), ("b", "free", "-")]


@pytest.mark.parametrize("name", ["demo", "dynamic-fattree", "netsens-small", "echelon-tensor"])
def test_a_plan_reads_back_as_it_was_written(name, tmp_path):
    """schedule.json through Plan.write and Plan.read gives the same document: epoch plans with
    CASSINI, a simulated (event-driven) plan, a program-job plan."""
    from harness.plan import Plan
    from harness.spec import load
    plan = schedule(load(ROOT / "experiments" / f"{name}.yaml"))
    plan.write(tmp_path / "schedule.json")
    again = Plan.read(tmp_path / "schedule.json")
    assert again.to_dict() == json.loads((tmp_path / "schedule.json").read_text()) == \
        json.loads(json.dumps(plan.to_dict()))


def test_a_preempted_job_keeps_its_segments_and_reshifts_through_a_file(tmp_path):
    from harness.plan import Plan, PlannedJob, Reshift, Segment
    j = PlannedJob("a", "vgg19", ["h1", "h2"], 10.0, 298.0, 30, 0.0, 0.0, 12.0, period_ms=300.0,
                   segments=[Segment(0.0, ["h1", "h2"], 10), Segment(5.0, ["h3", "h4"], 20)], restart_s=2.0,
                   reshifts=[Reshift(4.0, 20.0)], alignment="group", group=["a", "b"])
    plan = Plan("themis", "x", 1, {"name": "fattree"}, 50.0, [j])
    plan.write(tmp_path / "s.json")
    back = Plan.read(tmp_path / "s.json").jobs[0]
    assert back == j and back.stretches()[1].hosts == ["h3", "h4"] and back.beat_ms == 300.0
    assert "period_ms" not in PlannedJob("b", "m", [], 0.0, 1.0, 1, 0.0, 0.0, 1.0).to_dict()
