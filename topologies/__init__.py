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

``by_name(name, **params)`` builds any registered topology (harness.registry: the built-ins below
register there as a plug-in's builder does) from the spec's ``topology`` mapping.
"""
from harness import registry
from topologies.base import Link, Topology, TopologyError
from topologies.dumbbell import dumbbell
from topologies.fattree import fattree
from topologies.leafspine import leafspine


ROUTINGS = ("spread", "by_destination")   # harness.routing.compute_routes


def by_name(name, link=None, routing="spread", **params):
    """Build the topology called ``name`` with its keyword parameters; ``routing`` (any topology):
    how equal-cost paths are chosen (harness.routing), kept in the topology's params."""
    entry = registry.topology(name)
    if entry is None:
        raise TopologyError("topology.name", name, "one of " + ", ".join(registry.topology_names()))
    for k, v in params.items():
        if k not in entry.params:
            raise TopologyError(f"topology.{k}", v, f"a parameter of {name}: {entry.describe()}; or routing")
    if routing not in ROUTINGS:
        raise TopologyError("topology.routing", routing, "spread (every host pair on the least-loaded equal-cost "
                            "path) | by_destination (one path per destination, as forwarding on destination "
                            "rules alone gives)")
    try:
        topo = entry.builder(link=link, **params)
    except TopologyError:
        raise
    except Exception as exc:
        if entry.builtin:
            raise
        from harness.contract import raised_at
        at = raised_at(exc, entry.builder.__code__.co_filename)
        raise registry.PluginError(f"{at}: topology {name} raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(topo, Topology):
        raise registry.PluginError(f"{registry._fn_origin(entry.builder)}: topology {name} returned "
                                   f"{type(topo).__name__}, not a topologies.base.Topology")
    if routing != "spread":
        topo.params["routing"] = routing
    return topo


__all__ = ["Link", "Topology", "TopologyError", "by_name", "dumbbell", "fattree", "leafspine"]
