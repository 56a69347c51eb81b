"""``interleave run``: one spec in, one results directory out.

Order: validate the spec; schedule (harness.planners.schedule: placements, starts and every job's
timing); build the fabric with the backends the doctor chose; start telemetry; start each job's
agents when its epoch comes and its hosts are free (a job that the schedule placed on hosts still
busy waits for them); stop; write the results (the schema is harness.metrics').

Results directory (the contract): ``spec.yaml``, ``schedule.json``, ``environment.json``,
``iterations.csv``, ``links.csv``, ``summary.json``, ``jobs.csv``, ``iteration_ms.csv``; with pipeline or tensor jobs (agents.stage)
also ``flows.csv`` (every flow's step reference, release, arrival, pacing target and the priority
level its sender gave it) and, with ``replan``, ``replans.csv`` (harness.planners.replan), and their
summary gives the consumer's step time, ECT and pacing error (``add_step_metrics``). It is written
under ``<out>.partial`` and renamed at the end: complete or absent. An interrupted or failed run
tears the fabric down and keeps what it had under ``<name>.partial`` (no ``summary.json``), and
says so. Files belong to the invoking user when run with sudo.

Time: seconds since the run start (CLOCK_MONOTONIC). With ``time_dilation: D`` the fabric runs at
rate / D and the plan's times are stretched by D on the way to the agents (``wall_entry``, the one
place model time becomes wall time); measurements come back to model time in ``to_model_time``.
Not done yet: re-phasing running jobs at later epochs (their shifts are kept from placement).
"""
import dataclasses
import json
import os
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from harness import capacity, fidelity, metrics, probe, provenance, registry
from harness.errors import InterleaveError
from harness.fabric import Fabric
from harness.fidelity import cpu_idle, idle_shares
from harness.lifecycle import RunLock
from harness.netcheck import ce_received, datapath_counters
from harness.progress import Progress
from harness.replay import COLUMNS as ITER_COLUMNS, FLOW_COLUMNS, Replayer, byte_scale
from harness.planners import flowplan, replan
from harness.planners.schedule import schedule
from harness.telemetry import CE_PERIOD_MS, FLOW_STATS_SETTLE_S, PERIOD_MS, Telemetry, mono, wait_ce_caught_up
from topologies import by_name
from topologies.base import with_background
from agents import timing
from workloads.profiles import dilate, stretched
from agents.wire import PRIORITY_LEVELS

REPO = Path(__file__).resolve().parent.parent
START_LEAD_S = 3.0            # the run's reference instant t0 is this long after its start: the
                              # first agents connect and calibrate before their first slot
AGENT_SETUP_S = 2.0           # a later job's agents: connections + calibration before its first slot,
AGENT_SETUP_PER_HOST_S = 0.1  # ... plus this per worker (measured connect times grow with the job)
OVERRUN_S = 600.0             # a run still going this long after duration_s is stopped as hung
POLL_S = 0.2                  # the runner's loop: start due jobs, watch agents and the controller
CPU_SAMPLE_S = 1.0            # the fidelity guard's CPU idle samples
CE_CATCH_UP_S = 15.0          # at the end, how long (beyond one CE period) to wait for the controller's
                              # CE samples to equal the switches' own counters (netcheck waits as long)


def versions():
    out = provenance.dist_versions(("os-ken", "numpy", "pandas", "networkx", "scapy"))
    try:
        from mininet.net import VERSION
        out["mininet"] = VERSION
    except ImportError:
        out["mininet"] = None
    out["ovs"] = probe.ovs_status()["version"]
    return out


def chown_to_invoker(path):
    uid, gid = os.environ.get("SUDO_UID"), os.environ.get("SUDO_GID")
    if os.geteuid() == 0 and uid and gid:
        for root, dirs, files in os.walk(path):
            for n in [root] + [os.path.join(root, x) for x in dirs + files]:
                os.chown(n, int(uid), int(gid))


def segments(plan):
    """What the runner starts: one entry per job (``job``: its PlannedJob), or per segment of a
    preempted job (tags ``<job>``, ``<job>.s1``, ...; iterations numbered on with ``base``)."""
    out = []
    for j in plan.jobs:
        base = 0
        for k, sg in enumerate(j.stretches()):
            out.append({"job": j, "name": j.name, "hosts": sg.hosts, "placed_at_s": sg.start_s, "seg": k,
                        "tag": j.name if k == 0 else f"{j.name}.s{k}",
                        "prev_tag": None if k == 0 else (j.name if k == 1 else f"{j.name}.s{k - 1}"),
                        "seg_iterations": sg.iterations, "base": base,
                        "restart_s": j.restart_s if k else 0.0})    # the plan gives it with segments
            base += sg.iterations
    return out


