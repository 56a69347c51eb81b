"""Fluid model of jobs that share links: their iteration times and ECN marks while the set is fixed.

The unit of work is a *component*: running jobs joined by the directed links they share. Each job
replays its profile closed-loop exactly as the emulator's agent does (agents/agent.py): compute
gaps alternate with communication phases; a phase carries ``gbps x duration_ms`` of volume per
transfer and may not go faster than its profile rate; no iteration is shorter than the profile's.
During a phase, a job's transfers cross links with a multiplicity (how many of its transfers a
link carries, from harness.schedulers.traffic); rates are max-min fair per connection (progressive
filling, every connection of every active phase rising together) under per-link capacities. Links
with a propagation delay (``link.delay_ms``) keep each phase's data in flight for its steps times
the slowest route's one-way delay (``attach_links``).

Alignment as the agents do it (the rule is agents.timing's): ``group`` jobs (CASSINI's, keeping
their shifts) align to their slowest member: a job that starts an iteration late raises the group's
lag, and every member waits for ``grid + lag``; ``grid`` jobs wait for their own slot (the next one
when late by more than timing.REALIGN_FRAC); ``free`` jobs start each iteration when the previous
one ends.

ECN marks are an estimate: while the offered load of a link (every active transfer at its profile
rate) exceeds its capacity, the queue sits above the marking threshold and ``MARKS_PER_GBIT``
of every gigabit sent through it is marked (calibrated on the emulator: see harness.sim.calibration).
Units: time in ms, rates in Gbit/s at the reference line rate, volumes in Gbit/s x ms.
"""
from dataclasses import dataclass, field

import numpy as np

from harness.schedulers.traffic import link_loads, transfers
from harness.sim.calibration import MARKS_PER_GBIT
from agents import patterns, timing

EPS = 1e-9
MAX_STEPS = 5_000


@dataclass
class SimJob:
    name: str
    profile: object                 # workloads.profiles.Profile
    hosts: list
    shift_ms: float = 0.0
    group: object = None            # jobs with the same non-None group align to each other
    phase_links: list = field(default_factory=list)   # per phase: {link: multiplicity}
    alignment: str = None           # grid | group | free (timing.ALIGNMENTS); default: group if grouped
    phase_caps: list = None         # per phase: its rate alone (Gbit/s); default the profile's
    phase_latency: list = None      # per phase: ms its data is in flight after the last byte is sent

    def __post_init__(self):
        if self.alignment is None:
            self.alignment = "group" if self.group is not None else "free"
        if not self.phase_links:
            self.phase_links = [dict() for _ in self.profile.phases]
        if self.phase_caps is None:
            self.phase_caps = [ph.gbps for ph in self.profile.phases]
        if self.phase_latency is None:
            self.phase_latency = [0.0] * len(self.profile.phases)


def attach_links(job, routes, delay_ms=None, line_gbps=None):
    """Fill ``job.phase_links`` from the routes: per phase, {directed link: transfers over it}.

    With ``delay_ms`` (a route's one-way propagation delay) the phase's steps behave as the agent's:
    each waits for its peers' data, ``latency`` = steps x the slowest route's delay in all, and the
    agent takes its calibrated step latency off the pacing schedule, sending faster (at most at
    ``line_gbps``) so that, alone, the phase lasts max(profile duration, volume / line + latency)."""
    per_phase = [dict() for _ in job.profile.phases]
    for link, loads in link_loads(job.profile, job.hosts, routes).items():
        for i, gbps in loads:
            rate = job.profile.phases[i].gbps
            if rate > 0:
                per_phase[i][link] = gbps / rate
    job.phase_links = per_phase
    if delay_ms is not None:
        caps, lat = [], []
        for ph in job.profile.phases:
            d = max((delay_ms(routes[t]) for t in transfers(ph.pattern, job.hosts)), default=0.0)
            latency = patterns.steps(ph.pattern, len(job.hosts)) * d
            volume = ph.gbps * ph.duration_ms
            sending = max(ph.duration_ms - latency, volume / line_gbps)
            caps.append(volume / sending if sending > 0 else ph.gbps)
            lat.append(latency)
        job.phase_caps, job.phase_latency = caps, lat
    return job


