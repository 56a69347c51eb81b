"""Replay agent: one process per worker of a job, run inside the worker's host namespace.

It replays a profile closed-loop: compute gaps (no traffic) alternate with communication phases
made of real TCP transfers to the job's other workers; the next phase starts only after the
previous one's data has moved, so contention stretches iterations as it would stretch training.

Timing. All jobs of a run share one reference instant ``t0``; a job's plan grid has its iteration
slots at ``t0 + shift + m * iteration`` (seconds, CLOCK_MONOTONIC). Every worker starts its first
iteration at slot ``first_slot`` (0 unless the job starts later in the run). No iteration takes less than the profile's iteration time (the replay
cannot run a model faster than it was measured; congestion makes iterations longer). For jobs
that keep a time-shift (``realign``: CASSINI's compatible jobs, or fixed offsets), worker 0 (the
leader) never starts an iteration before its slot, and when it is late by more than
``realign_frac`` (5 %) of the iteration it waits for the next slot and logs a re-alignment
(CASSINI §4.2). The other workers follow through the data dependencies of the communication (they
cannot finish a phase without the leader's data). Other jobs run free ("send whenever they want").
Jobs given a ``group`` (the jobs they share links with, same period) align to each other instead of
to the absolute grid: see ``Group`` (an implementer decision: CASSINI does not say how it re-adjusts).

Communication. A phase of ``gbps`` for ``duration_ms`` at the reference rate carries
``gbps * duration / 8 * scale`` bytes per transfer (``scale`` = emulated rate / reference rate),
paced in user space at ``gbps * scale`` (8 KB slices on a token schedule), so alone it lasts
``duration_ms``:
  ring_allreduce, tensor_allreduce: 2(N-1) steps; in each, every worker sends 1/(2(N-1)) of the
    bytes to its ring successor and receives as much from its predecessor (reduce-scatter then
    all-gather, as NCCL's ring);
  pipeline_p2p: worker i sends to i+1 (the first only sends, the last only receives);
  alltoall: every worker sends bytes/(N-1) to each other worker.
Traffic carries the job's DSCP, so switches can attribute it. TCP with ECN (the namespace's
sysctl).

Output: CSV rows ``job,worker,iteration,slot,start,comm_start,comm_end,end,realigned`` (seconds
since ``run_start``), flushed per iteration; a final JSON line on stdout with the summary.
Exit 0 when done or stopped by SIGTERM; any other exit is a crash the harness reports.
A config with ``"kind": "program"`` (pipeline and tensor-parallel jobs) is run by workloads.stage.
"""
import argparse
import json
import os
from pathlib import Path
import signal
import socket
import struct
import sys
import threading
import time

SLICE = 8 * 1024          # one jumbo frame of payload: emission follows the fluid rate closely
HEADER = struct.Struct("!I")


def precise_sleeps():
    """Timer slack 1 us (default 50 us): every sleep of the agent otherwise overshoots, and the
    overshoot accumulates into a drift against the plan grid."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(29, 1000, 0, 0, 0)   # PR_SET_TIMERSLACK, ns
    except (OSError, AttributeError):
        pass


def now():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


LATENESS = []      # seconds each sleep_until woke up after its target (the fidelity guard's timers)


def sleep_until(t):
    slept = False
    while True:
        d = t - now()
        if d <= 0:
            if slept:
                LATENESS.append(-d)
            return
        slept = True
        time.sleep(min(d, 0.05))


def lateness_ms():
    """{p50, p99, max} of the sleeps' lateness in ms (None without sleeps)."""
    if not LATENESS:
        return None
    xs = sorted(LATENESS)
    pick = lambda q: round(xs[min(len(xs) - 1, int(q * len(xs)))] * 1000, 3)
    return {"p50": pick(0.5), "p99": pick(0.99), "max": round(xs[-1] * 1000, 3), "n": len(xs)}


class Stopped(Exception):
    pass


