"""Fabric topologies as plain data: build and inspect them without root.

Naming rules (the rest of the product relies on them):
  * hosts are ``h1..hN``, numbered pod by pod, edge switch by edge switch (fat-tree),
    ToR by ToR (leaf-spine), left side then right side (dumbbell);
  * switches are ``s1..sM``; a switch's number is its OpenFlow datapath id;
    its *layer* (``edge``/``agg``/``core``) says where it sits;
  * a link is named ``a-b`` with ``a`` the end nearer the hosts; its two
    directions are ``a>b`` (up, away from hosts) and ``b>a`` (down);
  * port numbers are assigned in the order links are added, from 1 on each node;
    host ``hI`` has MAC ``00:00:00:00:00:II`` (hex) and IP ``10.0.0.I``.

``by_name(name, **params)`` builds any of them from the spec's ``topology`` mapping.
"""
from topologies.base import Link, Topology, TopologyError
from topologies.dumbbell import dumbbell
from topologies.fattree import fattree
from topologies.leafspine import leafspine

BUILDERS = {"fattree": fattree, "leafspine": leafspine, "dumbbell": dumbbell}


ROUTINGS = ("spread", "by_destination")   # harness.routing.compute_routes


def by_name(name, link=None, routing="spread", **params):
    """Build the topology called ``name`` with its keyword parameters; ``routing`` (any topology):
    how equal-cost paths are chosen (harness.routing), kept in the topology's params."""
    if name not in BUILDERS:
        raise TopologyError("topology.name", name, "one of " + ", ".join(sorted(BUILDERS)))
    if routing not in ROUTINGS:
        raise TopologyError("topology.routing", routing, "spread (every host pair on the least-loaded equal-cost "
                            "path) | by_destination (one path per destination, as forwarding on destination "
                            "rules alone gives)")
    topo = BUILDERS[name](link=link, **params)
    if routing != "spread":
        topo.params["routing"] = routing
    return topo


__all__ = ["BUILDERS", "Link", "Topology", "TopologyError", "by_name", "dumbbell", "fattree", "leafspine"]
