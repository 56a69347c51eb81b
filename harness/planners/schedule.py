"""Scheduling over a trace: epochs at arrivals (and at finishes that free hosts for waiting jobs).

At each epoch the running jobs keep their hosts; waiting jobs are placed in arrival order when
enough hosts are free (later jobs may go first if an earlier one does not fit). With ``+cassini``
the base policy's candidates are scored, the best accepted one is taken, and Algorithm 1 gives
shifts to every job sharing links with others (a running job keeps its shift as the reference of
its component; others in that component may be re-phased, as CASSINI does at epoch boundaries).
Without CASSINI, shifts are 0 (or the spec's time_shift_ms with ``fixed``). ``period_ms``: the beat
a job runs on, its profile's iteration time or, with CASSINI, the common period of the jobs on its
links (harness.schedulers.cassini.common_periods); ``iteration_ms`` stays the profile's.

Finish times are estimated as placement + iterations x profile iteration time (the job alone): the
emulator measures the real ones. Shifts are relative to the run's common reference instant T0:
iteration k of job j is planned to start at T0 + shift_j + k x iteration_j.
"""
import dataclasses

from harness.contract import EventPolicy
from harness.plan import Plan, PlannedJob, Reshift, Segment
from harness.routing import compute_routes
from harness.planners.flowplan import schedule_programs
from harness.schedulers.policy import EpochPolicy, ScheduleError, assign_timing, groups, placeable_jobs, \
    unified  # noqa: F401 (re-exported)
from harness.schedulers.reallocation import reallocating
from harness.planners.tuner import tune
from harness.sim.engine import Simulator


def resolve_timers(spec):
    """netsens's ``timers: auto`` resolved by the tuner (a grid search in the simulator), before any
    policy is built: (the spec with the chosen timers, the tuning record or None)."""
    if not issubclass(spec.policy_class, EventPolicy) or not spec.policy_class.tunes_timers \
            or spec.netsens.get("timers") != "auto":
        return spec, None
    tuning = tune(spec)
    return dataclasses.replace(spec, netsens={**spec.netsens, "timers": tuning["chosen"]}), tuning


def plan_from_simulation(spec, routes, progress=None):
    """The plan of a policy that decides in time (netsens's delay timers, consolidate, tiresias): run the
    trace in the simulator and take its placements and start times. The emulator then starts each
    job at that time or when its hosts are free. A preempted job has ``segments``: the emulator runs
    the first segment's iterations, lets it exit (its checkpoint), and starts the next segment on its
    new hosts once they are free and ``restart_s`` has passed, numbering iterations on."""
    spec, tuning = resolve_timers(spec)
    sim = Simulator(spec, routes=routes)
    summary = sim.run(progress)
    jobs_out = []
    for j in spec.jobs:
        js = summary["jobs"][j.name]
        seg = js["segments"][0]
        prof = spec.profiles[j.model]
        out = PlannedJob(j.name, j.model, seg["hosts"], 0.0, prof.iteration_ms, j.iterations, j.arrival_s,
                         placed_at_s=seg["start_s"], finish_est_s=round(j.arrival_s + js["jct_s"], 3),
                         queue_est_s=js["queue_s"])
        if len(js["segments"]) > 1:     # preempted: the emulator runs each segment's iterations in turn
            left = [int(round(x["iterations_left"])) for x in js["segments"]] + [0]
            out.segments = [Segment(x["start_s"], x["hosts"], a - b)
                            for x, a, b in zip(js["segments"], left, left[1:]) if a - b > 0]
            out.restart_s = sim.restart_s
        jobs_out.append(out)
    epochs = [{**e, "links": [], "score": 1.0} for e in sim.epochs]
    params = sim.policy.plan_params()
    if tuning:
        params["netsens"]["tuning"] = tuning
    return Plan.of(spec, jobs_out, epochs=epochs, params=params,
                   predicted={k: summary["totals"][k] for k in ("iteration_ms_mean", "jct_s_mean", "makespan_s")})


def schedule(spec, routes=None, progress=None):
    """The plan (schedule.json): every job's placement, start and timing (``time_shift_ms``,
    ``alignment``, ``group``: the owner of each job's timing is this document). ``progress(placed
    or finished jobs)`` is told as the plan goes (harness.progress)."""
    if (cls := reallocating(spec)) is not None:
        raise ScheduleError(f"{cls.key}: reallocations move running jobs, which the emulator's plan cannot "
                            "carry yet; simulate it (interleave simulate, or reproduce --simulate)")
    routes = routes or compute_routes(spec.topology)
    if issubclass(spec.policy_class, EventPolicy):
        out = plan_from_simulation(spec, routes, progress)
    elif spec.has_programs:     # pipeline / tensor jobs: pinned hosts, step grid, the flow scheduler's decision
        out = schedule_programs(spec, routes)
    else:
        out = schedule_epochs(spec, routes, progress)
    assign_timing(out, spec.policy_class.keeps_spec_shifts, spec.uses_cassini, spec.cassini["align_min_score"],
                  {j.name: spec.profiles[j.model].comm_span_ms for j in spec.jobs} if unified(spec) else None)
    return out


def schedule_epochs(spec, routes, progress=None):
    """Base policies and CASSINI: epochs at arrivals and at finishes that free hosts; ``progress(placed
    jobs)`` after each epoch."""
    topo = spec.topology
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
            prof, period = profiles_of[j.name], policy.period(j.name)
            running[j.name] = {"hosts": placed[j.name], "placed": t,
                               "finish": t + j.iterations * period / 1000.0}
            jobs_out[j.name] = PlannedJob(j.name, j.model, placed[j.name], round(shifts[j.name], 3), prof.iteration_ms,
                                          j.iterations, j.arrival_s, round(t, 3), round(running[j.name]["finish"], 3),
                                          alone=spec.policy_class.alone, period_ms=period)
            waiting.remove(j)
        for n in epoch.get("reshifted", {}):
            jobs_out[n].reshifts = (jobs_out[n].reshifts or []) + [Reshift(round(t, 3), round(shifts[n], 3))]
        epochs.append(epoch)
        if progress is not None:
            progress(len(jobs_out))
    first = epochs[0]
    return Plan.of(spec, [jobs_out[j.name] for j in spec.jobs], links=first["links"],
                   affinity_graph=first["affinity_graph"], candidates_considered=first["candidates_considered"],
                   epochs=epochs, params={k: policy.params[k] for k in sorted(policy.params)})
