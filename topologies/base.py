"""The Topology data type shared by every fabric shape (see the package docstring for naming)."""
from dataclasses import dataclass, field

import networkx as nx

from harness.errors import BadValue
from harness.linkmodel import LinkParams


class TopologyError(BadValue):
    """A topology parameter is out of range."""


@dataclass(frozen=True)
class Link:
    a: str
    b: str
    a_port: int
    b_port: int
    params: LinkParams

    @property
    def id(self):
        return f"{self.a}-{self.b}"

    def directions(self):
        """The two directed links: (id, from, to, egress port on 'from')."""
        return [(f"{self.a}>{self.b}", self.a, self.b, self.a_port),
                (f"{self.b}>{self.a}", self.b, self.a, self.b_port)]


@dataclass
class Topology:
    name: str
    params: dict = field(default_factory=dict)
    hosts: list = field(default_factory=list)
    switches: dict = field(default_factory=dict)  # name -> layer
    links: list = field(default_factory=list)
    _next_port: dict = field(default_factory=dict, repr=False)
    _edge: dict = field(default_factory=dict, repr=False, compare=False)

    def add_host(self):
        name = f"h{len(self.hosts) + 1}"
        self.hosts.append(name)
        self._next_port[name] = 0
        return name

    def add_switch(self, layer):
        name = f"s{len(self.switches) + 1}"
        self.switches[name] = layer
        self._next_port[name] = 1
        return name

    def add_link(self, a, b, params):
        link = Link(a, b, self._next_port[a], self._next_port[b], params)
        self._next_port[a] += 1
        self._next_port[b] += 1
        self.links.append(link)
        if a in self._next_port and a.startswith("h"):
            self._edge.setdefault(a, b)
        return link

    # ---- queries -------------------------------------------------------
    def dpid(self, switch):
        return int(switch[1:])

    def host_index(self, host):
        return int(host[1:])

    def mac(self, host):
        i = self.host_index(host)
        return ":".join(f"{(i >> s) & 0xff:02x}" for s in (40, 32, 24, 16, 8, 0))

    def ip(self, host):
        i = self.host_index(host)
        return f"10.{(i >> 16) & 0xff}.{(i >> 8) & 0xff}.{i & 0xff}"

    def edge_of(self, host):
        """The switch a host hangs off."""
        if host in self._edge:
            return self._edge[host]
        for link in self.links:
            if link.a == host:
                return link.b
        raise KeyError(host)

    def link_between(self, u, v):
        for link in self.links:
            if (link.a, link.b) in ((u, v), (v, u)):
                return link
        raise KeyError(f"{u}-{v}")

    def port(self, node, peer):
        """Port number on ``node`` of its link to ``peer``."""
        link = self.link_between(node, peer)
        return link.a_port if link.a == node else link.b_port

    def graph(self):
        g = nx.Graph()
        for h in self.hosts:
            g.add_node(h, kind="host", layer="host")
        for s, layer in self.switches.items():
            g.add_node(s, kind="switch", layer=layer)
        for link in self.links:
            g.add_edge(link.a, link.b, link=link)
        return g

    def summary(self):
        layers = {}
        for layer in self.switches.values():
            layers[layer] = layers.get(layer, 0) + 1
        return {"name": self.name, "params": self.params, "hosts": len(self.hosts),
                "switches": len(self.switches), "links": len(self.links), "layers": layers}

    def to_dict(self):
        """Plain JSON-able description (what the controller process loads)."""
        return {
            "name": self.name, "params": self.params,
            "hosts": [{"name": h, "mac": self.mac(h), "ip": self.ip(h)} for h in self.hosts],
            "switches": [{"name": s, "layer": l, "dpid": self.dpid(s)} for s, l in self.switches.items()],
            "links": [{"id": k.id, "a": k.a, "b": k.b, "a_port": k.a_port, "b_port": k.b_port,
                       **k.params.to_dict()} for k in self.links],
        }


def with_background(topo, load):
    """A copy of ``topo`` whose switch-to-switch links keep ``1 - load`` of their rate: constant
    background traffic as the capacity it takes (the congested condition of harness.sim's
    ``background``; in the emulator those links are shaped lower). Host links are unchanged."""
    import copy
    from dataclasses import replace
    if not load:
        return topo
    out = copy.copy(topo)
    out.links = [replace(l, params=LinkParams.scaled(l.params.rate_mbps * (1 - load), mtu=l.params.mtu))
                 if l.a in topo.switches and l.b in topo.switches else l for l in topo.links]
    return out
