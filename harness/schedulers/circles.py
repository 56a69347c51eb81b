"""CASSINI's geometric abstraction (NSDI'24 §3) and the per-link optimisation of its Table 1.

Implementer decisions (the paper leaves them open; reference notes §1.16):
  * iteration times are quantised to ``quantum_ms`` (default 5 ms) before the LCM; when the LCM
    (the unified perimeter) exceeds ``max_perimeter_ms`` (default 10 s) the quantum grows through
    QUANTA until it fits, and the result says ``approximate: true``;
  * bw_circle_j(alpha) is the *mean* demand of job j over each angle bin (bytes are conserved);
    the discretization applies to the circle of the shortest period on the link: |A| = 360 /
    discretization_deg bins (default 5 deg -> 72) per shortest period, so a unified circle of several
    periods keeps the same time step (at most MAX_BINS bins);
  * the exhaustive search stops at EXACT_MAX_CELLS combinations x bins x links (memory): beyond,
    the descent below;
  * the search fixes the first job's rotation at 0 (only relative rotations matter) and is exact
    (vectorised exhaustive) up to ``exact_max_jobs`` jobs; beyond, coordinate descent from a greedy
    start (tested against the exact search on small cases);
  * among equally good rotations the one in the middle of its run of optima is taken, so a shift
    tolerates drift in both directions.
"""
import math
from dataclasses import dataclass
from functools import reduce

import numpy as np

from agents.timing import perimeter

QUANTA = (5, 10, 20, 25, 50, 100, 200, 250, 500, 1000)
MAX_BINS = 4096
EXACT_MAX_CELLS = 30_000_000   # float64 cells: 240 MB at most


def bins_for(perimeter_ms, periods_ms, discretization_deg):
    """Angle bins of a unified circle: ``360 / discretization_deg`` per shortest period."""
    per = int(round(360.0 / discretization_deg))
    return int(min(MAX_BINS, max(per, round(per * perimeter_ms / min(periods_ms)))))


