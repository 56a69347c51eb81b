"""CASSINI's Algorithm 2 (NSDI'24 §4.2): score candidate placements, pick one, compute time-shifts.

For one candidate: the directed links carrying more than one job are grouped by the set of jobs
they carry (a link group shares one optimisation: the same jobs must use the same shifts on all of
them, so grouping removes loops that would be spurious); each group is optimised (circles.optimise),
the Affinity graph is built with t_j^l as weights and Algorithm 1 assigns one shift per job.
A candidate whose graph has a loop is discarded (the paper) unless every link still gets its
optimised relative shifts ("consistent", an implementer extension). Candidates are ranked by the
mean (or min) of their link scores; a candidate without shared links scores 1.0. With
``unequal_score: sliding`` a link some two of whose jobs no shift keeps apart (``harmonic``) is
scored at the mean over their relative offsets (circles.sliding_score), as they will run.
"""
import itertools
import math
from dataclasses import dataclass, field

from agents.timing import common_divisor
from harness.schedulers import affinity, circles, traffic
from workloads.profiles import stretched


@dataclass
class Evaluation:
    placement: dict
    score: float
    link_scores: dict          # link -> score at the optimised shifts
    link_jobs: dict            # link -> [jobs] (shared links only)
    shifts: dict               # job -> time-shift ms
    loop_free: bool
    consistent: bool
    accepted: bool
    approximate: bool = False
    exact: bool = True
    groups: int = 0
    notes: list = field(default_factory=list)
    periods: dict = field(default_factory=dict)   # job -> the period it runs on (common or padded)


def exact_periods(params):
    """Are unequal periods scored on their exact LCM (``unequal_periods: unified``)?"""
    return params.get("unequal_periods", "unified") == "unified"


def quantised_period(it_ms, quantum_ms):
    return max(quantum_ms, round(it_ms / quantum_ms) * quantum_ms)


def link_demands(placement, profiles_of, routes, memo=None):
    """{link: {job: demand_fn}} for every directed link any job crosses. ``memo`` (a dict kept by
    the caller for one spec, routes, capacity and parameters) keeps each job's demands by its
    hosts and period, so a running job's are computed once, not at every candidate and epoch."""
    out = {}
    for job, hosts in placement.items():
        prof = profiles_of[job]
        key = ("demands", job, tuple(hosts), prof.iteration_ms)
        loads = memo.get(key) if memo is not None else None
        if loads is None:
            loads = {link: traffic.demand_fn(prof, rates) for link, rates in traffic.link_loads(prof, hosts, routes).items()}
            if memo is not None:
                memo[key] = loads
        for link, fn in loads.items():
            out.setdefault(link, {})[job] = fn
    return out


def memo_forget(memo, job):
    """Drop what ``memo`` holds about ``job`` (it finished or left)."""
    for key in [k for k in memo if (k[1] == job if k[0] == "demands" else any(x[0] == job for x in k[1]))]:
        del memo[key]


def _optimised(jobs, links, placement, profiles_of, shared, capacity, params, memo):
    """circles.optimise for one link group, kept in ``memo`` by the group's jobs (with their hosts
    and periods) and links: the same jobs on the same links give the same solution."""
    key = ("group", tuple((j, tuple(placement[j]), profiles_of[j].iteration_ms) for j in jobs), tuple(links))
    sol = memo.get(key) if memo is not None else None
    if sol is None:
        sol = circles.optimise([(profiles_of[j].iteration_ms, [shared[l][j] for l in links]) for j in jobs],
                               capacity, params["discretization_deg"], params["quantum_ms"],
                               params["max_perimeter_ms"], params["exact_max_jobs"], exact_periods(params))
        if memo is not None:
            memo[key] = sol
    return sol


def common_periods(link_jobs, natural, kept, tolerance):
    """The beat each job runs on: {job: period ms}. Jobs joined by shared links (``link_jobs``) form
    components; in each, a job whose own iteration (``natural``) is within ``tolerance`` of the
    component's longest is stretched to it, so that the jobs share one period and the shift that is
    scored is the shift that is kept (the paper's unified circle assumes periods that repeat; two
    periods 5 ms apart slide a whole iteration in 51). ``kept``: {job: period} of running jobs,
    which cannot change theirs; a new job slower than a running one keeps its own."""
    comps = {tuple(m) for m in affinity.components(list(natural), link_jobs.values()).values()}
    out = {j: kept.get(j, natural[j]) for j in natural}
    for members in comps:
        fixed = [kept[j] for j in members if j in kept]
        target = max(fixed) if fixed else max(natural[j] for j in members)
        for j in members:
            if j not in kept and natural[j] <= target <= natural[j] * (1 + tolerance):
                out[j] = target
    return out


