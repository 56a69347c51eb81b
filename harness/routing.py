"""Routes between every ordered pair of hosts, computed from the topology alone (no root).

A route is the list of nodes from source host to destination host. Among equal-cost shortest
paths, pairs are taken in a fixed order (source number, then destination number) and each gets
the candidate whose busiest directed link carries the fewest routes so far (ties: the first in
networkx's sorted path order). The result is deterministic and spreads load like a hand-balanced
ECMP. ``pins`` override single pairs with a given path, which must be a simple path along links.

Every route is loop-free by construction (a simple path); the forwarding state that realises it
matches (eth_src, eth_dst), so two routes never interfere.
"""
import itertools

import networkx as nx


class RouteError(ValueError):
    pass


def directed_links(path):
    """The directed link ids ``a>b`` a route crosses, in order."""
    return [f"{u}>{v}" for u, v in zip(path, path[1:])]


def path_delays(topo):
    """A route's one-way propagation delay (ms, the links' ``delay_ms`` summed) as a function of its
    path, or None when no link has a delay."""
    hop = {(u, v): l.params.delay_ms for l in topo.links if l.params.delay_ms > 0
           for u, v in ((l.a, l.b), (l.b, l.a))}
    return (lambda path: sum(hop.get(e, 0.0) for e in zip(path, path[1:]))) if hop else None


def check_path(topo, src, dst, path):
    g = topo.graph()
    if not path or path[0] != src or path[-1] != dst:
        raise RouteError(f"pinned path for {src}->{dst} must start at {src} and end at {dst}: {path}")
    if len(set(path)) != len(path):
        raise RouteError(f"pinned path for {src}->{dst} visits a node twice: {path}")
    for u, v in zip(path, path[1:]):
        if not g.has_edge(u, v):
            raise RouteError(f"pinned path for {src}->{dst} uses {u}-{v}, which is not a link")
        if g.nodes[u]["kind"] == "host" and u != src:
            raise RouteError(f"pinned path for {src}->{dst} passes through host {u}")
    return list(path)


def compute_routes(topo, pins=None):
    """Return {(src, dst): [nodes]} for all ordered host pairs. ``topo.params["routing"]``:
    ``spread`` (default: pair by pair, the equal-cost path whose busiest link carries the fewest
    routes so far) or ``by_destination`` (every source reaches a destination over the same choice
    among its equal-cost paths, indexed by the destination: what destination-only forwarding
    rules give, e.g. CASSINI's testbed's <input port, destination MAC> entries)."""
    by_destination = topo.params.get("routing") == "by_destination"
    g = topo.graph()
    pins = dict(pins or {})
    load = {}
    routes = {}
    for (src, dst), path in pins.items():
        routes[(src, dst)] = check_path(topo, src, dst, path)
        for d in directed_links(path):
            load[d] = load.get(d, 0) + 1
    order = sorted(itertools.permutations(topo.hosts, 2),
                   key=lambda p: (topo.host_index(p[0]), topo.host_index(p[1])))
    # Hosts are never transit nodes: search on the switch graph plus the two endpoints.
    switches = g.subgraph(list(topo.switches))
    for src, dst in order:
        if (src, dst) in routes:
            continue
        a, b = topo.edge_of(src), topo.edge_of(dst)
        cands = sorted(nx.all_shortest_paths(switches, a, b)) if a != b else [[a]]
        if by_destination:
            best = cands[topo.host_index(dst) % len(cands)]
        else:
            best = min(cands, key=lambda p: (max((load.get(d, 0) for d in directed_links(p)), default=0),
                                              sum(load.get(d, 0) for d in directed_links(p))))
        path = [src, *best, dst]
        routes[(src, dst)] = path
        for d in directed_links(path):
            load[d] = load.get(d, 0) + 1
    return routes


def flow_table(topo, routes):
    """Per switch, the forwarding entries realising ``routes``: {switch: [(src, dst, out_port)]}."""
    table = {s: [] for s in topo.switches}
    for (src, dst), path in sorted(routes.items(), key=lambda kv: (topo.host_index(kv[0][0]), topo.host_index(kv[0][1]))):
        for prev, node, nxt in zip(path, path[1:], path[2:]):
            table[node].append((src, dst, topo.port(node, nxt)))
    return table


