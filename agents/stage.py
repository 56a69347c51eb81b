"""Program replay: one worker of a pipeline- or tensor-parallel job whose computation waits for its inputs.

Run by agents.agent when its config has ``"kind": "program"`` (built by
harness.planners.flowplan.agent_config from a workloads.echelon EchelonFlow). The worker runs its ops in order, step after step; an op
starts only when every flow it consumes has arrived; when an op ends, the flows it releases are
queued on their connection (one TCP connection per ordered worker pair, flows in release order) and
sent by that connection's sender thread while computation goes on. So the order and time in which
flows finish change the step time, as they would change a pipeline's.

Steps. Step k of the job is planned at slot k of its grid (agents.timing): a worker whose first op needs no
input (pipeline stage 0, every tensor-parallel rank) starts the step at that slot or, if the previous
step overran it, as soon as its previous step ended; other workers follow their inputs. The step's
reference time (for targets and the ECT) is its planned slot, or its late start: every flow carries
it in its header.

Pacing (the central decision enforced at the host): a flow with a ``schedule`` (its planned
cumulative sending curve, seconds after its step's reference: when its bytes leave the sender; the
plan's ``target_s`` is the curve's end plus the path's store-and-forward latency) writes each 8 KB
slice when the curve reaches it. The curve already leaves the path its latency, so nothing is sent
ahead of it: a paced flow arrives between the curve's end and its target unless the network holds
it longer. A slice whose time has passed (the flow was released late, or congestion held it) goes at
once: the flow catches up as fast as TCP allows. A flow without a schedule (fair sharing) is sent at
once and TCP shares the links. A flow with a ``priority`` (link.sharing priority; a list: one per
step of the grid, in turn) is sent with that priority's DSCP (agents.wire.priority_tos): its connection's TOS is set before the flow's first
byte, so the switches' priority queues serve it by its level (bytes of the connection's previous
flow still in the socket buffer leave with the new TOS). With re-planning (``replan_path``,
harness.planners.replan) the worker reads the runner's newest table at the start of each step and
its senders use it from the step the table names on.

Output: iteration rows as the agent's (``start`` first op start, ``comm_start`` first flow released
or received, ``comm_end`` last flow received, ``end`` last op end), and ``<out>.flows`` rows
``job,step,flow,src,dst,bytes,reference,release,start,finish,target,priority`` for the flows this
worker received (seconds since ``run_start``; ``target`` empty when not paced, ``priority`` the
level its sender gave it, empty when none).
"""
import bisect
import json
import queue
import socket
import struct
import threading

from agents import timing
from agents.wire import (PACING, PAYLOAD, SLICE, Peers, Stopped, connect_deadline, drain, lateness_ms, now,
                            priority_tos, recv_exact, send_all, sleep_until)

HEADER = struct.Struct("!IIddi")    # step, flow index, step reference (monotonic s), release time, level (-1: none)


class ConnectionLost(RuntimeError):
    pass


def paced_send(sock, n, ref, schedule):
    """Send n bytes along ``schedule`` ([[t, fraction of bytes sent], ...], t seconds after the
    monotonic time ``ref``): each slice is written when the schedule has sent every byte up to and
    including it. No schedule: at once. A slice whose time is past goes at once, so a late flow
    catches up as fast as TCP allows."""
    if not schedule:
        send_all(sock, n)
        return
    ts = [p[0] for p in schedule]
    xs = [p[1] for p in schedule]
    sent = 0
    while sent < n:
        k = min(SLICE, n - sent)
        sleep_until(ref + schedule_time(ts, xs, (sent + k) / n), PACING)
        sock.sendall(PAYLOAD[:k])
        sent += k


def schedule_time(ts, xs, frac):
    """The first time at which the piecewise-linear schedule (ts, xs) reaches ``frac``."""
    i = bisect.bisect_left(xs, frac - 1e-12)
    if i <= 0:
        return ts[0]
    if i >= len(xs):
        return ts[-1]
    x0, x1, t0, t1 = xs[i - 1], xs[i], ts[i - 1], ts[i]
    return t1 if x1 <= x0 else t0 + (t1 - t0) * (frac - x0) / (x1 - x0)


