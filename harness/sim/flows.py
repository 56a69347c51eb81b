"""Flow-level simulation of EchelonFlows sharing links, under a flow scheduler (fair | coflow | echelon).

Each job is one step of an EchelonFlow (workloads.echelon) whose ranks/stages sit on hosts; its
compute ops run on their resource in order, a flow is released when the op it follows ends and
arrives when its bytes have moved, and an op that consumes a flow cannot start before it arrived.
A connection (job, source host, destination host) sends its flows one after another in release
order, as the emulator's agents do (agents.stage). Link rates each instant (capacity in Gbit/s,
bytes converted), among the flows at the head of their connection:

  fair     per-flow max-min fair sharing (what TCP approximates);
  coflow   Varys-like: jobs ordered by smallest bottleneck (SEBF); within a job, every released flow
           gets remaining / Gamma so that they all finish together (MADD); leftover shared fairly;
  echelon  jobs ordered by smallest bottleneck; within a job, the reference R is the earliest at
           which every released flow could still meet its slot (R = max_i(now + rem_i / path_i - d_i)),
           and flow i gets just rem_i / (R + d_i - now) (earliest slot first, within what is left);
           leftover shared fairly (finishing early never hurts the consumer).
  priority (switch priority queues) strict priority by each flow's level, per-flow max-min within one.
The emulator's own behaviour, where calibrated (harness.sim.calibration): the shapers' token
buckets (a new flow sends their burst at once), a flow's fixed latency, the fabric's start backlog
(flows starting close together wait for each other: the 2-core machine forwards their first
packets one after another), compute ops lengthened by the agents' late wake-ups. Results per job: step time (consumer), ECT = max_i(F_i - d_i) with F
relative to the job's start, coflow completion, and each flow's finish. ``model_flow_times``: the
benchmark's scenarios (flows released together) in the model (bench/tcp_sharing.py).
"""
from dataclasses import dataclass

import numpy as np

from harness.routing import directed_links
from harness.sim import calibration
from harness.sim.fluid import maxmin_matrix
from workloads import echelon

POLICIES = ("fair", "coflow", "echelon")
EPS = 1e-12


@dataclass
class JobStep:
    name: str
    e: object           # workloads.echelon.EchelonFlow
    hosts: list         # rank/stage index -> host
    start_s: float = 0.0
    priorities: list = None   # per flow, 0 the most urgent (policy "priority"); None: all least urgent


def simulate_steps(steps, routes, capacity_gbps, policy="echelon", max_s=3600.0, hop_latency_s=0.0,
                   flow_latency_s=0.0, burst_bytes=0.0, op_lateness_s=(), seed=0, start_cost_s=0.0):
    """One step of each job. ``hop_latency_s`` per link of a flow's path and ``flow_latency_s`` once
    are added to its arrival; ``start_cost_s``: each flow that becomes its connection's head adds
    that much work to one backlog shared by the whole fabric (draining at one second per second),
    and its arrival is delayed by the backlog it finds plus the work of the flows that start with
    it (served together); ``burst_bytes`` (bytes at the simulated rate) is each link's token
    bucket: a flow that becomes its connection's head sends that much of its bytes at once while
    every link of its path has the tokens, as the emulator's shapers let it (harness.qdisc: HTB
    burst); a link's bucket refills with the capacity its flows leave unused. Policy ``priority``:
    strict priority by ``JobStep.priorities`` at every link, per-flow max-min fair within a level
    (the switches' priority queues, link.sharing priority). ``op_lateness_s``: equally likely
    values (s) one of which, drawn with ``seed``, lengthens each compute op (the emulator's agents
    wake late from the sleep that times an op)."""
    if policy not in POLICIES + ("priority",):
        raise ValueError(f"flow_scheduler {policy!r}: one of {', '.join(POLICIES)} (or priority)")
    return _Steps(steps, routes, capacity_gbps, policy, max_s, hop_latency_s, flow_latency_s, burst_bytes,
                  op_lateness_s, seed, start_cost_s).run()


