"""The simulator: fluid model against hand-computed cases, the engine's bookkeeping, netsens."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from harness import spec as spec_mod
from harness.maxmin import maxmin_rates
from harness.schedulers import netsens
from harness.planners.tuner import tune
from harness.simulate import simulate_spec
from harness.sim.fluid import SimJob, maxmin_matrix, simulate
from workloads.profiles import Phase, Profile, builtins


def prof(name, it, phases, pattern="ring_allreduce"):
    return Profile(name, "data", it, tuple(Phase(s, d, g, pattern) for s, d, g in phases))


def job(name, p, links, shift=0.0, group=None):
    return SimJob(name, p, ["x", "y"], shift, group, [dict(links) for _ in p.phases])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from("abcd"), min_size=1, max_size=3, unique=True), min_size=1, max_size=6),
       st.lists(st.floats(1, 100), min_size=4, max_size=4))
def test_matrix_maxmin_equals_progressive_filling(flows, caps):
    links = list("abcd")
    capacity = dict(zip(links, caps))
    m = np.array([[1.0 if l in f else 0.0 for l in links] for f in flows])
    got = maxmin_matrix(m, np.full(len(flows), np.inf), np.array(caps))
    want = maxmin_rates({i: f for i, f in enumerate(flows)}, capacity)
    assert got == pytest.approx([want[i] for i in range(len(flows))], rel=1e-6)


def test_matrix_maxmin_respects_caps_and_multiplicity():
    # flow 0 crosses link a twice (two of its transfers), capped at 50; flow 1 once, cap 10
    r = maxmin_matrix(np.array([[2.0], [1.0]]), np.array([50.0, 10.0]), np.array([100.0]))
    assert r == pytest.approx([45.0, 10.0])


def test_alone_a_job_runs_at_its_profile():
    p = prof("p", 100, [(40, 30, 50)])
    out = simulate([job("a", p, {"l": 1})], {"l": 50.0})
    assert np.mean(out.iteration_ms["a"]) == pytest.approx(100.0)
    assert out.marks_per_iteration["a"] == 0


def test_two_jobs_colliding_share_the_link():
    # both communicate 50 Gbit/s for 50 ms of a 100 ms iteration, starting together: sharing, each
    # phase takes 100 ms; iteration = 50 compute + 100 comm = 150 ms (hand computed)
    p = prof("p", 100, [(50, 50, 50)])
    out = simulate([job("a", p, {"l": 1}), job("b", p, {"l": 1})], {"l": 50.0})
    assert np.mean(out.iteration_ms["a"]) == pytest.approx(150.0, rel=1e-6)
    assert out.marks_per_iteration["a"] > 0


def test_shifted_jobs_in_a_group_interleave():
    p = prof("p", 100, [(50, 50, 50)])
    out = simulate([job("a", p, {"l": 1}, 0.0, "g"), job("b", p, {"l": 1}, 50.0, "g")], {"l": 50.0})
    assert np.mean(out.iteration_ms["a"]) == pytest.approx(100.0)
    assert np.mean(out.iteration_ms["b"]) == pytest.approx(100.0)
    assert out.marks_per_iteration["a"] == 0


def test_demo_spec_matches_the_papers_direction():
    themis = simulate_spec(spec_mod.load("experiments/demo.yaml", scheduler="themis"))
    cassini = simulate_spec(spec_mod.load("experiments/demo.yaml", scheduler="themis+cassini"))
    assert cassini["totals"]["iteration_ms_mean"] == pytest.approx(298.0)
    # VGG19: Up 149 of 298 ms at the full rate; together the overlap is shared: 355 ms (fluid model)
    assert themis["totals"]["iteration_ms_mean"] == pytest.approx(355.1, abs=0.5)
    assert themis["jobs"]["vgg19-a"]["iterations"] == 100
    assert themis["totals"]["jct_s_mean"] == pytest.approx(100 * 0.3551, rel=1e-3)


def spec_with(jobs, scheduler, **extra):
    """A spec on the 24-host fat-tree; ``jobs`` None: the ``trace`` in ``extra``."""
    raw = {"name": "t", "topology": {"name": "fattree"}, "scheduler": scheduler, **extra,
           **({"jobs": jobs} if jobs is not None else {})}
    return spec_mod.from_mapping(raw)


def test_netsens_classes_and_levels():
    b = builtins()
    # VGG19: 119 of 298 ms at 37 Gbit/s; half of 50 Gbit/s left: that phase takes 119 x 37 / 25 ms
    assert netsens.modelled_sensitivity(b["vgg19"], 0.5) == pytest.approx((179 + 119 * 37 / 25) / 298)
    assert netsens.classify(netsens.modelled_sensitivity(b["roberta"], 0.5), [1.15, 1.25]) == "high"
    assert netsens.classify(netsens.modelled_sensitivity(b["dlrm"], 0.5), [1.15, 1.25]) == "low"
    assert netsens.modelled_sensitivity(b["resnet50"], 0.0) == 1.0
    lay = netsens.Layout(spec_with([{"name": "a", "model": "vgg19", "workers": 2}], "netsens").topology)
    assert lay.rack_size == 3 and lay.pod_size == 6
    assert lay.level(["h1", "h2"]) == 0 and lay.level(["h1", "h4"]) == 1 and lay.level(["h1", "h13"]) == 2
    free = ["h1", "h4", "h5", "h6", "h7"]
    assert lay.pick(2, free, 0) == ["h4", "h5"]            # the only rack with room
    assert lay.pick(2, free, 1, fragments_first=True) == ["h1", "h4"]   # leaves rack h4-h6 mostly whole


def test_delay_scheduling_waits_then_relaxes():
    # a 22-worker insensitive blocker (DLRM) leaves 2 free hosts in one rack: a 2-worker sensitive
    # job fits there at once; a 3-worker one finds no free rack and waits its rack timer.
    jobs = [{"name": "blocker", "model": "dlrm", "workers": 22, "iterations": 10000},
            {"name": "sens", "model": "roberta", "workers": 2, "iterations": 50, "arrival_s": 1}]
    s = spec_with(jobs, "netsens", background={"load": 0.5},
                  netsens={"timers": {"high": [30, 30]}, "preemption": False})
    out = simulate_spec(s)
    j = out["jobs"]["sens"]
    assert j["queue_s"] == pytest.approx(0.0)   # 2 free hosts in one rack: it fits at once, level 0
    jobs[1]["workers"] = 3                        # needs a whole rack: none free; waits 30 s, then pod/any
    out = simulate_spec(spec_with(jobs, "netsens", background={"load": 0.5},
                                  netsens={"timers": {"high": [30, 30]}, "preemption": False}))
    assert out["jobs"]["sens"]["queue_s"] > 0


def test_preemption_frees_a_rack_for_a_sensitive_job_and_costs_a_restart():
    jobs = [{"name": f"low{i}", "model": "dlrm", "workers": 3, "iterations": 5000} for i in range(8)]
    jobs.append({"name": "sens", "model": "roberta", "workers": 3, "iterations": 100, "arrival_s": 200})
    cfg = {"timers": {"high": [10, 10]}, "preemption": True, "restart_s": 30, "min_run_s": 60}
    out = simulate_spec(spec_with(jobs, "netsens", background={"load": 0.5}, netsens=cfg))
    assert out["totals"]["preemptions"] == 1
    assert out["totals"]["restarts"] == 1 and out["totals"]["restart_gpu_s"] == pytest.approx(3 * 30)
    victim = next(n for n, j in out["jobs"].items() if j["preemptions"])
    assert out["jobs"][victim]["iterations"] == 5000          # progress kept across the restart
    assert out["jobs"]["sens"]["queue_s"] == pytest.approx(10.0, abs=0.01)
    # the victim's JCT: its work (5000 x 150 ms) + the sensitive job's run (100 x 210 ms: every host
    # is busy) + the 30 s restart
    assert out["jobs"][victim]["jct_s"] == pytest.approx(5000 * 0.150 + 100 * 0.210 + 30, abs=0.5)
    cfg["preemption"] = False
    out2 = simulate_spec(spec_with(jobs, "netsens", background={"load": 0.5}, netsens=cfg))
    assert out2["totals"]["preemptions"] == 0
    assert out2["jobs"]["sens"]["queue_s"] > out["jobs"]["sens"]["queue_s"]


def test_tiresias_serves_the_least_attained_first_and_demotes_at_its_queue_limit():
    """Two-queue LAS on GPU-time: a 24-worker job holds every host; a 3-worker job arriving at 1 s
    waits (same queue, later arrival) until the big one has 120 GPU-s (5 s), which demotes and
    preempts it; the small job runs alone (100 x 58 ms) and the big one resumes with the restart."""
    jobs = [{"name": "big", "model": "resnet50", "workers": 24, "iterations": 10000},
            {"name": "small", "model": "resnet50", "workers": 3, "iterations": 100, "arrival_s": 1}]
    out = simulate_spec(spec_with(jobs, "tiresias", tiresias={"queue_limits": [120]}, netsens={"restart_s": 30}))
    assert out["jobs"]["small"]["queue_s"] == pytest.approx(4.0, abs=1e-6)
    assert out["jobs"]["small"]["jct_s"] == pytest.approx(4.0 + 100 * 0.058, abs=1e-6)
    big = out["jobs"]["big"]
    assert big["preemptions"] == 1 and big["iterations"] == pytest.approx(10000)
    assert big["jct_s"] == pytest.approx(10000 * 0.058 + 100 * 0.058 + 30, abs=1e-6)
    assert out["totals"]["restarts"] == 1 and out["totals"]["restart_gpu_s"] == pytest.approx(24 * 30)
    # Tiresias's default split (3,600 GPU-s) is reached by the big job at 150 s
    out = simulate_spec(spec_with(jobs, "tiresias"))
    assert out["jobs"]["small"]["queue_s"] == pytest.approx(149.0, abs=1e-6)


@pytest.mark.parametrize("bad, key", [({"queue_limits": [100, 50]}, "tiresias.queue_limits"),
                                      ({"queue_limits": []}, "tiresias.queue_limits"),
                                      ({"limits": [1]}, "tiresias.limits"), ([3600], "tiresias")])
def test_bad_tiresias_keys_name_the_key(bad, key):
    with pytest.raises(spec_mod.SpecError, match=key.replace(".", r"\.") + ":"):
        spec_with([{"name": "a", "model": "vgg19", "workers": 2}], "tiresias", tiresias=bad)


def test_tuner_reports_every_candidate_and_picks_the_best():
    jobs = [{"name": f"j{i}", "model": m, "workers": 3, "iterations": 100, "arrival_s": 5 * i}
            for i, m in enumerate(["vgg19", "resnet50", "vgg16", "bert", "resnet50", "vgg19", "gpt2", "vgg11"])]
    s = spec_with(jobs, "netsens", background={"load": 0.5})
    res = tune(s, grid_high=(0.0, 60.0), grid_medium=(0.0,))
    assert len(res["tried"]) == 2
    assert res["chosen"] == min(res["tried"], key=lambda r: r["jct_mean"])["timers"]
    assert res["held_out"] is False and res["trace_seed"] == s.seed


def test_tuner_on_a_held_out_trace_judges_other_jobs():
    """``tune_seed``: the candidates run on the trace drawn again with that seed (background kept);
    on the spec's own seed it is the oracle tuning, candidate for candidate."""
    raw = {"trace": {"kind": "poisson", "jobs": 12, "load": 1.2, "iterations_scale": 0.2}, "seed": 3}
    own = spec_with(None, "netsens", background={"load": 0.5}, **raw)
    grid = {"grid_high": (0.0, 60.0), "grid_medium": (0.0,)}
    oracle = tune(own, **grid)
    same = tune(spec_with(None, "netsens", background={"load": 0.5}, netsens={"tune_seed": 3}, **raw), **grid)
    other = tune(spec_with(None, "netsens", background={"load": 0.5}, netsens={"tune_seed": 1000}, **raw), **grid)
    assert same["tried"] == oracle["tried"] and same["held_out"] and same["trace_seed"] == 3
    assert other["trace_seed"] == 1000 and other["tried"] != oracle["tried"]