class Worker:
    def __init__(self, cfg, worker):
        self.cfg, self.me = cfg, worker
        self.flows = cfg["flows"]
        self.ops = cfg["programs"][str(worker)]
        self.arrived = {}                    # (step, flow) -> (reference, release, start, finish)
        self.cv = threading.Condition()
        self.errors = []
        self.closed = set()                  # peers that closed their connection after their last flow
        self.queues = {}
        self.replans, self.replan_version, self.replans_loaded = [], 0, 0   # (from_step, level per flow)

    def pairs(self):
        return {(f["src"], f["dst"]) for f in self.flows if self.me in (f["src"], f["dst"])}

    def _receiver(self, sock, src):
        try:
            while True:
                try:
                    head = recv_exact(sock, HEADER.size)
                except Stopped:             # closed between flows: the peer has sent all it will
                    with self.cv:
                        self.closed.add(src)
                        self.cv.notify_all()
                    return
                step, idx, ref, release, level = HEADER.unpack(head)
                t = now()
                drain(sock, self.flows[idx]["bytes"])
                with self.cv:
                    self.arrived[(step, idx)] = (ref, release, t, now(), level)
                    self.cv.notify_all()
        except (Stopped, OSError) as exc:
            with self.cv:
                self.errors.append(exc)
                self.cv.notify_all()

    def _sender(self, sock, q):
        tos = None
        try:
            while True:
                item = q.get()
                if item is None:
                    return
                step, idx, ref, release = item
                f = self.flows[idx]
                prio = self.priority(step, idx)
                if prio is not None:
                    want = priority_tos(prio, self.cfg.get("dscp", 0))
                    if want != tos:
                        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, want)
                        tos = want
                sock.sendall(HEADER.pack(step, idx, ref, release, -1 if prio is None else prio))
                paced_send(sock, f["bytes"], ref, f.get("schedule"))
        except OSError as exc:
            with self.cv:
                self.errors.append(exc)
                self.cv.notify_all()

    def priority(self, step, idx):
        """The flow's level in ``step``: the newest re-planned table that applies from that step on,
        else the plan's (a list: one level per step of the grid, in turn)."""
        for from_step, table in reversed(self.replans):
            if step >= from_step:
                return table[idx]
        prio = self.flows[idx].get("priority")
        if isinstance(prio, list):
            prio = prio[(step + self.cfg.get("first_slot", 0)) % len(prio)]
        return prio

    def load_replan(self):
        """A newer re-planned table, if the runner wrote one (harness.planners.replan; written
        atomically, read once per version)."""
        path = self.cfg.get("replan_path")
        if not path:
            return
        try:
            doc = json.loads(open(path).read())
        except (OSError, ValueError):      # none yet, or replaced while read: the next step reads it again
            return
        if doc["version"] > self.replan_version:
            self.replan_version = doc["version"]
            self.replans = sorted(self.replans + [(doc["from_step"], doc["priority"])], key=lambda x: x[0])
            self.replans_loaded += 1

    def wait_inputs(self, step, inputs):
        with self.cv:
            while not all((step, i) in self.arrived for i in inputs):
                missing = {self.flows[i]["src"] for i in inputs if (step, i) not in self.arrived}
                if self.errors or missing & self.closed:
                    why = self.errors[0] if self.errors else "peer closed"
                    raise ConnectionLost(f"worker {self.me}: step {step}: a peer's connection ended before "
                                         f"its flows arrived ({why})")
                self.cv.wait(0.2)
            return [self.arrived[(step, i)] for i in inputs]


def run(cfg, worker, out_path):
    """The program loop; returns the agent's final summary."""
    w = Worker(cfg, worker)
    peers = Peers({**cfg, "worker": worker, "pairs": sorted(w.pairs())})
    t0 = cfg["t0"] + cfg["time_shift_ms"] / 1000.0
    period = cfg["period_s"]
    run_start = cfg["run_start"]
    first_start = timing.slot_time(t0, 0.0, cfg.get("first_slot", 0), period)
    peers.connect(deadline=connect_deadline(first_start))
    for src, s in peers.inc.items():
        threading.Thread(target=w._receiver, args=(s, src), daemon=True).start()
    senders = []
    for dst, s in peers.out.items():
        w.queues[dst] = queue.Queue()
        senders.append(threading.Thread(target=w._sender, args=(s, w.queues[dst]), daemon=True))
        senders[-1].start()
    rows = open(out_path, "a", buffering=1)
    frows = open(out_path + ".flows", "a", buffering=1)
    done = 0
    needs_input = bool(w.ops and w.ops[0]["inputs"])
    try:
        for k in range(cfg["iterations"]):
            slot = timing.slot_time(t0, 0.0, cfg.get("first_slot", 0) + k, period)
            w.load_replan()
            ref = None
            if not needs_input:
                sleep_until(slot)
                ref = max(slot, now())
            start = None
            comm = []                       # times a flow of this step was released or received
            for op in w.ops:
                got = w.wait_inputs(k, op["inputs"])
                if got:
                    ref = ref if ref is not None else got[0][0]
                    comm += [g[2] for g in got] + [g[3] for g in got]
                t = now()
                start = start if start is not None else t
                sleep_until(t + op["dur_s"])
                released = now()
                for i in op["outputs"]:
                    comm.append(released)
                    w.queues[w.flows[i]["dst"]].put((k, i, ref, released))
            end = now()
            with w.cv:
                mine = sorted((key, w.arrived.pop(key)) for key in [x for x in w.arrived if x[0] == k])
            base = k + cfg.get("iteration_base", 0)
            for (_step, i), (r, rel, st, fin, level) in mine:
                f = w.flows[i]
                tgt = "" if f.get("target_s") is None else f"{r + f['target_s'] - run_start:.6f}"
                frows.write(f"{cfg['job']},{base},{f['name']},{f['src']},{f['dst']},{f['bytes']},{r - run_start:.6f},"
                            f"{rel - run_start:.6f},{st - run_start:.6f},{fin - run_start:.6f},{tgt},"
                            f"{'' if level < 0 else level}\n")
            rows.write(f"{cfg['job']},{worker},{base},{k},{start - run_start:.6f},"
                       f"{min(comm, default=start) - run_start:.6f},{max(comm, default=end) - run_start:.6f},"
                       f"{end - run_start:.6f},0\n")
            done += 1
        # the last flows must leave before the connections close
        for q in w.queues.values():
            q.put(None)
        for t in senders:
            t.join(10)
    except Stopped:
        pass
    finally:
        rows.close()
        frows.close()
        peers.close()
    return {"job": cfg["job"], "worker": worker, "iterations": done, "realignments": 0,
            "replans_loaded": w.replans_loaded}


def main(cfg, worker, out_path):
    print(json.dumps({**run(cfg, worker, out_path), "timer_late_ms": lateness_ms(),
                      "pacing_late_ms": lateness_ms(PACING)}), flush=True)
    return 0
