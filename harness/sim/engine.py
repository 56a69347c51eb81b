"""Event-driven cluster simulation: the same spec, profiles, topology, routes and schedulers as
``interleave run``, with the fabric replaced by the fluid model of harness.sim.fluid.

Events: arrivals, job finishes, policy wake-ups (delay timers). At each event the policy decides
(placements, preemptions), then the iteration time of every running job is recomputed: jobs that
share no link and fit the capacity run at their profile time; each component of link-sharing jobs
(or a job whose links have less capacity than its phases ask, under background load) is run in the
fluid model until its iterations are steady, and the job progresses at that rate until the next
event; a component of ``MEANFIELD_MIN_JOBS`` or more free-running jobs runs in harness.sim.meanfield
instead (the fluid run's cost grows with its size). Components are cached by (jobs, hosts, shifts,
groups): an event recomputes only the components it changed.

Cluster model (the emulator's): one GPU per host; capacity per directed link = the spec's
``reference_gbps``; ``background: {load: b}`` takes b of every switch-to-switch link (the congested
condition of the network-sensitive scheduling paper); host links are never shared.
Preemption (netsens; a reallocation moving a job, harness.schedulers.reallocation): the victim's
progress is kept (it checkpoints), it returns to the queue and pays ``restart_s`` when placed again;
under reallocation, placed on another worker count, its iterations left are converted (work in
worker-iterations). Time: seconds; iteration times in ms.
"""
import time
from dataclasses import dataclass

import numpy as np

from harness import metrics
from harness.routing import path_delays, routes_for
from harness.schedulers import affinity
from harness.contract import EventPolicy
from harness.schedulers.netsens import DEFAULTS as NETSENS_DEFAULTS
from harness.schedulers.policy import BasePolicy, aligned_members, aligns, alignment, groups, unified, unified_alignable
from harness.schedulers.reallocation import reallocating
from harness.sim import calibration, meanfield
from harness.schedulers.traffic import link_loads
from harness.sim.fluid import SimJob, attach_links, simulate
from workloads.profiles import stretched


MEANFIELD_MIN_JOBS = 12    # a component of this many free-running jobs: harness.sim.meanfield, not the fluid run
ALIGN_RANK = {"free": 0, "grid": 1, "group": 2}   # a job reports the strongest alignment it ran with


@dataclass
class Waiting:
    job: object
    since: float
    preemptions: int = 0
    remaining: float = None
    workers: int = None        # the worker count ``remaining`` is in


@dataclass
class Running:
    job: object
    hosts: list
    ready_at: float
    remaining: float
    it_ms: float = 0.0
    marks_per_it: float = 0.0
    re_per_it: float = 0.0
    comm_ms: float = 0.0
    samples: object = None
    preemptions: int = 0


class Accum:
    def __init__(self):
        self.samples, self.weights, self.marks, self.iterations, self.realign = [], [], 0.0, 0.0, 0.0
        self.comm = 0.0                 # communication ms summed over iterations

    def add(self, samples, done):
        if self.samples and self.samples[-1] is samples:
            self.weights[-1] += done
        else:
            self.samples.append(samples)
            self.weights.append(done)


def capacities(topo, reference_gbps, background=0.0):
    cap = {}
    for link in topo.links:
        shared = link.a in topo.switches and link.b in topo.switches
        for did, *_ in link.directions():
            cap[did] = reference_gbps * (1 - background if shared else 1.0)
    return cap


