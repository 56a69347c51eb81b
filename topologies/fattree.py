"""k-ary fat-tree with a chosen number of hosts per edge switch.

Switch numbering: edge switches first (pod by pod), then aggregation (pod by pod), then core.
The default, k=4 with 3 hosts per edge switch, gives 24 hosts and 20 switches (8 edge, 8 agg,
4 core); the edge layer is then 3:2 oversubscribed (the classic k=4 tree has 2 hosts per edge).
Agg switch j of every pod connects to the core switches j*(k/2) .. j*(k/2)+k/2-1.
"""
from harness.linkmodel import LinkParams
from harness.registry import register_topology
from topologies.base import Topology, TopologyError


@register_topology("fattree")
def fattree(k=4, hosts_per_edge=3, link=None):
    if not isinstance(k, int) or isinstance(k, bool) or k < 2 or k % 2:
        raise TopologyError("topology.k", k, "an even whole number >= 2")
    if not isinstance(hosts_per_edge, int) or isinstance(hosts_per_edge, bool) or hosts_per_edge < 1:
        raise TopologyError("topology.hosts_per_edge", hosts_per_edge, "a whole number >= 1")
    link = link or LinkParams.default()
    half = k // 2
    topo = Topology("fattree", {"k": k, "hosts_per_edge": hosts_per_edge})
    edges = [[topo.add_switch("edge") for _ in range(half)] for _ in range(k)]
    aggs = [[topo.add_switch("agg") for _ in range(half)] for _ in range(k)]
    cores = [topo.add_switch("core") for _ in range(half * half)]
    for pod in range(k):
        for e in edges[pod]:
            for _ in range(hosts_per_edge):
                topo.add_link(topo.add_host(), e, link)
    for pod in range(k):
        for e in edges[pod]:
            for a in aggs[pod]:
                topo.add_link(e, a, link)
    for pod in range(k):
        for j, a in enumerate(aggs[pod]):
            for c in cores[j * half:(j + 1) * half]:
                topo.add_link(a, c, link)
    return topo
