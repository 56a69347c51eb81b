
import networkx as nx
import pytest

from harness.linkmodel import LinkParams
from topologies import TopologyError, by_name, dumbbell, fattree, leafspine


def ports_unique(topo):
    seen = set()
    for link in topo.links:
        for node, port in ((link.a, link.a_port), (link.b, link.b_port)):
            assert (node, port) not in seen
            seen.add((node, port))
    return True


def test_default_fattree_is_24_hosts_20_switches():
    t = fattree()
    assert len(t.hosts) == 24 and len(t.switches) == 20
    assert t.summary()["layers"] == {"edge": 8, "agg": 8, "core": 4}
    assert len(t.links) == 24 + 16 + 16
    assert ports_unique(t)
    g = t.graph()
    assert nx.is_connected(g)
    # every host hangs off an edge switch, 3 per edge switch, pod by pod
    edges = [t.edge_of(h) for h in t.hosts]
    assert all(t.switches[e] == "edge" for e in edges)
    assert edges == [e for e in sorted(set(edges), key=lambda s: int(s[1:])) for _ in range(3)]


@pytest.mark.parametrize("k,hpe", [(2, 1), (4, 2), (4, 3), (6, 3)])
def test_fattree_sizes(k, hpe):
    t = fattree(k=k, hosts_per_edge=hpe)
    assert len(t.hosts) == k * (k // 2) * hpe
    assert len(t.switches) == k * k + (k // 2) ** 2
    degrees = dict(t.graph().degree())
    for s, layer in t.switches.items():
        assert degrees[s] == {"edge": hpe + k // 2, "agg": k, "core": k}[layer]


def test_leafspine_is_cassini_like():
    t = leafspine()
    assert len(t.hosts) == 24 and len(t.switches) == 13 and len(t.links) == 48
    g = t.graph()
    for s, layer in t.switches.items():
        hosts = sum(1 for n in g[s] if n.startswith("h"))
        ups = sum(1 for n in g[s] if n in t.switches and
                  ["edge", "agg", "core"].index(t.switches[n]) > ["edge", "agg", "core"].index(layer))
        if layer == "edge":
            assert hosts == 4 and ups == 2  # 2:1 oversubscribed at the ToR
        if layer == "agg":
            assert ups == 3
    assert ports_unique(t)


def test_dumbbell_naming():
    t = dumbbell(3)
    assert t.hosts == [f"h{i}" for i in range(1, 7)]
    assert [t.edge_of(h) for h in t.hosts] == ["s1"] * 3 + ["s2"] * 3
    assert t.links[-1].id == "s1-s2"


def test_addresses_and_directions():
    t = fattree()
    assert t.mac("h1") == "00:00:00:00:00:01" and t.ip("h24") == "10.0.0.24"
    assert len({t.mac(h) for h in t.hosts}) == 24
    link = t.link_between("h1", "s1")
    assert link.id == "h1-s1"
    assert [d[0] for d in link.directions()] == ["h1>s1", "s1>h1"]
    assert t.port("s1", "h1") == link.b_port


def test_links_carry_their_params():
    p = LinkParams.scaled(20)
    t = fattree(link=p)
    assert all(l.params == p for l in t.links)
    d = t.to_dict()
    assert d["links"][0]["rate_mbps"] == 20


@pytest.mark.parametrize("builder,kw,key", [
    (fattree, {"k": 3}, "topology.k"),
    (fattree, {"hosts_per_edge": 0}, "topology.hosts_per_edge"),
    (fattree, {"hosts_per_edge": 1.5}, "topology.hosts_per_edge"),
    (dumbbell, {"hosts_per_side": -1}, "topology.hosts_per_side"),
    (leafspine, {"hosts_per_tor": 0}, "topology.hosts_per_tor"),
])
def test_bad_parameters_name_the_key(builder, kw, key):
    with pytest.raises(TopologyError) as e:
        builder(**kw)
    assert e.value.key == key and key in str(e.value)


def test_unknown_topology():
    with pytest.raises(TopologyError, match="topology.name: 'ring'"):
        by_name("ring")
