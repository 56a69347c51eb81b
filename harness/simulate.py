"""``interleave simulate``'s entry point: a spec in the simulator, with what the planner resolves
first (netsens's ``timers: auto``), or, for pipeline and tensor-parallel jobs, the flow model of
their steps. Sits above both the planner and the simulator; nothing below imports it.
"""
import json
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from harness import metrics, provenance
from harness.planners.schedule import resolve_timers, schedule
from harness.sim.engine import Simulator
from harness.spec import SpecError


def simulate_spec(spec, progress=None, times=None, **kw):
    """summary.json (simulator schema) of ``spec``; ``progress(finished jobs)`` at every event;
    ``times``, a dict, receives each job's modelled iteration times, as
    harness.metrics.distribution_rows takes them; keyword arguments go to harness.sim.Simulator."""
    if spec.has_programs:
        summary = simulate_programs(spec)
        if times is not None:           # one step stands for all of a job's steps
            times.update({n: (np.array([j["iteration_ms_mean"]]), np.array([float(j["iterations"])]))
                          for n, j in summary["jobs"].items()})
        return summary
    spec, tuning = resolve_timers(spec)
    sim = Simulator(spec, **kw)
    summary = sim.run(progress)
    if times is not None:
        times.update(sim.iteration_times)
    if tuning:
        summary.setdefault("params", {})["tuning"] = tuning
    return summary


def simulate_run(spec, out=None, replace=False, progress=None, times=None):
    """``interleave simulate [--out DIR]``, ``reproduce --simulate``'s runs and the Python API's
    ``simulate``: the summary of ``spec`` simulated and, with ``out``, its results directory
    (``write_run``; the caller has checked that ``out`` may take it: harness.provenance.refuse_other);
    ``times``, a dict, receives the jobs' modelled iteration times (``simulate_spec``)."""
    times = {} if times is None else times
    summary = simulate_spec(spec, progress=progress, times=times)
    if out is not None:
        write_run(spec, out, summary, replace=replace, times=times)
    return summary


def write_run(spec, d, summary, replace=False, times=None):
    """A simulated run's results directory ``d``: spec.yaml, summary.json (with the background load
    and the versions), jobs.csv (harness.metrics.job_rows), iteration_ms.csv (``times``, as
    ``simulate_spec`` gave them: harness.metrics.distribution_rows) and provenance.json, written under
    ``<d>.partial`` first. A new ``d`` is that directory renamed; into an existing one the files are moved (the caller has checked that
    it holds this spec's simulated results: harness.provenance.stale), or with ``replace`` it is
    removed first (nothing of other results is left beside the new ones)."""
    d = Path(d)
    work = d.with_name(d.name + ".partial")
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    summary["background_load"] = spec.background
    summary["versions"] = provenance.versions_light()
    (work / "spec.yaml").write_text(yaml.safe_dump(spec.raw, sort_keys=False))
    (work / "summary.json").write_text(json.dumps(summary, indent=2))
    pd.DataFrame(metrics.job_rows(summary)).to_csv(work / "jobs.csv", index=False)
    pd.DataFrame(metrics.distribution_rows(times or {}), columns=metrics.DISTRIBUTION_COLUMNS).to_csv(
        work / metrics.DISTRIBUTION, index=False)
    provenance.write(work, spec, "simulated")
    if d.exists() and replace:
        shutil.rmtree(d)
    if d.exists():
        for f in work.iterdir():
            f.replace(d / f.name)
        work.rmdir()
    else:
        work.rename(d)
    return summary


def simulate_programs(spec):
    """``interleave simulate`` for program jobs: the flow model's step of every job under the spec's
    flow scheduler (each step repeats on the grid with the same overlap, so one step stands for all),
    in the summary schema of harness.sim."""
    profile_jobs = [j for j in spec.jobs if not j.is_program]
    if profile_jobs:
        raise SpecError(spec.source, f"jobs[{spec.jobs.index(profile_jobs[0])}]", profile_jobs[0].name,
                        "only program jobs in the flow model: program jobs and profile jobs together run in "
                        "the emulator only (the flow model has no profile jobs)")
    t0 = time.perf_counter()
    plan = schedule(spec)
    fp = plan.flow_scheduler
    jobs = {}
    for j in plan.jobs:
        d = fp["jobs"][j.name]
        step_ms, ideal_ms = d["predicted"]["step_s"] * 1000, d["ideal_step_s"] * 1000
        # a step that overruns the grid delays the next one: the job then runs at its step time
        every_s = max(fp["period_s"], d["predicted"]["step_s"])
        jobs[j.name] = metrics.job(
            program=True, model=j.model, hosts=j.hosts, iterations=j.iterations,
            iteration_ms_mean=step_ms, iteration_ms_p99=step_ms, iteration_ms_profile=round(ideal_ms, 2),
            iteration_ms_meaning=metrics.STEP_MEANING, ect_ms_mean=d["predicted"]["ect_s"] * 1000,
            coflow_ms=d["predicted"]["coflow_s"] * 1000,
            predicted_step_ms=step_ms, predicted_ect_ms=d["predicted"]["ect_s"] * 1000,
            jct_s=j.time_shift_ms / 1000 + (j.iterations - 1) * every_s + d["predicted"]["step_s"],
            time_shift_ms=j.time_shift_ms, alignment=j.alignment, flows=len(d["flows"]))
    vals = [v["iteration_ms_mean"] for v in jobs.values()]
    slow = [v["iteration_ms_mean"] / v["iteration_ms_profile"] for v in jobs.values()]
    makespan = max(v["jct_s"] for v in jobs.values())
    totals = metrics.totals(
        iteration_ms_mean=sum(vals) / len(vals), iteration_ms_p99=max(vals),   # one step per job
        ect_ms_mean=sum(v["ect_ms_mean"] for v in jobs.values()) / len(jobs),
        slowdown_mean=sum(slow) / len(slow), slowdown_p99=max(slow),
        jct_s_mean=sum(v["jct_s"] for v in jobs.values()) / len(jobs), makespan_s=makespan,
        communication_overhead_s=metrics.communication_overhead_s(
            (v["iteration_ms_mean"], v["iteration_ms_profile"], v["iterations"]) for v in jobs.values()))
    return metrics.summary(
        spec.scheduler, spec.name, makespan, jobs, totals,
        {"ok": True, "notes": ["flow-level model of one step per job (harness.sim.flows)"]},
        head={"flow_scheduler": spec.flow_scheduler, "simulated": True},
        simulator={"wall_s": round(time.perf_counter() - t0, 3), "model": "harness.sim.flows",
                   "period_s": fp["period_s"], "hop_latency_s": fp["hop_latency_s"]})