@pytest.mark.parametrize("bad,msg", [
    ({"netsens": {"timers": {"high": [1]}}}, "netsens.timers.high"),
    ({"netsens": {"bogus": 1}}, "netsens.bogus"),
    ({"netsens": {"thresholds": [2, 1]}}, "netsens.thresholds"),
    ({"netsens": {"tune_seed": -1}}, "netsens.tune_seed"),
    ({"netsens": {"sensitivity": "measured"}}, "netsens.sensitivity"),
    ({"background": {"load": 1.2}}, "background.load"),
])
def test_bad_netsens_keys_name_the_key(bad, msg):
    with pytest.raises(spec_mod.SpecError, match=msg.replace(".", r"\.")):
        spec_with([{"name": "a", "model": "vgg19", "workers": 2}], "netsens", **bad)


def test_stored_sensitivity_table_is_current():
    import yaml
    from workloads import derive_sensitivity
    stored = yaml.safe_load(derive_sensitivity.OUT.read_text())
    assert stored == derive_sensitivity.table()       # regenerate with python -m workloads.derive_sensitivity
    assert set(stored["models"]) == set(builtins())
    assert derive_sensitivity.SET.read_text() == derive_sensitivity.set_file()   # ... --set


@pytest.fixture
def measured_table(monkeypatch):
    """netsens reads a stand-in emulated table: RoBERTa measured 1.2 at background 0 and 2.0 at 0.5."""
    from workloads import sensitivity as table
    monkeypatch.setattr(table, "_EMULATED", {"roberta": ([0.0, 0.5], [1.2, 2.0])})


