"""The flow model's predictions against emulation for a set of program jobs (EchelonFlow).

Reads an emulated set's results (``interleave reproduce SET --out DIR``) whose rows run pipeline or
tensor-parallel jobs under several flow schedulers. Every run's summary carries the mean step the
planner predicted for it (``predicted_step_ms``, harness.planners.flowplan, with the calibrated
emulator model of harness.sim.calibration) beside the step measured. Two tables:

  model: per row and scheduler, the measured mean step (``emulated``) (95 % interval over the kept repeats), the
         prediction, and whether it is within MODEL_TOLERANCE of the measurement;
  gains: per row, ``fixed:echelon`` against every other scheduler of the row: the measured ratio
         other / echelon (per repeat, > 1: echelon faster; harness.sets.ratio_row), the model's
         ratio, and the target: a pipeline row must beat the other scheduler (interval above 1) by
         at least half the model's predicted gain; a tensor-parallel or data-parallel row must not
         be worse (interval reaching 1 or above); and the room left: the other scheduler's predicted
         step over the model's step of the jobs with no other job on the fabric
         (harness.planners.flowplan.alone_steps, played from the row's spec and grid), the ratio
         echelon would reach if it removed all contention between the jobs.

    python -m harness.modelcheck experiments/sets/echelon-priority.yaml --out results/echelon-priority \\
        --publish results/echelon/README.md
"""
import json
import sys

from harness import sets
from harness import spec as spec_mod
from harness.errors import UsageError
from harness.routing import compute_routes
from harness.planners import flowplan

MODEL_TOLERANCE = 0.05        # the model's mean step within 5 % of the emulated one
TARGET = "fixed:echelon"
KIND = "modelcheck"


def _predicted(summary):
    steps = [j["predicted_step_ms"] for j in summary["jobs"].values() if j.get("predicted_step_ms") is not None]
    return sum(steps) / len(steps) if steps else None


def _kind(out, name, scheduler, repeat):
    """The row's kind, from its jobs in the run's plan: pipeline if any job is one (the rows whose
    arrangement the model expects echelon to exploit), else tensor or data_parallel."""
    plan = json.loads((sets.run_dir(out, name, scheduler, repeat) / "schedule.json").read_text())
    kinds = {j["kind"] for j in (plan.get("flow_scheduler") or {}).get("jobs", {}).values()}
    return "pipeline" if "pipeline" in kinds or not kinds else "+".join(sorted(kinds))


def _mechanism(out, name, repeats):
    """How echelon's schedule reached the flows in the row's runs (``schedule.json``'s
    ``flow_scheduler.mechanism``, harness.planners.flowplan; a plan older than that field: priority
    if it has priority levels, else pacing), with a count per mechanism when the repeats differ."""
    seen = {}
    for k in repeats:
        fp = json.loads((sets.run_dir(out, name, TARGET, k) / "schedule.json").read_text()).get("flow_scheduler") or {}
        m = (fp.get("mechanism") or {}).get("chosen") or ("priority" if fp.get("priorities") else "pacing")
        seen[m] = seen.get(m, 0) + 1
    return seen.popitem()[0] if len(seen) == 1 else ", ".join(f"{m} {n}" for m, n in sorted(seen.items()))


def _alone_ms(out, name, repeat):
    """The model's mean step of the row's jobs each alone on the fabric (ms), from the echelon run's
    spec and grid; None for a run without its spec or plan, or without program jobs
    (harness.planners.flowplan.alone_steps)."""
    run = sets.run_dir(out, name, TARGET, repeat)
    if not (run / "spec.yaml").exists() or not (run / "schedule.json").exists():
        return None
    period = json.loads((run / "schedule.json").read_text()).get("flow_scheduler", {}).get("period_s")
    if period is None:
        return None
    sp = spec_mod.load(run / "spec.yaml")
    steps = flowplan.alone_steps(sp, compute_routes(sp.topology), {j.name: j.hosts for j in sp.jobs}, period)
    return 1000 * sum(steps.values()) / len(steps) if steps else None


