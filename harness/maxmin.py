"""Fair rates of flows on fixed routes: max-min (progressive filling), the yardstick of fidelity,
and alpha-fair (the allocations TCP itself approaches)."""


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


def alpha_fair_rates(flows, capacity, alpha):
    """The alpha-fair rates of flows on fixed routes: maximise sum U(x) under the links' capacities,
    U(x) = log x for alpha 1, x^(1 - alpha) / (1 - alpha) otherwise. Alpha 1 is proportional fairness
    (Kelly), alpha 2 the allocation of TCP Reno's window law (rate ~ 1 / (RTT sqrt(p)), p the marks
    summed over a flow's hops); max-min is the limit alpha -> infinity. Solved with scipy's SLSQP,
    from the max-min rates (feasible) and in units of the largest capacity. Returns {flow: rate}."""
    import numpy as np
    from scipy.optimize import minimize
    names = [f for f in flows if flows[f]]
    links = sorted({l for f in names for l in flows[f]})
    scale = max(capacity[l] for l in links)
    a = np.array([[1.0 if l in flows[f] else 0.0 for f in names] for l in links])
    c = np.array([capacity[l] / scale for l in links])
    x0 = np.array([maxmin_rates(flows, capacity)[f] / scale for f in names])
    if alpha == 1:
        obj, grad = (lambda x: -np.sum(np.log(x))), (lambda x: -1.0 / x)
    else:
        obj, grad = (lambda x: -np.sum(x ** (1 - alpha)) / (1 - alpha)), (lambda x: -x ** (-alpha))
    res = minimize(obj, x0, jac=grad, method="SLSQP", bounds=[(1e-6, None)] * len(names),
                   constraints=[{"type": "ineq", "fun": lambda x: c - a @ x, "jac": lambda x: -a}],
                   options={"ftol": 1e-12, "maxiter": 500})
    out = {f: 0.0 for f in flows}
    out.update({f: float(v) * scale for f, v in zip(names, res.x)})
    return out
