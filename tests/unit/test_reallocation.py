"""Reallocating schedulers (harness.schedulers.reallocation): Themis's auction rule, and simulated
traces whose Themis auctions and Pollux reallocations move jobs while every job's work is kept."""
import pytest
from hypothesis import given, settings, strategies as st

from harness import spec as spec_mod
from harness.planners.schedule import ScheduleError, schedule
from harness.schedulers.reallocation import allocate, rho
from harness.sim.engine import Simulator


def job(name, elapsed=0.0, work=100.0, it=0.2, total=100.0):
    return (name, elapsed, work, it, total)


def test_a_job_without_gpus_is_served_before_any_job_gets_a_second():
    alloc = allocate([job("a", work=1e6), job("b", work=1.0), job("c", work=1.0)], 3, 12)
    assert alloc == {"a": 1, "b": 1, "c": 1}


def test_more_work_left_behind_its_fair_share_wins_more_gpus():
    alloc = allocate([job("behind", elapsed=50.0, work=400.0), job("ahead", elapsed=0.0, work=40.0)], 8, 12)
    assert alloc["behind"] > alloc["ahead"] >= 1
    assert sum(alloc.values()) == 8


def test_rho_falls_with_more_gpus_and_is_infinite_without():
    assert rho(0.0, 10.0, 0, 0.1, 1.0) == float("inf")
    assert rho(0.0, 10.0, 1, 0.1, 1.0) > rho(0.0, 10.0, 2, 0.1, 1.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0.1, 1e4), st.floats(0.01, 3.0), st.floats(0.1, 1e4)),
                min_size=1, max_size=12),
       st.integers(0, 40), st.integers(1, 12))
def test_every_gpu_is_handed_out_and_no_job_passes_the_cap(raw, n_gpus, cap):
    jobs = [(f"j{i}", *x) for i, x in enumerate(raw)]
    alloc = allocate(jobs, n_gpus, cap)
    assert set(alloc) == {j[0] for j in jobs}
    assert all(0 <= n <= cap for n in alloc.values())
    assert sum(alloc.values()) == min(n_gpus, cap * len(jobs))
    if n_gpus >= len(jobs):
        assert min(alloc.values()) >= 1


SPEC = """
name: lease-test
topology: {name: leafspine, hosts_per_tor: 4}
link: {rate_mbps: 50}
trace: {kind: poisson, jobs: 12, load: 0.9, workers: [1, 12], iterations_scale: 0.1,
        models: [vgg16, resnet50, bert, roberta, dlrm, xlm]}
themis: {racks: penalty, lease_s: 20, restart_s: 1}
pollux: {interval_s: 20, restart_s: 1}
scheduler: themis
seed: 3
"""


def lease_spec(tmp_path, scheduler="themis"):
    p = tmp_path / "spec.yaml"
    p.write_text(SPEC.replace("scheduler: themis", f"scheduler: {scheduler}"))
    return spec_mod.load(p)


@pytest.mark.parametrize("scheduler", ["themis", "themis+cassini", "ideal", "pollux", "pollux+cassini"])
def test_reallocations_move_jobs_and_keep_their_work(tmp_path, scheduler):
    spec = lease_spec(tmp_path, scheduler)
    summary = Simulator(spec).run()
    rec = summary["simulator"]["reallocation"]
    assert rec["reallocations"] >= 1 and rec["moves"] >= 1
    resized = 0
    for j in spec.jobs:
        segs = summary["jobs"][j.name]["segments"]
        counts = [len(s["hosts"]) for s in segs]
        resized += len(set(counts + [j.workers])) > 1
        # work in worker-iterations: what the first segment starts with is the request's work
        assert segs[0]["iterations_left"] * counts[0] == pytest.approx(j.iterations * j.workers, rel=1e-3)
        # a moved job restarts no earlier than restart_s after it was stopped
        for a, b in zip(segs, segs[1:]):
            assert b["start_s"] >= a["end_s"]
    assert resized >= 1


@pytest.mark.parametrize("scheduler, key", [("themis", "themis.lease_s"), ("pollux+cassini", "pollux.interval_s")])
def test_the_emulator_refuses_reallocation_with_the_reason(tmp_path, scheduler, key):
    with pytest.raises(ScheduleError, match=key.replace(".", r"\.")):
        schedule(lease_spec(tmp_path, scheduler))


@pytest.mark.parametrize("block, key", [({"lease_s": 0}, "themis.lease_s"), ({"lease_s": 5, "max_workers": 0},
                                                                              "themis.max_workers"),
                                        ({"restart_s": 2}, "themis.restart_s"), ({"leases": 3}, "themis.leases"),
                                        ({"pollux": {"interval_s": -1}}, "pollux.interval_s"),
                                        ({"pollux": {"restart_s": 1}}, "pollux.restart_s"),
                                        ({"pollux": {"every": 5}}, "pollux.every")])
def test_bad_reallocation_settings_name_the_key(tmp_path, block, key):
    import yaml
    raw = yaml.safe_load(SPEC)
    if "pollux" in block:
        raw["pollux"] = block["pollux"]
    else:
        raw["themis"] = block
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(spec_mod.SpecError, match=key.replace(".", r"\.")):
        spec_mod.load(p)
