"""The policy contract, below the simulator and the planner: what a scheduling policy returns
(``Decision``), the base policy and CASSINI at one epoch (``EpochPolicy``; ``BasePolicy`` wraps it
for the simulator's events), which waiting jobs fit (``placeable_jobs``) and which jobs keep their
shifts together (``groups``). The planner (harness.planners.schedule) and the simulator
(harness.sim.engine) both build on this module; it imports neither.
"""
import itertools
from dataclasses import dataclass, field

from harness.schedulers import cassini, placement as placement_mod
from harness.schedulers.affinity import components, wrap


@dataclass
class Decision:
    place: dict = field(default_factory=dict)      # job -> hosts
    preempt: list = field(default_factory=list)    # running jobs to stop (they go back to the queue)
    wake_at: float = None                          # a time at which to decide again (a timer)
    epoch: dict = None                             # record for the schedule (placement decisions)


class ScheduleError(ValueError):
    pass


def _links_json(link_jobs, link_scores):
    return [{"id": l, "jobs": link_jobs[l], "score": round(link_scores[l], 4)} for l in sorted(link_jobs)]


def groups(names, epochs, min_score=0.0, alignable=None):
    """Jobs (``names``) that share a link at any of ``epochs`` (each with its scored ``links``), joined
    transitively: {job: set of jobs in its group}.

    Only links whose compatibility score is at least ``min_score`` join jobs: CASSINI's shifts are
    worth keeping only where the jobs can interleave; on an incompatible link (two RoBERTa, Up 82 %
    of the time) holding each other to the shift only adds pauses (measured on snapshot 4).
    ``alignable`` (unified_alignable): a link joins its jobs only if it says they can keep shifts."""
    links = [link["jobs"] for e in epochs for link in e["links"] if link.get("score", 1.0) >= min_score
             and (alignable is None or alignable(link["jobs"]))]
    return {name: set(members) for name, members in components(list(names), links).items()}


def alignment(keeps_spec_shifts, uses_cassini, members):
    """The alignment decision (agents.timing.ALIGNMENTS) of a job whose group of jobs sharing links
    with it is ``members`` (itself included; aligned_members): CASSINI's jobs and the jobs of a
    policy that keeps the spec's shifts (``fixed``) keep their shifts relative to such a group; such
    a job alone keeps its own grid; every other job runs free."""
    if len(members) > 1 and (uses_cassini or keeps_spec_shifts):
        return "group"
    return "grid" if keeps_spec_shifts else "free"


def aligns(keeps_spec_shifts, uses_cassini):
    """Do this scheduler's jobs keep shifts at all (so their groups must be known)?"""
    return uses_cassini or keeps_spec_shifts


def unified(spec):
    """Do jobs of different periods keep shifts together (CASSINI with ``unequal_periods: unified``)?"""
    return spec.uses_cassini and cassini.exact_periods(spec.cassini)


def unified_alignable(period, span):
    """For ``groups``: a link's jobs keep their shifts together when every two of them are
    harmonic (cassini.harmonic) on the periods they run on (``period``, ``span``: their
    communication spans, {job: ms})."""
    return lambda jobs: all(cassini.harmonic(period[a], period[b], span[a], span[b])
                            for a, b in itertools.combinations(jobs, 2))


def aligned_members(name, grp, period, unified_=False):
    """The members of ``grp[name]`` that ``name`` keeps its shift with, sorted (``period``: {job: the
    period it runs on}): those of its period or, on the unified circle (``unified_``: groups were
    joined by unified_alignable links), all of them."""
    return sorted(m for m in grp.get(name, {name}) if unified_ or period[m] == period[name])


def assign_timing(plan, keeps_spec_shifts, uses_cassini, min_score, spans=None):
    """Each planned job's ``alignment`` and ``group`` (the sorted members it aligns with, or None),
    from the links the plan's epochs recorded (in place); ``spans`` ({job: communication span ms}):
    on the unified circle (unified), else None."""
    it = {j.name: j.beat_ms for j in plan.jobs}
    ok = unified_alignable(it, spans) if spans is not None else None
    grp = groups([j.name for j in plan.jobs], plan.epochs, min_score, ok) \
        if aligns(keeps_spec_shifts, uses_cassini) else {}
    for j in plan.jobs:
        members = aligned_members(j.name, grp, it, spans is not None)
        j.alignment = alignment(keeps_spec_shifts, uses_cassini, members)
        j.group = members if j.alignment == "group" else None


def placeable_jobs(waiting, used, n_hosts_free):
    """Waiting jobs that fit now, in order (a later job may go first if an earlier one does not fit)."""
    out, n_free = [], n_hosts_free
    for j in waiting:
        pinned_busy = j.hosts and any(h in used for h in j.hosts)
        if j.workers <= n_free and not pinned_busy:
            out.append(j)
            n_free -= j.workers
    return out


