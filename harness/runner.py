"""``interleave run``: one spec in, one results directory out.

Order: validate the spec; schedule (harness.schedulers.plan); build the fabric with the backends the
doctor chose; start telemetry; start each job's agents when its epoch comes and its hosts are free
(a job that the schedule placed on hosts still busy waits for them); stop; write the results.

Results directory (the contract): ``spec.yaml``, ``schedule.json``, ``environment.json``,
``iterations.csv``, ``links.csv``, ``summary.json``; with pipeline or tensor jobs (workloads.stage)
also ``flows.csv`` (every flow's step reference, release, arrival and pacing target), and their
summary gives the consumer's step time, ECT and pacing error (``add_step_metrics``). It is written under ``<out>.partial`` and
renamed at the end: complete or absent. An interrupted or failed run tears the fabric down and
keeps what it had under ``<name>.partial`` (no ``summary.json``), and says so. Files belong to the
invoking user when run with sudo.

Time: seconds since the run start (CLOCK_MONOTONIC). With ``time_dilation: D`` the fabric runs at
rate / D and every profile time is stretched by D; the results are reported in undilated time.
Not done yet: re-phasing running jobs at later epochs (their shifts are kept from placement).
"""
import dataclasses
import json
import os
import platform
import shutil
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import yaml

from harness import __version__, fidelity, probe
from harness.errors import InterleaveError
from harness.fabric import Fabric
from harness.lifecycle import RunLock
from harness.linkmodel import LinkParams
from harness.netcheck import ce_received
from harness.replay import COLUMNS as ITER_COLUMNS, Replayer, byte_scale
from harness.schedulers import flowplan
from harness.schedulers.plan import groups, schedule
from harness.fidelity import idle_shares
from harness.telemetry import FLOW_STATS_SETTLE_S, Telemetry, mono
from topologies import by_name
from topologies.base import with_background
from workloads.profiles import dilate

REPO = Path(__file__).resolve().parent.parent