def harmonic(a_ms, b_ms, span_a_ms, span_b_ms):
    """Can one time-shift keep two periodic jobs' communication apart for good? The offsets between
    their iteration starts take every value of one class modulo the GCD of their periods, so only
    if both communication spans fit in that GCD (one period: always, as CASSINI aligns any two jobs
    of one period)."""
    return a_ms == b_ms or common_divisor([a_ms, b_ms]) >= span_a_ms + span_b_ms - 1e-9


def padded_periods(own_ms, pad_max_ms):
    """The periods a job may keep on the unified circle: its own and the whole ms above it, up to
    ``pad_max_ms`` more."""
    return [own_ms] + [float(c) for c in range(math.ceil(own_ms), math.floor(own_ms + pad_max_ms + 1e-9) + 1)
                       if c > own_ms]


def unified_periods(link_jobs, periods, kept, pad_max_ms, spans):
    """The periods jobs keep on the unified circle ({job: ms}). Each new job that shares links
    takes, among its own period and the whole milliseconds above it up to ``pad_max_ms`` more, the
    one harmonic (``harmonic``) with the most jobs it shares links with that already have a period
    (running jobs, ``kept``, and longer new jobs, decided first), the least padding among equals:
    e.g. 58 ms beside 300 ms becomes 60. A job harmonic with none keeps its own period (padding
    would buy nothing) and runs free of them; so does a job alone, until one joins it."""
    out = dict(periods)
    partners = {j: set() for j in periods}
    for js in link_jobs.values():
        for j in js:
            partners[j] |= set(js) - {j}
    decided = set(kept)
    for j in sorted((j for j in periods if j not in kept), key=lambda j: (-periods[j], j)):
        others = [k for k in partners[j] if k in decided]
        if others:
            out[j] = max(padded_periods(periods[j], pad_max_ms),
                         key=lambda c: (sum(harmonic(c, out[k], spans[j], spans[k]) for k in others), -c))
        decided.add(j)
    return out


def evaluate(placement, profiles_of, routes, capacity, params, initial_shifts=None, kept_periods=None, memo=None):
    """Optimise shifts for one candidate placement (CASSINI Algorithm 2, inner loop), with the jobs
    on their common periods (``common_periods``) and, with ``unequal_periods: unified``, on periods
    padded to be harmonic with the jobs they share links with (``unified_periods``), scored on the
    exact LCM of their periods, so that the shifts scored there are the shifts kept
    (Evaluation.periods); ``memo``: see link_demands."""
    demands = link_demands(placement, profiles_of, routes, memo)
    shared = {l: d for l, d in demands.items() if len(d) > 1}
    link_jobs = {l: sorted(d) for l, d in shared.items()}
    kept_periods = kept_periods or {}
    periods = common_periods(link_jobs, {j: profiles_of[j].iteration_ms for j in placement}, kept_periods,
                             params.get("common_period", 0.0))
    unified = exact_periods(params)
    if unified:
        periods = unified_periods(link_jobs, periods, kept_periods, params["quantum_ms"],
                                  {j: profiles_of[j].comm_span_ms for j in placement})
    if any(periods[j] != profiles_of[j].iteration_ms for j in placement):
        profiles_of = {j: stretched(profiles_of[j], periods[j]) for j in placement}
        demands = link_demands(placement, profiles_of, routes, memo)
        shared = {l: d for l, d in demands.items() if len(d) > 1}
    groups = {}
    for l, js in sorted(link_jobs.items()):
        groups.setdefault(tuple(js), []).append(l)
    q = params["quantum_ms"]
    # the period each job's shift is taken modulo: the circle's (its exact period on an unequal one)
    unequal = {j for js in groups for j in js if len({profiles_of[k].iteration_ms for k in js}) > 1} if unified else ()
    period = {j: profiles_of[j].iteration_ms if j in unequal else quantised_period(profiles_of[j].iteration_ms, q)
              for j in placement}
    weights, link_scores, group_jobs = {}, {}, {}
    approx, exact = False, True
    for jobs, links in groups.items():
        gid = "+".join(links)
        group_jobs[gid] = list(jobs)
        sol = _optimised(jobs, links, placement, profiles_of, shared, capacity, params, memo)
        approx |= sol.approximate
        exact &= sol.exact
        slides = unified and params.get("unequal_score", "circle") == "sliding" and not all(
            harmonic(periods[a], periods[b], profiles_of[a].comm_span_ms, profiles_of[b].comm_span_ms)
            for a, b in itertools.combinations(jobs, 2))
        for l, s in zip(links, sol.link_scores):
            link_scores[l] = circles.sliding_score([(profiles_of[j].iteration_ms, shared[l][j]) for j in jobs],
                                                   capacity) if slides else s
        for j, t in zip(jobs, sol.shifts_ms):
            weights[(j, gid)] = affinity.wrap(t, period[j])
    g = affinity.build(group_jobs, weights)
    loop_free = not affinity.has_loop(g)
    initial = dict(initial_shifts or {})
    ref = (lambda js: next((j for j in js if j in initial), js[0]))
    shifts = affinity.assign(g, period, reference=ref, initial=initial)
    broken = affinity.preserved(g, shifts, period) if not loop_free else []
    notes = []
    if broken and params.get("loops", "reject") == "joint":
        broken = _joint(g, broken, shared, profiles_of, period, capacity, params, shifts, link_scores, notes)
        approx |= any("approximate" in n for n in notes)
    consistent = not broken
    for j in placement:
        shifts.setdefault(j, float(initial.get(j, 0.0)))
    agg = params.get("aggregate", "mean")
    vals = list(link_scores.values())
    score = 1.0 if not vals else (min(vals) if agg == "min" else sum(vals) / len(vals))
    if broken:
        notes.append(f"loop through {', '.join(sorted(broken)[:4])}: relative shifts cannot all hold")
    return Evaluation(placement, score, link_scores, link_jobs, shifts, loop_free, consistent, consistent,
                      approx, exact, len(groups), notes, periods)