class EpochPolicy:
    """The base policy (and CASSINI on top) at one epoch: placement of the jobs that fit, and the
    time-shifts of every running job. Keeps the shifts across epochs. Used by ``schedule`` (the
    emulator's plan) and by the simulator (harness.sim), which calls it at its own events."""

    def __init__(self, spec, routes):
        self.spec, self.routes = spec, routes
        self.topo = spec.topology
        self.profiles_of = {j.name: spec.profiles[j.model] for j in spec.jobs}
        self.params, self.capacity = spec.cassini, spec.reference_gbps
        self.placer, self.use_cassini = spec.policy_class.from_spec(spec), spec.uses_cassini
        self.shifts, self.periods, self.epoch_no = {}, {}, 0     # job -> shift; job -> the period it runs on
        self.record_links = True     # scores of shared links in the record even without CASSINI
        self.memo = {}               # CASSINI's per-job demands and per-group solutions (cassini.link_demands)

    def place(self, t, placeable, running, counts=None):
        """``running``: {job: hosts} of the jobs that keep their hosts; ``counts``: worker counts
        already decided (harness.schedulers.reallocation). Returns (placement of ``placeable``
        {job: hosts}, the epoch record)."""
        used = {h for hs in running.values() for h in hs}
        free = [h for h in self.topo.hosts if h not in used]
        params = self.params
        n_cand = params["candidates"] if self.use_cassini else 1
        try:
            cands = placement_mod.candidates(self.placer, placeable, self.topo, self.spec.profiles, free,
                                             fixed=running, n=n_cand, seed=self.spec.seed + self.epoch_no,
                                             counts=counts)
        except placement_mod.PlacementError as exc:
            raise ScheduleError(str(exc))
        prof_now = {n: self.profiles_of[n] for n in cands[0]}
        epoch = {"t_s": round(t, 3), "placed": [j.name for j in placeable], "candidates_considered": len(cands)}
        if self.use_cassini:
            initial = {n: self.shifts[n] for n in running}
            kept = {n: self.period(n) for n in running}
            idx, evals = cassini.choose(cands, prof_now, self.routes, self.capacity, params, initial, kept, self.memo)
            epoch["candidates_rejected_loops"] = sum(1 for e in evals if not e.accepted)
            if idx is None:
                chosen, new_shifts = cands[0], {**{n: 0.0 for n in cands[0]}, **initial}
                link_scores = cassini.score_placement(chosen, prof_now, self.routes, self.capacity, params, new_shifts,
                                                      memo=self.memo)
                link_jobs = evals[0].link_jobs
                epoch.update(fallback="every candidate's affinity graph has an inconsistent loop: "
                                      "base placement, zero shifts", chosen_candidate=0,
                             affinity_graph={"loop_free": False, "consistent": False})
            else:
                ev = evals[idx]
                chosen, new_shifts, link_scores, link_jobs = ev.placement, ev.shifts, ev.link_scores, ev.link_jobs
                self.periods.update({n: ev.periods[n] for n in chosen if n not in running})
                epoch.update(chosen_candidate=idx, affinity_graph={"loop_free": ev.loop_free, "consistent": ev.consistent},
                             approximate=ev.approximate, exact_search=ev.exact,
                             candidate_scores=[round(e.score, 4) if e.accepted else None for e in evals])
                if ev.notes:
                    epoch["notes"] = ev.notes
                if any("jointly" in n for n in ev.notes):
                    epoch["affinity_graph"]["joint"] = True
        else:
            chosen = cands[0]
            new_shifts = {n: self.shifts.get(n, 0.0) for n in chosen}
            for j in placeable:
                new_shifts[j.name] = (j.time_shift_ms or 0.0) if self.placer.keeps_spec_shifts else 0.0
            link_scores, link_jobs = cassini.score_placement(chosen, prof_now, self.routes, self.capacity, params,
                                                             new_shifts, with_jobs=True, memo=self.memo) \
                if self.record_links else ({}, {})
            epoch.update(chosen_candidate=0, affinity_graph={"loop_free": None, "consistent": None})
        vals = list(link_scores.values())
        epoch["score"] = round(1.0 if not vals else sum(vals) / len(vals), 4)
        epoch["links"] = _links_json(link_jobs, link_scores)
        changed = {n: s for n, s in new_shifts.items() if n in running and abs(s - self.shifts.get(n, 0.0)) > 1e-6}
        if changed:
            epoch["reshifted"] = {n: round(s, 3) for n, s in changed.items()}
        for n, s in new_shifts.items():
            self.shifts[n] = wrap(s, self.period(n))
        epoch["shifts"] = {n: round(self.shifts[n], 3) for n in sorted(chosen)}
        self.epoch_no += 1
        return {j.name: chosen[j.name] for j in placeable}, epoch

    def period(self, name):
        """The period ``name`` runs on: its profile's iteration, or CASSINI's common period."""
        return self.periods.get(name, self.profiles_of[name].iteration_ms)

    def forget(self, name):
        self.shifts.pop(name, None)
        self.periods.pop(name, None)
        cassini.memo_forget(self.memo, name)




class BasePolicy:
    """The emulator's scheduler (base policy, optionally +CASSINI) at the simulator's events."""

    def __init__(self, spec, routes):
        self.ep = EpochPolicy(spec, routes)
        self.ep.record_links = aligns(spec.policy_class.keeps_spec_shifts, spec.uses_cassini)   # link scores make the groups
        self.n_hosts = len(spec.topology.hosts)

    def decide(self, t, waiting, running):
        used = {h for hs in running.values() for h in hs}
        placeable = placeable_jobs([w.job for w in waiting], used, self.n_hosts - len(used))
        if not placeable:
            return Decision()
        placed, epoch = self.ep.place(t, placeable, running)
        return Decision(place=placed, epoch=epoch)

    def shift(self, name):
        return self.ep.shifts.get(name, 0.0)

    def period(self, name):
        return self.ep.period(name)

    def forget(self, name):
        self.ep.forget(name)
