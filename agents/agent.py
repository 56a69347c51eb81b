"""Replay agent: one process per worker of a job, run inside the worker's host namespace.

It replays a profile closed-loop: compute gaps (no traffic) alternate with communication phases
made of real TCP transfers to the job's other workers; the next phase starts only after the
previous one's data has moved, so contention stretches iterations as it would stretch training.

Timing (the rule is agents.timing's). Every worker starts its first iteration at slot
``first_slot`` of its job's grid (0 unless the job starts later in the run). No iteration takes less
than the profile's iteration time (the replay cannot run a model faster than it was measured;
congestion makes iterations longer). The job's ``alignment`` says how the leader (worker 0) starts
the next one: ``grid`` (never before its slot; late by more than timing.REALIGN_FRAC of an iteration,
wait for the next slot and log a re-alignment, CASSINI §4.2), ``group`` (keep the shift relative to
the jobs it shares links with: see ``Group``, an implementer decision: CASSINI does not say how it
re-adjusts) or ``free`` (at once: "send whenever they want"). The other workers follow through the
data dependencies of the communication (they cannot finish a phase without the leader's data).

Communication. A phase of ``gbps`` for ``duration_ms`` at the reference rate carries
``gbps * duration / 8 * scale`` bytes per worker (``scale`` = emulated rate / reference rate),
split into transfers by its pattern (agents.patterns) and paced in user space (8 KB slices on a
token schedule, agents.wire), so alone it lasts ``duration_ms``.
Traffic carries the job's DSCP, so switches can attribute it. TCP with ECN (the namespace's
sysctl).

Output: CSV rows ``job,worker,iteration,slot,start,comm_start,comm_end,end,realigned`` (seconds
since ``run_start``), flushed per iteration; a final JSON line on stdout with the summary.
Exit 0 when done or stopped by SIGTERM; any other exit is a crash the harness reports.
A config with ``"kind": "program"`` (pipeline and tensor-parallel jobs) is run by agents.stage.
"""
import argparse
import json
import os
from pathlib import Path
import signal
import sys
import time

from agents import patterns, timing
from agents.wire import (CONNECT_MARGIN_S, PACING, SLICE, Peers, Stopped, connect_deadline, exchange, lateness_ms, now,
                            precise_sleeps, sleep_until)


CALIBRATION_ROUND_S = 0.01     # one calibration exchange per slot of this length, on every worker alike
CALIBRATION_WARMUP = 2


