import pytest

from harness.replay import job_config
from harness.schedulers.traffic import link_loads, transfers
from harness.routing import compute_routes
from harness.spec import Job
from topologies import dumbbell
from workloads.profiles import builtins


def test_patterns():
    h = ["a", "b", "c", "d"]
    assert transfers("ring_allreduce", h) == [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")]
    assert transfers("pipeline_p2p", h) == [("a", "b"), ("b", "c"), ("c", "d")]
    assert len(transfers("alltoall", h)) == 12
    assert transfers("ring_allreduce", ["a"]) == []


def test_link_loads_on_a_dumbbell():
    topo = dumbbell(2)
    routes = compute_routes(topo)
    loads = link_loads(builtins()["vgg16"], ["h1", "h3"], routes)
    assert loads["s1>s2"] == [(0, 37.0)] and loads["s2>s1"] == [(0, 37.0)]
    assert set(loads) == {"h1>s1", "s1>s2", "s2>h3", "h3>s2", "s2>s1", "s1>h1"}


def test_agent_config_scales_bytes_not_time():
    prof = builtins()["vgg16"]
    cfg = job_config(Job("a", "vgg16", 2, 10), prof, ["h1", "h3"], ["10.0.0.1", "10.0.0.3"], 120.0,
                     50 / 50000, 100.0, 99.0, 0, True)
    assert cfg["iteration_ms"] == 255 and cfg["phases"][0]["duration_ms"] == 114
    assert cfg["scale"] == 0.001 and cfg["time_shift_ms"] == 120 and cfg["dscp"] == 1


@pytest.mark.parametrize("dilation", [1, 3, 8])
def test_a_dilated_run_carries_the_bytes_and_load_of_the_undilated_one(dilation):
    """time_dilation D builds the fabric at rate / D and stretches the profile (time x D, demand
    / D): the agent's bytes per phase and its share of the wall link must not change with D."""
    from harness.replay import byte_scale
    from harness.runner import wall_fabric
    from harness.spec import from_mapping
    from workloads.profiles import dilate
    from agents.timing import Dilation
    s = from_mapping({"name": "d", "topology": "dumbbell", "link": {"rate_mbps": 50},
                      "jobs": [{"name": "a", "model": "vgg16", "workers": 2, "iterations": 10, "hosts": ["h1", "h3"]}],
                      "time_dilation": dilation})
    topo, link = wall_fabric(s, Dilation(dilation))
    prof = dilate(builtins()["vgg16"], dilation)
    cfg = job_config(s.jobs[0], prof, ["h1", "h3"], ["10.0.0.1", "10.0.0.3"], 0.0,
                     byte_scale(topo, ["h1", "h3"], prof.reference_gbps, dilation), 0.0, 0.0, 0, True)
    ph = cfg["phases"][0]
    nbytes = ph["gbps"] * 1e9 / 8 * ph["duration_ms"] / 1000 * cfg["scale"]
    assert nbytes == pytest.approx(37 * 1e9 / 8 * 0.114 * 1e-3)            # vgg16: 37 Gbit/s for 114 ms
    wall_bps = ph["gbps"] * 1e9 * cfg["scale"]
    assert wall_bps / (link.rate_mbps * 1e6) == pytest.approx(37 / 50)      # 37 of the reference 50 Gbit/s


def test_the_agent_config_takes_each_part_by_name():
    """One builder: a group's members and beat directory, a program's part, a replan file; nothing
    else is merged in."""
    from harness.spec import Job
    from workloads.profiles import builtins
    prof = builtins()["vgg16"]
    plain = job_config(Job("a", "vgg16", 2, 10), prof, ["h1", "h3"], ["10.0.0.1", "10.0.0.3"], 0.0, 1.0, 0.0, 0.0, 0,
                       "grid", first_slot=3, iteration_base=7)
    assert plain["first_slot"] == 3 and plain["iteration_base"] == 7
    assert not {"group", "beat_dir", "kind", "replan_path", "inject_delay_ms"} & set(plain)
    full = job_config(Job("a", "vgg16", 2, 10), prof, ["h1", "h3"], ["10.0.0.1", "10.0.0.3"], 0.0, 1.0, 0.0, 0.0, 0,
                      "group", group=[{"job": "b", "shift_ms": 5.0}], beat_dir="/tmp/x",
                      program={"kind": "program", "period_s": 1.0}, replan_path="/tmp/r.json")
    assert full["group"] == [{"job": "b", "shift_ms": 5.0}] and full["beat_dir"] == "/tmp/x"
    assert full["kind"] == "program" and full["period_s"] == 1.0 and full["replan_path"] == "/tmp/r.json"
    with pytest.raises(TypeError):
        job_config(Job("a", "vgg16", 2, 10), prof, ["h1"], ["10.0.0.1"], 0.0, 1.0, 0.0, 0.0, 0, "grid", {"x": 1})
