"""Base placement policies and the candidate placements they propose (documented simplifications).

Cluster model: one GPU per host; a *rack* is an edge switch (ToR), a *pod* the racks sharing
aggregation switches. Pinned hosts from a spec are always respected.

  themis  (Mahajan et al., NSDI'20), kept: finish-time fairness decides *who* gets GPUs (jobs
          furthest behind their fair share first; at one epoch with no history that is arrival
          order), a job gets the workers it asks for, and the network penalty for spanning racks
          makes it pack into as few racks as possible (``racks: penalty``: the paper's rack penalty
          only). Leases and finish-time-fairness auctions: harness.schedulers.reallocation.
  pollux  (Qiao et al., OSDI'21), kept: worker counts chosen for cluster goodput, greedily adding the
          worker with the largest marginal goodput, with speedup N / (1 + c (N - 1)) (c = the job's
          communication fraction) and a statistical-efficiency penalty past its requested count
          (at most 2x). Not kept: batch-size/learning-rate co-adaptation, migration cost.
  random  hosts drawn uniformly (the paper's "highest network overhead" baseline).
  ideal   themis's placement, each job as if alone on the fabric (the yardstick: the simulator
          gives every job its contention-free iteration time; the emulator cannot isolate jobs).
  fixed   the spec's pinned hosts and time_shift_ms; no decisions.

Candidates (CASSINI §4.2 step 1): the base allocation is kept (same worker counts, same number of
racks per job: same fairness) and up to N alternatives differ only in *which* racks and hosts;
generated from a seeded random generator, duplicates dropped, candidate 0 is the base placement.
"""
import numpy as np

from harness.contract import Cluster, JobRequest, PlacementError, PlacementPolicy  # noqa: F401 (PlacementError re-exported)
from harness.registry import register_scheduler


def racks(topo):
    """{rack (edge switch): [hosts]} in host order."""
    out = {}
    for h in topo.hosts:
        out.setdefault(topo.edge_of(h), []).append(h)
    return out


def _place(job_workers, free, rack_of, pick):
    """Each job in turn on the free hosts: ``pick(free_by_rack, n)`` gives its hosts (a rule below);
    they leave the free pool; hosts of a job in host order."""
    free_by_rack = {}
    for h in free:
        free_by_rack.setdefault(rack_of[h], []).append(h)
    placement = {}
    for name, n in job_workers:
        chosen = pick(free_by_rack, n)
        if len(chosen) < n:
            raise PlacementError(f"job {name} needs {n} hosts, only {len(chosen)} free")
        for h in chosen:
            free_by_rack[rack_of[h]].remove(h)
        placement[name] = sorted(chosen, key=lambda h: int(h[1:]))
    return placement


def _shuffled(hosts, rng):
    return list(hosts) if rng is None else [str(h) for h in rng.permutation(hosts)]


def _pack(job_workers, free, rack_of, rack_order, rng=None):
    """Best-fit packing: each job into the fewest racks (fullest-fit first); hosts in order."""
    def pick(free_by_rack, n):
        avail = sorted((r for r in rack_order if free_by_rack.get(r)), key=lambda r: -len(free_by_rack[r]))
        fit = [r for r in avail if len(free_by_rack[r]) >= n]
        if fit:  # smallest rack that holds the whole job (keeps big holes for big jobs)
            return _shuffled(free_by_rack[min(fit, key=lambda r: len(free_by_rack[r]))], rng)[:n]
        chosen = []
        for r in avail:
            chosen += _shuffled(free_by_rack[r], rng)[:n - len(chosen)]
            if len(chosen) == n:
                break
        return chosen
    return _place(job_workers, free, rack_of, pick)


def _rack_penalty(job_workers, free, rack_of, rack_order, rng=None):
    """Themis's network awareness as the paper states it: a slowdown penalty for a job whose workers
    are not under one rack, nothing finer. A job that fits in one rack gets one (the first with
    room in ``rack_order``); one that does not takes free GPUs wherever they are (in host order, or
    drawn at random with ``rng``): the penalty is the same however many racks it spans, so nothing
    keeps it to few racks and placements fragment as jobs come and go."""
    def pick(free_by_rack, n):
        fit = [r for r in rack_order if len(free_by_rack.get(r, [])) >= n]
        if fit:
            return _shuffled(free_by_rack[fit[0]], rng)[:n]
        pool = sorted((h for r in rack_order for h in free_by_rack.get(r, [])), key=lambda h: int(h[1:]))
        return _shuffled(pool, rng)[:n]
    return _place(job_workers, free, rack_of, pick)


def pollux_workers(jobs, profiles, n_free):
    """Goodput-driven worker counts: {job: N}."""
    alloc = {j.name: 1 for j in jobs}
    left = n_free - len(jobs)
    if left < 0:
        raise PlacementError("more jobs than free hosts")

    def goodput(j, n):
        c = profiles[j.model].comm_fraction
        speed = n / (1 + c * (n - 1))
        eff = 1.0 / (1.0 + 0.25 * max(0, n - j.workers) / j.workers)
        return speed * eff
    by = {j.name: j for j in jobs}
    while left > 0:
        gains = {n: goodput(by[n], alloc[n] + 1) - goodput(by[n], alloc[n])
                 for n in alloc if alloc[n] < 2 * by[n].workers}
        if not gains:
            break
        best = max(sorted(gains), key=lambda n: gains[n])
        if gains[best] <= 0.05:
            break
        alloc[best] += 1
        left -= 1
    return alloc