def tables(st, out):
    """(model rows, gain rows) of every row of ``st`` with results under ``out``."""
    model, gains = [], []
    for r in st["runs"]:
        runs = {s: sets.kept_summaries(out, r["name"], s, r["repeats"]) for s in r["schedulers"]}
        pred = {}
        for s, (got, excluded) in runs.items():
            if not got:
                continue
            em, ci = sets.mean_ci([x["totals"]["iteration_ms_mean"] for x in got.values()])
            p, _ = sets.mean_ci([_predicted(x) for x in got.values()])
            pred[s] = p
            dev = None if p is None or em is None else p / em - 1
            model.append({"spec": r["name"], "scheduler": s, "runs": len(got), "excluded": excluded,
                          "emulated": em, "emulated_ci": ci, "simulated": p,
                          "deviation": None if dev is None else round(dev, 4),
                          "within": None if dev is None else abs(dev) <= MODEL_TOLERANCE})
        target = runs.get(TARGET, ({}, 0))[0]
        if not target:
            continue
        kind = _kind(out, r["name"], TARGET, min(target))
        mechanism = _mechanism(out, r["name"], sorted(target))
        alone = _alone_ms(out, r["name"], min(target))
        for s, (got, _x) in runs.items():
            if s == TARGET or not got or pred.get(s) is None or pred.get(TARGET) is None:
                continue
            g = sets.ratio_row(got, target, {}, {})
            m, ci = g.get("iteration_ms_mean"), g.get("iteration_ms_mean_ci")
            predicted = pred[s] / pred[TARGET]
            need = max(1.0, 1 + (predicted - 1) / 2)
            if kind != "pipeline":
                met = m is not None and ci is not None and ci[1] >= 1.0
            else:
                met = m is not None and ci is not None and ci[0] > 1.0 and m >= need
            gains.append({"row": r["name"], "kind": kind, "mechanism": mechanism, "other": s, "pairs": g["pairs"], "measured": m,
                          "measured_ci": ci, "model": round(predicted, 4), "needed": round(need, 4), "met": met,
                          "alone": None if alone is None else round(pred[s] / alone, 4)})
    return model, gains


def markdown(st, model, gains):
    n_in = sum(1 for x in model if x["within"])
    n_met = sum(1 for x in gains if x["met"])
    lines = [f"# {st['name']}: the flow model against emulation, and echelon's gains", "",
             f"**Model: {n_in} of {len(model)}** row/scheduler means within {MODEL_TOLERANCE:.0%} of the emulated "
             f"mean step (emulated: mean [95 % interval] over the runs the fidelity guard kept; the model's "
             f"prediction is the planner's, harness.sim.calibration).", "",
             "| row | scheduler | runs kept / excluded | emulated step | model | model - emulated | within |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [sets.deviation_line(x) for x in model]
    lines += ["", f"**Gains: {n_met} of {len(gains)}** comparisons meet the target (pipeline rows: {TARGET} faster, "
              "interval above 1, by at least half the model's predicted gain; tensor and data-parallel rows: not "
              "slower, interval reaching 1). Ratio = other's mean step / echelon's, per repeat pair; > 1: echelon faster. "
              "Echelon by: the mechanism its plans chose (harness.planners.flowplan, echelon_mechanism). "
              "No contention: the model's ratio if echelon removed all contention between the jobs (the other "
              "scheduler's predicted step over the jobs' steps each alone on the fabric).", "",
              "| row | jobs | echelon by | echelon against | pairs | measured | model | needed | met | no contention |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for x in gains:
        need = "not slower" if x["kind"] != "pipeline" else f"{x['needed']:.3f}x"
        lines.append(f"| {x['row']} | {x['kind']} | {x['mechanism']} | {x['other']} | {x['pairs']} | "
                     f"{sets.fmt({'m': x['measured'], 'm_ci': x['measured_ci']}, 'm', 'x', 3)} | {x['model']:.3f}x | "
                     f"{need} | {'yes' if x['met'] else 'no'} | "
                     f"{'' if x['alone'] is None else format(x['alone'], '.3f') + 'x'} |")
    return "\n".join(lines) + "\n"


def render(st, out):
    model, gains = tables(st, out)
    if not model:
        raise UsageError(f"{out}: no run of the set has results there")
    return markdown(st, model, gains)


def main(argv=None):
    return sets.block_command("harness.modelcheck", __doc__, KIND, "emulated", render, argv)


if __name__ == "__main__":
    sys.exit(main())
