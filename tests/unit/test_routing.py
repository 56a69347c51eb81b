from pathlib import Path

import networkx as nx
import pytest

from controllers.fabric_app import route_entries
from harness.routing import RouteError, check_path, compute_routes, directed_links, flow_table, link_load
from topologies import dumbbell, fattree, leafspine


@pytest.mark.parametrize("topo", [fattree(), leafspine(), dumbbell(3), fattree(k=6, hosts_per_edge=2)],
                         ids=["fattree", "leafspine", "dumbbell", "fattree6"])
def test_all_pairs_loop_free_shortest(topo):
    g = topo.graph()
    routes = compute_routes(topo)
    assert len(routes) == len(topo.hosts) * (len(topo.hosts) - 1)
    for (src, dst), path in routes.items():
        assert path[0] == src and path[-1] == dst
        assert len(set(path)) == len(path)                      # loop-free
        assert all(g.has_edge(u, v) for u, v in zip(path, path[1:]))
        assert len(path) - 1 == nx.shortest_path_length(g, src, dst)
        assert not any(n.startswith("h") for n in path[1:-1])   # hosts never transit


def test_deterministic():
    assert compute_routes(fattree()) == compute_routes(fattree())


def test_ecmp_spreads_over_all_cores():
    topo = fattree()
    load = link_load(compute_routes(topo))
    up_to_core = {d: n for d, n in load.items()
                  if topo.switches.get(d.split(">")[0]) == "agg" and topo.switches.get(d.split(">")[1]) == "core"}
    assert len(up_to_core) == 16                                 # every agg->core link used
    assert max(up_to_core.values()) - min(up_to_core.values()) <= 2
    edge_up = [n for d, n in load.items() if topo.switches.get(d.split(">")[0]) == "edge"
               and topo.switches.get(d.split(">")[1]) == "agg"]
    assert max(edge_up) - min(edge_up) <= 2


def test_pins_override_and_are_checked():
    topo = fattree()
    default = compute_routes(topo)[("h1", "h24")]
    cores = [n for n in topo.switches if topo.switches[n] == "core"]
    other = next(c for c in cores if c not in default)
    g = topo.graph()
    agg_src = next(a for a in g[other] if nx.has_path(g, a, "s1") and "s1" in g[a])
    agg_dst = next(a for a in g[other] if "s8" in g[a])
    pinned = ["h1", "s1", agg_src, other, agg_dst, "s8", "h24"]
    routes = compute_routes(topo, pins={("h1", "h24"): pinned})
    assert routes[("h1", "h24")] == pinned
    with pytest.raises(RouteError, match="not a link"):
        check_path(topo, "h1", "h24", ["h1", "s1", "s17", "s8", "h24"])
    with pytest.raises(RouteError, match="start at h1"):
        check_path(topo, "h1", "h24", ["h2", "s1", "h24"])


def test_flow_table_and_controller_entries_realise_routes():
    topo = leafspine()
    routes = compute_routes(topo)
    table = flow_table(topo, routes)
    entries = route_entries(topo.to_dict(), {f"{s}>{d}": p for (s, d), p in routes.items()})
    # walk the controller's entries from each source and get the route back
    for (src, dst), path in routes.items():
        node, walked = topo.edge_of(src), [src]
        while node != dst:
            walked.append(node)
            port = entries[topo.dpid(node)][(topo.mac(src), topo.mac(dst))]
            assert (src, dst, port) in table[node]
            link = next(l for l in topo.links if (l.a == node and l.a_port == port) or (l.b == node and l.b_port == port))
            node = link.b if link.a == node else link.a
        assert walked + [dst] == path
    assert directed_links(["h1", "s1", "h2"]) == ["h1>s1", "s1>h2"]


FLOWS = Path(__file__).parent / "fixtures" / "ovs_dump_flows_fattree"