def test_netsens_uses_the_measured_sensitivity(measured_table):
    b = builtins()
    assert netsens.sensitivity(b["roberta"], 0.5) == pytest.approx(2.0)
    assert netsens.sensitivity(b["roberta"], 0.25) == pytest.approx(1.6)       # linear between measured loads
    assert netsens.sensitivity(b["roberta"], 0.75) == pytest.approx(2.0)       # nearest measured outside them
    assert netsens.sensitivity(b["roberta"], 0.5, "modelled") == netsens.modelled_sensitivity(b["roberta"], 0.5)
    assert netsens.sensitivity(b["vgg19"], 0.5) == netsens.modelled_sensitivity(b["vgg19"], 0.5)   # not measured
    # a derived profile: its modelled value times the model's measured / modelled
    from workloads.profiles import at_batch
    big = at_batch(b["roberta"], 48)
    assert netsens.sensitivity(big, 0.5) == pytest.approx(
        netsens.modelled_sensitivity(big, 0.5) * 2.0 / netsens.modelled_sensitivity(b["roberta"], 0.5))
    # a spec's own profile named like a built-in is not the built-in: modelled
    own = spec_mod.from_mapping({"name": "t", "topology": {"name": "fattree"}, "scheduler": "netsens",
                                 "profiles": {"roberta": {"iteration_ms": 100, "phases": [
                                     {"start_ms": 0, "duration_ms": 50, "gbps": 37}]}},
                                 "jobs": [{"name": "a", "model": "roberta", "workers": 2}]}).profiles["roberta"]
    assert netsens.sensitivity(own, 0.5) == netsens.modelled_sensitivity(own, 0.5)
    pol = netsens.NetsensPolicy(spec_with([{"name": "a", "model": "roberta", "workers": 2}], "netsens"))
    assert pol.sens == {"a": pytest.approx(2.0)}
    pol = netsens.NetsensPolicy(spec_with([{"name": "a", "model": "roberta", "workers": 2}], "netsens",
                                          netsens={"sensitivity": "modelled"}))
    assert pol.sens == {"a": pytest.approx(netsens.modelled_sensitivity(b["roberta"], 0.5))}