def _joint(g, broken, shared, profiles_of, period, capacity, params, shifts, link_scores, notes):
    """``cassini.loops: joint`` (an extension; the paper discards looped candidates): a connected
    component whose loop breaks Theorem 1 is optimised as one, over all its links at once (a job
    puts nothing on a link it does not cross), when it has at most ``exact_max_jobs`` + 1 jobs.
    Its shifts then hold on every link by construction. Returns the groups still broken."""
    import networkx as nx
    still = []
    for comp in nx.connected_components(g):
        gids = sorted(n[1] for n in comp if n[0] == "link")
        if not set(gids) & set(broken):
            continue
        jobs = sorted(n[1] for n in comp if n[0] == "job")
        if len(jobs) > params["exact_max_jobs"] + 1:
            still += [x for x in gids if x in broken]
            continue
        links = [l for gid in gids for l in gid.split("+")]
        zero = lambda t: 0.0 * t  # noqa: E731
        sol = circles.optimise([(profiles_of[j].iteration_ms, [shared[l].get(j, zero) for l in links]) for j in jobs],
                               capacity, params["discretization_deg"], params["quantum_ms"],
                               params["max_perimeter_ms"], params["exact_max_jobs"] + 1, exact_periods(params))
        for l, sc in zip(links, sol.link_scores):
            link_scores[l] = sc
        base = sol.shifts_ms[0]
        for j, t in zip(jobs, sol.shifts_ms):
            shifts[j] = affinity.wrap(t - base + shifts[jobs[0]], period[j])
        notes.append(f"looped component {', '.join(jobs)} optimised jointly over {len(links)} links"
                     + (" (approximate)" if sol.approximate else ""))
    return still


def score_placement(placement, profiles_of, routes, capacity, params, shifts, with_jobs=False, memo=None):
    """Link scores of a placement running with given shifts (what a base scheduler gets);
    with ``with_jobs`` also {link: [jobs]} of the shared links."""
    demands = link_demands(placement, profiles_of, routes, memo)
    out, jobs = {}, {}
    for l, d in sorted(demands.items()):
        if len(d) > 1:
            js = jobs[l] = sorted(d)
            out[l] = circles.score_at([(profiles_of[j].iteration_ms, d[j]) for j in js], capacity,
                                      [shifts.get(j, 0.0) for j in js], params["discretization_deg"],
                                      params["quantum_ms"], params["max_perimeter_ms"], exact_periods(params))
    return (out, jobs) if with_jobs else out


def choose(cands, profiles_of, routes, capacity, params, initial_shifts=None, kept_periods=None, memo=None):
    """Best accepted candidate (highest score, then lowest index); None if all have loops."""
    evals = [evaluate(c, profiles_of, routes, capacity, params, initial_shifts, kept_periods, memo) for c in cands]
    ok = [(i, e) for i, e in enumerate(evals) if e.accepted]
    if not ok:
        return None, evals
    i, best = max(ok, key=lambda ie: (ie[1].score, -ie[0]))
    return i, evals