def tags_of(name, keys):
    return [k for k in keys if k == name or k.startswith(name + ".s")]


def wall_entry(entry, plan, dil):
    """A segment entry's times on the wall clock (the one place plan times are dilated): start,
    shift, period, restart, its group members' shifts and the group's perimeter (the LCM of their
    periods)."""
    j, sched = entry["job"], plan.by_name
    period_ms = j.beat_ms
    if plan.is_program(j.name):
        period_ms = plan.flow_scheduler["period_s"] * 1000       # a program job's step grid
    return {"start_s": dil.wall(entry["placed_at_s"]), "shift_ms": dil.wall(j.time_shift_ms),
            "period_s": dil.wall(period_ms / 1000), "restart_s": dil.wall(entry["restart_s"]),
            "group": [{"job": m, "shift_ms": dil.wall(sched[m].time_shift_ms)} for m in j.group or []],
            "perimeter_ms": dil.wall(timing.perimeter([sched[m].beat_ms for m in j.group])) if j.group else None}


def telemetry_periods(spec, dil):
    """(port-statistics period, CE-statistics period) in wall ms: ``telemetry.period_ms`` (default
    PERIOD_MS) and CE_PERIOD_MS are model time, like every time of a spec, so under time dilation the
    controller polls D times less often (its statistics cost CPU per wall second, whatever the
    traffic)."""
    period_ms = float((spec.raw.get("telemetry") or {}).get("period_ms", PERIOD_MS))
    return dil.wall(period_ms), dil.wall(CE_PERIOD_MS)


def to_model_time(dil, iters, links, flows):
    """Measured times back from the wall clock to model time (in place)."""
    for c in ("start", "comm_start", "comm_end", "end"):
        iters[c] = dil.model(iters[c])
    for c in ("time", "counter_time"):
        if c in links:
            links[c] = dil.model(links[c])
    for c in ("reference", "release", "start", "finish", "target"):
        if flows is not None and c in flows:
            flows[c] = dil.model(flows[c])


def wall_fabric(spec, dil):
    """The topology and link parameters the fabric is built with (rates divided by the dilation)."""
    if dil.factor == 1:
        link, topo = spec.link, spec.topology
    else:
        link = spec.link.dilated(dil)
        topo = by_name(spec.topology.name, link=link, **spec.topology.params)
    return with_background(topo, spec.background), link