def test_measured_sensitivities_come_from_the_sets_kept_runs(tmp_path):
    import json
    from workloads import derive_sensitivity as ds
    runs = {("roberta-bg0.5", 0): (200.0, 400.0, True), ("roberta-bg0.5", 1): (200.0, 360.0, True),
            ("roberta-bg0.5", 2): (100.0, 900.0, False), ("vgg19-bg0", 0): (300.0, 300.0, True)}
    for (lab, k), (p, q, ok) in runs.items():
        d = tmp_path / lab / f"consolidate-r{k}"
        d.mkdir(parents=True)
        (d / "summary.json").write_text(json.dumps({"fidelity": {"ok": ok}, "jobs": {
            "packed": {"iteration_ms_mean": p}, "spread": {"iteration_ms_mean": q}}}))
    got, kept, excluded = ds.measured(tmp_path)
    assert (kept, excluded) == (3, 1)
    assert set(got) == {"roberta", "vgg19"}
    r = got["roberta"]["background_0.5"]
    assert (r["ratio"], r["runs"], r["excluded"], r["packed_ms"], r["spread_ms"]) == (1.9, 2, 1, 200.0, 380.0)
    assert r["ci"][0] < 1.9 < r["ci"][1]
    assert got["vgg19"]["background_0.0"]["ratio"] == 1.0 and got["vgg19"]["background_0.0"]["ci"] is None