class Simulator:
    def __init__(self, spec, policy=None, routes=None, background=None, horizon_iterations=30):
        self.spec = spec
        self.topo = spec.topology
        self.routes = routes or routes_for(self.topo)
        bg = background if background is not None else spec.background
        self.background = bg
        self.capacity = capacities(self.topo, spec.reference_gbps, bg)
        self.delay_ms = path_delays(self.topo)
        self.policy = policy or make_policy(spec, self.routes)
        self.horizon = horizon_iterations
        self.cache, self._links_cache, self._squeeze_cache, self._free_cache = {}, {}, {}, {}
        # harness.sim.meanfield's: a number per directed link, capacities in that order, last phase times
        self._link_ids = {l: k for k, l in enumerate(self.capacity)}
        self._cap_arr, self._warm = np.array(list(self.capacity.values()), dtype=float), {}
        self.fluid_runs = self.meanfield_runs = 0
        self.alignment = {}            # job -> its alignment (agents.timing), as the plan has it
        self.period_of = {}            # job -> the period it keeps (CASSINI's common or padded period)
        self.shifts = {}               # job -> its time-shift (ms) at the last event while it ran
        self.align_min = spec.cassini.get("align_min_score", 0.9)
        self.unified = unified(spec)     # jobs of different periods keep shifts on their unified circle
        # iterations are work at the requested count (reallocation); else a job runs its iterations
        # on whatever count it is given (pollux's counts: the earlier model, kept)
        self.work_scales = getattr(self.policy, "work_scales", False)
        # checkpoint restore of a preempted (or, under reallocation, moved) job: the policy's, else
        # the spec's netsens value (validated with netsens's defaults)
        own = getattr(self.policy, "restart_s", None)
        self.restart_s = float(own if own is not None else spec.netsens.get("restart_s", NETSENS_DEFAULTS["restart_s"]))

    # ---- the iteration-time model -------------------------------------------------------------
    def _period(self, r):
        """The period a running job's agent keeps: its profile's, or CASSINI's common period."""
        period = getattr(self.policy, "period", None)
        return period(r.job.name) if period else self.spec.profiles[r.job.model].iteration_ms

    def _simjob(self, r, group, mode):
        j = SimJob(r.job.name, stretched(self.spec.profiles[r.job.model], self._period(r)), list(r.hosts),
                   self.policy.shift(r.job.name), group, alignment=mode)
        return attach_links(j, self.routes, self.delay_ms, self.spec.reference_gbps)

    def _free_simjob(self, r):
        """A free-running job's arrays for harness.sim.meanfield, kept while it runs on the same hosts."""
        key = (r.job.name, tuple(r.hosts), self._period(r))
        if key not in self._free_cache:
            self._free_cache[key] = meanfield.prepare(self._simjob(r, None, "free"), self._link_ids)
        return self._free_cache[key]

    def _links_of(self, r):
        key = (r.job.name, tuple(r.hosts))
        if key not in self._links_cache:
            self._links_cache[key] = self._compute_links(r)
        return self._links_cache[key]

    def _squeezed(self, r, links):
        """Does a phase of the job ask more of one of its links than the link has (background)?"""
        key = (r.job.name, tuple(r.hosts))
        if key not in self._squeeze_cache:
            self._squeeze_cache[key] = any(d > self.capacity[l] * (1 + 1e-9) for l, d in links.items())
        return self._squeeze_cache[key]

    def _compute_links(self, r):
        """{directed link: the most any phase of the job puts on it (Gbit/s)}."""
        loads = link_loads(self.spec.profiles[r.job.model], r.hosts, self.routes)
        return {l: max(g for _i, g in phases) for l, phases in loads.items()}

    def recompute(self, running, epoch_links):
        """Set it_ms / marks of every running job for the current set."""
        links_of = {n: self._links_of(r) for n, r in running.items()}
        users = {}
        for n, ls in links_of.items():
            for l in ls:
                users.setdefault(l, []).append(n)
        joined = affinity.components(list(running), users.values())
        comps = {}
        for n in running:
            comps.setdefault(n if self.spec.policy_class.alone else joined[n][0], []).append(n)
        live = [{**l, "jobs": [n for n in l["jobs"] if n in running]} for l in epoch_links]
        keeps, cassini = self.spec.policy_class.keeps_spec_shifts, self.spec.uses_cassini
        period = {n: self._period(r) for n, r in running.items()}
        self.period_of.update(period)
        ok = unified_alignable(period, {n: self.spec.profiles[r.job.model].comm_span_ms for n, r in running.items()}) \
            if self.unified else None
        grp = groups(running, [{"links": live}], self.align_min, ok) if aligns(keeps, cassini) else {}
        same = {n: aligned_members(n, grp, period, self.unified) for n in running}
        mode = {n: alignment(keeps, cassini, same[n]) for n in running}
        gid = {n: same[n][0] if mode[n] == "group" else None for n in running}
        for n, m in mode.items():       # as the plan has it: group if it ever aligned with a group
            if ALIGN_RANK[m] > ALIGN_RANK.get(self.alignment.get(n), -1):
                self.alignment[n] = m
        for members in comps.values():
            shared = len(members) > 1
            squeezed = any(self._squeezed(running[n], links_of[n]) for n in members)
            if not shared and not squeezed and self.delay_ms is None:     # alone: its profile, exactly
                r = running[members[0]]
                r.it_ms = period[members[0]]
                r.comm_ms = self.spec.profiles[r.job.model].comm_span_ms
                r.marks_per_it, r.re_per_it, r.samples = 0.0, 0.0, None
                continue
            key = tuple(sorted((n, tuple(running[n].hosts), round(self.policy.shift(n), 3), gid[n], mode[n], period[n])
                               for n in members))
            if len(members) >= MEANFIELD_MIN_JOBS and all(mode[n] == "free" for n in members):
                self._meanfield(key, members, running)
                continue
            out = self.cache.get(key)
            if out is None:
                jobs = [self._simjob(running[n], gid[n], mode[n]) for n in members]
                periods = {j.profile.iteration_ms for j in jobs}
                # different periods slide against each other: cover a full relative cycle (e.g.
                # 260 vs 255 ms: 52 iterations) so the mean is not that of one phase of the slide
                horizon = self.horizon if len(periods) == 1 else 4 * self.horizon
                out = simulate(jobs, self.capacity, horizon_iterations=horizon)
                self.cache[key] = out
                self.fluid_runs += 1
            for n in members:
                r = running[n]
                r.samples = out.iteration_ms[n]
                r.it_ms = float(np.mean(r.samples))
                r.marks_per_it = out.marks_per_iteration[n]
                r.re_per_it = out.realignments_per_iteration[n]
                comm = (out.comm_ms or {}).get(n)
                r.comm_ms = self.spec.profiles[r.job.model].comm_span_ms if comm is None else comm

    def _meanfield(self, key, members, running):
        out = self.cache.get(key)
        if out is None:
            out = meanfield.iteration_times([self._free_simjob(running[n]) for n in members], self._cap_arr,
                                            warm=self._warm)
            self._warm.update(out[3])
            self.cache[key] = out
            self.meanfield_runs += 1
        it, marks, comm, _send = out
        for n in members:
            r = running[n]
            r.it_ms, r.marks_per_it, r.re_per_it, r.comm_ms = it[n], marks[n], 0.0, comm[n]
            r.samples = np.array([r.it_ms])

    # ---- the event loop -----------------------------------------------------------------------
    def run(self, progress=None):
        """summary.json of the spec's jobs; ``progress(finished)`` is told how many jobs have finished
        at every event (harness.progress)."""
        wall0 = time.perf_counter()
        spec = self.spec
        pending = sorted(spec.jobs, key=lambda j: (j.arrival_s, spec.jobs.index(j)))
        waiting, running, acc, finished = [], {}, {}, {}
        epochs, segments, wake = [], {}, None
        queue_s = {}
        epoch_links = []
        t = 0.0
        while pending or waiting or running:
            nxt = [pending[0].arrival_s] if pending else []
            nxt += [max(t, r.ready_at) + r.remaining * r.it_ms / 1000 for r in running.values()]
            if wake is not None and wake > t + 1e-9:
                nxt.append(wake)
            if not nxt:
                raise RuntimeError(f"jobs {[w.job.name for w in waiting]} can never be placed")
            t_new = max(t, min(nxt))
            self._advance(running, acc, t, t_new)
            t = t_new
            for n in [n for n, r in running.items() if r.remaining <= 1e-6]:
                r = running.pop(n)
                finished[n] = t
                segments[n][-1]["end_s"] = round(t, 3)
                self.policy.forget(n)
            while pending and pending[0].arrival_s <= t + 1e-9:
                j = pending.pop(0)
                waiting.append(Waiting(j, j.arrival_s, 0, float(j.iterations), j.workers))
            if hasattr(self.policy, "observe"):      # a policy that weighs progress (reallocation)
                self.policy.observe({n: r.remaining for n, r in running.items()})
            d = self.policy.decide(t, waiting, {n: r.hosts for n, r in running.items()})
            wake = d.wake_at
            for n in d.preempt:
                r = running.pop(n)
                segments[n][-1].update(end_s=round(t, 3), preempted=True)
                waiting.insert(0, Waiting(r.job, t, r.preemptions + 1, r.remaining, len(r.hosts)))
            for name, hosts in d.place.items():
                w = next(x for x in waiting if x.job.name == name)
                waiting.remove(w)
                restart = self.restart_s if w.preemptions else 0.0
                if self.work_scales and w.workers != len(hosts):
                    # another worker count than the one its iterations are in (a reallocation): the
                    # work is kept, in worker-iterations (a per-GPU batch)
                    w.remaining *= w.workers / len(hosts)
                running[name] = Running(w.job, list(hosts), t + restart, w.remaining, preemptions=w.preemptions)
                acc.setdefault(name, Accum())
                queue_s[name] = queue_s.get(name, 0.0) + (t - w.since)
                segments.setdefault(name, []).append({"start_s": round(t, 3), "hosts": list(hosts),
                                                      "iterations_left": round(w.remaining, 2)})
            if d.epoch is not None:
                epochs.append(d.epoch)
                epoch_links = d.epoch.get("links", [])
            self.recompute(running, epoch_links)
            for n in running:            # the shift in effect while it ran (the policy forgets a finished job's)
                self.shifts[n] = self.policy.shift(n)
            if progress is not None:
                progress(len(finished))
        wall = time.perf_counter() - wall0
        self.epochs = epochs
        return self._summary(acc, finished, queue_s, segments, epochs, wall)

    def _advance(self, running, acc, t0, t1):
        for n, r in running.items():
            start = max(t0, r.ready_at)
            if t1 <= start or r.it_ms <= 0:
                continue
            done = min(r.remaining, (t1 - start) * 1000 / r.it_ms)
            r.remaining -= done
            a = acc[n]
            a.iterations += done
            a.marks += done * r.marks_per_it
            a.realign += done * r.re_per_it
            a.comm += done * r.comm_ms
            if r.samples is None:
                r.samples = np.array([r.it_ms])
            a.add(r.samples, done)

    def _summary(self, acc, finished, queue_s, segments, epochs, wall):
        spec = self.spec
        self.iteration_times = {}       # {job: (modelled iteration ms, iterations run at each)}
        jobs, all_it, all_w, all_slow, overhead = {}, [], [], [], []
        acct = getattr(self.policy, "job_accounting", lambda name: {})
        for j in spec.jobs:
            a = acc.get(j.name)
            prof = spec.profiles[j.model]
            if a is None or not a.weights:
                continue
            vals = np.concatenate(a.samples)
            wts = np.concatenate([np.full(len(s), w / len(s)) for s, w in zip(a.samples, a.weights)])
            mean = metrics.mean(vals, wts)
            distinct, at = np.unique(np.round(vals, 3), return_inverse=True)    # a row per modelled time
            self.iteration_times[j.name] = (distinct, np.bincount(at, weights=wts))
            all_it.append(vals)
            all_w.append(wts)
            all_slow.append(vals / prof.iteration_ms)
            overhead.append((mean, prof.iteration_ms, a.iterations))
            jobs[j.name] = metrics.job(
                model=j.model, hosts=segments[j.name][-1]["hosts"], iterations=a.iterations,
                iteration_ms_mean=mean, iteration_ms_p99=metrics.percentile(vals, 99, wts),
                iteration_ms_profile=prof.iteration_ms, comm_ms_mean=a.comm / a.iterations if a.iterations else None,
                comm_ms_profile=prof.comm_span_ms, jct_s=finished[j.name] - j.arrival_s,
                queue_s=queue_s.get(j.name, 0.0), ecn_marks=a.marks,
                ecn_marks_source="estimated (fluid queue model, harness.sim)",
                ecn_marks_per_iteration=a.marks / max(1.0, a.iterations), time_shift_ms=self.shifts.get(j.name, 0.0),
                alignment=self.alignment.get(j.name), realignments=a.realign,
                realignments_per_minute=a.realign / (a.iterations * mean / 60_000) if a.iterations and mean else None,
                padding_ms=self.period_of.get(j.name, prof.iteration_ms) - prof.iteration_ms,
                locality_wait_s=acct(j.name).get("locality_wait_s"),
                restart_paid_s=(len(segments[j.name]) - 1) * self.restart_s,
                slowdown=mean / prof.iteration_ms if mean else None,
                preemptions=len(segments[j.name]) - 1, segments=segments[j.name])
        vals, wts = (np.concatenate(all_it), np.concatenate(all_w)) if all_it else (np.array([]), np.array([]))
        slow = np.concatenate(all_slow) if all_slow else np.array([])
        jct = [v["jct_s"] for v in jobs.values()]
        done_it = sum(a.iterations for a in acc.values())
        end = max(finished.values()) if finished else 0.0
        restarts = [metrics.restart_cost(v["segments"], self.restart_s) for v in jobs.values()]
        totals = metrics.totals(
            iteration_ms_mean=metrics.mean(vals, wts if len(vals) else None),
            iteration_ms_p99=metrics.percentile(vals, 99, wts),
            comm_ms_mean=sum(a.comm for a in acc.values()) / done_it if done_it else None,
            ecn_marks=sum(v["ecn_marks"] for v in jobs.values()),
            slowdown_mean=metrics.mean(slow, wts if len(slow) else None),
            slowdown_p99=metrics.percentile(slow, 99, wts), makespan_s=end, jct_s_mean=metrics.mean(jct),
            queue_s_mean=metrics.mean([v["queue_s"] for v in jobs.values()]),
            locality_wait_s_mean=metrics.mean([v["locality_wait_s"] for v in jobs.values()
                                               if v["locality_wait_s"] is not None]),
            restart_paid_s_mean=metrics.mean([v["restart_paid_s"] for v in jobs.values()]),
            communication_overhead_s=metrics.communication_overhead_s(overhead),
            preemptions=sum(v["preemptions"] for v in jobs.values()),
            restarts=sum(r for r, _g in restarts), restart_gpu_s=sum(g for _r, g in restarts))
        return metrics.summary(
            spec.scheduler, spec.name, end, jobs, totals,
            {"ok": True, "notes": ["flow-level simulation (harness.sim): no emulator to keep up"]},
            head={"simulated": True},
            simulator={"wall_s": round(wall, 3), "fluid_runs": self.fluid_runs, "meanfield_runs": self.meanfield_runs,
                       "background_load": self.background,
                       "epochs": len(epochs), "marks_per_gbit": calibration.MARKS_PER_GBIT,
                       "horizon_iterations": self.horizon,
                       **({"reallocation": self.policy.record()} if hasattr(self.policy, "record") else {})})


def make_policy(spec, routes):
    """The policy that decides at the simulator's events: an event policy itself, else the placement
    policy (with CASSINI) at each event, or its reallocating form (leases, periodic reallocation)."""
    if issubclass(spec.policy_class, EventPolicy):
        return spec.policy_class(spec, routes)
    if (cls := reallocating(spec)) is not None:
        return cls(spec, routes)
    return BasePolicy(spec, routes)