class _Steps:
    """The event loop of ``simulate_steps``: flows (released when their producing op ends, one per
    connection at a time) at the policy's rates, ops started when their inputs arrived."""

    def __init__(self, steps, routes, capacity_gbps, policy, max_s, hop_latency_s, flow_latency_s, burst_bytes,
                 op_lateness_s, seed, start_cost_s):
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
        self.lat = np.array([hop_latency_s * len(p) + (flow_latency_s if p else 0.0) for p in fpath])
        self.burst = float(burst_bytes)
        self.late, self.rng = np.asarray(op_lateness_s, dtype=float), np.random.default_rng(seed)
        self.tokens = np.full(len(links), self.burst)
        self.started = np.zeros(len(flows), dtype=bool)         # has been its connection's head
        self.start_cost, self.backlog, self.backlog_t = float(start_cost_s), 0.0, 0.0
        self.level = np.array([(j.priorities[k] if j.priorities is not None else np.inf) for j, k, _f in flows])
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
        # unreleased flows by what releases them: their job's start, or the end of the op they follow
        self.wait_start = [i for i, (_j, _k, f) in enumerate(flows) if f.after is None]
        self.wait_op = {}
        for i, (j, _k, f) in enumerate(flows):
            if f.after:
                self.wait_op.setdefault((j.name, f.after), []).append(i)
        self.ended = []                                  # (job, op) ended since the last release

    def release(self, now):
        ready = [i for key in self.ended for i in self.wait_op.pop(key, [])]
        self.ended = []
        if self.wait_start:
            due = [i for i in self.wait_start if now >= self.flows[i][0].start_s - EPS]
            if due:
                self.wait_start = sorted(set(self.wait_start) - set(due))
                ready += due
        rem = self.rem
        for i in ready:
            self.released[i] = now
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
                    if len(self.late):
                        dur += float(self.late[self.rng.integers(len(self.late))])
                    s["running"][r] = (op, now + dur)
                    s["pos"][r] += 1

    def end_ops(self, now):
        for j in self.steps:
            s = self.st[j.name]
            for r, run in list(s["running"].items()):
                if run and run[1] <= now + EPS:
                    s["end"][run[0]] = run[1]
                    self.ended.append((j.name, run[0]))
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
        if self.policy == "priority":
            left = cap.copy()
            for lv in sorted(set(self.level[act])):
                ix = act[self.level[act] == lv]
                r[ix] = maxmin_matrix(m[ix], np.full(len(ix), np.inf), np.maximum(left, 0.0))
                left -= r[ix] @ m[ix]
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

    def start_heads(self, t):
        """Flows that just became their connection's head: each finds the fabric's start backlog
        (``start_cost_s``) and adds to it, then sends up to the tokens of its path at once; flows
        starting together on a link split its tokens equally."""
        if (self.burst <= 0 and self.start_cost <= 0) or self.started[~np.isnan(self.released)
                                                                      & np.isnan(self.sent)].all():
            return
        new = np.array([i for i in self.active() if not self.started[i]], dtype=int)
        if not len(new):
            return
        self.started[new] = True
        if self.start_cost > 0:
            self.backlog = max(0.0, self.backlog - (t - self.backlog_t))
            self.lat[new] += self.backlog + (len(new) - 1) * self.start_cost
            self.backlog, self.backlog_t = self.backlog + len(new) * self.start_cost, t
        if self.burst > 0:
            self._take_bursts(t, new)
        self.mark_sent(t)

    def _take_bursts(self, t, new):
        m = self.m[new]
        n_on = m.sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(n_on > 0, self.tokens / np.maximum(n_on, 1), np.inf)
        for row, i in enumerate(new):
            on = m[row] > 0
            chunk = min(self.rem[i], float(share[on].min()) if on.any() else 0.0)
            if chunk <= 0:
                continue
            self.curve[i].append((t, self.size[i] - self.rem[i]))
            self.rem[i] -= chunk
            self.tokens[on] -= chunk
            self.curve[i].append((t, self.size[i] - self.rem[i]))

    def mark_sent(self, t):
        # done when under a billionth of the flow is left: a smaller step may not advance t at all
        rem, size = self.rem, self.size
        newly = np.where(~np.isnan(self.released) & np.isnan(self.sent) & (rem <= 1e-9 * size + 1e-3))[0]
        self.sent[newly] = t
        self.finished[newly] = t + self.lat[newly]

    def done(self):
        st = self.st
        return all(all(st[j.name]["pos"][r] >= len(seq) and not st[j.name]["running"].get(r)
                       for r, seq in j.e.order.items()) for j in self.steps) and not np.isnan(self.finished).any()

    def next_event(self, t, r, act):
        cands = [self.max_s]
        if len(act):
            cands.append(t + float((self.rem[act] / r[act]).min()))
        fin = self.finished
        cands += fin[fin > t + EPS].tolist()
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
            self.start_heads(t)
            self.start_ops(t)           # an input that arrived whole in a burst
            self.release(t)
            self.start_heads(t)
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
            if self.burst > 0:
                self.tokens = np.minimum(self.burst, self.tokens + (self.cap - r @ self.m) * dt)
            for i in act:
                curve[i].append((t_next, size[i] - rem[i]))
            t = t_next
            self.mark_sent(t)
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


