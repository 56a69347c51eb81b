"""The flow scheduler's central decision for pipeline- and tensor-parallel jobs (``flow_scheduler``).

A spec job with a ``pipeline`` or ``tensor`` block is a *program job*: its step is an EchelonFlow
(workloads.echelon) whose compute ops wait for their inputs, replayed by agents.stage. Steps of
every program job start on one grid, ``period_s`` = 1.25 x the slowest job's step when all start
together under fair sharing (the same for every policy and shift, so all see the same offered load);
a step that overruns its slot delays the next one. Before the run, the flow model (harness.sim.flows)
plays the steady state of that grid (each job's step between its previous and next one, each job at
its time shift) under the spec's policy, on the routes the controller pins:

  fair     no decision: every flow is sent at once and TCP shares the links;
  coflow   each flow follows the coflow schedule (SEBF across jobs, MADD within, leftover shared);
  echelon  each flow follows the echelon schedule (jobs by smallest bottleneck, each flow paced to
           its slot R + d_i, leftover shared).

With ``link.sharing: priority`` (switch and host egress queues per priority, harness.qdisc),
``echelon`` carries its schedule by one of two mechanisms (``echelon_mechanism``, MECHANISMS):
``priority`` gives each flow a priority instead of a sending curve (``step_priorities``: the jobs take
the agents.wire.PRIORITY_LEVELS levels in order and take turns going first, one step each; within
a job's levels, earliest offset first), which its sender carries in the DSCP, and sends it at once;
``pacing`` paces each flow along the echelon schedule, unmarked. Both at once made every spec slower
in emulation (pacing only holds flows back; results/echelon/README.md, issue 17). ``auto`` plays both in the
model and takes the one with the smaller predicted mean step (with ``replan``: priorities, which the
re-planner changes). ``priority`` is the default: auto picked pacing for 1F1B, which the model
predicts faster and emulation measured slower (results/echelon/README.md, "Priority queues"). The model
plays priorities with strict priority levels
(harness.sim.flows, policy ``priority``) over one rotation. ``fair`` and ``coflow`` flows stay
unmarked (one level: the queues behave as one FIFO).

The hosts enforce the decision by pacing each flow along its planned sending curve (fraction of
bytes sent by each instant, seconds after its step's reference); a flow behind its curve (released
late, or slowed by congestion) catches up as fast as TCP allows. The model sees the emulator as calibrated on it
(``emulator_model``, harness.sim.calibration: shaper bursts, a flow's latency, the fabric's start
backlog, the agents' late wake-ups, averaged over MODEL_SEEDS runs). Composing with CASSINI: the jobs'
``time_shift_ms`` (``fixed``) or searched shifts (``fixed+cassini``, ``search_shifts``) shift their
grids across jobs; pacing works within each job's step. Naming: flows and ops as in
workloads.echelon; bytes at the reference rate in the plan, scaled to the emulated rate in the
agents' configs (``agent_config``).
"""
import math

from harness.plan import Plan, PlannedJob
from harness.programblocks import MECHANISMS
from harness.sim import calibration
from harness.sim.flows import JobStep, simulate_steps
from agents import timing
from workloads import echelon
from agents.timing import Dilation
from agents.wire import PRIORITY_LEVELS

PERIOD_MARGIN = 1.25
MODEL_SEEDS = 5             # model runs averaged when the agents' timing noise is modelled


def flow_priorities(e, position=0, jobs=1, levels=PRIORITY_LEVELS):
    """Each flow's priority, 0 the most urgent, for a job at ``position`` (0 first) among ``jobs``
    program jobs: the jobs take the levels in order (levels // jobs each; jobs share levels when
    there are more jobs than levels), and within its levels a job's flows go by their offset d_i
    (the ideal start of the op that consumes them) in equal bins from the step's earliest to its
    latest offset: EchelonFlow's order across echelons, then earliest deadline first within one."""
    return levels_by(e.d, position, jobs, levels)


