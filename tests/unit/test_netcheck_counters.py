"""netcheck's counters comparison on a dumbbell, from hand-made CE samples: equal counts pass, a
shortfall fails, and a shortfall that the queues' measured drops explain passes."""
from types import SimpleNamespace

from harness.netcheck import _counters_check
from harness.routing import compute_routes
from topologies import dumbbell


def fake_fabric():
    topo = dumbbell(2)
    return SimpleNamespace(topo=topo, routes=compute_routes(topo), port_dev=lambda node, port: f"il{node}-eth{port}")


def check(seen_at_s2, marked, drops=None):
    fab = fake_fabric()
    topo, flows = fab.topo, [("h1", "h3"), ("h2", "h4")]
    s2 = topo.dpid("s2")
    key = {f: f"{topo.mac(f[0])}>{topo.mac(f[1])}" for f in flows}
    base = [{"kind": "ce", "dpid": s2, "ce": {key[f]: 0 for f in flows}}]
    end = [{"kind": "ce", "dpid": s2, "ce": {key[flows[0]]: seen_at_s2 // 2, key[flows[1]]: seen_at_s2 - seen_at_s2 // 2}}]
    dev = fab.port_dev("s1", topo.port("s1", "s2"))
    return _counters_check(fab, base, base + end, {dev: marked}, flows, {dev: drops} if drops else None)


def test_equal_counts_on_the_switch_link_pass():
    r = check(300, 300)
    assert r["ok"] and r["compared"] == ["s1>s2"]


def test_a_shortfall_fails_unless_the_queue_dropped_that_many():
    assert not check(290, 300)["ok"]
    r = check(290, 300, drops=8)
    assert r["ok"] and r["queue_drops"] == {"s1>s2": 8}