def prepare(out_dir, spec, plan, findings, backends, link, dil, replace=False):
    """The ``.partial`` working directory with what was asked and decided (``out_dir`` must not
    exist, unless ``replace``: it is replaced when the run completes)."""
    out_dir = Path(out_dir)
    work = out_dir.with_name(out_dir.name + ".partial")
    if out_dir.exists() and not replace:
        raise InterleaveError(f"{out_dir} exists: choose another --out or remove it")
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    (work / "spec.yaml").write_text(yaml.safe_dump(spec.raw, sort_keys=False))
    plan.write(work / "schedule.json")
    env = {"doctor": findings, "backends": backends, "versions": versions(), "time_dilation": dil.factor,
           "plugins": registry.plugin_files(),
           "link": link.to_dict(), "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    (work / "environment.json").write_text(json.dumps(env, indent=2))
    provenance.write(work, spec, "emulated")
    return out_dir, work


def add_environment(work, **items):
    """Add ``items`` to the run's environment.json (what is known only once the fabric is up)."""
    path = work / "environment.json"
    env = json.loads(path.read_text())
    env.update(items)
    path.write_text(json.dumps(env, indent=2))


def run(spec, out_dir, quiet=False, datapath=None, ecn_marker=None, log=lambda m: None, replace=False,
        instances=None):
    """Emulate ``spec`` into ``out_dir`` (with ``replace``, whatever is there is replaced once the run
    is complete); returns its summary."""
    findings = probe.doctor()
    backends = probe.resolve(findings, datapath, ecn_marker, delay=spec.link.delay_ms > 0, instances=instances)
    probe.require_ready(findings)
    plan = schedule(spec)
    dil = timing.Dilation(spec.time_dilation)
    topo, link = wall_fabric(spec, dil)
    too_fast = capacity.warning(link.rate_mbps, *capacity.measurement(
        capacity.key(backends["datapath"], backends["vswitchd_instances"])))
    if too_fast:
        log(f"warning: {too_fast}")
    out_dir, work = prepare(out_dir, spec, plan, findings, backends, link, dil, replace)
    total_it = sum(j.iterations for j in plan.jobs)
    progress = Progress(total_it, "iterations", desc=spec.name, quiet=quiet)
    ok = False
    try:
        with RunLock(log=log) as lock:
            with Fabric(topo, lock.ledger, lock.dir, datapath=backends["datapath"], marker=backends["ecn_marker"],
                        cc=backends["congestion_control"], instances=backends["vswitchd_instances"], log=log) as fab:
                add_environment(work, host_settings=fab.settings)
                measured = Session(spec, plan, fab, work, dil, topo, progress, log).run()
        ok = True
    finally:
        progress.close()
        if not ok:
            log(f"run failed or interrupted: partial data kept in {work}")
    summary = write_results(spec, plan, work, measured, dil, topo)
    if replace and out_dir.exists():
        shutil.rmtree(out_dir)
    os.rename(work, out_dir)
    chown_to_invoker(out_dir)
    return summary


class Session:
    """One run on a built fabric: starts every job (or segment) when it is due and its hosts are
    free, watches agents and the controller, and collects what was measured."""

    def __init__(self, spec, plan, fab, work, dil, topo, progress, log):
        self.spec, self.plan, self.fab, self.work, self.dil, self.topo = spec, plan, fab, work, dil, topo
        self.progress, self.log = progress, log
        self.jobs = {j.name: j for j in spec.jobs}
        self.index = {j.name: i for i, j in enumerate(plan.jobs)}
        self.pending = sorted(segments(plan), key=lambda e: (e["placed_at_s"], e["name"], e["seg"]))
        self.n_entries = len(self.pending)
        self.started, self.finished, self.ce0, self.ce1 = {}, {}, {}, {}
        self.idle_samples = [cpu_idle()]
        self.datapath0 = datapath_counters(fab)

    def run(self):
        period_ms, ce_period_ms = telemetry_periods(self.spec, self.dil)
        self.tm = Telemetry(self.fab, self.work / "telemetry", period_ms=period_ms, ce_period_ms=ce_period_ms).start()
        self.rp = Replayer(self.fab, self.work, self.log, self.dil.factor)
        self.run_start = mono()
        self.replanner = replan.Replanner(self.spec.replan, self.plan.flow_scheduler, self.rp.dir, FLOW_COLUMNS,
                                          lambda: self.dil.model(mono() - self.run_start), self.dil.model,
                                          {j.name: j.iterations for j in self.plan.jobs}) \
            if self.spec.replan else None
        # one reference instant for the whole run: job j's iteration k is planned at slot k of its
        # grid from t_ref (a later job starts at its first slot after it can be ready)
        self.t_ref = self.run_start + START_LEAD_S
        done_it, last_count = 0, -1.0
        while self.pending or self.rp.running():
            now = mono() - self.run_start
            for entry in list(self.pending):
                if self.due(entry, now):
                    self.launch(entry, now)
            self.rp.check()
            if self.replanner is not None:
                self.replanner.tick()
            self.watch_controller()
            self.note_finished()
            if now - last_count >= CPU_SAMPLE_S:
                done_it, last_count = self.rp.iterations_done(), now
                self.idle_samples.append(cpu_idle())
            running = len(self.started) - len(self.finished)
            self.progress.update(done_it, f"{self.dil.model(now):.0f} s, jobs running {running}, "
                                          f"done {len(self.finished)}/{self.n_entries}")
            if now > self.dil.wall(self.spec.duration_s + OVERRUN_S):
                raise InterleaveError(f"run exceeded duration_s + {OVERRUN_S:.0f} s ({self.spec.duration_s} s asked)")
            time.sleep(POLL_S)
        self.note_finished(all_started=True)           # jobs that ended during the last sleep
        time.sleep(FLOW_STATS_SETTLE_S)               # the switches' flow counters after the revalidator
        caught_up = wait_ce_caught_up(self.fab, self.tm.of_path,
                                      timeout_s=CE_CATCH_UP_S + self.tm.ce_period_ms / 1000) is not None
        self.tm.stop()
        self.idle_samples.append(cpu_idle())
        datapath = fidelity.datapath_delta(self.datapath0, datapath_counters(self.fab))
        marker = self.fab.marker_counters() if any(l.params.sharing == "priority" for l in self.topo.links) else None
        return {"iters": self.rp.iterations(), "flows": self.rp.flows(), "links": self.tm.links(self.run_start),
                "marker": marker, "replanner": self.replanner,
                "datapath": datapath, "agents": self.rp.summaries(), "started": self.started, "ce0": self.ce0, "ce1": self.ce1,
                "idle": idle_shares(self.idle_samples), "ce_caught_up": caught_up}

    def due(self, entry, now):
        busy = any(h in self.started[n]["hosts"] for h in entry["hosts"] for n in self.started
                   if n not in self.finished)
        resumable = entry["seg"] == 0 or entry["prev_tag"] in self.finished
        return self.dil.wall(entry["placed_at_s"]) <= now and not busy and resumable

    def launch(self, entry, now):
        """Start the agents of one job (or segment) at its first slot they can make."""
        spec, plan, dil, hosts, tag = self.spec, self.plan, self.dil, entry["hosts"], entry["tag"]
        w = wall_entry(entry, plan, dil)
        job = dataclasses.replace(self.jobs[entry["name"]], iterations=entry["seg_iterations"])
        prof = dilate(stretched(spec.profiles[job.model], entry["job"].period_ms or 0), dil.factor)
        for h in hosts:
            self.ce0[(tag, h)] = ce_received(self.fab, h)
        period_s = w["period_s"] if job.is_program else prof.iteration_ms / 1000
        # connections + calibration, and a resumed segment's restart from its checkpoint
        earliest = mono() + AGENT_SETUP_S + AGENT_SETUP_PER_HOST_S * len(hosts) + w["restart_s"]
        first = timing.first_slot(earliest, self.t_ref, w["shift_ms"] / 1000, period_s)
        program = flowplan.agent_config(job, plan.flow_scheduler, byte_scale(self.topo, hosts, spec.reference_gbps,
                                                                             dil.factor), dil.factor) \
            if job.is_program else None
        self.rp.start(job, prof, hosts, w["shift_ms"], self.t_ref, self.run_start, self.index[entry["name"]],
                      entry["job"].alignment, tag=tag, first_slot=first, iteration_base=entry["base"],
                      group=w["group"] if entry["job"].alignment == "group" else None,
                      group_perimeter_ms=w["perimeter_ms"] if entry["job"].alignment == "group" else None, program=program,
                      replan_path=str(self.replanner.path(job.name)) if program and self.replanner else None)
        self.started[tag] = {"hosts": hosts, "t0": dil.model(self.t_ref - self.run_start), "at": dil.model(now),
                             "first_slot": first}
        self.pending.remove(entry)

    def watch_controller(self):
        fab = self.fab
        if fab.controller is not None and fab.controller.poll() is not None:
            log_copy = self.work / "controller.log"
            shutil.copy(fab.state_dir / "controller.log", log_copy)
            raise InterleaveError(f"the controller died mid-run (exit {fab.controller.returncode}): "
                                  f"routes and telemetry are gone; its log: {log_copy}")

    def note_finished(self, all_started=False):
        """Record the end and the hosts' CE counters of every job whose agents all exited (with
        ``all_started``: of every started job, at the end of the run)."""
        procs = self.rp.procs
        for name, st in self.started.items():
            if name in self.finished:
                continue
            if all_started or all(procs[(name, k)].poll() is not None for k in range(len(st["hosts"]))):
                self.finished[name] = mono() - self.run_start
                for h in st["hosts"]:
                    self.ce1[(name, h)] = ce_received(self.fab, h)


def write_results(spec, plan, work, m, dil, topo):
    """iterations.csv, flows.csv, links.csv and summary.json in model time."""
    iters, links, flows = m["iters"], m["links"], m["flows"] if spec.has_programs else None
    to_model_time(dil, iters, links, flows)
    iters = iters.sort_values(["job", "worker", "iteration"])[ITER_COLUMNS]
    iters.to_csv(work / "iterations.csv", index=False)
    if flows is not None:
        flows = flows.sort_values(["job", "step", "finish"])
        flows.to_csv(work / "flows.csv", index=False)
    links.to_csv(work / "links.csv", index=False)
    steady = {}
    summary = summarize(spec, plan, iters, links, m, dil, topo, steady)
    if flows is not None:
        add_step_metrics(summary, plan, iters, flows, steady)
    if m.get("marker") is not None:
        summary["ecn_marks_by_priority"] = metrics.priority_marks(m["marker"], PRIORITY_LEVELS)
    if m.get("replanner") is not None:
        rp = m["replanner"]
        pd.DataFrame(rp.records, columns=replan.COLUMNS).to_csv(work / "replans.csv", index=False)
        loaded = [a.get("replans_loaded", 0) for a in m["agents"].values()]
        summary["replan"] = metrics.replan(**rp.summary(), agents_loaded_min=min(loaded, default=None))
    (work / "summary.json").write_text(json.dumps(summary, indent=2))
    pd.DataFrame(metrics.job_rows(summary)).to_csv(work / "jobs.csv", index=False)
    rows = metrics.distribution_rows({n: (it, np.ones(len(it))) for n, (it, _slow) in steady.items()})
    pd.DataFrame(rows, columns=metrics.DISTRIBUTION_COLUMNS).to_csv(work / metrics.DISTRIBUTION, index=False)
    return summary


def add_step_metrics(summary, plan, iters, flows, steady):
    """Program jobs: the consumer's step time (worker 0's first op start to last op end, the first
    step left out as warm-up), ECT per step (max over flows of finish - reference - d_i, as in
    harness.sim.flows) and, for paced flows, how far each finished from its target. The totals are
    over every job: profile jobs beside them (``steady``: {job: (steady iteration times ms, their
    slowdowns)} from ``summarize``) keep their iterations."""
    fp = plan.flow_scheduler
    steps_all, ects_all, slow_all, overhead = [], [], [], []
    for name, (it, slow) in steady.items():
        if name not in fp["jobs"]:
            e = summary["jobs"][name]
            steps_all.extend(it.tolist())
            slow_all.extend(slow.tolist())
            overhead.append((e["iteration_ms_mean"], e["iteration_ms_profile"], e["iterations"]))
    for name, d in fp["jobs"].items():
        w0 = iters[(iters.job == name) & (iters.worker == 0)].sort_values("iteration")
        steps = ((w0.end - w0.start) * 1000).to_numpy()[1:]
        f = flows[flows.job == name]
        dmap = {x["name"]: x["d_s"] for x in d["flows"]}
        f = f.assign(late=f.finish - f.reference - f.flow.map(dmap))
        ect = (f[f.step > f.step.min()].groupby("step").late.max() * 1000).to_numpy() if len(f) else np.array([])
        paced = f[f.target.notna()]
        err = ((paced.finish - paced.target) * 1000).to_numpy()
        rel = (paced.finish - paced.target) / (paced.target - paced.release).clip(lower=1e-6)
        ideal_ms = d["ideal_step_s"] * 1000                     # alone, infinitely fast links
        entry = summary["jobs"][name]
        summary["jobs"][name] = metrics.job(program=True, **{
            **entry, "iteration_ms_mean": metrics.mean(steps), "iteration_ms_p99": metrics.percentile(steps, 99),
            "fastest_iteration_ms": min(steps) if len(steps) else None,
            "iteration_ms_profile": ideal_ms, "iteration_ms_meaning": metrics.STEP_MEANING,
            "comm_ms_profile": None,                     # a step's flows overlap its ops: no span alone
            "ect_ms_mean": metrics.mean(ect), "predicted_step_ms": d["predicted"]["step_s"] * 1000,
            "predicted_ect_ms": d["predicted"]["ect_s"] * 1000, "flows": len(f),
            "flows_paced": sum(1 for x in d["flows"] if x.get("schedule")),
            "flows_prioritized": sum(1 for x in d["flows"] if x.get("priority") is not None),
            "pacing_error_ms_p50": float(np.median(err)) if len(err) else None,
            "pacing_error_rel_p50": float(np.median(np.abs(rel))) if len(rel) else None})
        steady[name] = (steps, steps / ideal_ms)
        steps_all.extend(steps.tolist())
        ects_all.extend(ect.tolist())
        slow_all.extend((steps / ideal_ms).tolist())
        overhead.append((metrics.mean(steps), ideal_ms, entry["iterations"]))
    summary["totals"] = metrics.totals(**{
        **summary["totals"], "iteration_ms_mean": metrics.mean(steps_all),
        "iteration_ms_p99": metrics.percentile(steps_all, 99), "slowdown_mean": metrics.mean(slow_all),
        "slowdown_p99": metrics.percentile(slow_all, 99),
        "communication_overhead_s": metrics.communication_overhead_s(overhead), "ect_ms_mean": metrics.mean(ects_all)})
    summary["flow_scheduler"] = fp["policy"]


def max_window_utilization(links, rate_bps_of, window_s):
    """Highest utilisation of any link over ``window_s`` windows, from the cumulative byte counters
    on their own read times (``counter_time``; the sample time when absent) and the link model's
    rate (``rate_bps_of[direction]``). Replies of the controller arrive bunched: over their receipt
    times a second of counters can look like 106 % of the rate."""
    of = links[(links.source == "openflow") & links.tx_bytes.notna()]
    clock = "counter_time" if "counter_time" in of and of.counter_time.notna().any() else "time"
    peak = 0.0
    for did, d in of.groupby("direction"):
        d = d[d[clock].notna()].sort_values(clock)
        t, b = d[clock].to_numpy(), d.tx_bytes.to_numpy()
        if len(t) < 2 or t[-1] - t[0] < window_s or did not in rate_bps_of:
            continue
        starts = t[t <= t[-1] - window_s]
        moved = np.interp(starts + window_s, t, b) - np.interp(starts, t, b)
        peak = max(peak, float(np.max(moved * 8 / window_s / rate_bps_of[did])))
    return peak


def shaping_allowance(link_params, window_s):
    """Utilisation a shaped link may show over ``window_s``: its rate plus one HTB burst (the
    bucket may be full at the window's start), plus 1 % for interpolating between 100 ms samples."""
    return 1 + link_params.burst_bytes * 8 / (link_params.rate_bps * window_s) + 0.01


def shift_errors_ms(name, j, plan, iters, started):
    """How far a job's communication starts were from where its shift put them.

    In a group (schedule.json's ``group``) the shift is relative: the error is the offset to
    another member's nearest earlier communication start minus the planned difference of shifts,
    wrapped into one period (agents.timing.wrap). Otherwise it is the distance to the job's own
    plan grid."""
    sched = plan.by_name
    it = j.beat_ms / 1000
    mine = iters[(iters.job == name) & (iters.worker == 0)].sort_values("comm_start")
    others = [m for m in j.group or [] if m != name]
    if others:
        other = iters[(iters.job == others[0]) & (iters.worker == 0)].sort_values("comm_start")
        if len(other) and len(mine):
            planned = (j.time_shift_ms - sched[others[0]].time_shift_ms) / 1000
            idx = np.searchsorted(other.comm_start.to_numpy(), mine.comm_start.to_numpy()) - 1
            ok = idx >= 0
            d = mine.comm_start.to_numpy()[ok] - other.comm_start.to_numpy()[idx[ok]] - planned
            return np.abs(timing.wrap(d, it)) * 1000
    t0 = started.get(name, {}).get("t0", 0.0)
    slot_start = timing.slot_time(t0, j.time_shift_ms / 1000, mine.slot, it)
    return ((mine.start - slot_start).abs() * 1000).to_numpy()


def job_metrics(j, iters, m):
    """One job's summary entry from its leader's rows, its hosts' CE counters and its agents'
    summaries; also its steady iteration times (ms) for the totals."""
    name, segs = j.name, j.segment_dicts()
    w0 = iters[(iters.job == name) & (iters.worker == 0)].sort_values("iteration")
    pieces = metrics.segment_pieces(w0, segs)
    steady = metrics.steady_iteration_ms(w0, segs)
    comm = np.concatenate([metrics.comm_ms(p) for p in pieces]) if len(w0) else np.array([])
    ce0, ce1 = m["ce0"], m["ce1"]
    marks = sum(ce1[k] - ce0.get(k, 0) for k in ce1 if k[0] in tags_of(name, {t for t, _h in ce1}))
    err = shift_errors_ms(name, j, m["plan"], iters, m["started"])
    realigns = sum(s.get("realignments", 0) for (jn, _w), s in m["agents"].items() if jn in tags_of(name, [jn]))
    span_min = max(1e-9, (w0.end.max() - w0.start.min()) / 60) if len(w0) else 1e-9
    entry = metrics.job(
        model=j.model, hosts=j.hosts, iterations=len(w0),
        iteration_ms_mean=metrics.mean(steady), iteration_ms_p99=metrics.percentile(steady, 99),
        iteration_ms_profile=j.iteration_ms, fastest_iteration_ms=min(steady) if len(steady) else None,
        comm_ms_mean=metrics.mean(comm), comm_ms_profile=m["profiles"][j.model].comm_span_ms,
        jct_s=float(w0.end.max() - j.arrival_s) if len(w0) else None,
        queue_s=m["started"][name]["at"] - j.arrival_s if name in m["started"] else None,
        ecn_marks=marks, ecn_marks_source="receivers (IpExtInCEPkts of the job's hosts)",
        ecn_marks_per_iteration=marks / max(1, len(w0)), time_shift_ms=j.time_shift_ms,
        alignment=j.alignment, padding_ms=j.beat_ms - j.iteration_ms,
        shift_error_ms_p50=float(np.median(err)) if len(err) else None,
        realignments=realigns, realignments_per_minute=realigns / span_min,
        preemptions=len(segs or [None]) - 1, segments=segs)
    return entry, steady, comm


def guard(m, links, shortest_ms, dil, topo):
    """The fidelity guard's signals and verdict (harness.fidelity), on model time: link rates are
    the model's (the fabric's times D), a window of one model second holds D wall seconds; the
    agents' sleeps are late on the wall clock, against the shortest iteration (``shortest_ms``, model
    time) on that clock."""
    rates = {did: dil.wall(l.params.rate_bps) for l in topo.links for did, *_ in l.directions()}
    peak = max_window_utilization(links, rates, 1.0)
    allowed = max(shaping_allowance(l.params, dil.wall(1.0)) for l in topo.links)
    signals = fidelity.signals(m["idle"], list(m["agents"].values()), peak, allowed,
                               dil.wall(shortest_ms), m.get("datapath"))
    ok, notes = fidelity.verdict(signals)
    return {"ok": ok, "notes": notes, **signals}


def summarize(spec, plan, iters, links, m, dil, topo, steady_of=None):
    """The summary of a run; ``steady_of`` (a dict) receives each job's steady iteration times (ms)
    and their slowdowns, for ``add_step_metrics``."""
    jobs, all_it, all_slow, all_comm = {}, [], [], []
    m = {**m, "plan": plan, "profiles": spec.profiles}
    for j in plan.jobs:
        jobs[j.name], steady, comm = job_metrics(j, iters, m)
        all_it.extend(steady.tolist())
        all_comm.extend(comm.tolist())
        all_slow.extend((steady / j.iteration_ms).tolist())
        if steady_of is not None:
            steady_of[j.name] = (steady, steady / j.iteration_ms)
    jcts = [v["jct_s"] for v in jobs.values() if v["jct_s"] is not None]
    queues = [v["queue_s"] for v in jobs.values() if v["queue_s"] is not None]
    end = float(iters.end.max()) if len(iters) else None
    restarts = [metrics.restart_cost(j.segment_dicts(), j.restart_s) for j in plan.jobs]
    totals = metrics.totals(
        iteration_ms_mean=metrics.mean(all_it), iteration_ms_p99=metrics.percentile(all_it, 99),
        comm_ms_mean=metrics.mean(all_comm), ecn_marks=sum(v["ecn_marks"] for v in jobs.values()),
        # iteration time / the profile's: comparable across models (a trace mixes 58 ms and 3 s)
        slowdown_mean=metrics.mean(all_slow), slowdown_p99=metrics.percentile(all_slow, 99),
        jct_s_mean=metrics.mean(jcts), makespan_s=end, queue_s_mean=metrics.mean(queues),
        communication_overhead_s=metrics.communication_overhead_s(
            (v["iteration_ms_mean"], v["iteration_ms_profile"], v["iterations"]) for v in jobs.values()),
        preemptions=sum(v["preemptions"] for v in jobs.values()),
        restarts=sum(r for r, _g in restarts), restart_gpu_s=sum(g for _r, g in restarts))
    telemetry = {"ce_caught_up": m.get("ce_caught_up"),
                 "ce_caught_up_meaning": "the controller's last CE samples equal the switches' own counters "
                                         "(links.csv's openflow ecn_marked is complete)"}
    judged = guard(m, links, min(j.iteration_ms for j in plan.jobs), dil, topo)
    return metrics.summary(spec.scheduler, spec.name, end or 0.0, jobs, totals, judged, telemetry=telemetry)
