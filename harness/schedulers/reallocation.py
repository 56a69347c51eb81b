"""Schedulers that take GPUs back from running jobs at fixed times, as the CASSINI paper ran its two
host schedulers (§5.1); simulator only (harness.sim: the emulator's plan cannot move jobs yet).

Themis (Mahajan et al., NSDI'20), ``themis: {lease_s: L}`` for ``themis``, ``themis+cassini`` and
``ideal``: "an assignment of GPU servers is valid until the period of lease time. When the lease
time expires, the job gives up the server, and a new auction is conducted for all the released
servers"; a job's first request is drawn from 1-12 GPUs and "the number of workers is automatically
tuned based on Themis's finish-time-fairness metric". Every L seconds all leases end together and
one auction hands out every GPU. Finish-time fairness of job j with n GPUs: rho_j(n) = (elapsed +
w_j / n * it_j) / T_alone, w_j its work left in worker-iterations (iterations x workers: a per-GPU
batch, so n workers do n units per iteration), it_j its profile's iteration time, T_alone its whole
work on an equal share of the cluster (G / active jobs GPUs, at most ``max_workers``). GPUs go one
at a time to the job whose rho falls most (a job with none first, in arrival order): the greedy
form of Themis's partial allocation, every GPU allocated, no job above ``max_workers``. Not kept:
bids, the fairness knob f (every job bids: all leases end together), hidden payoffs.

Pollux (Qiao et al., OSDI'21), ``pollux: {interval_s: I}`` for ``pollux`` and ``pollux+cassini``:
"periodically reassigns GPUs to maximise goodput". Every I seconds the worker counts of all active
jobs are chosen again by harness.schedulers.placement.pollux_workers over every GPU (jobs beyond
the GPU count, in arrival order, get none). Not kept: batch-size co-adaptation, its own migration
cost model (``restart_s`` stands for it).

Both: a job whose worker count is unchanged keeps its servers; one whose count changed gives them
all up and is placed again on the free GPUs by the base rule (with CASSINI, among its candidates):
that is where placements fragment. A moved job pays ``restart_s`` (checkpoint and restore) and keeps
its work (harness.sim.engine converts its iterations to the new count). Between reallocations,
arrivals and finishes place waiting jobs on free GPUs as the plain policy does.
"""
import dataclasses

from harness.schedulers.placement import Pollux, Themis, pollux_workers
from harness.schedulers.policy import BasePolicy, Decision

THEMIS_DEFAULTS = {"lease_s": None, "restart_s": 0.0, "max_workers": 12}
POLLUX_DEFAULTS = {"interval_s": None, "restart_s": 0.0}


def rho(elapsed_s, work, n, it_s, alone_s):
    """Finish-time fairness of a job with ``work`` worker-iterations left on ``n`` GPUs."""
    if n <= 0:
        return float("inf")
    return (elapsed_s + work / n * it_s) / alone_s


