"""Which directed links a placed job loads, and how much, phase by phase.

The patterns' worker pairs and rate shares are agents.patterns' (the agents run the same table).
A link's demand from a job at time t is the sum over active phases of the rate of each transfer
routed over it. Routes come from harness.routing (the ones the fabric installs).
"""
from harness.routing import directed_links
from agents import patterns


def transfers(pattern, hosts):
    """(src host, dst host) of each transfer of the pattern among ``hosts`` (placement order)."""
    return [(hosts[a], hosts[b]) for a, b in patterns.pairs(pattern, len(hosts))]


def link_loads(profile, hosts, routes):
    """{link: [(phase index, gbps)]}: what each phase of the job puts on each directed link."""
    loads = {}
    n = len(hosts)
    for i, ph in enumerate(profile.phases):
        rate = patterns.transfer_rate(ph.pattern, n, ph.gbps)
        for src, dst in transfers(ph.pattern, hosts):
            for link in directed_links(routes[(src, dst)]):
                loads.setdefault(link, {}).setdefault(i, 0.0)
                loads[link][i] += rate
    return {l: sorted(v.items()) for l, v in loads.items()}


def demand_fn(profile, phase_rates):
    """Demand on one link at times t (ms within the iteration) from [(phase index, gbps)]."""
    import numpy as np
    phases = [(profile.phases[i].start_ms, profile.phases[i].end_ms, r) for i, r in phase_rates]

    def fn(t):
        t = np.asarray(t, dtype=float)
        out = np.zeros_like(t)
        for s, e, r in phases:
            out += np.where((t >= s) & (t < e), r, 0.0)
        return out
    return fn
