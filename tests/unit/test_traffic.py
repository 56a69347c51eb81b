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