def maxmin_matrix(m, caps, capacity):
    """``maxmin`` on arrays: ``m`` (flows x links) multiplicities, ``caps`` per-flow caps,
    ``capacity`` per link. Returns the per-connection rate of each flow."""
    k = len(caps)
    rate = np.zeros(k)
    left = capacity.astype(float).copy()
    unfrozen = np.ones(k, dtype=bool)
    level = 0.0
    while unfrozen.any():
        w = m[unfrozen].sum(axis=0)
        used = w > 0
        if not used.any():          # the rest cross no link: each at its cap
            rate[unfrozen] = caps[unfrozen]
            break
        step = float(np.min(caps[unfrozen])) - level
        if used.any():
            step = min(step, float(np.min(left[used] / w[used])))
        step = max(step, 0.0)
        level += step
        left -= step * w
        sat = used & (left <= EPS * np.maximum(1.0, capacity))
        now = unfrozen & ((caps - level <= EPS) | (m[:, sat].sum(axis=1) > 0))
        if not now.any():
            now = unfrozen.copy()
        rate[now] = level
        unfrozen &= ~now
    return rate


@dataclass
class Outcome:
    iteration_ms: dict      # job -> np.array of iteration times (start to next start), warm-up dropped
    marks_per_iteration: dict
    realignments_per_iteration: dict
    simulated_ms: float
    comm_ms: dict = None    # job -> mean communication time (first phase start to last phase end), warm-up dropped




class _State:
    """One job's position in its iteration: ``mode`` wait | gap | comm | flight (its last data on the
    way: ``phase_latency``) | tail, ``left`` ms (or volume in comm)."""

    def __init__(self, job):
        self.job, self.p = job, job.profile
        self.order = sorted(range(len(self.p.phases)), key=lambda i: self.p.phases[i].start_ms)
        self.k, self.pos, self.start, self.starts = 0, -1, 0.0, []
        self.mode, self.left, self.phase = "wait", job.shift_ms, None
        self.marks, self.realign = 0.0, 0
        self.c0 = self.c1 = None        # this iteration's first communication start, last end
        self.comms = []                 # communication time of each finished iteration

    def start_iteration(self, now):
        if self.c0 is not None and self.c1 is not None:
            self.comms.append(self.c1 - self.c0)
        self.c0 = self.c1 = None
        self.start = now
        self.starts.append(now)
        self.pos = -1
        self.next_stage(now)

    def next_stage(self, now):
        p = self.p
        self.pos += 1
        if self.pos < len(self.order):
            i = self.order[self.pos]
            ph = p.phases[i]
            prev_end = p.phases[self.order[self.pos - 1]].end_ms if self.pos else 0.0
            self.mode, self.left, self.phase = "gap", max(0.0, ph.start_ms - prev_end), i
            if self.left <= EPS:
                self.mode, self.left = "comm", ph.gbps * ph.duration_ms
                self.c0 = now if self.c0 is None else self.c0
        else:      # the tail, then the floor at the profile's iteration time
            last = p.phases[self.order[-1]].end_ms if self.order else 0.0
            self.mode = "tail"
            self.left = max(p.iteration_ms - last, self.start + p.iteration_ms - now, 0.0)

    def iterations(self, warmup):
        d = np.diff(np.array(self.starts))
        return d[warmup:] if len(d) > warmup else d

    def comm_ms(self, warmup):
        c = self.comms[warmup:] if len(self.comms) > warmup else self.comms
        return float(np.mean(c)) if c else None


def _iteration_due(s, now, lag):
    """The previous iteration (or the initial shift) of ``s`` is over: start now, or wait for the
    group (``lag``: each group's accumulated lag, ms) or the grid."""
    j = s.job
    if j.alignment == "group" and j.group is not None and s.starts:
        late = now - (timing.slot_time(0.0, j.shift_ms, s.k, s.p.iteration_ms) + lag[j.group])
        if late > timing.LAG_TOLERANCE_MS:
            lag[j.group] += late
            s.realign += timing.realigns(late, s.p.iteration_ms)
        elif late < -EPS:
            s.mode, s.left = "wait", -late
            return
    elif j.alignment == "grid" and s.starts:
        start, realigned = timing.grid_start(now, j.shift_ms, s.p.iteration_ms)
        s.realign += realigned
        if start > now + EPS:
            s.mode, s.left = "wait", start - now
            return
    s.start_iteration(now)


def _phase_matrix(st, capacity):
    """(row of each (job, phase), multiplicity matrix phases x links, capacity per link)."""
    links = sorted({l for s in st.values() for pl in s.job.phase_links for l in pl})
    col = {l: i for i, l in enumerate(links)}
    cap_vec = np.array([capacity[l] for l in links], dtype=float)
    row, rows = {}, []
    for n, s in st.items():
        for i, pl in enumerate(s.job.phase_links):
            v = np.zeros(len(links))
            for l, mult in pl.items():
                v[col[l]] = mult
            row[(n, i)] = len(rows)
            rows.append(v)
    mat = np.array(rows) if rows else np.zeros((0, len(links)))
    return row, mat, cap_vec


