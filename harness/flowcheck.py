"""One emulated run's flows against the flow model's, flow by flow: where the model's step goes
wrong.

Reads a results directory of program jobs (``flows.csv``, ``schedule.json``, ``spec.yaml``) and
plays the run's plan in the model again (harness.planners.flowplan.steady_steps: the step between
its neighbours on the grid, the run's policy, shifts and period, the calibration in the code now).
Per job and flow, in the model's release order: the model's release and duration, and over the
run's steps (the first left out as warm-up) the median release, duration and finish lag (emulated
finish - model finish), all from the step's reference; with several jobs, how far each job's flow
is released after the same flow of the first job (the jobs' drift within a step). Under priority
queues (echelon) the jobs take turns: step k is compared with the model's turn k mod jobs.

    python -m harness.flowcheck RUN_DIR [--job a]
"""
import argparse
import sys
from pathlib import Path

import pandas as pd

from harness import spec as spec_mod
from harness.errors import UsageError
from harness.plan import Plan
from harness.routing import compute_routes
from harness.planners import flowplan

WARMUP_STEPS = 1


def model_turns(run):
    """[per turn: {job: harness.sim.flows result of its step}] of the run's plan, played again."""
    plan = Plan.read(run / "schedule.json")
    fs = plan.flow_scheduler
    if not fs:
        raise UsageError(f"{run}: schedule.json has no flow_scheduler (not a run of program jobs)")
    sp = spec_mod.load(run / "spec.yaml")
    routes = compute_routes(sp.topology)
    hosts = {j.name: j.hosts for j in sp.jobs}
    shifts = {j.name: j.time_shift_ms for j in plan.jobs}
    if fs.get("priorities"):
        return [flowplan.steady_steps(sp, routes, hosts, shifts, fs["period_s"], "priority", phase)
                for phase in range(len(flowplan.program_jobs(sp)))]
    return [flowplan.steady_steps(sp, routes, hosts, shifts, fs["period_s"], fs["policy"])]


def compare(run):
    """A DataFrame: one row per (turn, job, flow) with the model's and the emulated timing (ms)."""
    run = Path(run)
    for name in ("flows.csv", "schedule.json", "spec.yaml"):
        if not (run / name).exists():
            raise UsageError(f"{run}: no {name} (a results directory of program jobs is needed)")
    turns = model_turns(run)
    f = pd.read_csv(run / "flows.csv")
    f = f[f.step >= WARMUP_STEPS].assign(rel=lambda x: 1000 * (x.release - x.reference),
                                         fin=lambda x: 1000 * (x.finish - x.reference))
    f["dur"], f["turn"] = f.fin - f.rel, f.step % len(turns)
    emu = f.groupby(["turn", "job", "flow"])[["rel", "dur", "fin"]].median()
    first = sorted(f.job.unique())[0]
    rows = []
    for t, res in enumerate(turns):
        for job, r in res.items():
            for name in sorted(r["finish_s"], key=lambda n: r["release_s"][n]):
                if (t, job, name) not in emu.index:
                    continue
                e = emu.loc[(t, job, name)]
                m_rel, m_fin = 1000 * r["release_s"][name], 1000 * r["finish_s"][name]
                row = {"turn": t, "job": job, "flow": name, "model_release_ms": m_rel, "model_ms": m_fin - m_rel,
                       "emulated_release_ms": e.rel, "emulated_ms": e.dur, "lag_ms": e.fin - m_fin}
                if job != first and (t, first, name) in emu.index:
                    row["model_after_first_ms"] = m_rel - 1000 * res[first]["release_s"][name]
                    row["emulated_after_first_ms"] = e.rel - emu.loc[(t, first, name)].rel
                rows.append(row)
    return pd.DataFrame(rows).round(1)


def markdown(run, df, job=None):
    if job:
        df = df[df.job == job]
    cols = [c for c in df.columns if c != "turn" or df.turn.nunique() > 1]
    lines = [f"# {run}: each flow, model against emulation (ms from the step's reference; emulated: "
             f"median over steps >= {WARMUP_STEPS})", "", "| " + " | ".join(cols) + " |",
             "| " + " | ".join("---" for _ in cols) + " |"]
    lines += ["| " + " | ".join("" if pd.isna(v) else str(v) for v in r) + " |" for r in df[cols].itertuples(index=False)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m harness.flowcheck", description=__doc__.splitlines()[0])
    ap.add_argument("run", help="a results directory of program jobs")
    ap.add_argument("--job", help="only this job's flows")
    args = ap.parse_args(argv)
    try:
        print(markdown(args.run, compare(args.run), args.job), end="")
    except UsageError as exc:             # SpecError is one; one line, exit status 2 (README)
        print(f"flowcheck: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