def unified_perimeter(iter_ms, quantum_ms=5.0, max_perimeter_ms=10000.0, exact=False):
    """(perimeter_ms, quantised iteration times, quantum used, approximate?). With ``exact`` and
    periods that differ, their own LCM (to a thousandth of a ms) when it is at most
    ``max_perimeter_ms`` (quantum 0: nothing rounded; jobs on CASSINI's unified circle run on
    exactly these periods); beyond it, rounded as without ``exact`` and always approximate."""
    if exact and len(set(iter_ms)) > 1:
        p = perimeter(iter_ms)
        if p <= max_perimeter_ms:
            return p, list(iter_ms), 0.0, False
        p, iq, q, _approx = unified_perimeter(iter_ms, quantum_ms, max_perimeter_ms)
        return p, iq, q, True           # the jobs do not run on the rounded periods scored
    quanta = [q for q in QUANTA if q >= quantum_ms] or [quantum_ms]
    if quantum_ms not in quanta:
        quanta = [quantum_ms] + quanta
    for q in quanta:
        units = [max(1, int(round(t / q))) for t in iter_ms]
        lcm = reduce(lambda a, b: a * b // math.gcd(a, b), units)
        if lcm * q <= max_perimeter_ms or q == quanta[-1]:
            return lcm * q, [u * q for u in units], q, q != quantum_ms
    raise AssertionError


def bw_circle(demand_fn, period_ms, perimeter_ms, bins, samples_per_bin=16):
    """Mean demand per angle bin of a job whose pattern repeats every ``period_ms``."""
    t = (np.arange(bins * samples_per_bin) + 0.5) * perimeter_ms / (bins * samples_per_bin)
    d = demand_fn(np.mod(t, period_ms))
    return d.reshape(bins, samples_per_bin).mean(axis=1)


def score_of(total, capacity):
    """Eq. 1-2: 1 - sum(excess) / (|A| * C), for one link's total demand per angle."""
    excess = np.clip(total - capacity, 0.0, None)
    return 1.0 - excess.sum(axis=-1) / (total.shape[-1] * capacity)


@dataclass
class LinkSolution:
    rotations: list       # bins, per job (exact search: first job 0; heuristic: any)
    shifts_ms: list       # t_j^l (Eq. 5), per job, in [0, quantised iteration)
    periods_ms: list      # the quantised iteration times the circle used
    score: float          # mean over the links optimised together
    link_scores: list     # per link
    perimeter_ms: float
    bins: int
    approximate: bool
    exact: bool


def _center(ks, best, scores_fn, k_max):
    """Move each coordinate to the middle of its circular run of optimal values."""
    ks = list(ks)
    for j in range(len(ks)):
        vals = scores_fn(j, ks)
        opt = np.isclose(vals, best, atol=1e-12) | (vals > best)
        n = len(vals)
        if opt.all() or not opt[ks[j]]:
            continue
        # walk left and right from the current optimum within the run
        left = 0
        while opt[(ks[j] - left - 1) % n] and left < n:
            left += 1
        right = 0
        while opt[(ks[j] + right + 1) % n] and right < n:
            right += 1
        ks[j] = (ks[j] - left + (left + right) // 2) % n
    return ks


def _descent(n, k_max, stacks, rolled, capacity, coord_scores, total_score):
    """Greedy start then coordinate descent, restarted with each job placed first; best kept."""
    best_ks, best = None, -np.inf
    by_size = sorted(range(n), key=lambda j: -float(stacks[j].sum()))
    for first in by_size:
        order = [first] + [j for j in by_size if j != first]
        ks = [0] * n
        placed = [first]
        for j in order[1:]:
            rest = sum(rolled[i][ks[i]] for i in placed)
            vals = score_of(rest[None] + rolled[j], capacity).mean(axis=-1)
            ks[j] = int(np.argmax(vals))
            placed.append(j)
        for _ in range(50):
            improved = False
            for j in range(n):
                vals = coord_scores(j, ks)
                b = int(np.argmax(vals))
                if vals[b] > vals[ks[j]] + 1e-12:
                    ks[j], improved = b, True
            if not improved:
                break
        # only relative rotations matter, so job 0 keeps its own (re-basing it to 0 would need
        # fractional bins when a period is not a whole number of bins)
        s = total_score(ks)
        if s > best + 1e-12:
            best_ks, best = ks, s
    return best_ks


def optimise(jobs, capacity, discretization_deg=5.0, quantum_ms=5.0, max_perimeter_ms=10000.0,
             exact_max_jobs=3, exact_periods=False):
    """Per-link optimisation for one link, or several links carrying the same jobs.

    jobs: list of (iteration_ms, [demand_fn per link]) where demand_fn(t_ms) gives the job's
    demand on that link at time t within its iteration; ``exact_periods``: see unified_perimeter.
    Returns a LinkSolution.
    """
    iters = [j[0] for j in jobs]
    p, iq, _q, approx = unified_perimeter(iters, quantum_ms, max_perimeter_ms, exact_periods)
    bins = bins_for(p, iq, discretization_deg)
    n_links = len(jobs[0][1])
    # circles[j][l] : (bins,)
    circles = [[bw_circle(fn, iq[j], p, bins) for fn in jobs[j][1]] for j in range(len(jobs))]
    k_max = [max(1, int(math.ceil(bins * iq[j] / p - 1e-9))) for j in range(len(jobs))]
    stacks = [np.stack(c) for c in circles]                       # (links, bins) per job
    rolled = [np.stack([np.roll(s, k, axis=-1) for k in range(k_max[j])]) for j, s in enumerate(stacks)]
    # rolled[j]: (k_max_j, links, bins)

    def total_score(ks):
        tot = sum(rolled[j][k] for j, k in enumerate(ks))
        return float(score_of(tot, capacity).mean())

    def coord_scores(j, ks):
        rest = sum(rolled[i][k] for i, k in enumerate(ks) if i != j)
        return score_of(rest[None] + rolled[j], capacity).mean(axis=-1)

    n = len(jobs)
    exact = n <= exact_max_jobs and math.prod(k_max[1:]) * bins * n_links <= EXACT_MAX_CELLS
    if n == 1:
        ks = [0]
    elif exact:
        acc = rolled[0][0][None]                                   # (1, links, bins)
        idx = [np.zeros(1, dtype=int)]
        for j in range(1, n):
            acc = (acc[:, None] + rolled[j][None]).reshape(-1, n_links, bins)
            idx = [np.repeat(a, k_max[j]) for a in idx] + [np.tile(np.arange(k_max[j]), len(idx[0]))]
        scores = score_of(acc, capacity).mean(axis=-1)
        b = int(np.argmax(scores))
        ks = [int(a[b]) for a in idx]
    else:
        ks = _descent(n, k_max, stacks, rolled, capacity, coord_scores, total_score)
    best = total_score(ks)
    if n > 1:
        ks = _center(ks, best, coord_scores, k_max)
    tot = sum(rolled[j][k] for j, k in enumerate(ks))
    link_scores = [float(s) for s in score_of(tot, capacity)]
    shifts = [float((k * p / bins) % iq[j]) for j, k in enumerate(ks)]  # k >= 0: no negative wrap
    return LinkSolution(ks, shifts, iq, float(np.mean(link_scores)), link_scores, p, bins, approx, exact or n == 1)


def score_at(jobs, capacity, shifts_ms, discretization_deg=5.0, quantum_ms=5.0, max_perimeter_ms=10000.0,
             exact_periods=False):
    """Score of one link when each job runs with a given time-shift (no optimisation).

    jobs: list of (iteration_ms, demand_fn); shifts_ms: one per job.
    """
    p, iq, _q, _approx = unified_perimeter([j[0] for j in jobs], quantum_ms, max_perimeter_ms, exact_periods)
    bins = bins_for(p, iq, discretization_deg)
    total = np.zeros(bins)
    for (it, fn), period, shift in zip(jobs, iq, shifts_ms):
        total += bw_circle(lambda t, fn=fn, s=shift, per=period: fn(np.mod(t - s, per)), period, p, bins)
    return float(score_of(total, capacity))


def sliding_score(jobs, capacity, samples=720):
    """Eq. 1-2's score of one link whose jobs slide through each other (no common beat: every
    relative offset occurs equally often, so each job's phase is independent and uniform):
    1 - E[excess] / C, the excess of the sum of the jobs' demands, each at an independent uniform
    time of its iteration. jobs: list of (iteration_ms, demand_fn); each demand is sampled at
    ``samples`` points of its iteration (exact for piecewise-constant demands whose phases are
    whole multiples of iteration / samples)."""
    dist = {0.0: 1.0}                   # total demand -> probability
    for it, fn in jobs:
        vals, counts = np.unique(np.round(fn((np.arange(samples) + 0.5) * it / samples), 9), return_counts=True)
        nxt = {}
        for total, p in dist.items():
            for v, c in zip(vals, counts):
                k = round(total + float(v), 9)
                nxt[k] = nxt.get(k, 0.0) + p * c / samples
        dist = nxt
    return 1.0 - sum(p * max(0.0, d - capacity) for d, p in dist.items()) / capacity
