"""Mean-field iteration times for large components of free-running jobs (the fluid model's stand-in
where running it event by event costs too much: harness.sim.engine.MEANFIELD_MIN_JOBS).

Each job's phases are treated as on for a share of its iteration (its duty) at independent times,
as free-running jobs of different periods slide past each other. While a phase of job j sends over
link l with ``m`` connections, the other jobs' connections on l number N ~ Binomial(n, c / n), n the
most they can open there, c their expected count (sum of duty x multiplicity); each connection gets
its max-min fair share cap / (m + N), at most the phase's own rate c_p, so the phase lasts
volume x E[max(1 / c_p, (m + N) / cap)] over its slowest link. A job's iteration = its compute gaps +
its phases (never below the profile's); duties follow from those times: iterated to a fixed point
(from ``warm``, the phase times of an earlier solution, when given). ECN marks: the fluid model's
rule (MARKS_PER_GBIT of what crosses a link while its offered load exceeds capacity) with the
probability of that from the same count. Alignment is ignored: only for components whose jobs all
run free.
"""
import math
from dataclasses import dataclass

import numpy as np

from harness.sim.calibration import MARKS_PER_GBIT

MAX_ROUNDS, TOLERANCE, DAMPING = 200, 1e-4, 0.8


@dataclass
class Prepared:
    """A job's arrays, computed once per placement: per phase its volume, rate, latency and duration;
    per (phase, link) entry the phase, the link's number (``link_ids``) and the multiplicity."""
    name: str
    floor: float
    compute: float
    span: float
    volume: np.ndarray
    rate: np.ndarray
    latency: np.ndarray
    duration: np.ndarray
    t_phase: np.ndarray
    t_link: np.ndarray
    t_mult: np.ndarray


def prepare(job, link_ids):
    """``job`` (harness.sim.fluid.SimJob) as a Prepared; ``link_ids``: {directed link: int}."""
    ph = job.profile.phases
    entries = [(i, link_ids[l], m) for i, pl in enumerate(job.phase_links) for l, m in pl.items()]
    return Prepared(job.name, job.profile.iteration_ms, job.profile.iteration_ms - sum(p.duration_ms for p in ph),
                    job.profile.comm_span_ms, np.array([p.gbps * p.duration_ms for p in ph], dtype=float),
                    np.array(job.phase_caps, dtype=float), np.array(job.phase_latency, dtype=float),
                    np.array([p.duration_ms for p in ph], dtype=float),
                    np.array([e[0] for e in entries], dtype=int), np.array([e[1] for e in entries], dtype=int),
                    np.array([e[2] for e in entries], dtype=float))