def levels_by(keys, position=0, jobs=1, levels=PRIORITY_LEVELS):
    """The levels of a job at ``position`` among ``jobs`` for flows ranked by ``keys`` (smaller: more
    urgent): the job's block of levels (levels // jobs of them) in equal bins from the smallest key to
    the largest. The one binning of the plan (``flow_priorities``) and of re-plans (harness.planners.replan)."""
    per = max(1, levels // jobs)
    base = min(levels - per, position * levels // jobs)
    lo, hi = min(keys), max(keys)
    if hi - lo <= 0:
        return [base] * len(keys)
    return [base + min(per - 1, int(per * (k - lo) / (hi - lo))) for k in keys]


def step_priorities(e, rank, jobs, levels=PRIORITY_LEVELS):
    """Per step of the grid (step k uses entry k mod ``jobs``), the flows' priorities of the job at
    ``rank`` among ``jobs``: the jobs' order rotates every step, so that each goes first in turn."""
    return [flow_priorities(e, (rank - k) % jobs, jobs, levels) for k in range(jobs)]


def emulator_model(spec):
    """The flow model's keywords for the spec's emulated fabric (harness.sim.calibration: fitted to
    TCP and the agents' timing on the emulator where measured), at the reference rate the plan is
    made in."""
    return calibration.emulator_model(spec.link, spec.reference_gbps * 1e9 / spec.link.rate_bps)


def simulate(spec, steps, routes, policy):
    """The flow model's result for ``steps``: with the agents' timing noise in the model, the mean
    over MODEL_SEEDS runs (step, ECT and coflow time; flows and curves of the first run)."""
    kw = emulator_model(spec)
    seeds = MODEL_SEEDS if len(kw["op_lateness_s"]) else 1
    return _mean_steps([simulate_steps(steps, routes, _capacity(spec), policy, seed=spec.seed * 1000 + i, **kw)
                        for i in range(seeds)])


def step_of(job):
    """The job's step as an EchelonFlow (bytes at the reference rate)."""
    if job.pipeline:
        p = job.pipeline
        return echelon.pipeline(job.name, job.workers, p["micro_batches"], p["forward_ms"], p["backward_ms"],
                                p["activation_mb"] * 1e6, p["gradient_mb"] * 1e6, schedule=p["schedule"])
    if job.data_parallel:
        d = job.data_parallel
        return echelon.data_parallel(job.name, d["buckets"], d["allreduce_mb"] * 1e6 / d["buckets"], ranks=job.workers,
                                     forward_ms=d["forward_ms"], backward_ms=d["backward_ms"])
    t = job.tensor
    return echelon.tensor_parallel(job.name, t["layers"], t["layer_ms"], t["allreduce_mb"] * 1e6, ranks=job.workers)


def programs(e, workers):
    """Per worker, its ops in order with the flows each consumes and releases (indices into e.flows).
    Pipeline stage s runs resource s; a tensor-parallel rank runs the shared layer sequence (resource 0)
    and consumes the all-reduce flows sent to it."""
    out = {}
    for w in range(workers):
        seq = e.order.get(w, e.order[0]) if len(e.order) > 1 else e.order[0]
        ops = []
        for op in seq:
            ops.append({"op": op, "dur_s": e.ops[op][1],
                        "inputs": [i for i, f in enumerate(e.flows) if f.feeds == op and f.dst == w],
                        "outputs": [i for i, f in enumerate(e.flows) if f.after == op and f.src == w]})
        out[w] = ops
    return out


def grid_period(spec, routes, hosts_of):
    """The step grid: 1.25 x the slowest job's step when every job starts together under fair
    sharing (the same for every flow scheduler and every shift, so they all see the same load)."""
    jobs = program_jobs(spec)
    fair = simulate(spec, [JobStep(j.name, step_of(j), hosts_of[j.name]) for j in jobs], routes, "fair")
    return math.ceil(PERIOD_MARGIN * max(v["step_s"] for v in fair.values()) * 1000) / 1000


def steady_steps(spec, routes, hosts_of, shifts_ms, period, policy, phase=0):
    """The model's step of every job in the steady state of the grid: each job's step k = ``phase``
    between its steps k - 1 and k + 1 (which may overlap the other jobs' step k when shifted), all
    under ``policy`` (``priority``: the flows' levels of ``step_priorities`` for those steps).
    Returns {job: harness.sim.flows result of its step k}."""
    steps, jobs = [], program_jobs(spec)
    for rank, j in enumerate(jobs):
        e = step_of(j)
        prio = step_priorities(e, rank, len(jobs))
        for k in (0, 1, 2):                     # start times >= 0: step "0" is the middle one
            start = timing.slot_time(0.0, shifts_ms.get(j.name, 0.0) / 1000, k, period)
            steps.append(JobStep(j.name if k == 1 else f"{j.name}#{k - 1}", e, hosts_of[j.name], start,
                                 prio[(k - 1 + phase) % len(jobs)] if policy == "priority" else None))
    out = simulate(spec, steps, routes, policy)
    return {j.name: out[j.name] for j in program_jobs(spec)}


def alone_steps(spec, routes, hosts_of, period):
    """Per program job, the model's step with the fabric to itself (every other job removed) on the
    grid ``period``, its flows shared fairly among themselves: the step with no contention between
    the jobs, all that ordering the jobs' flows against each other can win."""
    out = {}
    for j in program_jobs(spec):
        alone = steady_steps(spec_with_jobs(spec, [j]), routes, hosts_of, {j.name: 0.0}, period, "fair")
        out[j.name] = float(alone[j.name]["step_s"])
    return out


def _mean_steps(runs):
    """Per job, the step, ECT and coflow time averaged over several model runs (the first run's
    flows and curves)."""
    return {name: {**runs[0][name], **{k: sum(r[name][k] for r in runs) / len(runs)
                                       for k in ("step_s", "ect_s", "coflow_s")}} for name in runs[0]}


def mechanisms(spec):
    """The mechanisms the plan chooses from (the one with the smaller predicted mean step): ``none``
    under fair sharing, ``pacing`` for coflow and for echelon on FIFO ports, and for echelon on
    priority ports the spec's ``echelon_mechanism`` (``auto``: both; with ``replan``: priority)."""
    if spec.flow_scheduler == "fair":
        return ["none"]
    rule = _rule(spec)
    if rule is None:
        return ["pacing"]
    if rule == "auto":
        return ["priority"] if spec.replan else ["priority", "pacing"]
    return [rule]


def _rule(spec):
    """The spec's ``echelon_mechanism`` where it applies (echelon on priority ports), else None."""
    if spec.flow_scheduler != "echelon" or spec.link.sharing != "priority":
        return None
    return spec.echelon_mechanism or MECHANISMS[0]


def program_jobs(spec):
    return [j for j in spec.jobs if j.is_program]


def plan(spec, routes, hosts_of, shifts_ms, period=None):
    """The decision for every program job: ``{"policy", "period_s", "jobs": {name: {...}}}`` with each
    job's flows (name, src, dst, bytes at reference, d_s, target_s and sending schedule, or None under
    fair sharing) and the model's predicted step and ECT under the chosen policy and under fair sharing."""
    period = period or grid_period(spec, routes, hosts_of)
    fair = steady_steps(spec, routes, hosts_of, shifts_ms, period, "fair")
    candidates = {}
    for m in mechanisms(spec):
        if m == "priority":     # the jobs' order rotates per step: the prediction is the mean over one rotation
            candidates[m] = _mean_steps([steady_steps(spec, routes, hosts_of, shifts_ms, period, "priority", phase)
                                         for phase in range(len(program_jobs(spec)))])
        elif m == "none":
            candidates[m] = fair
        else:
            candidates[m] = steady_steps(spec, routes, hosts_of, shifts_ms, period, spec.flow_scheduler)
    mean_ms = {m: round(float(1000 * sum(v["step_s"] for v in c.values()) / len(c)), 3) for m, c in candidates.items()}
    mechanism = min(mean_ms, key=lambda m: (mean_ms[m], m))
    chosen = candidates[mechanism]
    prioritized = mechanism == "priority"
    fit = calibration.emulator_model(spec.link)             # at the emulated rate: the bytes a burst holds there
    out = {"policy": spec.flow_scheduler, "period_s": period, "hop_latency_s": round(fit["hop_latency_s"], 6),
           "mechanism": {"chosen": mechanism, "rule": _rule(spec), "predicted_step_ms": mean_ms},
           "model": {"flow_latency_s": round(fit["flow_latency_s"], 6), "burst_bytes": round(fit["burst_bytes"]),
                     "start_cost_s": round(fit["start_cost_s"], 6),
                     "op_lateness_ms_mean": round(1000 * sum(fit["op_lateness_s"]) / max(1, len(fit["op_lateness_s"])), 3),
                     "seeds": MODEL_SEEDS if len(fit["op_lateness_s"]) else 1,
                     "calibrated": spec.link.sharing in calibration.LINK_MODEL,
                     "source": "harness.sim.calibration (bench/tcp_sharing.py)"},
           "jobs": {}}
    paced = mechanism == "pacing"
    out["priorities"] = PRIORITY_LEVELS if prioritized else None
    out["replan"] = spec.replan             # harness.planners.replan re-plans the priorities in the run
    jobs = program_jobs(spec)
    for rank, j in enumerate(jobs):
        e = step_of(j)
        res = chosen[j.name]
        prio = list(zip(*step_priorities(e, rank, len(jobs)))) if prioritized else [None] * len(e.flows)
        flows = [{"name": f.name, "src": f.src, "dst": f.dst, "bytes": f.bytes, "d_s": d,
                  "target_s": round(float(res["finish_s"][f.name]), 6) if paced else None,
                  "schedule": res["curve"][f.name] if paced else None, "priority": None if p is None else list(p)}
                 for f, d, p in zip(e.flows, e.d, prio)]
        out["jobs"][j.name] = {
            "kind": j.kind, "flows": flows,
            "ideal_step_s": round(echelon.step_time(e, {}), 6),
            "predicted": {k: round(float(res[k]), 6) for k in ("step_s", "ect_s", "coflow_s")},
            "predicted_fair": {k: round(float(fair[j.name][k]), 6) for k in ("step_s", "ect_s", "coflow_s")}}
    return out


def agent_config(job, decision, scale, dilation=1.0):
    """The part of a program job's agent config that the runner adds to the common keys: flows with
    emulated bytes and targets and sending curves on the wall clock (agents.timing.Dilation),
    per-worker programs, the step grid."""
    wall = Dilation(dilation).wall
    e = step_of(job)
    d = decision["jobs"][job.name]
    flows = [{**f, "bytes": max(1, int(round(f["bytes"] * scale))),
              "target_s": None if f["target_s"] is None else wall(f["target_s"]),
              "schedule": None if f["schedule"] is None else [[wall(t), x] for t, x in f["schedule"]]}
             for f in d["flows"]]
    progs = {str(w): [{**op, "dur_s": wall(op["dur_s"])} for op in ops]
             for w, ops in programs(e, job.workers).items()}
    return {"kind": "program", "flows": flows, "programs": progs, "period_s": wall(decision["period_s"])}


def search_shifts(spec, routes, hosts_of, period):
    """CASSINI's idea for program jobs (``fixed+cassini``): time-shift the jobs' step grids so that
    their communication interleaves. CASSINI's circles need a periodic Up/Down profile, which a
    pipeline step is not; the flow model scores a shift instead (steady state of the grid, under the
    spec's flow scheduler). Greedy in job order: the first job keeps shift 0, each next one takes the
    multiple of period / ``cassini.candidates`` that minimises the model's mean step of the jobs
    placed so far. Returns ({job: shift_ms}, {shift_ms: predicted mean step ms} of the last search)."""
    jobs = program_jobs(spec)
    n = spec.cassini["candidates"]
    shifts, scores = {jobs[0].name: 0.0}, {}
    for j in jobs[1:]:
        scores = {}
        for k in range(n):
            trial = {**shifts, j.name: round(k * period / n * 1000, 3)}
            sub = spec_with_jobs(spec, [x for x in jobs if x.name in trial])
            steps = steady_steps(sub, routes, hosts_of, trial, period, spec.flow_scheduler)
            scores[trial[j.name]] = round(float(1000 * sum(v["step_s"] for v in steps.values()) / len(steps)), 3)
        shifts[j.name] = min(scores, key=lambda s: (scores[s], s))
    return shifts, scores


def spec_with_jobs(spec, jobs):
    import dataclasses
    return dataclasses.replace(spec, jobs=jobs)


def _capacity(spec):
    return {d: spec.reference_gbps for link in spec.topology.links for d, *_ in link.directions()}


def schedule_programs(spec, routes):
    """The plan (``interleave schedule``'s document) of a spec of program jobs (and, with ``fixed``,
    profile jobs beside them): pinned hosts, the spec's shifts (``fixed``) or searched ones
    (``fixed+cassini``), the flow scheduler's decision for the program jobs."""
    hosts = {j.name: j.hosts for j in spec.jobs}
    period = grid_period(spec, routes, hosts)
    search = {}
    if spec.uses_cassini:
        shifts, search = search_shifts(spec, routes, hosts, period)
    else:
        shifts = {j.name: j.time_shift_ms or 0.0 for j in spec.jobs}
    fp = plan(spec, routes, hosts, shifts, period)
    profile_jobs = [j.name for j in spec.jobs if not j.is_program]
    if profile_jobs:
        fp["model_note"] = ("the profile jobs " + ", ".join(profile_jobs) + " are not in the flow model: their "
                            "traffic shares the links in the run, the prediction leaves it out")
    period = fp["period_s"]
    jobs = []
    for j in spec.jobs:         # a profile job (spec with both kinds) runs its profile's iteration
        it_s = period if j.is_program else spec.profiles[j.model].iteration_ms / 1000
        jobs.append(PlannedJob(j.name, j.model, j.hosts, shifts[j.name], round(it_s * 1000, 3), j.iterations,
                               j.arrival_s, j.arrival_s, round(j.arrival_s + j.iterations * it_s, 3)))
    return Plan.of(spec, jobs, candidates_considered=max(1, len(search)),
                   params={"shift_search_ms": search} if search else {}, flow_scheduler=fp)
