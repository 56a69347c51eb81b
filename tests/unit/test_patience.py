"""netsens's adaptive waiting (harness.schedulers.patience): the expected wait, the wait-or-go rule,
the slowdown learned from progress, and the rule at work in the simulator."""
import math

import pytest

from harness import spec as spec_mod
from harness.schedulers import netsens
from harness.schedulers.patience import Patience
from harness.simulate import simulate_spec


def spec_with(jobs, **extra):
    return spec_mod.from_mapping({"name": "t", "topology": {"name": "fattree"}, "scheduler": "netsens",
                                  "jobs": jobs, **extra})


@pytest.fixture
def layout():     # 8 racks of 3 hosts (h1-h3, h4-h6, ...), pods of two racks
    return netsens.Layout(spec_with([{"name": "a", "model": "vgg19", "workers": 2}]).topology)


def patience(layout, across=1.5):
    return Patience(layout, lambda n, lvl: 1.0 if lvl == 0 else across, lambda n, its: its * 0.1)


def test_the_expected_wait_is_the_first_predicted_end_that_frees_enough_hosts(layout):
    p = patience(layout)
    p.placed("x", 0.0, 100, 0)                 # 10 s of work in one rack: ends at 10 s
    p.placed("y", 0.0, 100, 1)                 # across racks: 100 x 0.1 x 1.5 = ends at 15 s
    running = {"x": ["h1", "h2", "h3"], "y": ["h4", "h7"]}
    assert p.expected_wait(2.0, 3, 0, [], running) == pytest.approx(8.0)
    assert p.expected_wait(2.0, 3, 0, ["h10", "h11", "h12"], running) == 0.0
    assert p.expected_wait(2.0, 2, 0, ["h5"], {"y": running["y"]}) == pytest.approx(13.0)  # h4 back at 15 s
    assert p.expected_wait(2.0, 4, 0, [], running) == math.inf                   # no rack holds 4
    assert p.expected_wait(20.0, 3, 0, [], running) == 0.0      # past its predicted end: taken as now


def test_a_job_waits_only_for_a_saving_larger_than_the_wait(layout):
    p = patience(layout)
    p.placed("blocker", 0.0, 80, 0)            # its rack frees at 8 s
    running = {"blocker": ["h1", "h2", "h3"]}
    # 1000 iterations x 0.1 s = 100 s of work; across racks 1.5x: one rack saves 50 s
    assert p.target(0.0, "j", 1000, 3, 2, 0, ["h4", "h7", "h10"], running) == (0, pytest.approx(50.0),
                                                                                pytest.approx(8.0))
    assert p.target(0.0, "j", 100, 3, 2, 0, ["h4", "h7", "h10"], running) is None      # saves 5 s < 8 s
    assert patience(layout, across=1.0).target(0.0, "j", 1000, 3, 2, 0, [], running) is None


def test_each_level_learns_its_slowdown_from_the_progress_of_its_jobs(layout):
    p = patience(layout)
    assert p.factor(2) == 1.0                  # nothing seen: the model as it is
    p.placed("y", 0.0, 100, 2)                 # modelled 100 x 0.1 x 1.5 = 15 s
    p.observe(10.0, {"y": 50.0})               # half its work in 10 s: 2 s per 1.5 s modelled
    assert p.factor(2) == pytest.approx(10.0 / 7.5)
    assert p.slowdown("j", 2) == pytest.approx(1.5 * 10.0 / 7.5)
    assert p.factor(0) == 1.0


# Racks 1-7 busy with pinned jobs that run long (rack 1 and 2 with a host free each); rack 8 holds a
# short job on two hosts and one free host. A 3-worker RoBERTa (sensitive) arrives at 1 s: no rack
# is free, three hosts across racks are.
def cluster(short_iterations):
    pinned = [{"name": "r1", "model": "dlrm", "workers": 2, "iterations": 100000, "hosts": ["h1", "h2"]},
              {"name": "r2", "model": "dlrm", "workers": 2, "iterations": 100000, "hosts": ["h4", "h5"]}]
    pinned += [{"name": f"r{k}", "model": "dlrm", "workers": 3, "iterations": 100000,
                "hosts": [f"h{3 * k - 2}", f"h{3 * k - 1}", f"h{3 * k}"]} for k in range(3, 8)]
    pinned.append({"name": "short", "model": "dlrm", "workers": 2, "iterations": short_iterations,
                   "hosts": ["h22", "h23"]})
    return pinned + [{"name": "sens", "model": "roberta", "workers": 3, "iterations": 2000, "arrival_s": 1}]


def test_netsens_waits_for_a_rack_that_frees_soon_and_goes_at_once_when_none_will():
    lay = netsens.Layout(spec_with(cluster(100)).topology)
    out = simulate_spec(spec_with(cluster(100), background={"load": 0.5}))
    sens, short = out["jobs"]["sens"], out["jobs"]["short"]
    assert lay.level(sens["hosts"]) == 0
    assert sens["queue_s"] == pytest.approx(short["jct_s"] - 1, abs=0.01)
    assert sens["locality_wait_s"] == pytest.approx(sens["queue_s"])
    out = simulate_spec(spec_with(cluster(100000), background={"load": 0.5}))
    assert out["jobs"]["sens"]["queue_s"] == 0.0 and lay.level(out["jobs"]["sens"]["hosts"]) == 2
    assert out["jobs"]["sens"]["locality_wait_s"] == 0.0


def test_fixed_timers_stay_selectable():
    cfg = {"timers": {"high": [0, 0]}, "preemption": False}
    out = simulate_spec(spec_with(cluster(100), background={"load": 0.5}, netsens=cfg))
    assert out["jobs"]["sens"]["queue_s"] == 0.0             # a zero timer never waits


def test_low_jobs_fill_racks_or_pods_as_low_fill_says():
    # netsens-small: eight 2-worker DLRM jobs (low) on racks of 3, then RoBERTa and VGG19 (3 each)
    from pathlib import Path
    small = Path(__file__).resolve().parents[2] / "experiments/netsens-small.yaml"
    lay = None
    for fill, level in (("pod", 0), ("rack", 2)):    # patience 1: RoBERTa goes where hosts are free now
        spec = spec_mod.load(small, overrides={"netsens": {"low_fill": fill, "patience": 1}})
        lay = lay or netsens.Layout(spec.topology)
        out = simulate_spec(spec)
        assert lay.level(out["jobs"]["roberta"]["hosts"]) == level, fill
    with pytest.raises(spec_mod.SpecError, match="netsens.low_fill"):
        spec_with([{"name": "a", "model": "vgg19", "workers": 2}], netsens={"low_fill": "any"})


def test_patience_scales_the_saving_a_wait_may_cost(layout):
    """patience 1: waits only for a saving above the wait (100 iterations save 5 s < 8 s); patience 2:
    10 s of budget > 8 s, so it waits; the budget is what the job may wait in all."""
    running = {"blocker": ["h1", "h2", "h3"]}
    for k, expect in ((1.0, None), (2.0, (0, pytest.approx(10.0), pytest.approx(8.0)))):
        p = Patience(layout, lambda n, lvl: 1.0 if lvl == 0 else 1.5, lambda n, its: its * 0.1, patience=k)
        p.placed("blocker", 0.0, 80, 0)
        assert p.target(0.0, "j", 100, 3, 2, 0, ["h4", "h7", "h10"], running) == expect


def test_patience_is_a_positive_number():
    for bad in (0, -1, "long", True):
        with pytest.raises(spec_mod.SpecError, match="netsens.patience"):
            spec_with([{"name": "a", "model": "vgg19", "workers": 2}], netsens={"patience": bad})
