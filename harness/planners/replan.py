"""Re-planning echelon's priorities from measured arrivals while a run goes (spec ``replan``, issue 17).

With ``flow_scheduler: echelon`` on priority ports the plan (harness.planners.flowplan) fixes every
flow's priority before the run from the arrangement alone: the jobs take turns going first, one step
each, and within a job its flows go by their ideal offset d_i. ``replan: {every_steps: N,
window_steps: W}`` closes the loop: whenever every program job has completed N more steps, the
runner reads the arrivals its stage receivers wrote (flows rows: reference, release, start, finish
per flow and step) for each job's last W complete steps and gives

  the jobs       the levels in order of how far behind they are (``behind``: the mean over the window
                 of the step's ECT, max over flows of finish - reference - d_i, as
                 harness.runner.add_step_metrics; most behind first, ties in job order);
  a job's flows  its levels by their measured laxity, least first (``laxity``: d_i - (release -
                 reference) - (finish - start): its deadline minus when it was released and how long it
                 took on the wire), in flowplan.levels_by's equal bins.

A flow with no arrival in the window keeps its order by d_i (the job's flows then go by the plan's
rule). The new table is written for each job as ``<agents>/<job>.replan.json`` ({version, from_step,
priority per flow}); the agents (agents.stage) load it at the start of a step and use it from
``from_step`` (two steps after the job's newest complete one, so that every worker has it) on.
The runner records every plan and its cost (CPU time of reading the arrivals and planning) in
``replans.csv`` and summary.json's ``replan`` (harness.metrics.REPLAN).
"""
import json
import os
import time
from pathlib import Path

from harness.planners.flowplan import levels_by
from agents.wire import PRIORITY_LEVELS
from harness.programblocks import REPLAN_KEYS as KEYS

LEAD_STEPS = 2          # a plan applies from the job's newest complete step + this
RULE = ("jobs by measured step ECT over the window (most behind first); a job's flows by measured laxity "
        "d_i - release offset - time on the wire (least first)")
COLUMNS = ["version", "time_s", "job", "from_step", "behind_ms", "priority", "cpu_ms", "wall_ms"]


def laxity(rows, d):
    """Per flow name, its mean measured laxity over ``rows`` (flows rows of one job): d_i minus
    its release offset minus its time on the wire (s)."""
    acc = {}
    for r in rows:
        lx = d[r["flow"]] - (r["release"] - r["reference"]) - (r["finish"] - r["start"])
        acc.setdefault(r["flow"], []).append(lx)
    return {k: sum(v) / len(v) for k, v in acc.items()}


def behind(rows, d):
    """The job's mean step ECT over ``rows`` (s): per step, max over flows of finish - reference - d_i."""
    per = {}
    for r in rows:
        late = r["finish"] - r["reference"] - d[r["flow"]]
        per[r["step"]] = max(per.get(r["step"], late), late)
    return sum(per.values()) / len(per) if per else 0.0


def complete_steps(by_step, n_flows):
    """The steps of which every one of the job's ``n_flows`` flows has arrived, in order
    (``by_step``: {step: its flows rows})."""
    return sorted(s for s, rows in by_step.items() if len(rows) >= n_flows)


def plan(jobs, rows_of, levels=PRIORITY_LEVELS):
    """The re-planned priorities: ``jobs`` {name: plan flows (name, d_s) in the agents' order}, in job
    order; ``rows_of`` {name: flows rows of its window}. Returns {name: (behind_s, [level per flow])}."""
    d_of = {name: {f["name"]: f["d_s"] for f in flows} for name, flows in jobs.items()}
    lag = {name: behind(rows_of.get(name, []), d_of[name]) for name in jobs}
    order = sorted(jobs, key=lambda n: -lag[n])             # stable: ties keep job order
    out = {}
    for name, flows in jobs.items():
        lx = laxity(rows_of.get(name, []), d_of[name])
        keys = [lx[f["name"]] for f in flows] if all(f["name"] in lx for f in flows) else [f["d_s"] for f in flows]
        out[name] = (lag[name], levels_by(keys, order.index(name), len(jobs), levels))
    return out