def allocate(jobs, n_gpus, max_workers):
    """Themis's auction: {job: GPUs}. ``jobs``: [(name, elapsed_s, work_left, it_s, work_total)] in
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


class Reallocation(BasePolicy):
    """The plain base policy between reallocations; every ``period_s`` new worker counts for every
    job (``counts``, by the subclass) and the moves they imply."""
    period_s = restart_s = None

    def __init__(self, spec, routes):
        super().__init__(spec, routes)
        self.spec = spec
        self.next_at = self.period_s
        self.remaining = {}          # running job -> iterations left at its current count (engine.observe)
        self.work_scales = True      # the engine converts iterations left when a job's count changes
        self.rounds, self.moves = 0, 0
        self.jobs = {j.name: j for j in spec.jobs}
        self.order = {j.name: (j.arrival_s, i) for i, j in enumerate(spec.jobs)}

    def observe(self, remaining):
        self.remaining = dict(remaining)

    def decide(self, t, waiting, running):
        if t + 1e-9 < self.next_at:
            d = super().decide(t, waiting, running)
            d.wake_at = self.next_at
            return d
        while self.next_at <= t + 1e-9:
            self.next_at += self.period_s
        return self._reallocate(t, waiting, running)

    def _reallocate(self, t, waiting, running):
        self.rounds += 1
        pinned = {n: hs for n, hs in running.items() if self.jobs[n].hosts}     # pinned jobs keep their hosts
        active = sorted([(n, None) for n in running if n not in pinned]
                        + [(w.job.name, w) for w in waiting if not w.job.hosts], key=lambda x: self.order[x[0]])
        state = []          # (job, its count now, iterations left at that count)
        for name, w in active:
            if name in running:
                state.append((self.jobs[name], len(running[name]), self.remaining.get(name, self.jobs[name].iterations)))
            else:
                state.append((self.jobs[name], w.workers, w.remaining))
        n_gpus = self.n_hosts - sum(len(hs) for hs in pinned.values())
        alloc = self.counts(t, state, n_gpus)
        keep = {n: hs for n, hs in running.items() if n in pinned or alloc.get(n) == len(hs)}
        moved = sorted(n for n in running if n not in keep)
        todo = [dataclasses.replace(self.jobs[n], workers=alloc[n]) for n, _w in active
                if n not in keep and alloc.get(n, 0) > 0]
        placed, epoch = self.ep.place(t, todo, keep, counts={j.name: j.workers for j in todo}) \
            if todo else ({}, {"t_s": round(t, 3), "placed": []})
        self.moves += len([n for n in moved if n in placed])
        epoch.update(reallocation=self.rounds, workers={n: alloc[n] for n in sorted(alloc)},
                     moved=moved, kept=sorted(keep))
        return Decision(place=placed, preempt=moved, wake_at=self.next_at, epoch=epoch)

    def forget(self, name):
        super().forget(name)
        self.remaining.pop(name, None)

    def record(self):
        return {"reallocations": self.rounds, "moves": self.moves, "period_s": self.period_s,
                "restart_s": self.restart_s}


class ThemisAuctions(Reallocation):
    """Themis (and ideal, and +CASSINI on top) with lease auctions."""
    key = "themis.lease_s"      # the spec key that switches it on

    def __init__(self, spec, routes):
        cfg = {**THEMIS_DEFAULTS, **spec.themis}
        self.period_s, self.restart_s, self.max_workers = cfg["lease_s"], cfg["restart_s"], cfg["max_workers"]
        super().__init__(spec, routes)

    def counts(self, t, state, n_gpus):
        jobs = [(j.name, t - j.arrival_s, left * n_now, self.spec.profiles[j.model].iteration_ms / 1000,
                 j.iterations * j.workers) for j, n_now, left in state]
        return allocate(jobs, n_gpus, self.max_workers)

    def record(self):
        return {**super().record(), "kind": "themis lease auctions", "max_workers": self.max_workers}


class PolluxReallocation(Reallocation):
    """Pollux (and +CASSINI on top) reassigning every job's GPUs for goodput every interval."""
    key = "pollux.interval_s"

    def __init__(self, spec, routes):
        cfg = {**POLLUX_DEFAULTS, **spec.pollux}
        self.period_s, self.restart_s = cfg["interval_s"], cfg["restart_s"]
        super().__init__(spec, routes)

    def counts(self, t, state, n_gpus):
        served = [j for j, _n, _left in state][:n_gpus]
        alloc = pollux_workers(served, self.spec.profiles, n_gpus) if served else {}
        return {j.name: alloc.get(j.name, 0) for j, _n, _left in state}

    def record(self):
        return {**super().record(), "kind": "pollux goodput reallocation"}


def reallocating(spec):
    """The reallocating policy class a spec asks for, or None."""
    cls = spec.policy_class
    if issubclass(cls, Themis) and spec.themis.get("lease_s"):
        return ThemisAuctions
    if issubclass(cls, Pollux) and spec.pollux.get("interval_s"):
        return PolluxReallocation
    return None