def iteration_times(jobs, capacity, warm=None):
    """({job: iteration ms}, {job: ECN marks per iteration}, {job: communication ms: the profile's
    span, longer by what its phases took over their durations}, {job: its phases' sending ms}) of
    ``jobs`` (SimJob, alignment free, or Prepared) under ``capacity`` {directed link: Gbit/s} (or, with
    Prepared jobs, a capacity array indexed by their link numbers)."""
    if jobs and not isinstance(jobs[0], Prepared):
        ids = {l: k for k, l in enumerate(capacity)}
        jobs, capacity = [prepare(j, ids) for j in jobs], np.array(list(capacity.values()), dtype=float)
    nj = len(jobs)
    n_ph = np.array([len(j.volume) for j in jobs], dtype=int)
    first = np.concatenate([[0], np.cumsum(n_ph)[:-1]]).astype(int)
    job_of = np.repeat(np.arange(nj), n_ph)
    volume = np.concatenate([j.volume for j in jobs]) if nj else np.zeros(0)
    if not len(volume):
        return ({j.name: j.floor for j in jobs}, {j.name: 0.0 for j in jobs}, {j.name: j.span for j in jobs},
                {j.name: np.zeros(0) for j in jobs})
    rate = np.concatenate([j.rate for j in jobs])
    latency = np.concatenate([j.latency for j in jobs])
    duration = np.concatenate([j.duration for j in jobs])
    floor = np.array([j.floor for j in jobs])
    compute = np.array([j.compute for j in jobs])
    n_e = np.array([len(j.t_phase) for j in jobs], dtype=int)
    tr = np.concatenate([j.t_phase for j in jobs]) + np.repeat(first, n_e)
    links, tl = np.unique(np.concatenate([j.t_link for j in jobs]), return_inverse=True)
    tm = np.concatenate([j.t_mult for j in jobs])
    cap = np.asarray(capacity, dtype=float)[links]
    nl = len(links)
    tj = job_of[tr]
    cells, cell = np.unique(tj * nl + tl, return_inverse=True)     # (job, link) pairs
    most = np.zeros(len(cells))           # a job's connections on a link: its largest phase's
    np.maximum.at(most, cell, tm)
    n_other = np.rint(np.bincount(cells % nl, most, minlength=nl)[tl] - most[cell]).astype(int)
    inv = 1.0 / np.maximum(rate, 1e-12)
    inv_t = inv[tr]
    # E[max(1/c, (m + N)/cap)] = (m + E[N])/cap + sum over k < k_fast of P(N = k) (1/c - (m + k)/cap):
    # only the few counts at which the phase still runs at its own rate need their probability
    k_fast = np.maximum(np.ceil(cap[tl] * inv_t - tm - 1e-9), 0).astype(int)
    need = np.ceil(np.maximum(cap[tl] - tm * rate[tr], 0.0) * inv_t + 1e-9).astype(int)   # overload (marks)
    ks = np.arange(max(int(k_fast.max(initial=0)), int(need.max(initial=0)), 1))
    gain = np.maximum(inv_t[:, None] - (tm[:, None] + ks[None, :]) / cap[tl][:, None], 0.0) * (ks[None, :] < k_fast[:, None])
    log_choose = np.array([[_log_choose(n, k) for k in ks] for n in range(int(n_other.max(initial=0)) + 1)])[n_other]
    rest = np.maximum(n_other[:, None] - ks[None, :], 0)
    ctx = (latency, compute, floor, job_of, tr, tl, tm, tj, cell, nj, nl, n_other, ks, log_choose, rest)
    alone = volume * inv
    send = alone.copy()
    if warm:
        for k, j in enumerate(jobs):
            w = warm.get(j.name)
            if w is not None and len(w) == n_ph[k]:
                send[first[k]:first[k] + n_ph[k]] = w
    for _ in range(MAX_ROUNDS):
        lam, pk = _others(send, *ctx)
        slow = (tm + lam) / cap[tl] + (pk * gain).sum(axis=1)       # ms per (Gbit/s x ms) of volume
        worst = inv.copy()
        np.maximum.at(worst, tr, slow)
        new = volume * worst
        done = np.max(np.abs(new - send) / np.maximum(send, 1e-9)) < TOLERANCE
        send = new if done else DAMPING * new + (1 - DAMPING) * send
        if done:
            break
    lam, pk = _others(send, *ctx)
    it = np.maximum(floor, compute + np.bincount(job_of, send + latency, minlength=nj))
    # marks: the probability that the link's offered load (own + others at this phase's rate) exceeds it
    p_over = 1.0 - (pk * (ks[None, :] < need[:, None])).sum(axis=1)
    marks = np.bincount(tj, p_over * tm * volume[tr] / 1000.0 * MARKS_PER_GBIT, minlength=nj)
    comm = np.array([j.span for j in jobs]) + np.bincount(job_of, send + latency - duration, minlength=nj)
    names = [j.name for j in jobs]
    return (dict(zip(names, it.tolist())), dict(zip(names, marks.tolist())), dict(zip(names, comm.tolist())),
            {n: send[first[k]:first[k] + n_ph[k]] for k, n in enumerate(names)})


def _log_choose(n, k):
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) if k <= n else -np.inf


def _others(send, latency, compute, floor, job_of, tr, tl, tm, tj, cell, nj, nl, n_other, ks, log_choose, rest):
    """Per (phase, link) entry: the other jobs' expected active connections on the link, and the
    probabilities of ``ks`` of them, Binomial(their most connections, expected connections / that)."""
    it = np.maximum(floor, compute + np.bincount(job_of, send + latency, minlength=nj))
    w = send[tr] / it[tj] * tm
    lam = np.bincount(tl, w, minlength=nl)[tl] - np.bincount(cell, w)[cell]
    lam = np.maximum(lam, 0.0)
    p = np.clip(lam / np.maximum(n_other, 1), 1e-12, 1 - 1e-12)[:, None]
    logpk = log_choose + ks[None, :] * np.log(p) + rest * np.log1p(-p)
    return lam, np.exp(logpk)