def _horizon(st, horizon_iterations, warmup):
    """(simulated ms to reach, iterations every job must have started) before the run may stop."""
    periods = sorted(s.p.iteration_ms for s in st.values())
    # long enough for the median job's ``horizon_iterations`` (different periods slide against each
    # other: this covers many relative phases) and for every job's warm-up and a few iterations
    until_ms = horizon_iterations * periods[len(periods) // 2]
    # large components (over 4 jobs) average over many jobs: fewer iterations each (at least 10 of
    # the median period), one measured iteration per job after warm-up, and at most MAX_STEPS
    # events once every job has it (a 3 s GPT-3 beside a 58 ms ResNet50 costs thousands of events)
    need = warmup + 3
    if len(st) > 4:
        until_ms = max(10, horizon_iterations * 4 / len(st)) * periods[len(periods) // 2]
        need = warmup + 1
    return until_ms, need


def _advance_stage(s, t, lag):
    """``s`` reached the end of its wait, gap, phase or tail at ``t``: move it on."""
    if s.mode == "wait":
        if s.starts:
            s.start_iteration(t)
        else:
            _iteration_due(s, t, lag)
    elif s.mode == "gap":
        ph = s.p.phases[s.phase]
        s.mode, s.left = "comm", ph.gbps * ph.duration_ms
        s.c0 = t if s.c0 is None else s.c0
    elif s.mode == "comm" and s.job.phase_latency[s.phase] > 0:
        s.mode, s.left = "flight", s.job.phase_latency[s.phase]
    elif s.mode in ("comm", "flight"):
        s.c1 = t
        s.next_stage(t)
    else:
        s.k += 1
        _iteration_due(s, t, lag)


def simulate(jobs, capacity, horizon_iterations=30, max_ms=120_000.0, warmup=2, marks_per_gbit=None):
    """Run the component until every job started ``horizon_iterations`` + 1 iterations (or ``max_ms``)."""
    mpg = MARKS_PER_GBIT if marks_per_gbit is None else marks_per_gbit
    st = {j.name: _State(j) for j in jobs}
    lag = {j.group: 0.0 for j in jobs if j.group is not None}
    t = 0.0
    names = list(st)
    row, mat, cap_vec = _phase_matrix(st, capacity)
    until_ms, need = _horizon(st, horizon_iterations, warmup)
    steps = 0
    while t < max_ms and steps < 2_000_000 and not (
            (t >= until_ms or steps >= MAX_STEPS) and all(len(s.starts) > need for s in st.values())):
        steps += 1
        act = [n for n in names if st[n].mode == "comm"]
        rates = {}
        if act:
            idx = [row[(n, st[n].phase)] for n in act]
            m = mat[idx]
            caps = np.array([st[n].job.phase_caps[st[n].phase] for n in act])
            r = maxmin_matrix(m, caps, cap_vec)
            rates = dict(zip(act, r))
        dt = max_ms - t
        for n, s in st.items():
            if s.mode == "comm":
                if rates[n] > EPS:
                    dt = min(dt, s.left / rates[n])
            else:
                dt = min(dt, s.left)
        dt = max(dt, 0.0)
        if act and dt > 0:
            over = (caps @ m) > cap_vec * (1 + 1e-6)
            if over.any():
                through = m[:, over].sum(axis=1)
                for n, rr, th in zip(act, r, through):
                    if th > 0:
                        st[n].marks += rr * th * dt / 1000.0 * mpg
        t += dt
        for n, s in st.items():
            s.left -= rates[n] * dt if s.mode == "comm" else dt
        for s in st.values():
            if s.left > 1e-9 * max(1.0, abs(dt)) and s.left > EPS:
                continue
            _advance_stage(s, t, lag)
    out_it, out_marks, out_re, out_comm = {}, {}, {}, {}
    for n, s in st.items():
        out_comm[n] = s.comm_ms(warmup)
        its = s.iterations(warmup)
        out_it[n] = its if len(its) else np.array([s.p.iteration_ms])
        k = max(1, len(s.starts))
        out_marks[n] = s.marks / k
        out_re[n] = s.realign / k
    return Outcome(out_it, out_marks, out_re, t, out_comm)
