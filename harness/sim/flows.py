"""Flow-level simulation of EchelonFlows sharing links, under a flow scheduler (fair | coflow | echelon).

Each job is one step of an EchelonFlow (workloads.echelon) whose ranks/stages sit on hosts; its
compute ops run on their resource in order, a flow is released when the op it follows ends and
arrives when its bytes have moved, and an op that consumes a flow cannot start before it arrived.
A connection (job, source host, destination host) sends its flows one after another in release
order, as the emulator's agents do (workloads.stage). Link rates each instant (capacity in Gbit/s,
bytes converted), among the flows at the head of their connection:

  fair     per-flow max-min fair sharing (what TCP approximates);
  coflow   Varys-like: jobs ordered by smallest bottleneck (SEBF); within a job, every released flow
           gets remaining / Gamma so that they all finish together (MADD); leftover shared fairly;
  echelon  jobs ordered by smallest bottleneck; within a job, the reference R is the earliest at
           which every released flow could still meet its slot (R = max_i(now + rem_i / path_i - d_i)),
           and flow i gets just rem_i / (R + d_i - now) (earliest slot first, within what is left);
           leftover shared fairly (finishing early never hurts the consumer).
Results per job: step time (consumer), ECT = max_i(F_i - d_i) with F relative to the job's start,
coflow completion, and each flow's finish.
"""
from dataclasses import dataclass

import numpy as np

from harness.routing import directed_links
from harness.sim.fluid import maxmin_matrix

POLICIES = ("fair", "coflow", "echelon")
EPS = 1e-12


@dataclass
class JobStep:
    name: str
    e: object           # workloads.echelon.EchelonFlow
    hosts: list         # rank/stage index -> host
    start_s: float = 0.0


def simulate_steps(steps, routes, capacity_gbps, policy="echelon", max_s=3600.0, hop_latency_s=0.0):
    """One step of each job; ``hop_latency_s`` per link of a flow's path is added to its arrival
    (store-and-forward of the last packet: what an emulated link at a scaled-down rate costs)."""
    if policy not in POLICIES:
        raise ValueError(f"flow_scheduler {policy!r}: one of {', '.join(POLICIES)}")
    return _Steps(steps, routes, capacity_gbps, policy, max_s, hop_latency_s).run()