def test_a_grid_job_late_by_more_than_the_threshold_waits_for_its_next_slot():
    # 50 ms at 50 Gbit/s over a 40 Gbit/s link: the phase takes 62.5 ms, the iteration 112.5 ms,
    # 12.5 % late: on its grid (a fixed job) it waits for the slot at 200 ms and re-aligns every
    # iteration (hand computed); running free it takes 112.5 ms
    p = prof("p", 100, [(50, 50, 50)])
    grid = simulate([SimJob("a", p, ["x", "y"], 0.0, None, [{"l": 1}], alignment="grid")], {"l": 40.0})
    free = simulate([SimJob("a", p, ["x", "y"], 0.0, None, [{"l": 1}], alignment="free")], {"l": 40.0})
    assert np.mean(grid.iteration_ms["a"]) == pytest.approx(200.0, rel=1e-6)
    assert grid.realignments_per_iteration["a"] > 0.9
    assert np.mean(free.iteration_ms["a"]) == pytest.approx(112.5, rel=1e-6)


def test_communication_time_stretches_when_phases_collide():
    # the hand-computed case above: alone a phase lasts its 50 ms, colliding each takes 100 ms
    p = prof("p", 100, [(50, 50, 50)])
    alone = simulate([job("a", p, {"l": 1})], {"l": 50.0})
    both = simulate([job("a", p, {"l": 1}), job("b", p, {"l": 1})], {"l": 50.0})
    assert alone.comm_ms["a"] == pytest.approx(50.0) and p.comm_span_ms == 50.0
    assert both.comm_ms["a"] == pytest.approx(100.0, rel=1e-6)


def test_link_delay_keeps_each_step_in_flight_for_the_route_delay():
    """Two workers across a 3-link dumbbell route, 10 ms per link (30 ms one way). The 36 ms phase at
    line rate cannot be sent faster: each of a 2-worker ring's 2 steps sends its half (18 ms) and
    waits 30 ms for its peer's data: 96 ms, so the iteration is 36 + 96 = 132 ms. At a fifth of line
    rate the agent sends faster to make up for the latency: max(36, 7.2 + 60) = 67.2 ms, iteration
    103.2 ms (hand computed). Without delay both run at the profile's 72 ms."""
    from harness.routing import path_delays, routes_for
    from harness.sim.fluid import attach_links
    from topologies import by_name
    from harness.linkmodel import LinkParams
    for gbps, want in ((50.0, 132.0), (10.0, 103.2)):
        p = prof("toy", 72.0, [(36.0, 36.0, gbps)])
        for delay in (0.0, 10.0):
            topo = by_name("dumbbell", link=LinkParams.from_spec({"rate_mbps": 50, "delay_ms": delay}),
                           hosts_per_side=2)
            routes = routes_for(topo)
            j = attach_links(SimJob("a", p, ["h1", "h3"]), routes, path_delays(topo), 50.0)
            out = simulate([j], {l: 50.0 for pl in j.phase_links for l in pl})
            assert np.mean(out.iteration_ms["a"]) == pytest.approx(want if delay else 72.0, rel=1e-6)