def _pack_candidates(order, free, rack_of, rack_order, n, rng):
    base = _pack(order, free, rack_of, rack_order)
    out = [base]
    racks_used = {name: len({rack_of[h] for h in hs}) for name, hs in base.items()}
    for _ in range(20 * n):
        if len(out) >= n:
            break
        cand = _pack(order, free, rack_of, list(rng.permutation(rack_order)), rng)
        if all(len({rack_of[h] for h in cand[name]}) == racks_used[name] for name in cand) and cand not in out:
            out.append(cand)
    return out


def _penalty_candidates(order, free, rack_of, rack_order, n, rng):
    base = _rack_penalty(order, free, rack_of, rack_order)
    out = [base]
    single = {name: len({rack_of[h] for h in hs}) == 1 for name, hs in base.items()}
    for _ in range(20 * n):
        if len(out) >= n:
            break
        cand = _rack_penalty(order, free, rack_of, [str(r) for r in rng.permutation(rack_order)], rng)
        if all((len({rack_of[h] for h in cand[name]}) == 1) == single[name] for name in cand) and cand not in out:
            out.append(cand)
    return out


def _order_and_racks(jobs, cluster):
    rack_of = {h: cluster.rack_of(h) for h in cluster.topology.hosts}
    return [(j.name, j.workers) for j in jobs], rack_of, list(cluster.racks)


@register_scheduler("themis")
class Themis(PlacementPolicy):
    """Packs each job into the fewest racks (``racks: fewest``) or the paper's rack penalty only."""
    reads = ("themis",)

    def __init__(self, racks="fewest"):
        self.racks = racks

    @classmethod
    def from_spec(cls, spec):
        return cls(racks=spec.themis["racks"])

    def propose(self, jobs, free, cluster, n, rng):
        order, rack_of, rack_order = _order_and_racks(jobs, cluster)
        rule = _penalty_candidates if self.racks == "penalty" else _pack_candidates
        return rule(order, free, rack_of, rack_order, n, rng)


@register_scheduler("ideal")
class Ideal(Themis):
    """Themis's placement, every job as if alone on the fabric (the simulator's yardstick)."""
    cassini = False
    alone = True


@register_scheduler("pollux")
class Pollux(PlacementPolicy):
    """Worker counts for cluster goodput (``pollux_workers``), packed like themis's ``fewest``."""
    reads = ("pollux",)

    def __init__(self, profiles):
        self.profiles = profiles

    @classmethod
    def from_spec(cls, spec):
        return cls(spec.profiles)

    def worker_counts(self, jobs, n_free):
        return pollux_workers(jobs, self.profiles, n_free)

    def propose(self, jobs, free, cluster, n, rng):
        order, rack_of, rack_order = _order_and_racks(jobs, cluster)
        return _pack_candidates(order, free, rack_of, rack_order, n, rng)


@register_scheduler("random")
class Random(PlacementPolicy):
    """Hosts drawn uniformly."""

    def propose(self, jobs, free, cluster, n, rng):
        out = []
        for _ in range(20 * n):
            if len(out) >= n:
                break
            perm = list(rng.permutation(free))
            cand, i = {}, 0
            for j in jobs:
                cand[j.name] = sorted(perm[i:i + j.workers], key=lambda h: int(h[1:]))
                i += j.workers
            if cand not in out:
                out.append(cand)
        return out


@register_scheduler("fixed")
class Fixed(PlacementPolicy):
    """The spec's pinned hosts and time_shift_ms; no decisions."""
    keeps_spec_shifts = True
    requires_pinned_hosts = True

    def propose(self, jobs, free, cluster, n, rng):
        return [{}]


def candidates(placer, jobs, topo, profiles, free, fixed=None, n=10, seed=1, counts=None):
    """Up to ``n`` placements {job: [hosts]} for ``jobs`` (the spec's Job objects) on ``free`` hosts
    by the PlacementPolicy ``placer``; ``fixed`` jobs ({job: hosts}) kept, pinned jobs on their hosts.
    ``counts``: {job: workers} already decided (a reallocation), else the policy's own."""
    fixed = dict(fixed or {})
    pinned = {j.name: j.hosts for j in jobs if j.hosts}
    free = [h for h in free if not any(h in hs for hs in pinned.values())]
    todo = [j for j in jobs if not j.hosts]
    if counts is not None:
        counts = {j.name: counts[j.name] for j in todo}
    else:
        counts = placer.worker_counts(todo, len(free)) if todo else {}
    need = sum(counts.values())
    if need > len(free):
        raise PlacementError(f"{need} workers asked, {len(free)} hosts free")
    rng = np.random.default_rng(seed)
    cluster = Cluster(topo, {**fixed, **pinned})
    requests = [JobRequest(j.name, counts[j.name], j.model, profiles[j.model], j.arrival_s) for j in todo]
    out = placer.propose(requests, free, cluster, n, rng)
    return [{**fixed, **pinned, **c} for c in out]