def released_together(flows):
    """(hosts, EchelonFlow) of ``flows`` [(src host, dst host, bytes[, delay s])] released together:
    one worker per host (in order of first appearance) releases the flows it sends ("S<w>", 1 ms
    plus the largest delay of its flows: a staggered start), then waits for those sent to it
    ("R<w>", 1 ms); a host may do both, as the ranks of a ring. The scenarios of
    bench/tcp_sharing.py, modelled here and run by the agents (flowplan.programs)."""
    hosts = list(dict.fromkeys([f[0] for f in flows] + [f[1] for f in flows]))
    w = {h: i for i, h in enumerate(hosts)}
    fl = [echelon.Flow(f"f{i}", w[f[0]], w[f[1]], f[2], after=f"S{w[f[0]]}", feeds=f"R{w[f[1]]}")
          for i, f in enumerate(flows)]
    ops, order = {}, {}
    for h in hosts:
        delay = max([f[3] for f in flows if f[0] == h and len(f) > 3] or [0.0])
        ops[f"S{w[h]}"] = (w[h], 0.001 + delay, [])
        order[w[h]] = [f"S{w[h]}"]
        if any(f[1] == h for f in flows):
            ops[f"R{w[h]}"] = (w[h], 0.001, [])
            order[w[h]].append(f"R{w[h]}")
    return hosts, echelon.EchelonFlow("cal", 0, fl, [0.0] * len(fl), ops, order)


def model_flow_times(flows, routes, link, burst_bytes, flow_latency_s, store_and_forward=False, start_cost_s=0.0):
    """The flow model's time (release to arrival, s) of each of ``flows`` [(src host, dst host,
    bytes[, delay s])] released together (``released_together``) at the emulated rate, fair sharing: what
    bench/tcp_sharing.py measures in emulation."""
    hosts, e = released_together(flows)
    cap = {l: link.rate_mbps / 1000 for p in routes.values() for l in directed_links(p)}
    res = simulate_steps([JobStep("cal", e, hosts)], routes, cap, "fair",
                         hop_latency_s=calibration.hop_latency_s(link) if store_and_forward else link.delay_ms / 1000,
                         flow_latency_s=flow_latency_s, burst_bytes=burst_bytes, start_cost_s=start_cost_s)["cal"]
    return [res["finish_s"][f.name] - res["release_s"][f.name] for f in e.flows]