class _Steps:
    """The event loop of ``simulate_steps``: flows (released when their producing op ends, one per
    connection at a time) at the policy's rates, ops started when their inputs arrived."""

    def __init__(self, steps, routes, capacity_gbps, policy, max_s, hop_latency_s):
        self.steps, self.policy, self.max_s = steps, policy, max_s
        flows, fpath = [], []
        for j in steps:
            for k, f in enumerate(j.e.flows):
                a, b = j.hosts[f.src], j.hosts[f.dst]
                fpath.append(directed_links(routes[(a, b)]) if a != b else [])
                flows.append((j, k, f))
        self.flows, self.fpath = flows, fpath
        links = sorted({l for p in fpath for l in p})
        col = {l: i for i, l in enumerate(links)}
        self.cap = np.array([capacity_gbps[l] * 1e9 / 8 for l in links])     # bytes/s
        self.m = np.zeros((len(flows), len(links)))
        for i, p in enumerate(fpath):
            for l in p:
                self.m[i, col[l]] = 1.0
        self.rem = np.array([f.bytes for _j, _k, f in flows], dtype=float)
        self.size = self.rem.copy()
        self.released = np.full(len(flows), np.nan)
        self.sent = np.full(len(flows), np.nan)          # last byte sent
        self.finished = np.full(len(flows), np.nan)      # last byte arrived
        self.lat = np.array([hop_latency_s * len(p) for p in fpath])
        self.curve = [[] for _ in flows]                 # (t, bytes sent) at every rate change
        self.by_job = {}
        for i, (j, k, f) in enumerate(flows):
            self.by_job.setdefault(j.name, []).append(i)
        self.path_cap = np.array([self.cap[self.m[i] > 0].min() if self.m[i].any() else np.inf
                                  for i in range(len(flows))])
        # compute state per job
        self.st = {j.name: {"pos": {r: 0 for r in j.e.order}, "free": {r: j.start_s for r in j.e.order},
                            "end": {}, "start": {}, "running": {}} for j in steps}
        self.needs = {j.name: {} for j in steps}
        for i, (j, k, f) in enumerate(flows):
            if f.feeds:
                self.needs[j.name].setdefault(f.feeds, []).append(i)
        self.conn = [(j.name, j.hosts[f.src], j.hosts[f.dst]) for j, _k, f in flows]

    def release(self, now):
        st, released, rem = self.st, self.released, self.rem
        for i, (j, k, f) in enumerate(self.flows):
            if np.isnan(released[i]):
                if (f.after is None and now >= j.start_s - EPS) or (f.after and f.after in st[j.name]["end"]
                                                                    and st[j.name]["end"][f.after] <= now + EPS):
                    released[i] = now
                    if rem[i] <= 0 or not self.fpath[i]:
                        self.sent[i] = self.finished[i] = now
                        rem[i] = 0.0

    def start_ops(self, now):
        finished = self.finished
        for j in self.steps:
            s = self.st[j.name]
            for r, seq in j.e.order.items():
                while s["pos"][r] < len(seq) and not s["running"].get(r):
                    op = seq[s["pos"][r]]
                    _res, dur, deps = j.e.ops[op]
                    if any(d not in s["end"] or s["end"][d] > now + EPS for d in deps):
                        break
                    if any(np.isnan(finished[i]) or finished[i] > now + EPS for i in self.needs[j.name].get(op, [])):
                        break
                    if s["free"][r] > now + EPS:
                        break
                    s["start"][op] = now
                    s["running"][r] = (op, now + dur)
                    s["pos"][r] += 1

    def end_ops(self, now):
        for j in self.steps:
            s = self.st[j.name]
            for r, run in list(s["running"].items()):
                if run and run[1] <= now + EPS:
                    s["end"][run[0]] = run[1]
                    s["free"][r] = run[1]
                    s["running"][r] = None

    def active(self):
        """Released, unfinished flows, one per connection: the earliest released (the sender sends
        a connection's flows in order, as the emulator's agents do)."""
        head, conn, released = {}, self.conn, self.released
        for i in np.where(~np.isnan(released) & np.isnan(self.sent))[0]:
            if conn[i] not in head or (released[i], i) < (released[head[conn[i]]], head[conn[i]]):
                head[conn[i]] = i
        return np.array(sorted(head.values()), dtype=int)

    def _gamma(self, ix, avail):
        load = (self.rem[ix][:, None] * self.m[ix]).sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            g = np.where(load > 0, load / np.maximum(avail, EPS), 0.0)
        return float(g.max())

    def rates(self, now):
        act = self.active()
        m, cap, rem, flows = self.m, self.cap, self.rem, self.flows
        r = np.zeros(len(flows))
        if not len(act):
            return r
        if self.policy == "fair":
            r[act] = maxmin_matrix(m[act], np.full(len(act), np.inf), cap)
            return r
        left = cap.copy()
        jobs = {}
        for i in act:
            jobs.setdefault(flows[i][0].name, []).append(i)
        for name in sorted(jobs, key=lambda n: (self._gamma(np.array(jobs[n]), cap), n)):
            ix = np.array(jobs[name])
            if self.policy == "coflow":
                g = self._gamma(ix, left)
                want = rem[ix] / max(g, EPS) if g > 0 else np.zeros(len(ix))
                order = list(range(len(ix)))
            else:
                j = flows[ix[0]][0]
                d = np.array([j.e.d[flows[i][1]] for i in ix])
                ref = float(np.max(now + rem[ix] / self.path_cap[ix] + self.lat[ix] - d))
                slack = np.maximum(ref + d - self.lat[ix] - now, EPS)
                want = rem[ix] / slack
                order = list(np.argsort(d, kind="stable"))
            for o in order:
                i = ix[o]
                on = m[i] > 0
                give = min(want[o], float(left[on].min()) if on.any() else 0.0)
                r[i] = max(give, 0.0)
                left[on] -= r[i]
        # leftover: fair among every active flow, on top of what it has
        extra = maxmin_matrix(m[act], np.full(len(act), np.inf), np.maximum(left, 0.0))
        r[act] += extra
        return r

    def done(self):
        st = self.st
        return all(all(st[j.name]["pos"][r] >= len(seq) and not st[j.name]["running"].get(r)
                       for r, seq in j.e.order.items()) for j in self.steps) and not np.isnan(self.finished).any()

    def next_event(self, t, r, act):
        cands = [self.max_s]
        if len(act):
            cands.append(t + float((self.rem[act] / r[act]).min()))
        cands += [x for x in self.finished if x > t + EPS]
        for j in self.steps:
            for run in self.st[j.name]["running"].values():
                if run:
                    cands.append(run[1])
            if j.start_s > t + EPS:
                cands.append(j.start_s)
        return max(min(cands), t)

    def run(self):
        t, guard = 0.0, 0
        rem, size, curve = self.rem, self.size, self.curve
        while guard < 1_000_000:
            guard += 1
            self.end_ops(t)
            self.release(t)
            self.start_ops(t)
            self.release(t)
            if self.done() or t > self.max_s:
                break
            r = self.rates(t)
            act = [i for i in self.active() if r[i] > EPS]
            t_next = self.next_event(t, r, act)
            if t_next == t and not len(act):
                # waiting on nothing: a dependency that cannot be met
                if all(not any(self.st[j.name]["running"].values()) for j in self.steps):
                    raise RuntimeError("deadlock in the step's dependencies")
            dt = t_next - t
            for i in act:
                if not curve[i] or curve[i][-1][0] < t:
                    curve[i].append((t, size[i] - rem[i]))
            rem[:] = np.maximum(rem - r * dt, 0.0)
            for i in act:
                curve[i].append((t_next, size[i] - rem[i]))
            t = t_next
            # done when under a billionth of the flow is left: a smaller step may not advance t at all
            newly = np.where(~np.isnan(self.released) & np.isnan(self.sent) & (rem <= 1e-9 * size + 1e-3))[0]
            self.sent[newly] = t
            self.finished[newly] = t + self.lat[newly]
        return self.result()

    def result(self):
        out, flows = {}, self.flows
        for j in self.steps:
            ix = self.by_job[j.name]
            fin = [self.finished[i] - j.start_s for i in ix]
            d = [j.e.d[flows[i][1]] for i in ix]
            # ECT's reference is the job's first slot in absolute terms: measured from the job's start
            ends = self.st[j.name]["end"]
            step_end = max(ends.values()) - j.start_s if ends else max(fin)
            out[j.name] = {"step_s": step_end, "ect_s": max(f - x for f, x in zip(fin, d)),
                           "coflow_s": max(fin), "finish_s": dict(zip([flows[i][2].name for i in ix], fin)),
                           "release_s": {flows[i][2].name: self.released[i] - j.start_s for i in ix},
                           "curve": {flows[i][2].name: _points(self.curve[i], j.start_s, self.size[i]) for i in ix}}
        return out


def _points(curve, t0, size):
    """A flow's sending schedule as (seconds after its job's start, fraction of bytes sent) at every
    change of rate; flat stretches (rate 0) kept, repeated points dropped."""
    out = []
    for t, b in curve:
        p = (round(float(t - t0), 6), round(float(min(1.0, b / size)), 6) if size else 1.0)
        if out and p[1] == out[-1][1] and len(out) > 1 and out[-2][1] == p[1]:
            out[-1] = p
        elif not out or p != out[-1]:
            out.append(p)
    return out
