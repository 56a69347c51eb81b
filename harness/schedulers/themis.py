"""Themis with leases and finish-time-fairness auctions, as the CASSINI paper ran it (§5.1): "an
assignment of GPU servers is valid until the period of lease time. When the lease time expires, the
job gives up the server, and a new auction is conducted for all the released servers"; a job's
first request is drawn from 1-12 GPUs and "the number of workers is automatically tuned based on
Themis's finish-time-fairness metric" (Mahajan et al., NSDI'20).

Switched on by ``themis: {lease_s: L}`` for ``themis``, ``themis+cassini`` and ``ideal``; simulator
only (harness.sim: the emulator's plan has no re-placement of jobs yet). The model:

- Every ``lease_s`` all leases end together and one auction hands out every GPU. Finish-time
  fairness of job j with n GPUs: rho_j(n) = (elapsed + w_j / n * it_j) / T_alone, where w_j is its
  work left in worker-iterations (iterations x workers: a per-GPU batch, so n workers do n units per
  iteration), it_j its profile's iteration time and T_alone its whole work on an equal share of the
  cluster (G / active jobs GPUs, at most ``max_workers``). GPUs go one at a time to the job whose
  rho falls most (a job with none first, in arrival order): the greedy form of Themis's partial
  allocation, every GPU allocated, no job above ``max_workers``. Not kept: bids, the fairness knob
  f (every job bids: all leases end together), hidden payoffs.
- A job whose worker count is unchanged keeps its servers; a job whose count changed gives them all
  up and is placed again on the free GPUs by the base rule (``themis.racks``; with CASSINI, among
  its candidates): that is where placements fragment. A moved job pays ``restart_s`` (checkpoint and
  restore) and keeps its work (harness.sim.engine converts its iterations to the new count).
- Between auctions, arrivals and finishes place waiting jobs on free GPUs at their request, as the
  lease-less model does.
"""
import dataclasses

from harness.schedulers.policy import BasePolicy, Decision

DEFAULTS = {"lease_s": None, "restart_s": 0.0, "max_workers": 12}


def rho(elapsed_s, work, n, it_s, alone_s):
    """Finish-time fairness of a job with ``work`` worker-iterations left on ``n`` GPUs."""
    if n <= 0:
        return float("inf")
    return (elapsed_s + work / n * it_s) / alone_s


def allocate(jobs, n_gpus, max_workers):
    """The auction: {job: GPUs}. ``jobs``: [(name, elapsed_s, work_left, it_s, work_total)] in
    arrival order. Greedy on the largest drop of rho per GPU; all GPUs handed out while a job can
    take one."""
    if not jobs:
        return {}
    share = min(max_workers, max(1.0, n_gpus / len(jobs)))
    alone = {name: max(1e-9, total / share * it) for name, _e, _w, it, total in jobs}
    alloc = {name: 0 for name, *_ in jobs}
    order = {name: i for i, (name, *_) in enumerate(jobs)}
    info = {name: (e, w, it) for name, e, w, it, _t in jobs}
    for _ in range(n_gpus):
        best, best_gain = None, None
        for name, n in alloc.items():
            if n >= max_workers:
                continue
            e, w, it = info[name]
            gain = rho(e, w, n, it, alone[name]) - rho(e, w, n + 1, it, alone[name])
            if best is None or gain > best_gain + 1e-12 or (abs(gain - best_gain) <= 1e-12 and order[name] < order[best]):
                best, best_gain = name, gain
        if best is None:
            break
        alloc[best] += 1
    return alloc


class ThemisAuctions(BasePolicy):
    """The simulator's Themis (and ideal, and +CASSINI on top) with lease auctions."""

    def __init__(self, spec, routes):
        super().__init__(spec, routes)
        self.spec = spec
        cfg = {**DEFAULTS, **spec.themis}
        self.lease_s, self.restart_s, self.max_workers = cfg["lease_s"], cfg["restart_s"], cfg["max_workers"]
        self.next_auction = self.lease_s
        self.remaining = {}          # running job -> iterations left at its current count (engine.observe)
        self.work_scales = True      # the engine converts iterations left when a job's count changes
        self.auctions, self.moves = 0, 0
        self.jobs = {j.name: j for j in spec.jobs}
        self.order = {j.name: (j.arrival_s, i) for i, j in enumerate(spec.jobs)}

    def observe(self, remaining):
        self.remaining = dict(remaining)

    def decide(self, t, waiting, running):
        if t + 1e-9 < self.next_auction:
            d = super().decide(t, waiting, running)
            d.wake_at = self.next_auction
            return d
        while self.next_auction <= t + 1e-9:
            self.next_auction += self.lease_s
        return self._auction(t, waiting, running)

    def _auction(self, t, waiting, running):
        self.auctions += 1
        pinned = {n: hs for n, hs in running.items() if self.jobs[n].hosts}     # pinned jobs are not auctioned
        by_arrival = sorted([(n, None) for n in running if n not in pinned]
                            + [(w.job.name, w) for w in waiting if not w.job.hosts], key=lambda x: self.order[x[0]])
        jobs = []
        for name, w in by_arrival:
            job = self.jobs[name]
            if name in running:
                n_now = len(running[name])
                left = self.remaining.get(name, job.iterations)
            else:
                n_now, left = w.workers, w.remaining
            it_s = self.spec.profiles[job.model].iteration_ms / 1000
            jobs.append((name, t - job.arrival_s, left * n_now, it_s, job.iterations * job.workers))
        n_gpus = self.n_hosts - sum(len(hs) for hs in pinned.values())
        alloc = allocate(jobs, n_gpus, self.max_workers)
        keep = {n: hs for n, hs in running.items() if n in pinned or alloc.get(n) == len(hs)}
        moved = sorted(n for n in running if n not in keep)
        todo = [dataclasses.replace(self.jobs[n], workers=alloc[n]) for n, _w in by_arrival
                if n not in keep and alloc.get(n, 0) > 0]
        placed, epoch = self.ep.place(t, todo, keep) if todo else ({}, {"t_s": round(t, 3), "placed": []})
        self.moves += len([n for n in moved if n in placed])
        epoch.update(auction=self.auctions, workers={n: alloc[n] for n in sorted(alloc)},
                     moved=moved, kept=sorted(keep))
        return Decision(place=placed, preempt=moved, wake_at=self.next_auction, epoch=epoch)

    def forget(self, name):
        super().forget(name)
        self.remaining.pop(name, None)

    def record(self):
        return {"auctions": self.auctions, "moves": self.moves, "lease_s": self.lease_s,
                "restart_s": self.restart_s, "max_workers": self.max_workers}


def uses_auctions(spec):
    return spec.base in ("themis", "ideal") and bool(spec.themis.get("lease_s"))
