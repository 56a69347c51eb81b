"""Scheduling over a trace: epochs at arrivals (and at finishes that free hosts for waiting jobs).

At each epoch the running jobs keep their hosts; waiting jobs are placed in arrival order when
enough hosts are free (later jobs may go first if an earlier one does not fit). With ``+cassini``
the base policy's candidates are scored, the best accepted one is taken, and Algorithm 1 gives
shifts to every job sharing links with others (a running job keeps its shift as the reference of
its component; others in that component may be re-phased, as CASSINI does at epoch boundaries).
Without CASSINI, shifts are 0 (or the spec's time_shift_ms with ``fixed``).

Finish times are estimated as placement + iterations x profile iteration time (the job alone): the
emulator measures the real ones. Shifts are relative to the run's common reference instant T0:
iteration k of job j is planned to start at T0 + shift_j + k x iteration_j.
"""
from harness.routing import compute_routes
from harness.schedulers import cassini, placement as placement_mod
from harness.schedulers.affinity import wrap


class ScheduleError(ValueError):
    pass


def _links_json(link_jobs, link_scores):
    return [{"id": l, "jobs": link_jobs[l], "score": round(link_scores[l], 4)} for l in sorted(link_jobs)]


def groups(plan, min_score=0.0):
    """Jobs that share a link at any epoch, joined transitively: {job: set of jobs in its group}.

    Only links whose compatibility score is at least ``min_score`` join jobs: CASSINI's shifts are
    worth keeping only where the jobs can interleave; on an incompatible link (two RoBERTa, Up 82 %
    of the time) holding each other to the shift only adds pauses (measured on snapshot 4)."""
    parent = {j["name"]: j["name"] for j in plan["jobs"]}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    for e in plan["epochs"]:
        for link in e["links"]:
            if link.get("score", 1.0) < min_score:
                continue
            for a, b in zip(link["jobs"], link["jobs"][1:]):
                parent[find(a)] = find(b)
    out = {}
    for name in parent:
        out.setdefault(find(name), set()).add(name)
    return {name: out[find(name)] for name in parent}


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
        self.base, self.use_cassini = spec.base, spec.uses_cassini
        self.shifts, self.epoch_no = {}, 0
        self.record_links = True     # scores of shared links in the record even without CASSINI

    def place(self, t, placeable, running):
        """``running``: {job: hosts} of the jobs that keep their hosts. Returns (placement of
        ``placeable`` {job: hosts}, the epoch record)."""
        used = {h for hs in running.values() for h in hs}
        free = [h for h in self.topo.hosts if h not in used]
        params, base = self.params, self.base
        n_cand = params["candidates"] if self.use_cassini else 1
        try:
            cands = placement_mod.candidates(base, placeable, self.topo, self.spec.profiles, free, fixed=running,
                                             n=n_cand, seed=self.spec.seed + self.epoch_no)
        except placement_mod.PlacementError as exc:
            raise ScheduleError(str(exc))
        prof_now = {n: self.profiles_of[n] for n in cands[0]}
        epoch = {"t_s": round(t, 3), "placed": [j.name for j in placeable], "candidates_considered": len(cands)}
        if self.use_cassini:
            initial = {n: self.shifts[n] for n in running}
            idx, evals = cassini.choose(cands, prof_now, self.routes, self.capacity, params, initial)
            epoch["candidates_rejected_loops"] = sum(1 for e in evals if not e.accepted)
            if idx is None:
                chosen, new_shifts = cands[0], {**{n: 0.0 for n in cands[0]}, **initial}
                link_scores = cassini.score_placement(chosen, prof_now, self.routes, self.capacity, params, new_shifts)
                link_jobs = evals[0].link_jobs
                epoch.update(fallback="every candidate's affinity graph has an inconsistent loop: "
                                      "base placement, zero shifts", chosen_candidate=0,
                             affinity_graph={"loop_free": False, "consistent": False})
            else:
                ev = evals[idx]
                chosen, new_shifts, link_scores, link_jobs = ev.placement, ev.shifts, ev.link_scores, ev.link_jobs
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
                new_shifts[j.name] = (j.time_shift_ms or 0.0) if base == "fixed" else 0.0
            link_scores, link_jobs = cassini.score_placement(chosen, prof_now, self.routes, self.capacity, params,
                                                             new_shifts, with_jobs=True) if self.record_links else ({}, {})
            epoch.update(chosen_candidate=0, affinity_graph={"loop_free": None, "consistent": None})
        vals = list(link_scores.values())
        epoch["score"] = round(1.0 if not vals else sum(vals) / len(vals), 4)
        epoch["links"] = _links_json(link_jobs, link_scores)
        changed = {n: s for n, s in new_shifts.items() if n in running and abs(s - self.shifts.get(n, 0.0)) > 1e-6}
        if changed:
            epoch["reshifted"] = {n: round(s, 3) for n, s in changed.items()}
        for n, s in new_shifts.items():
            self.shifts[n] = wrap(s, self.profiles_of[n].iteration_ms)
        epoch["shifts"] = {n: round(self.shifts[n], 3) for n in sorted(chosen)}
        self.epoch_no += 1
        return {j.name: chosen[j.name] for j in placeable}, epoch

    def forget(self, name):
        self.shifts.pop(name, None)


