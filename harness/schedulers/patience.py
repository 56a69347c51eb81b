"""netsens's adaptive waiting (``timers: adaptive``): whether a job that could start now at a loose
locality level gains by waiting for a tighter one, from the state the scheduler sees.

A job with ``R`` seconds of work left (its remaining iterations at its profile's iteration time)
runs ``R * slowdown(level)``. The modelled slowdown is 1 in one rack and the job's sensitivity at the
background across racks (alone, a ring crosses every fabric link alike); the slowdown used is the
modelled one times what the running jobs at that level measure: their iteration time observed from
their progress between events, over the modelled one (iteration-weighted over every job seen at the
level; 1 before any). Sharing makes levels differ where the model of a job alone cannot: spread
across pods, jobs share the core with each other. Waiting for level ``l`` pays when the expected wait
for ``l`` is shorter than ``patience`` times what ``l`` saves, ``R * (slowdown(now) - slowdown(l))``
(``netsens.patience``: seconds of waiting accepted per second saved). The expected wait
comes from the running jobs' predicted ends (placed at ``t`` with ``r`` iterations left at level
``m``: ``t + restart + r * iteration * slowdown(m)``): the first end after which a rack (a pod) holds
enough free hosts; jobs already past their predicted end are taken to end now. A job never waits
longer in all than ``patience`` times the saving it waits for, so a wrong prediction costs at most
that multiple of what a right one would have saved. With ``patience`` 1 a job waits only up to the
break-even of its own saving; the default (netsens.DEFAULTS) was chosen on development traces and
seeds, and is judged on held-out ones (docs/schedulers.md).
"""
import math


class Patience:
    """Predicted ends of running jobs, and the wait-or-go rule over them."""

    def __init__(self, layout, modelled, work_s, patience=1.0):
        self.layout = layout
        self.patience = patience     # seconds of waiting accepted per second saved
        self.modelled = modelled     # (job, level) -> modelled slowdown at that level
        self.work_s = work_s         # (job, iterations) -> seconds of work at slowdown 1
        self.ends = {}               # running job -> predicted end (s)
        self.seen = {}               # running job -> (level, iterations left, running from)
        self.observed = [[0.0, 0.0] for _ in range(3)]   # per level: [seconds run, seconds modelled]

    def factor(self, level):
        """Observed over modelled time of the jobs run at ``level`` (1 before any)."""
        run, modelled = self.observed[level]
        return run / modelled if modelled > 0 else 1.0

    def slowdown(self, name, level):
        return self.modelled(name, level) * self.factor(level)

    def placed(self, name, t, iterations, level, restart_s=0.0):
        self.ends[name] = t + restart_s + self.work_s(name, iterations) * self.slowdown(name, level)
        self.seen[name] = (level, iterations, t + restart_s)

    def observe(self, t, remaining):
        """The running jobs' iterations left at ``t``: each one's progress since it was last seen
        adds to its level's observed and modelled time."""
        for name, left in remaining.items():
            if name not in self.seen:
                continue
            level, before, start = self.seen[name]
            done = before - left
            if done > 1e-9 and t > start:
                self.observed[level][0] += t - start
                self.observed[level][1] += self.work_s(name, done) * self.modelled(name, level)
                self.seen[name] = (level, left, t)

    def forget(self, name):
        self.ends.pop(name, None)
        self.seen.pop(name, None)

    def expected_wait(self, t, n, level, free, running):
        """Seconds until ``n`` hosts are free within one rack (level 0) or one pod (level 1), if the
        running jobs end as predicted; 0 if they are now; inf if never."""
        per = {}
        for h in free:
            k = self._unit(h, level)
            per[k] = per.get(k, 0) + 1
        if any(v >= n for v in per.values()):
            return 0.0
        for end, hosts in sorted((max(self.ends.get(v, t), t), hs) for v, hs in running.items()):
            for h in hosts:
                k = self._unit(h, level)
                per[k] = per.get(k, 0) + 1
            if any(v >= n for v in per.values()):
                return end - t
        return math.inf

    def _unit(self, host, level):
        rack = self.layout.rack_of[host]
        return rack if level == 0 else self.layout.pod_of[rack]

    def target(self, t, name, iterations, n, now_level, lvl_min, free, running):
        """The tighter level worth waiting for, as (level, budget_s, expected wait_s), or None to go
        at ``now_level``; the budget is ``patience`` times the saving, the most the job may wait for
        it. ``now_level`` None: nothing fits now (the job waits whatever this says)."""
        best = None
        top = 2 if now_level is None else now_level
        s_now = self.slowdown(name, top)
        work = self.work_s(name, iterations)
        for lvl in range(lvl_min, top):
            budget = self.patience * work * (s_now - self.slowdown(name, lvl))
            if budget <= 0:
                continue
            wait = self.expected_wait(t, n, lvl, free, running)
            if budget > wait and (best is None or budget - wait > best[1] - best[2]):
                best = (lvl, budget, wait)
        return best
