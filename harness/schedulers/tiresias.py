"""Tiresias-style discretized two-dimensional least-attained-service (Gu et al., NSDI'19, its
``dlas-gpu`` scheduler), a baseline for the network-sensitive scheduler (issue 16).

Priority: a job's attained service is the GPU-time it has held (workers x seconds placed, summed
over its runs); ``queue_limits`` (GPU-seconds, increasing) cut it into queues, queue 0 first; within
a queue, arrival order. At every event all jobs, running and waiting, are taken in priority order
and given GPUs while they fit (a job that does not fit is skipped, later ones may go); a running
job left without GPUs is preempted (it keeps its progress and pays ``netsens.restart_s`` when placed
again, as every preempting policy of the simulator does). Jobs are woken when a running one crosses
its queue's limit. Placement is Tiresias's consolidation (its simulator's ``yarn`` scheme): the best
locality level free, in the fewest racks (netsens.Layout, as ``consolidate``).

``tiresias: {queue_limits: [3600]}``: the default is two queues split at 3,600 GPU-seconds, the
example of Tiresias's simulator (SymbioticLab/Tiresias, simulator/README.md). Not modelled: its
starvation promotion (a waiting job promoted after waiting a multiple of its run time) and its
choice to consolidate only models with large tensors.
"""
from harness.schedulers.netsens import Layout
from harness.contract import EventPolicy
from harness.registry import register_scheduler
from harness.schedulers.policy import Decision

DEFAULTS = {"queue_limits": [3600.0]}


def validate(where, raw, error):
    """The spec's ``tiresias`` mapping with defaults; ``error(where, key, value, allowed)`` for a bad one."""
    cfg = {k: list(v) for k, v in DEFAULTS.items()}
    if raw is None:
        return cfg
    if not isinstance(raw, dict):
        raise error(where, "tiresias", raw, "a mapping {queue_limits: [gpu_s, ...]}")
    for k, v in raw.items():
        if k not in DEFAULTS:
            raise error(where, f"tiresias.{k}", v, "unknown key; allowed: " + ", ".join(DEFAULTS))
    q = raw.get("queue_limits", cfg["queue_limits"])
    if not (isinstance(q, list) and q and all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0
                                               for x in q) and all(a < b for a, b in zip(q, q[1:]))):
        raise error(where, "tiresias.queue_limits", q, "increasing GPU-seconds > 0, e.g. [3600]")
    cfg["queue_limits"] = [float(x) for x in q]
    return cfg


@register_scheduler("tiresias")
class TiresiasPolicy(EventPolicy):
    """Discretized two-dimensional least-attained service (see the module)."""
    reads = ("tiresias", "netsens")      # netsens.restart_s: what a preempted job pays to restart

    def __init__(self, spec, routes=None):
        self.spec, self.layout = spec, Layout(spec.topology)
        self.limits = spec.tiresias["queue_limits"]
        self.order = {j.name: (j.arrival_s, i) for i, j in enumerate(spec.jobs)}
        self.attained, self.since, self.workers = {}, {}, {}

    def _attained(self, name, t):
        held = self.workers[name] * (t - self.since[name]) if name in self.since else 0.0
        return self.attained.get(name, 0.0) + held

    def queue(self, gpu_s):
        return sum(1 for lim in self.limits if gpu_s >= lim - 1e-9)

    def decide(self, t, waiting, running):
        jobs = [(n, len(hs), True) for n, hs in running.items()] + [(w.job.name, w.job.workers, False) for w in waiting]
        prio = {n: (self.queue(self._attained(n, t)), self.order[n]) for n, _w, _r in jobs}
        budget = len(self.spec.topology.hosts)
        keep, start = set(), []
        for n, w, is_running in sorted(jobs, key=lambda x: prio[x[0]]):
            if w > budget:
                continue
            budget -= w
            if is_running:
                keep.add(n)
            else:
                start.append(n)
        preempt = sorted(n for n in running if n not in keep)
        used = {h for n in keep for h in running[n]}
        free = [h for h in self.spec.topology.hosts if h not in used]
        by_name = {w.job.name: w.job for w in waiting}
        place = {}
        for n in start:
            j = by_name[n]
            if j.hosts:
                hosts = j.hosts if not set(j.hosts) - set(free) else None
            else:
                hosts = self.layout.consolidated(j.workers, free)
            if hosts:
                place[n] = list(hosts)
                free = [h for h in free if h not in hosts]
        for n in preempt:
            self.attained[n] = self._attained(n, t)
            self.since.pop(n)
        for n, hs in place.items():
            self.since[n], self.workers[n] = t, len(hs)
        wake = None
        for n in list(keep) + list(place):
            gpu_s = self._attained(n, t)
            nxt = next((lim for lim in self.limits if lim > gpu_s + 1e-9), None)
            if nxt is not None:
                at = t + (nxt - gpu_s) / self.workers[n]
                wake = at if wake is None else min(wake, at)
        epoch = None
        if place or preempt:
            epoch = {"t_s": round(t, 3), "placed": sorted(place), "preempted": preempt,
                     "queues": {n: prio[n][0] for n in sorted(place)}}
        return Decision(place=place, preempt=preempt, wake_at=wake, epoch=epoch)

    def forget(self, name):
        for d in (self.attained, self.since, self.workers):
            d.pop(name, None)