class Peers:
    """Persistent TCP connections to the other workers of the job (one per ordered pair)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.me = cfg["worker"]
        self.n = len(cfg["ips"])
        self.out = {}   # peer -> socket we send on
        self.inc = {}   # peer -> socket we receive on
        self.tos = cfg.get("dscp", 0) << 2

    def needed(self):
        if "pairs" in self.cfg:       # a program (workloads.stage) names its ordered pairs
            return {tuple(p) for p in self.cfg["pairs"]}
        want = set()
        n, me = self.n, self.me
        for ph in self.cfg["phases"]:
            p = ph["pattern"]
            if p in ("ring_allreduce", "tensor_allreduce") and n > 1:
                want.add((me, (me + 1) % n))
                want.add(((me - 1) % n, me))
            elif p == "pipeline_p2p":
                if me + 1 < n:
                    want.add((me, me + 1))
                if me > 0:
                    want.add((me - 1, me))
            elif p == "alltoall":
                want |= {(me, k) for k in range(n) if k != me} | {(k, me) for k in range(n) if k != me}
        return want

    def connect(self, deadline):
        want = self.needed()
        senders = {dst for src, dst in want if src == self.me}
        receivers = {src for src, dst in want if dst == self.me}
        port = self.cfg["port"]
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((self.cfg["ips"][self.me], port))
        srv.listen(max(4, len(receivers)))
        srv.settimeout(0.2)
        pending = set(senders)
        while (pending or len(self.inc) < len(receivers)) and now() < deadline:
            for dst in list(pending):
                s = socket.socket()
                s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, self.tos)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.settimeout(0.5)
                try:
                    s.connect((self.cfg["ips"][dst], port))
                    s.sendall(HEADER.pack(self.me))
                    s.settimeout(None)
                    self.out[dst] = s
                    pending.discard(dst)
                except OSError:
                    s.close()
            try:
                c, _ = srv.accept()
                c.settimeout(None)
                c.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, self.tos)
                src = HEADER.unpack(_recv_exact(c, HEADER.size))[0]
                self.inc[src] = c
            except socket.timeout:
                pass
        srv.close()
        if pending or len(self.inc) < len(receivers):
            raise RuntimeError(f"worker {self.me}: peers not connected by the start time "
                               f"(missing out {sorted(pending)}, in {sorted(receivers - set(self.inc))})")


def _recv_exact(sock, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], min(n - got, 1 << 20))
        if k == 0:
            raise Stopped("peer closed")
        got += k
    return bytes(buf)


def _drain(sock, n):
    buf = bytearray(min(n, 1 << 20))
    got = 0
    while got < n:
        k = sock.recv_into(buf, min(n - got, len(buf)))
        if k == 0:
            raise Stopped("peer closed")
        got += k


PAYLOAD = b"\0" * (1 << 20)


def _send(sock, n, rate_bytes, tail_s=0.0):
    """Send n bytes so that they arrive after n / rate_bytes seconds when the path is free.

    User-space token pacing (kernel pacing let the first window out unpaced after idle gaps):
    each slice is written when a fluid flow at ``rate_bytes`` would have delivered every byte up
    to and including it, minus ``tail_s``, the time a written slice needs to reach the receiver.
    Under congestion sendall blocks on the full socket buffer and the transfer takes longer."""
    t0 = now()
    sent = 0
    while sent < n:
        k = min(SLICE, n - sent)
        sleep_until(t0 + (sent + k) / rate_bytes - tail_s)
        sock.sendall(PAYLOAD[:k])
        sent += k


def exchange(peers, sends, recvs, rate_bytes, tail_s=0.0):
    """Send {peer: bytes} and receive {peer: bytes} concurrently; return when all are done."""
    errors = []

    def do(fn, *a):
        try:
            fn(*a)
        except Exception as exc:  # surfaced below
            errors.append(exc)
    threads = [threading.Thread(target=do, args=(_send, peers.out[p], n, rate_bytes, tail_s))
               for p, n in sends.items()]
    threads += [threading.Thread(target=do, args=(_drain, peers.inc[p], n)) for p, n in list(recvs.items())[1:]]
    for t in threads:
        t.start()
    if recvs:
        p, n = next(iter(recvs.items()))
        do(_drain, peers.inc[p], n)
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def calibrate(peers, phases, rounds=15):
    """Per-pattern step latency: the median time of a one-slice, unpaced transfer step.

    Every worker runs the same exchanges before the start time. The median over rounds is what a
    step typically costs on the free path (the minimum under-estimates it: measured phases then
    overran by up to 5 %); it is taken off each step's pacing schedule, so an uncongested phase
    lasts its profile duration while congestion still stretches it."""
    tails = {}
    for pattern in sorted({ph["pattern"] for ph in phases}):
        times = []
        for _ in range(rounds):
            t = now()
            _one_step(peers, pattern, SLICE, 1e12, 0.0)
            times.append(now() - t)
        tails[pattern] = sorted(times)[len(times) // 2]
    return tails


def _one_step(peers, pattern, nbytes, rate, tail):
    n, me = peers.n, peers.me
    if pattern in ("ring_allreduce", "tensor_allreduce"):
        exchange(peers, {(me + 1) % n: nbytes}, {(me - 1) % n: nbytes}, rate, tail)
    elif pattern == "pipeline_p2p":
        exchange(peers, {me + 1: nbytes} if me + 1 < n else {}, {me - 1: nbytes} if me > 0 else {}, rate, tail)
    elif pattern == "alltoall":
        others = [k for k in range(n) if k != me]
        exchange(peers, {k: nbytes for k in others}, {k: nbytes for k in others}, rate, tail)
    else:
        raise ValueError(pattern)


def run_phase(peers, ph, scale, tail):
    """One communication phase; ``tail`` (s) is the calibrated latency of one transfer step,
    taken off the pacing schedule so that an uncongested phase lasts its profile duration."""
    n, me = peers.n, peers.me
    total = ph["gbps"] * 1e9 / 8 * ph["duration_ms"] / 1000 * scale        # bytes per transfer
    rate = ph["gbps"] * 1e9 / 8 * scale                                     # bytes/s
    p = ph["pattern"]
    if n < 2:
        return
    if p in ("ring_allreduce", "tensor_allreduce"):
        steps = 2 * (n - 1)
        chunk = max(1, int(total / steps))
        for _ in range(steps):
            exchange(peers, {(me + 1) % n: chunk}, {(me - 1) % n: chunk}, rate, tail)
    elif p == "pipeline_p2p":
        sends = {me + 1: int(total)} if me + 1 < n else {}
        recvs = {me - 1: int(total)} if me > 0 else {}
        exchange(peers, sends, recvs, rate, tail)
    elif p == "alltoall":
        per = max(1, int(total / (n - 1)))
        others = [k for k in range(n) if k != me]
        exchange(peers, {k: per for k in others}, {k: per for k in others}, rate / (n - 1), tail)
    else:
        raise ValueError(p)


class Group:
    """Phase alignment with the other jobs of a CASSINI group (jobs sharing links, same period).

    Every leader publishes the start of its latest iteration in ``<beat_dir>/<job>.beat``. Before an
    iteration, a leader computes each member's plan base (its latest start minus its shift) against
    its own; a member whose base is later is *behind*, and the leader waits for the largest such lag.
    The group so tracks its slowest member: a delay that hits every job alike costs nothing, and no
    job ever pauses a whole iteration to return to an absolute grid. Beats older than two
    iterations (a member that finished) are ignored."""

    def __init__(self, cfg):
        self.me = cfg["job"]
        self.dir = Path(cfg["beat_dir"])
        self.shift = cfg["time_shift_ms"] / 1000.0
        self.it = cfg["iteration_ms"] / 1000.0
        self.members = [(m["job"], m["shift_ms"] / 1000.0) for m in cfg.get("group", []) if m["job"] != self.me]

    def publish(self, start):
        tmp = self.dir / f".{self.me}.beat"
        tmp.write_text(repr(start))
        os.replace(tmp, self.dir / f"{self.me}.beat")

    def lag(self, start):
        """Seconds this job is ahead of the slowest member (0 if none is behind)."""
        worst = 0.0
        mine = start - self.shift
        for job, shift in self.members:
            try:
                t = float((self.dir / f"{job}.beat").read_text())
            except (OSError, ValueError):
                continue
            if start - t > 2 * self.it:
                continue
            d = ((t - shift) - mine) % self.it
            d = d - self.it if d > self.it / 2 else d     # in (-it/2, it/2]: > 0 means it is behind
            worst = max(worst, d)
        return worst


def main(argv=None):
    ap = argparse.ArgumentParser(description="Interleave replay agent (one worker)")
    ap.add_argument("--config", required=True, help="JSON file (see harness.runner)")
    ap.add_argument("--worker", type=int, required=True)
    ap.add_argument("--out", required=True, help="CSV file for iteration rows")
    args = ap.parse_args(argv)
    with open(args.config) as f:
        cfg = json.load(f)
    cfg["worker"] = args.worker
    precise_sleeps()

    def on_term(signum, frame):
        raise Stopped("signal")
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    if cfg.get("kind") == "program":
        from workloads import stage
        return stage.main(cfg, args.worker, args.out)

    it_s = cfg["iteration_ms"] / 1000.0
    phases = sorted(cfg["phases"], key=lambda p: p["start_ms"])
    gaps, prev_end = [], 0.0
    for p in phases:
        gaps.append((p["start_ms"] - prev_end) / 1000.0)
        prev_end = p["start_ms"] + p["duration_ms"]
    tail = (cfg["iteration_ms"] - prev_end) / 1000.0
    t0 = cfg["t0"] + cfg["time_shift_ms"] / 1000.0
    run_start = cfg["run_start"]
    leader = args.worker == 0
    keep_grid = cfg.get("realign", True)
    group = Group(cfg) if cfg.get("group") and leader else None
    frac = cfg.get("realign_frac", 0.05)
    inject = {int(k): v / 1000.0 for k, v in cfg.get("inject_delay_ms", {}).get(str(args.worker), {}).items()}
    peers = Peers(cfg)
    realigns = done = 0
    tails = {}
    out = open(args.out, "a", buffering=1)
    try:
        first_start = t0 + cfg.get("first_slot", 0) * it_s
        peers.connect(deadline=first_start - 0.3 if first_start - now() > 1.3 else now() + 10)
        tails = calibrate(peers, phases) if peers.n > 1 else {}
        sleep_until(first_start)
        for k in range(cfg["iterations"]):
            if inject.get(k):
                time.sleep(inject[k])
            start = now()
            realigned = 0
            if group is not None and k > 0:
                lag = group.lag(start)
                if lag > 0.0005:                                    # wait for the slowest member
                    sleep_until(start + lag)
                    start = now()
                    if lag > frac * it_s:
                        realigned = 1
                        realigns += 1
            elif (k > 0 or cfg.get("first_slot", 0)) and keep_grid and leader:
                slot = round((start - t0) / it_s)
                dev = (start - t0) - slot * it_s                    # in (-it/2, it/2]
                if dev < 0:                                         # early: wait for the slot
                    sleep_until(t0 + slot * it_s)
                elif dev > frac * it_s:                             # late by > 5 %: next slot
                    sleep_until(t0 + (slot + 1) * it_s)
                    realigned = 1
                    realigns += 1
                start = now()
            slot = round((start - t0) / it_s)
            if group is not None:
                group.publish(start)
            comm_start = comm_end = None
            for gap, ph in zip(gaps, phases):
                time.sleep(max(0.0, gap))
                c0 = now()
                run_phase(peers, ph, cfg["scale"], tails.get(ph["pattern"], 0.0))
                comm_start = comm_start if comm_start is not None else c0
                comm_end = now()
            time.sleep(max(0.0, tail))
            # an iteration never takes less than its profile time (the replay cannot run the model
            # faster than it was measured); congestion still makes it longer
            sleep_until(start + it_s)
            end = now()
            out.write(f"{cfg['job']},{args.worker},{k + cfg.get('iteration_base', 0)},{slot},{start - run_start:.6f},{comm_start - run_start:.6f},"
                      f"{comm_end - run_start:.6f},{end - run_start:.6f},{realigned}\n")
            done += 1
    except Stopped:
        pass
    finally:
        out.close()
        for s in list(peers.out.values()) + list(peers.inc.values()):
            s.close()
    print(json.dumps({"job": cfg["job"], "worker": args.worker, "iterations": done, "realignments": realigns,
                      "step_latency_ms": {k: round(v * 1000, 3) for k, v in tails.items()},
                      "timer_late_ms": lateness_ms()}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