def test_routes_read_back_from_real_flow_tables():
    """``ovs-ofctl --no-names dump-flows`` of the 20 bridges of a running demo fabric (fat-tree,
    2026-12-01; route entries kept in full, CE entries trimmed to three per switch): every host
    pair's walk reaches its destination on a loop-free path of the topology, and the walk agrees
    with the controller's own entry computation for the routes that walk yields."""
    from controllers.flows import COOKIE_ROUTE
    from harness.routing import parse_route_flows, walk_flows
    topo = fattree()
    tables = {s: parse_route_flows((FLOWS / f"il{s}.txt").read_text(), COOKIE_ROUTE) for s in topo.switches}
    assert len(tables["s1"]) == (FLOWS / "ils1.txt").read_text().count("cookie=0x10,")
    g = topo.graph()
    walked = {}
    for src in topo.hosts:
        for dst in topo.hosts:
            if src != dst:
                path = walk_flows(topo, tables, src, dst)
                assert path and path[0] == src and path[-1] == dst and len(set(path)) == len(path)
                assert all(g.has_edge(u, v) for u, v in zip(path, path[1:]))
                walked[(src, dst)] = path
    entries = route_entries(topo.to_dict(), {f"{s}>{d}": p for (s, d), p in walked.items()})
    for s in topo.switches:
        assert entries[topo.dpid(s)] == tables[s]


def test_a_broken_table_breaks_the_walk():
    from harness.routing import walk_flows
    topo = dumbbell(2)
    routes = compute_routes(topo)
    entries = route_entries(topo.to_dict(), {f"{s}>{d}": p for (s, d), p in routes.items()})
    tables = {s: dict(entries[topo.dpid(s)]) for s in topo.switches}
    assert walk_flows(topo, tables, "h1", "h3") == routes[("h1", "h3")]
    del tables["s2"][(topo.mac("h1"), topo.mac("h3"))]
    assert walk_flows(topo, tables, "h1", "h3") is None


def test_ce_counters_read_back_from_real_flow_tables():
    """The same real dumps through the one dump-flows parser: the CE-counting entries (cookie 0xce,
    three kept per switch) with their packet counts, route entries left out."""
    from controllers.flows import COOKIE_CE
    from harness.routing import parse_ce_flows
    ce = parse_ce_flows((FLOWS / "ils13.txt").read_text(), COOKIE_CE)
    assert len(ce) == 3 and ce["00:00:00:00:00:01>00:00:00:00:00:0d"] == 6
    assert all(v == 0 for k, v in parse_ce_flows((FLOWS / "ils1.txt").read_text(), COOKIE_CE).items())


@pytest.mark.parametrize("topo", [fattree(), leafspine(), dumbbell(2)], ids=lambda t: t.name)
def test_netcheck_congests_a_switch_link_that_a_next_switch_counts(topo):
    """netcheck's congested flows first meet on a switch-to-switch link (2 x its rate offered there,
    at most 1 x on every later link) and end on different last hops, so its counters check always
    has a link to compare (on the fat-tree, marks only at last hops left it comparing nothing)."""
    from harness.netcheck import congested_flows
    from harness.routing import directed_links
    routes = compute_routes(topo)
    f, g = congested_flows(topo, routes)
    assert f[0] != g[0] and f[1] != g[1]
    lf, lg = directed_links(routes[f]), directed_links(routes[g])
    first = next(l for l in lf if l in lg)
    assert all(n in topo.switches for n in first.split(">")) and lf[-1] != lg[-1]


def test_a_paced_burst_is_under_k_at_half_the_link_rate():
    """The bound behind ecn_idle's tolerance of 0 marks: at every supported rate up to 1 Gbit/s a
    sender paced at half the rate bursts under K (2 jumbo frames, or 1 ms at the pacing rate)."""
    from harness.linkmodel import LinkParams
    from harness.netcheck import paced_burst_bytes
    for mbps in (10, 20, 50, 100, 1000):
        p = LinkParams.scaled(mbps)
        assert paced_burst_bytes(p, p.rate_bps / 2) < p.ecn_k_bytes, mbps


def test_by_destination_routing_gives_every_source_one_path_per_destination():
    from topologies import TopologyError, by_name
    topo = by_name("leafspine", hosts_per_tor=4, routing="by_destination")
    routes = compute_routes(topo)
    # h1..h4 share ToR s1: to one destination they all leave by the same uplink
    for dst in ("h5", "h6", "h13"):
        assert len({routes[(src, dst)][2] for src in ("h1", "h2", "h3", "h4")}) == 1
    spread = compute_routes(by_name("leafspine", hosts_per_tor=4))
    assert routes != spread and routes == compute_routes(by_name("leafspine", hosts_per_tor=4, routing="by_destination"))
    # the path to a destination depends on the destination only: its index picks among the equal-cost paths
    assert routes[("h1", "h5")][2] != routes[("h1", "h6")][2]
    with pytest.raises(TopologyError):
        by_name("leafspine", routing="random")
