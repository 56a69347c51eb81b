"""Max-min fair rates of flows on fixed routes (progressive filling): the yardstick of fidelity."""


def maxmin_rates(flows, capacity):
    """flows: {flow: [directed link ids]}; capacity: {link: rate}. Returns {flow: rate}."""
    rate = {f: 0.0 for f in flows}
    active = {f for f, links in flows.items() if links}
    remaining = dict(capacity)
    while active:
        users = {}
        for f in active:
            for l in flows[f]:
                users.setdefault(l, []).append(f)
        share = min(remaining[l] / len(fs) for l, fs in users.items())
        for f in active:
            rate[f] += share
        for l, fs in users.items():
            remaining[l] -= share * len(fs)
        saturated = {l for l in users if remaining[l] <= 1e-9 * capacity[l]}
        active -= {f for f in active if saturated & set(flows[f])}
    return rate
