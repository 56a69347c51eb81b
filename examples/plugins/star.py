"""A topology plug-in: ``racks`` edge switches of ``hosts_per_rack`` hosts each, every edge switch
linked to one core switch (the core link of a rack is its only way out).

    interleave schedule examples/star.yaml
    sudo interleave netcheck --plugin examples/plugins/star.py --topology star --param racks=3
"""
import interleave
from harness.linkmodel import LinkParams
from topologies import Topology, TopologyError


@interleave.register_topology("star")
def star(racks=4, hosts_per_rack=3, link=None):
    for key, value in (("racks", racks), ("hosts_per_rack", hosts_per_rack)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise TopologyError(f"topology.{key}", value, "a whole number >= 1")
    link = link or LinkParams.default()
    topo = Topology("star", {"racks": racks, "hosts_per_rack": hosts_per_rack})
    edges = [topo.add_switch("edge") for _ in range(racks)]
    core = topo.add_switch("core")
    for edge in edges:                     # hosts first, rack by rack: h1..h(racks x hosts_per_rack)
        for _ in range(hosts_per_rack):
            topo.add_link(topo.add_host(), edge, link)
    for edge in edges:
        topo.add_link(edge, core, link)
    return topo