def calibrate(peers, phases, at=None, rounds=15):
    """Per-pattern step latency: the median time of a one-slice, unpaced transfer step.

    Every worker runs the same exchanges before the start time, each round at the same instant on
    every worker (slots of CALIBRATION_ROUND_S from ``at``, CLOCK_MONOTONIC being the machine's):
    a worker that starts its exchange after its peers' slices are already in flight measures too
    little, and its peers, waiting for it, too much (on a fabric just started, too much on every
    worker: every phase of the run then ran short). The median over rounds is what a step typically
    costs on the free path (the minimum under-estimates it: measured phases then overran by up to
    5 %); it is taken off each step's pacing schedule, so an uncongested phase lasts its profile
    duration while congestion still stretches it. Without ``at`` (or when its slots have passed)
    the rounds run back to back."""
    tails = {}
    slot = 0
    for pattern in sorted({ph["pattern"] for ph in phases}):
        times = []
        for r in range(CALIBRATION_WARMUP + rounds):
            if at is not None:
                sleep_until(at + slot * CALIBRATION_ROUND_S)
            slot += 1
            t = now()
            _one_step(peers, pattern, SLICE, 1e12, 0.0)
            if r >= CALIBRATION_WARMUP:
                times.append(now() - t)
        tails[pattern] = sorted(times)[len(times) // 2]
    return tails


def _one_step(peers, pattern, nbytes, rate, tail):
    to, frm = patterns.of_worker(pattern, peers.n, peers.me)
    exchange(peers, {k: nbytes for k in to}, {k: nbytes for k in frm}, rate, tail)


def run_phase(peers, ph, scale, tail):
    """One communication phase; ``tail`` (s) is the calibrated latency of one transfer step,
    taken off the pacing schedule so that an uncongested phase lasts its profile duration."""
    n, p = peers.n, ph["pattern"]
    if n < 2:
        return
    volume = ph["gbps"] * 1e9 / 8 * ph["duration_ms"] / 1000 * scale        # bytes per worker
    rate = patterns.transfer_rate(p, n, ph["gbps"] * 1e9 / 8 * scale)        # bytes/s per transfer
    chunk = patterns.bytes_per_transfer(p, n, volume)
    for _ in range(patterns.steps(p, n)):
        _one_step(peers, p, chunk, rate, tail)


class Group:
    """Phase alignment with the other jobs of a CASSINI group (jobs sharing links: of one period, or
    of periods on one unified circle, whose relative pattern repeats every ``group_perimeter_ms``).

    Every leader publishes, in ``<beat_dir>/<job>.beat``, the start of its latest iteration, how far
    that start is behind its own grid (its lag: timing.grid_lag) and its period. Before an
    iteration, a leader compares each member's lag with its own, modulo the perimeter; a member
    whose lag is larger is *behind*, and the leader waits for the largest difference. The group so
    tracks its slowest member: a delay that hits every job alike costs nothing, and no job ever
    pauses a whole iteration to return to an absolute grid. Beats older than two of the member's
    iterations (a member that finished) are ignored."""

    def __init__(self, cfg, t0, it_s):
        self.me = cfg["job"]
        self.dir = Path(cfg["beat_dir"])
        self.t0, self.it = t0, it_s
        self.perimeter = cfg.get("group_perimeter_ms", cfg["iteration_ms"]) / 1000.0
        self.members = [m["job"] for m in cfg.get("group", []) if m["job"] != self.me]

    def own_lag(self, start, slot):
        return timing.grid_lag(start, self.t0, slot, self.it)

    def publish(self, start, slot):
        tmp = self.dir / f".{self.me}.beat"
        tmp.write_text(f"{start!r} {self.own_lag(start, slot)!r} {self.it!r}")
        os.replace(tmp, self.dir / f"{self.me}.beat")

    def lag(self, start, slot):
        """Seconds this job is ahead of the slowest member (0 if none is behind), starting slot
        ``slot`` of its grid at ``start``."""
        worst = 0.0
        mine = self.own_lag(start, slot)
        for job in self.members:
            try:
                t, theirs, period = (float(x) for x in (self.dir / f"{job}.beat").read_text().split())
            except (OSError, ValueError):
                continue
            if start - t > 2 * period:
                continue
            d = timing.wrap(theirs - mine, self.perimeter)     # > 0: that member is behind
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
        from agents import stage
        return stage.main(cfg, args.worker, args.out)

    return replay(cfg, args.worker, args.out)


def iteration_plan(cfg):
    """(phases in start order, compute gap before each, tail after the last), seconds."""
    phases = sorted(cfg["phases"], key=lambda p: p["start_ms"])
    gaps, prev_end = [], 0.0
    for p in phases:
        gaps.append((p["start_ms"] - prev_end) / 1000.0)
        prev_end = p["start_ms"] + p["duration_ms"]
    return phases, gaps, (cfg["iteration_ms"] - prev_end) / 1000.0


class Aligner:
    """When the next iteration starts, by the job's alignment (agents.timing): only the leader
    (worker 0) decides; the other workers follow through the data dependencies."""

    def __init__(self, cfg, worker, t0, it_s):
        leader = worker == 0
        mode = cfg.get("alignment", "grid")
        self.group = Group(cfg, t0, it_s) if mode == "group" and cfg.get("group") and leader else None
        self.grid = mode == "grid" and leader
        self.t0, self.it_s, self.first_slot = t0, it_s, cfg.get("first_slot", 0)
        self.realigns = 0

    def start(self, k):
        """Wait as the rule says; return (start time, re-aligned 0/1)."""
        start, realigned = now(), False
        slot = self.first_slot + k
        if self.group is not None and k > 0:
            lag = self.group.lag(start, slot)
            if lag > timing.LAG_TOLERANCE:                          # wait for the slowest member
                sleep_until(start + lag)
                start = now()
                realigned = timing.realigns(lag, self.it_s)
        elif self.grid and (k > 0 or self.first_slot):
            target, realigned = timing.grid_start(start, self.t0, self.it_s)
            sleep_until(target)
            start = now()
        self.realigns += int(realigned)
        if self.group is not None:
            self.group.publish(start, slot)
        return start, int(realigned)


def replay(cfg, worker, out_path):
    it_s = cfg["iteration_ms"] / 1000.0
    phases, gaps, tail = iteration_plan(cfg)
    t0 = cfg["t0"] + cfg["time_shift_ms"] / 1000.0
    run_start = cfg["run_start"]
    align = Aligner(cfg, worker, t0, it_s)
    inject = {int(k): v / 1000.0 for k, v in cfg.get("inject_delay_ms", {}).get(str(worker), {}).items()}
    peers = Peers(cfg)
    done = 0
    tails = {}
    out = open(out_path, "a", buffering=1)
    try:
        first_start = timing.slot_time(t0, 0.0, cfg.get("first_slot", 0), it_s)
        peers.connect(deadline=connect_deadline(first_start))
        tails = calibrate(peers, phases, at=first_start - CONNECT_MARGIN_S + CALIBRATION_ROUND_S) if peers.n > 1 else {}
        sleep_until(first_start)
        for k in range(cfg["iterations"]):
            if inject.get(k):
                time.sleep(inject[k])
            start, realigned = align.start(k)
            slot = timing.slot_of(start, t0, it_s)
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
            out.write(f"{cfg['job']},{worker},{k + cfg.get('iteration_base', 0)},{slot},{start - run_start:.6f},"
                      f"{comm_start - run_start:.6f},{comm_end - run_start:.6f},{end - run_start:.6f},{realigned}\n")
            done += 1
    except Stopped:
        pass
    finally:
        out.close()
        peers.close()
    print(json.dumps({"job": cfg["job"], "worker": worker, "iterations": done, "realignments": align.realigns,
                      "step_latency_ms": {k: round(v * 1000, 3) for k, v in tails.items()},
                      "timer_late_ms": lateness_ms(), "pacing_late_ms": lateness_ms(PACING)}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
