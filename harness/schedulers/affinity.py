"""CASSINI's Affinity graph and Algorithm 1 (NSDI'24 §4.1, App. A).

Bipartite graph: job nodes ``("job", name)`` and link nodes ``("link", id)``; an edge (j, l) when
job j crosses link l, weighted by t_j^l. Only links with more than one job appear.

Algorithm 1 here is deterministic: each connected component starts from its reference job (the
caller's choice: an already running job keeps its shift, else the first job by name), and BFS
visits neighbours in sorted order. Theorem 1: on a loop-free graph every link keeps the relative
shifts its own optimisation chose. ``preserved`` checks that property on any graph; a graph with a
loop whose shifts are nevertheless preserved is reported as ``consistent`` (an implementer
extension: the paper discards every looped candidate).
"""
from collections import deque

import networkx as nx


def wrap(x, period):
    """x mod period in [0, period): float % can return period itself for a tiny negative x."""
    r = x % period
    return 0.0 if r >= period else r


def build(link_jobs, weights):
    """link_jobs: {link: [jobs]}; weights: {(job, link): t_j^l}."""
    g = nx.Graph()
    for link, jobs in link_jobs.items():
        if len(jobs) < 2:
            continue
        g.add_node(("link", link), kind="link")
        for j in jobs:
            g.add_node(("job", j), kind="job")
            g.add_edge(("job", j), ("link", link), weight=weights.get((j, link), 0.0))
    return g


def has_loop(g):
    return any(True for _ in nx.cycle_basis(g))


def assign(g, iteration_ms, reference=None, initial=None):
    """Algorithm 1: one time-shift per job, t_k = (t_j - w(j,l) + w(l,k)) mod iter_k."""
    initial = initial or {}
    shifts = {}
    for comp in sorted(nx.connected_components(g), key=lambda c: sorted(n[1] for n in c if n[0] == "job")):
        jobs = sorted(n[1] for n in comp if n[0] == "job")
        ref = reference(jobs) if reference else jobs[0]
        shifts[ref] = wrap(float(initial.get(ref, 0.0)), iteration_ms[ref])
        queue = deque([ref])
        while queue:
            j = queue.popleft()
            for link in sorted(g[("job", j)], key=lambda n: n[1]):
                w_jl = g.edges[("job", j), link]["weight"]
                for k_node in sorted(g[link], key=lambda n: n[1]):
                    k = k_node[1]
                    if k in shifts:
                        continue
                    w_lk = g.edges[k_node, link]["weight"]
                    shifts[k] = wrap(shifts[j] - w_jl + w_lk, iteration_ms[k])
                    queue.append(k)
    return shifts


def preserved(g, shifts, period_ms, tol_ms=1e-6):
    """Links on which the final shifts do not reproduce the optimised alignment.

    Jobs a, b with (quantised, whole-ms) periods T_a, T_b, optimised shifts w_a, w_b and final
    shifts s_a, s_b keep their alignment iff one common translation maps both, i.e. (by the Chinese
    remainder theorem) (s_a - s_b) - (w_a - w_b) = 0 mod gcd(T_a, T_b).
    """
    from math import gcd
    broken = []
    for node in sorted(n for n in g if n[0] == "link"):
        jobs = sorted(g[node], key=lambda n: n[1])
        for i, a in enumerate(jobs):
            for b in jobs[i + 1:]:
                ja, jb = a[1], b[1]
                m = gcd(int(round(period_ms[ja])), int(round(period_ms[jb])))
                d = ((shifts[ja] - shifts[jb]) - (g.edges[a, node]["weight"] - g.edges[b, node]["weight"])) % m
                if min(d, m - d) > tol_ms:
                    broken.append(node[1])
                    break
            else:
                continue
            break
    return broken


def components(names, together):
    """{name: [the names joined with it]}: ``names`` joined transitively by each list in
    ``together`` (names outside ``names`` ignored); members in ``names`` order."""
    parent = {n: n for n in names}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    for group in together:
        inside = [n for n in group if n in parent]
        for a, b in zip(inside, inside[1:]):
            parent[find(a)] = find(b)
    out = {}
    for n in parent:
        out.setdefault(find(n), []).append(n)
    return {n: out[find(n)] for n in parent}
