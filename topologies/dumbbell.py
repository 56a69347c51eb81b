"""Dumbbell: ``h1..hn`` on switch s1, ``h(n+1)..h2n`` on s2, one bottleneck link s1-s2."""
from harness.linkmodel import LinkParams
from harness.registry import register_topology
from topologies.base import Topology, TopologyError


@register_topology("dumbbell")
def dumbbell(hosts_per_side=2, link=None):
    if not isinstance(hosts_per_side, int) or isinstance(hosts_per_side, bool) or hosts_per_side < 1:
        raise TopologyError("topology.hosts_per_side", hosts_per_side, "a whole number >= 1")
    link = link or LinkParams.default()
    topo = Topology("dumbbell", {"hosts_per_side": hosts_per_side})
    left, right = topo.add_switch("edge"), topo.add_switch("edge")
    for side in (left, right):
        for _ in range(hosts_per_side):
            topo.add_link(topo.add_host(), side, link)
    topo.add_link(left, right, link)
    return topo