def versions_light():
    """Versions of the Python side (no OVS probe): enough for simulated results."""
    out = {"interleave": __version__, "python": platform.python_version(), "kernel": os.uname().release}
    from importlib import metadata
    for dist in ("numpy", "pandas", "networkx"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def versions():
    out = {"interleave": __version__, "python": platform.python_version(), "kernel": os.uname().release}
    from importlib import metadata
    for dist in ("os-ken", "numpy", "pandas", "networkx", "scapy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
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


def cpu_idle():
    v = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return v[3] + v[4], sum(v)


class Progress:
    def __init__(self, quiet, total_jobs):
        self.quiet, self.total, self.last = quiet, total_jobs, 0.0

    def __call__(self, elapsed, running, done, iterations, total):
        if self.quiet or elapsed - self.last < 1.0:
            return
        self.last = elapsed
        sys.stderr.write(f"\r  {elapsed:6.1f} s  jobs running {running}, done {done}/{self.total}, "
                         f"iterations {iterations}/{total} ({iterations / max(1, total):.0%})  ")
        sys.stderr.flush()

    def end(self):
        if not self.quiet:
            sys.stderr.write("\n")


def segments(plan):
    """What the runner starts: one entry per job, or per segment of a preempted job (tags
    ``<job>``, ``<job>.s1``, ...; iterations numbered on with ``base``)."""
    out = []
    for j in plan["jobs"]:
        segs = j.get("segments") or [{"start_s": j["placed_at_s"], "hosts": j["hosts"], "iterations": j["iterations"]}]
        base = 0
        for k, sg in enumerate(segs):
            out.append({**j, "hosts": sg["hosts"], "placed_at_s": sg["start_s"], "seg": k,
                        "tag": j["name"] if k == 0 else f"{j['name']}.s{k}",
                        "prev_tag": None if k == 0 else (j["name"] if k == 1 else f"{j['name']}.s{k - 1}"),
                        "seg_iterations": sg["iterations"], "base": base,
                        "restart_s": j.get("restart_s", 0.0) if k else 0.0})
            base += sg["iterations"]
    return out


def tags_of(name, keys):
    return [k for k in keys if k == name or k.startswith(name + ".s")]


def run(spec, out_dir, quiet=False, datapath=None, ecn_marker=None, log=lambda m: None):
    findings = probe.doctor()
    backends = probe.resolve(findings, datapath, ecn_marker)
    probe.require_ready(findings)
    plan = schedule(spec)
    D = spec.time_dilation
    link = spec.link if D == 1 else LinkParams.scaled(spec.link.rate_mbps / D, mtu=spec.link.mtu)
    topo = spec.topology if D == 1 else by_name(spec.topology.name, link=link, **spec.topology.params)
    topo = with_background(topo, spec.background)
    out_dir = Path(out_dir)
    work = out_dir.with_name(out_dir.name + ".partial")
    if out_dir.exists():
        raise InterleaveError(f"{out_dir} exists: choose another --out or remove it")
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    (work / "spec.yaml").write_text(yaml.safe_dump(spec.raw, sort_keys=False))
    (work / "schedule.json").write_text(json.dumps(plan, indent=2))
    env = {"doctor": findings, "backends": backends, "versions": versions(), "time_dilation": D,
           "link": link.to_dict(), "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    (work / "environment.json").write_text(json.dumps(env, indent=2))
    jobs = {j.name: j for j in spec.jobs}
    sched = {j["name"]: j for j in plan["jobs"]}
    order = sorted(segments(plan), key=lambda e: (e["placed_at_s"], e["name"], e["seg"]))
    realign = spec.uses_cassini or spec.base == "fixed"
    ok = False
    progress = Progress(quiet, len(order))          # jobs, or their segments when preempted
    try:
        with RunLock(log=log) as lock:
            with Fabric(topo, lock.ledger, lock.dir, datapath=backends["datapath"], marker=backends["ecn_marker"],
                        cc=backends["congestion_control"], log=log) as fab:
                tm = Telemetry(fab, work / "telemetry", period_ms=float((spec.raw.get("telemetry") or {})
                                                                          .get("period_ms", 100))).start()
                rp = Replayer(fab, work, log)
                run_start = mono()
                # one reference instant for the whole run: job j's iteration k is planned at
                # t_ref + shift_j + k x iteration_j (a later job starts at its first slot after now)
                t_ref = run_start + 3.0
                idle_samples = [cpu_idle()]            # one a second: the fidelity guard's CPU signal
                started, finished, ce0, ce1 = {}, {}, {}, {}
                pending = list(order)
                grp = groups(plan, spec.cassini["align_min_score"])
                done_it, last_count = 0, -1.0
                total_it = sum(j["iterations"] for j in plan["jobs"])
                index = {j["name"]: i for i, j in enumerate(plan["jobs"])}
                # all agents of the same epoch share T0; shifts are offsets from it
                while pending or rp.running():
                    now = mono() - run_start
                    for j in list(pending):
                        hosts, tag = j["hosts"], j["tag"]
                        busy = [h for h in hosts if any(h in started[n]["hosts"] for n in started if n not in finished)]
                        resumable = j["seg"] == 0 or j["prev_tag"] in finished
                        if j["placed_at_s"] * D <= now and not busy and resumable:
                            job = dataclasses.replace(jobs[j["name"]], iterations=j["seg_iterations"])
                            prof = dilate(spec.profiles[job.model], D)
                            for h in hosts:
                                ce0[(tag, h)] = ce_received(fab, h)
                            shift_s, it_s = j["time_shift_ms"] * D / 1000, prof.iteration_ms / 1000
                            if job.is_program:          # its step grid, not the model's profile
                                it_s = plan["flow_scheduler"]["period_s"] * D
                            # connections + calibration, and a resumed segment's restart from its checkpoint
                            earliest = mono() + 2.0 + 0.1 * len(hosts) + j["restart_s"] * D
                            first = max(0, int(np.ceil((earliest - t_ref - shift_s) / it_s)))
                            members = [{"job": m, "shift_ms": sched[m]["time_shift_ms"] * D}
                                       for m in sorted(grp[j["name"]])
                                       if sched[m]["iteration_ms"] == j["iteration_ms"]]
                            extra = {"first_slot": first, "iteration_base": j["base"]}
                            keep = realign
                            if spec.uses_cassini:   # shifts kept only among compatible jobs; others start shifted
                                keep = len(members) > 1
                            if keep and len(members) > 1:
                                extra.update(group=members, beat_dir=str(rp.dir))
                            if job.is_program:
                                extra.update(flowplan.agent_config(job, plan["flow_scheduler"],
                                                                   byte_scale(topo, hosts, spec.reference_gbps), D))
                            rp.start(job, prof, hosts, j["time_shift_ms"] * D, t_ref, run_start, index[j["name"]],
                                     keep, extra, tag=tag)
                            started[tag] = {"hosts": hosts, "t0": t_ref - run_start, "at": now, "first_slot": first}
                            pending.remove(j)
                    rp.check()
                    if fab.controller is not None and fab.controller.poll() is not None:
                        log_copy = work / "controller.log"
                        shutil.copy(fab.state_dir / "controller.log", log_copy)
                        raise InterleaveError(f"the controller died mid-run (exit {fab.controller.returncode}): "
                                              f"routes and telemetry are gone; its log: {log_copy}")
                    for (name, w), p in list(rp.procs.items()):
                        if name not in finished and all(rp.procs[(name, k)].poll() is not None
                                                        for k in range(len(started[name]["hosts"]))):
                            finished[name] = mono() - run_start
                            for h in started[name]["hosts"]:
                                ce1[(name, h)] = ce_received(fab, h)
                    if now - last_count >= 1.0:
                        done_it, last_count = rp.iterations_done(), now
                        idle_samples.append(cpu_idle())
                    progress(now / D, len(started) - len(finished), len(finished), done_it, total_it)
                    if now > (spec.duration_s * D) + 600 * D:
                        raise InterleaveError(f"run exceeded duration_s + 600 s ({spec.duration_s} s asked)")
                    time.sleep(0.2)
                progress.end()
                for name in started:                  # jobs that ended during the last sleep
                    if name not in finished:
                        finished[name] = mono() - run_start
                        for h in started[name]["hosts"]:
                            ce1[(name, h)] = ce_received(fab, h)
                time.sleep(FLOW_STATS_SETTLE_S + tm.ce_period_ms / 1000)   # a CE sample after the revalidator
                tm.stop()
                idle_samples.append(cpu_idle())
                iters = rp.iterations()
                flows = rp.flows()
                links = tm.links(run_start)
                summaries = rp.summaries()
            ok = True
    finally:
        if not ok:
            progress.end()
            log(f"run failed or interrupted: partial data kept in {work}")
    # time back to undilated seconds
    for c in ("start", "comm_start", "comm_end", "end"):
        iters[c] = iters[c] / D
    links["time"] = links["time"] / D
    iters = iters.sort_values(["job", "worker", "iteration"])[ITER_COLUMNS]
    iters.to_csv(work / "iterations.csv", index=False)
    if spec.has_programs:
        for c in ("reference", "release", "start", "finish", "target"):
            flows[c] = flows[c] / D
        flows = flows.sort_values(["job", "step", "finish"])
        flows.to_csv(work / "flows.csv", index=False)
    links.to_csv(work / "links.csv", index=False)
    summary = summarize(spec, plan, iters, links, started, ce0, ce1, summaries, idle_shares(idle_samples), D, topo)
    if spec.has_programs:
        add_step_metrics(summary, plan, iters, flows)
    (work / "summary.json").write_text(json.dumps(summary, indent=2))
    os.rename(work, out_dir)
    chown_to_invoker(out_dir)
    return summary


def add_step_metrics(summary, plan, iters, flows):
    """Program jobs: the consumer's step time (worker 0's first op start to last op end, the first
    step left out as warm-up), ECT per step (max over flows of finish - reference - d_i, as in
    harness.sim.flows) and, for paced flows, how far each finished from its target."""
    fp = plan["flow_scheduler"]
    steps_all, ects_all, slow_all = [], [], []
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
        job = summary["jobs"][name]
        job.update({
            "iteration_ms_mean": round(float(steps.mean()), 2) if len(steps) else None,
            "iteration_ms_p99": round(float(np.percentile(steps, 99)), 2) if len(steps) else None,
            "iteration_ms_meaning": "step time of the consuming computation (worker 0: first op start to last op end)",
            "ect_ms_mean": round(float(ect.mean()), 2) if len(ect) else None,
            "predicted_step_ms": round(d["predicted"]["step_s"] * 1000, 2),
            "predicted_ect_ms": round(d["predicted"]["ect_s"] * 1000, 2),
            "iteration_ms_profile": round(d["ideal_step_s"] * 1000, 2),     # alone, infinitely fast links
            "flows": int(len(f)),
            "pacing_error_ms_p50": round(float(np.median(err)), 2) if len(err) else None,
            "pacing_error_rel_p50": round(float(np.median(np.abs(rel))), 4) if len(rel) else None})
        steps_all.extend(steps.tolist())
        ects_all.extend(ect.tolist())
        slow_all.extend((steps / (d["ideal_step_s"] * 1000)).tolist())
    t = summary["totals"]
    t["iteration_ms_mean"] = round(float(np.mean(steps_all)), 2) if steps_all else None
    t["iteration_ms_p99"] = round(float(np.percentile(steps_all, 99)), 2) if steps_all else None
    t["slowdown_mean"] = round(float(np.mean(slow_all)), 4) if slow_all else None
    t["slowdown_p99"] = round(float(np.percentile(slow_all, 99)), 4) if slow_all else None
    t["communication_overhead_s"] = round(sum((v["iteration_ms_mean"] - v["iteration_ms_profile"]) * v["iterations"]
                                              for v in summary["jobs"].values()
                                              if v["iteration_ms_mean"] is not None) / 1000, 3)
    t["ect_ms_mean"] = round(float(np.mean(ects_all)), 2) if ects_all else None
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


def iteration_times_ms(w0):
    """Iteration times of a job from its leader's rows: start to next start (a re-alignment pause
    before an iteration is part of the iteration before it, as it would be in a training log); the
    last iteration ends at its end."""
    starts, ends = w0.start.to_numpy(), w0.end.to_numpy()
    if len(starts) == 0:
        return np.array([])
    return np.append(np.diff(starts), ends[-1] - starts[-1]) * 1000


def shift_errors_ms(name, j, plan, iters, started, D):
    """How far a job's communication starts were from where its shift put them.

    In a group (jobs sharing links, same period) the shift is relative: the error is the offset to
    another member's nearest earlier communication start minus the planned difference of shifts,
    wrapped into (-it/2, it/2]. Otherwise it is the distance to the job's own plan grid."""
    sched = {x["name"]: x for x in plan["jobs"]}
    it = j["iteration_ms"] / 1000
    mine = iters[(iters.job == name) & (iters.worker == 0)].sort_values("comm_start")
    grp = sorted(m for m in groups(plan)[name] if m != name and sched[m]["iteration_ms"] == j["iteration_ms"])
    if grp:
        other = iters[(iters.job == grp[0]) & (iters.worker == 0)].sort_values("comm_start")
        if len(other) and len(mine):
            planned = (j["time_shift_ms"] - sched[grp[0]]["time_shift_ms"]) / 1000
            idx = np.searchsorted(other.comm_start.to_numpy(), mine.comm_start.to_numpy()) - 1
            ok = idx >= 0
            d = mine.comm_start.to_numpy()[ok] - other.comm_start.to_numpy()[idx[ok]] - planned
            d = (d + it / 2) % it - it / 2
            return np.abs(d) * 1000
    t0 = started.get(name, {}).get("t0", 0.0) / D
    slot_start = t0 + j["time_shift_ms"] / 1000 + mine.slot * it
    return ((mine.start - slot_start).abs() * 1000).to_numpy()


def summarize(spec, plan, iters, links, started, ce0, ce1, summaries, idle_per_s, D, topo):
    jobs, all_it, all_slow = {}, [], []
    for j in plan["jobs"]:
        name = j["name"]
        w0 = iters[(iters.job == name) & (iters.worker == 0)].sort_values("iteration")
        bounds = np.cumsum([sg["iterations"] for sg in j.get("segments", [])])[:-1]
        cuts = [0] + [int(np.searchsorted(w0.iteration.to_numpy(), b)) for b in bounds] + [len(w0)]
        pieces = [w0.iloc[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]
        it_ms = np.concatenate([iteration_times_ms(p) for p in pieces]) if len(w0) else np.array([])
        steady = it_ms[1:] if len(it_ms) > 1 else it_ms
        all_it.extend(steady.tolist())
        all_slow.extend((steady / j["iteration_ms"]).tolist())
        marks = sum(ce1[k] - ce0.get(k, 0) for k in ce1 if k[0] in tags_of(name, {t for t, _h in ce1}))
        n = max(1, len(w0))
        err = shift_errors_ms(name, j, plan, iters, started, D)
        realigns = sum(s.get("realignments", 0) for (jn, _w), s in summaries.items() if jn in tags_of(name, [jn]))
        span_min = max(1e-9, (w0.end.max() - w0.start.min()) / 60) if len(w0) else 1e-9
        jobs[name] = {
            "model": j["model"], "hosts": j["hosts"], "iterations": int(len(w0)),
            "iteration_ms_mean": round(float(np.mean(steady)), 2) if len(steady) else None,
            "iteration_ms_p99": round(float(np.percentile(steady, 99)), 2) if len(steady) else None,
            "iteration_ms_profile": j["iteration_ms"],
            "jct_s": round(float(w0.end.max() - j.get("arrival_s", 0.0)), 3) if len(w0) else None,
            "ecn_marks": int(marks), "ecn_marks_source": "receivers (IpExtInCEPkts of the job's hosts)",
            "ecn_marks_per_iteration": round(marks / n, 3),
            "time_shift_ms": j["time_shift_ms"], "shift_error_ms_p50": round(float(np.median(err)), 2) if len(err) else None,
            "realignments": int(realigns), "realignments_per_minute": round(realigns / span_min, 2),
        }
        if j.get("segments"):
            jobs[name].update(preemptions=len(j["segments"]) - 1, segments=j["segments"])
        jobs[name]["fastest_iteration_ms"] = round(float(min(steady)), 2) if len(steady) else None
    jcts = [v["jct_s"] for v in jobs.values() if v["jct_s"] is not None]
    rates = {did: l.params.rate_bps * D for l in topo.links for did, *_ in l.directions()}
    peak = max_window_utilization(links, rates, 1.0)
    allowed = max(shaping_allowance(l.params, 1.0) for l in topo.links)
    guard = fidelity.signals(idle_per_s, list(summaries.values()), peak, allowed,
                             min(j["iteration_ms"] for j in plan["jobs"]))
    ok, notes = fidelity.verdict(guard)
    return {
        "scheduler": spec.scheduler, "spec": spec.name,
        "duration_s": round(float(iters.end.max()) if len(iters) else 0.0, 3),
        "jobs": jobs,
        "totals": {"iteration_ms_mean": round(float(np.mean(all_it)), 2) if all_it else None,
                   "iteration_ms_p99": round(float(np.percentile(all_it, 99)), 2) if all_it else None,
                   "ecn_marks": int(sum(v["ecn_marks"] for v in jobs.values())),
                   # iteration time / the profile's: comparable across models (a trace mixes 58 ms and 3 s)
                   "slowdown_mean": round(float(np.mean(all_slow)), 4) if all_slow else None,
                   "slowdown_p99": round(float(np.percentile(all_slow, 99)), 4) if all_slow else None,
                   "jct_s_mean": round(float(np.mean(jcts)), 3) if jcts else None,
                   "makespan_s": round(float(iters.end.max()), 3) if len(iters) else None,
                   "communication_overhead_s": round(sum((v["iteration_ms_mean"] - v["iteration_ms_profile"]) *
                                                         v["iterations"] for v in jobs.values()
                                                         if v["iteration_ms_mean"] is not None) / 1000, 3)},
        "fidelity": {"ok": ok, "notes": notes, **guard},
    }
