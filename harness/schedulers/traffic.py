"""Which directed links a placed job loads, and how much, phase by phase.

Patterns (workers in placement order w0..wN-1):
  ring_allreduce / tensor_allreduce: w_i -> w_(i+1 mod N), every ring edge at the phase rate;
  pipeline_p2p: w_i -> w_(i+1) for i < N-1 (activations forward);
  alltoall: every ordered pair, each at rate / (N-1) (the phase rate is per worker).
A link's demand from a job at time t is the sum over active phases of the rate of each transfer
routed over it. Routes come from harness.routing (the ones the fabric installs).
"""
from harness.routing import directed_links


def transfers(pattern, hosts):
    n = len(hosts)
    if n < 2:
        return []
    if pattern in ("ring_allreduce", "tensor_allreduce"):
        pairs = [(hosts[i], hosts[(i + 1) % n]) for i in range(n)]
        return pairs if n > 2 else pairs  # n == 2: both directions of one pair
    if pattern == "pipeline_p2p":
        return [(hosts[i], hosts[i + 1]) for i in range(n - 1)]
    if pattern == "alltoall":
        return [(a, b) for a in hosts for b in hosts if a != b]
    raise ValueError(pattern)


def link_loads(profile, hosts, routes):
    """{link: [(phase index, gbps)]}: what each phase of the job puts on each directed link."""
    loads = {}
    n = len(hosts)
    for i, ph in enumerate(profile.phases):
        rate = ph.gbps / (n - 1) if ph.pattern == "alltoall" and n > 1 else ph.gbps
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