class ArrivalLog:
    """The flows rows the stage receivers append to ``<agents>/<job>.w<i>.csv.flows``, read as they
    grow (whole lines only), kept as ``steps``: {job: {step: its rows}}."""

    def __init__(self, agents_dir, columns):
        self.dir, self.columns = Path(agents_dir), columns
        self.offset, self.steps = {}, {}

    def read(self):
        for f in sorted(self.dir.glob("*.csv.flows")):
            pos = self.offset.get(f, 0)
            with open(f, "rb") as fh:
                fh.seek(pos)
                data = fh.read()
            end = data.rfind(b"\n") + 1
            self.offset[f] = pos + end
            for line in data[:end].decode().splitlines():
                v = dict(zip(self.columns, line.split(",")))
                row = {"flow": v["flow"], "step": int(v["step"]),
                       **{k: float(v[k]) for k in ("reference", "release", "start", "finish")}}
                self.steps.setdefault(v["job"], {}).setdefault(row["step"], []).append(row)
        return self.steps


class Replanner:
    """The runner's side: ``tick()`` from its loop; re-plans when due, writes each job's table for
    its agents, keeps the record."""

    def __init__(self, block, decision, agents_dir, columns, clock, model_s=lambda x: x, steps=None):
        """``steps``: {job: its steps in the run}; a job that has completed them no longer holds
        the next plan back."""
        self.every, self.window = block["every_steps"], block["window_steps"]
        self.steps = steps or {}
        self.jobs = {name: d["flows"] for name, d in decision["jobs"].items()}
        self.dir, self.clock, self.model_s = Path(agents_dir), clock, model_s
        self.log = ArrivalLog(agents_dir, columns)
        self.next_at = self.every
        self.version = 0
        self.records = []               # one per plan and job (replans.csv)
        self.costs = []                 # (CPU ms, wall ms) of each plan
        self.cpu_ms = 0.0               # every tick's, re-planning or not

    def path(self, job):
        return self.dir / f"{job}.replan.json"

    def tick(self):
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        steps = self.log.read()
        done = {n: complete_steps(steps.get(n, {}), len(f)) for n, f in self.jobs.items()}
        # step 0 is warm-up (connections, first slot); a job counts its steps from 1
        counts = {n: len([s for s in steps if s > 0]) for n, steps in done.items()
                  if len(steps) < self.steps.get(n, float("inf"))}
        if not counts or min(counts.values()) < self.next_at:
            self.cpu_ms += (time.thread_time() - cpu0) * 1000
            return None
        self.next_at = min(counts.values()) + self.every
        window = {n: [s for s in done[n] if s > 0][-self.window:] for n in self.jobs}
        # measured times go to model time (d_i is model time): offsets scale with the dilation
        win_rows = {n: [{**r, **{k: self.model_s(r[k]) for k in ("reference", "release", "start", "finish")}}
                        for s in window[n] for r in steps[n][s]] for n in self.jobs}
        new = plan(self.jobs, win_rows)
        self.version += 1
        from_step = {name: max(done[name]) + LEAD_STEPS for name in new}
        for name, (_lag, prio) in new.items():
            tmp = self.dir / f".{name}.replan.json"
            tmp.write_text(json.dumps({"version": self.version, "from_step": from_step[name], "priority": prio}))
            os.replace(tmp, self.path(name))
        cpu, wall = (time.thread_time() - cpu0) * 1000, (time.perf_counter() - wall0) * 1000
        self.cpu_ms += cpu
        self.costs.append((cpu, wall))
        at = self.clock()
        for name, (lag, prio) in new.items():
            self.records.append({"version": self.version, "time_s": round(at, 3), "job": name,
                                 "from_step": from_step[name], "behind_ms": round(lag * 1000, 3),
                                 "priority": " ".join(map(str, prio)), "cpu_ms": round(cpu, 3), "wall_ms": round(wall, 3)})
        return new

    def summary(self):
        """summary.json's ``replan`` values (harness.metrics.REPLAN)."""
        cpu = [c for c, _w in self.costs]
        wall = [w for _c, w in self.costs]
        return {"every_steps": self.every, "window_steps": self.window, "plans": len(self.costs), "rule": RULE,
                "cpu_ms_mean": sum(cpu) / len(cpu) if cpu else None, "cpu_ms_max": max(cpu, default=None),
                "wall_ms_mean": sum(wall) / len(wall) if wall else None, "cpu_ms_total": self.cpu_ms}