def link_load(routes):
    """How many routes cross each directed link."""
    load = {}
    for path in routes.values():
        for d in directed_links(path):
            load[d] = load.get(d, 0) + 1
    return load


class EcmpRoutes:
    """Routes computed on demand, for fabrics too large for ``compute_routes`` (every pair of a
    1,024-host fabric is a million routes): among the equal-cost paths between the two edge
    switches (sorted, cached per switch pair), pair (src, dst) takes the one its host numbers hash
    to, as hash-based ECMP does. Deterministic. Mapping interface: ``routes[(src, dst)]``."""

    def __init__(self, topo):
        self.topo = topo
        self.switches = topo.graph().subgraph(list(topo.switches)).copy()
        self.paths, self.cache = {}, {}

    def __getitem__(self, pair):
        r = self.cache.get(pair)
        if r is None:
            src, dst = pair
            a, b = self.topo.edge_of(src), self.topo.edge_of(dst)
            if (a, b) not in self.paths:
                self.paths[(a, b)] = sorted(nx.all_shortest_paths(self.switches, a, b)) if a != b else [[a]]
            cands = self.paths[(a, b)]
            i, j = self.topo.host_index(src), self.topo.host_index(dst)
            r = self.cache[pair] = [src, *cands[(i * 7919 + j * 104729) % len(cands)], dst]
        return r

    def __contains__(self, pair):
        return pair[0] in self.topo.hosts and pair[1] in self.topo.hosts


def routes_for(topo, max_hosts_precomputed=64):
    """The emulator's routes (``compute_routes``) on fabrics it can build, ECMP on demand beyond."""
    return compute_routes(topo) if len(topo.hosts) <= max_hosts_precomputed else EcmpRoutes(topo)


FLOW_FIELDS = {"cookie": r"cookie=(0x[0-9a-f]+)", "n_packets": r"n_packets=(\d+)",
               "dl_src": r"dl_src=([0-9a-f:]{17})", "dl_dst": r"dl_dst=([0-9a-f:]{17})",
               "nw_ecn": r"nw_ecn=(\d)", "output": r"actions=output:(\d+)"}


def dump_flow_entries(text):
    """The entries of ``ovs-ofctl --no-names dump-flows`` output, one dict per line with the fields
    of FLOW_FIELDS it has (cookie, n_packets, nw_ecn and output as integers): the one parser of
    switch flow tables (routes read back, CE counters read back)."""
    import re
    out = []
    for line in text.splitlines():
        e = {}
        for key, pat in FLOW_FIELDS.items():
            m = re.search(pat, line)
            if m:
                v = m.group(1)
                e[key] = int(v, 16) if key == "cookie" else v if key.startswith("dl_") else int(v)
        if "cookie" in e:
            out.append(e)
    return out


def parse_route_flows(text, cookie):
    """{(src mac, dst mac): out port} from ``ovs-ofctl --no-names dump-flows`` output, keeping the
    entries whose cookie is ``cookie`` (the controller's route entries)."""
    return {(e["dl_src"], e["dl_dst"]): e["output"] for e in dump_flow_entries(text)
            if e["cookie"] == cookie and "dl_src" in e and "dl_dst" in e and "output" in e and "nw_ecn" not in e}


def parse_ce_flows(text, cookie):
    """{"src mac>dst mac": packets} of the CE-counting entries (cookie ``cookie``)."""
    return {f"{e['dl_src']}>{e['dl_dst']}": e["n_packets"] for e in dump_flow_entries(text)
            if e["cookie"] == cookie and "dl_src" in e and "dl_dst" in e and "n_packets" in e}


def walk_flows(topo, flows_by_switch, src, dst, max_hops=16):
    """The path a packet from host ``src`` to ``dst`` takes when each switch forwards as its flow
    table ``flows_by_switch[switch]`` ({(src mac, dst mac): port}) says; None if it breaks off."""
    peer_on = {}
    for link in topo.links:
        peer_on[(link.a, link.a_port)] = link.b
        peer_on[(link.b, link.b_port)] = link.a
    key = (topo.mac(src), topo.mac(dst))
    path, node = [src], topo.edge_of(src)
    while len(path) <= max_hops:
        path.append(node)
        if node == dst:
            return path
        port = flows_by_switch.get(node, {}).get(key)
        if port is None:
            return None
        node = peer_on.get((node, port))
        if node is None:
            return None
    return None