def plan_from_simulation(spec, routes):
    """The plan of a policy that decides in time (netsens's delay timers, consolidate): run the
    trace in the simulator and take its placements and start times. The emulator then starts each
    job at that time or when its hosts are free. A preempted job has ``segments``: the emulator runs
    the first segment's iterations, lets it exit (its checkpoint), and starts the next segment on its
    new hosts once they are free and ``restart_s`` has passed, numbering iterations on."""
    from harness.sim.engine import Simulator
    sim = Simulator(spec, routes=routes)
    summary = sim.run()
    jobs_out = []
    for j in spec.jobs:
        js = summary["jobs"][j.name]
        seg = js["segments"][0]
        prof = spec.profiles[j.model]
        out = {"name": j.name, "model": j.model, "hosts": seg["hosts"], "time_shift_ms": 0.0,
               "iteration_ms": prof.iteration_ms, "iterations": j.iterations, "arrival_s": j.arrival_s,
               "placed_at_s": seg["start_s"], "finish_est_s": round(j.arrival_s + js["jct_s"], 3),
               "alone": False, "queue_est_s": js["queue_s"]}
        if len(js["segments"]) > 1:     # preempted: the emulator runs each segment's iterations in turn
            left = [int(round(x["iterations_left"])) for x in js["segments"]] + [0]
            segs = [{"start_s": x["start_s"], "hosts": x["hosts"], "iterations": a - b}
                    for x, a, b in zip(js["segments"], left, left[1:]) if a - b > 0]
            out["segments"] = segs
            out["restart_s"] = spec.netsens["restart_s"]
        jobs_out.append(out)
    epochs = [{**e, "links": [], "score": 1.0} for e in sim.epochs]
    policy = sim.policy
    params = {"netsens": {**spec.netsens, "timers": getattr(policy, "timers", None)}} if spec.base == "netsens" else {}
    if getattr(policy, "tuning", None):
        params["netsens"]["tuning"] = policy.tuning
    if spec.base == "netsens":
        params["sensitivity"] = {n: round(v, 4) for n, v in policy.sens.items()}
        params["class"] = dict(policy.cls)
    return {
        "scheduler": spec.scheduler, "spec": spec.name, "seed": spec.seed,
        "topology": spec.topology.summary(), "reference_gbps": spec.reference_gbps,
        "jobs": jobs_out, "links": [], "affinity_graph": {"loop_free": None},
        "candidates_considered": 1, "epochs": epochs, "params": params,
        "predicted": {k: summary["totals"][k] for k in ("iteration_ms_mean", "jct_s_mean", "makespan_s")},
        "routes": "computed by harness.routing (deterministic least-loaded ECMP); pinned by the runner",
    }


def schedule(spec, routes=None):
    topo = spec.topology
    routes = routes or compute_routes(topo)
    if spec.base in ("netsens", "consolidate"):
        return plan_from_simulation(spec, routes)
    if spec.has_programs:       # pipeline / tensor jobs: pinned hosts, step grid, the flow scheduler's decision
        from harness.schedulers.flowplan import schedule_programs
        return schedule_programs(spec, routes)
    policy = EpochPolicy(spec, routes)
    profiles_of = policy.profiles_of
    pending = sorted(spec.jobs, key=lambda j: (j.arrival_s, spec.jobs.index(j)))
    waiting, running, done, epochs, jobs_out = [], {}, {}, [], {}
    t = 0.0
    while pending or waiting:
        if not waiting:
            t = max(t, pending[0].arrival_s)
        while pending and pending[0].arrival_s <= t + 1e-9:
            waiting.append(pending.pop(0))
        for name in [n for n, r in running.items() if r["finish"] <= t + 1e-9]:
            done[name] = running.pop(name)
        used = {h for r in running.values() for h in r["hosts"]}
        placeable = placeable_jobs(waiting, used, len(topo.hosts) - len(used))
        if not placeable:
            nxt = [r["finish"] for r in running.values()] + [p.arrival_s for p in pending]
            if not nxt:
                raise ScheduleError(f"job {waiting[0].name} needs {waiting[0].workers} hosts; the topology has "
                                    f"{len(topo.hosts)}")
            t = min(x for x in nxt if x > t - 1e-9) if any(x > t for x in nxt) else max(nxt)
            continue
        placed, epoch = policy.place(t, placeable, {n: r["hosts"] for n, r in running.items()})
        shifts = policy.shifts
        for j in placeable:
            prof = profiles_of[j.name]
            running[j.name] = {"hosts": placed[j.name], "placed": t,
                               "finish": t + j.iterations * prof.iteration_ms / 1000.0}
            jobs_out[j.name] = {"name": j.name, "model": j.model, "hosts": placed[j.name],
                                "time_shift_ms": round(shifts[j.name], 3), "iteration_ms": prof.iteration_ms,
                                "iterations": j.iterations, "arrival_s": j.arrival_s, "placed_at_s": round(t, 3),
                                "finish_est_s": round(running[j.name]["finish"], 3), "alone": spec.base == "ideal"}
            waiting.remove(j)
        for n in epoch.get("reshifted", {}):
            jobs_out[n].setdefault("reshifts", []).append({"t_s": round(t, 3), "time_shift_ms": round(shifts[n], 3)})
        epochs.append(epoch)
    first = epochs[0]
    return {
        "scheduler": spec.scheduler, "spec": spec.name, "seed": spec.seed,
        "topology": topo.summary(), "reference_gbps": spec.reference_gbps,
        "jobs": [jobs_out[j.name] for j in spec.jobs],
        "links": first["links"], "affinity_graph": first["affinity_graph"],
        "candidates_considered": first["candidates_considered"],
        "epochs": epochs, "params": {k: policy.params[k] for k in sorted(policy.params)},
        "routes": "computed by harness.routing (deterministic least-loaded ECMP); pinned by the runner",
    }