def test_simulated_jobs_report_the_shift_they_ran_with():
    """The demo pair under CASSINI: each job's time_shift_ms in the simulated summary is the plan's
    (the policy forgets a finished job's shift; the summary is written after)."""
    from harness.planners.schedule import schedule
    from tests.helpers import ROOT
    s = spec_mod.load(ROOT / "experiments" / "demo.yaml", scheduler="themis+cassini")
    planned = {j.name: j.time_shift_ms for j in schedule(s).jobs}
    simulated = {n: j["time_shift_ms"] for n, j in simulate_spec(s)["jobs"].items()}
    assert simulated == pytest.approx(planned) and max(planned.values()) > 0, (simulated, planned)


def test_a_profile_at_another_reference_rate_runs_at_its_share_of_the_line_in_both_backends(tmp_path):
    """A profile given at 100 Gbit/s (an 80 Gbit/s phase: 80 % of its line) on a spec of 50: the
    simulator runs it at 40 of 50 (alone: its own iteration, no marks), and the emulator's Mbit/s per
    phase on a 50 Mbit/s fabric are what they were before the profile was normalised (40)."""
    import yaml
    from workloads.profiles import from_dict
    raw = {"iteration_ms": 400, "reference_gbps": 100, "phases": [{"start_ms": 200, "duration_ms": 200, "gbps": 80}]}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"name": "ref", "topology": {"name": "dumbbell", "hosts_per_side": 2},
                                 "reference_gbps": 50, "profiles": {"wide": raw}, "scheduler": "fixed",
                                 "jobs": [{"name": "a", "model": "wide", "workers": 2, "hosts": ["h1", "h3"],
                                           "iterations": 20}]}))
    s = spec_mod.load(p)
    assert s.profiles["wide"].reference_gbps == 50 and s.profiles["wide"].phases[0].gbps == pytest.approx(40)
    assert s.profiles["wide"].scaled_mbps(50) == pytest.approx([40.0])
    assert from_dict("wide", raw, "x").scaled_mbps(50) == pytest.approx([40.0])
    j = simulate_spec(s)["jobs"]["a"]
    assert j["iteration_ms_mean"] == pytest.approx(400, rel=0.01) and j["ecn_marks"] == 0, j


def test_a_job_that_a_later_arrival_groups_with_reports_the_plans_alignment(tmp_path):
    """mine1 runs alone, then gpt1a arrives and shares its links under CASSINI: the plan gives both
    alignment group, and so does the simulated summary (it recorded mine1's alignment at placement:
    free)."""
    import yaml
    from harness.planners.schedule import schedule
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({
        "name": "later", "topology": {"name": "fattree"}, "scheduler": "themis+cassini", "seed": 7,
        "profiles": {"mynet": {"iteration_ms": 200, "phases": [{"start_ms": 100, "duration_ms": 100, "gbps": 30}]}},
        "jobs": [{"name": "mine1", "model": "mynet", "workers": 10, "iterations": 150},
                 {"name": "bert1", "model": "bert", "workers": 10, "iterations": 150},
                 {"name": "gpt1a", "model": "gpt1", "workers": 4, "iterations": 150, "arrival_s": 3}]}))
    s = spec_mod.load(p)
    planned = {j.name: j.alignment for j in schedule(s).jobs}
    simulated = {n: j["alignment"] for n, j in simulate_spec(s)["jobs"].items()}
    assert planned == simulated and planned["mine1"] == "group", (planned, simulated)
