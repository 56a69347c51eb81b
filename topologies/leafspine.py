"""CASSINI-like 2:1 oversubscribed fabric: 24 hosts, 13 switches, 48 links.

CASSINI's testbed (NSDI'24 §5.1) is 24 servers on 13 logical switches and 48 links, 2:1
oversubscribed; its exact layout is only in a figure. This module uses the layout
"6 ToR + 4 aggregation + 3 core" (reference notes §1.11):
  * 6 ToRs (s1..s6, layer ``edge``), 4 hosts each, 2 uplinks each -> 4:2 = 2:1 at the ToR;
  * 4 aggregation switches (s7..s10) in two pods: ToRs s1..s3 connect to s7 and s8,
    ToRs s4..s6 to s9 and s10 (3 downlinks per agg);
  * 3 core switches (s11..s13); every agg connects to every core (3 uplinks, 1:1 at agg).
Links: 24 host + 12 ToR-agg + 12 agg-core = 48.
"""
from harness.linkmodel import LinkParams
from harness.registry import register_topology
from topologies.base import Topology, TopologyError


@register_topology("leafspine")
def leafspine(hosts_per_tor=4, link=None):
    if not isinstance(hosts_per_tor, int) or isinstance(hosts_per_tor, bool) or hosts_per_tor < 1:
        raise TopologyError("topology.hosts_per_tor", hosts_per_tor, "a whole number >= 1")
    link = link or LinkParams.default()
    topo = Topology("leafspine", {"hosts_per_tor": hosts_per_tor})
    tors = [topo.add_switch("edge") for _ in range(6)]
    aggs = [topo.add_switch("agg") for _ in range(4)]
    cores = [topo.add_switch("core") for _ in range(3)]
    for tor in tors:
        for _ in range(hosts_per_tor):
            topo.add_link(topo.add_host(), tor, link)
    for i, tor in enumerate(tors):
        pod = i // 3
        for a in aggs[2 * pod:2 * pod + 2]:
            topo.add_link(tor, a, link)
    for a in aggs:
        for c in cores:
            topo.add_link(a, c, link)
    return topo
