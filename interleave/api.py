"""The functions of the Python API (the CLI's commands as calls) and ``Result``."""
import json
from pathlib import Path

import pandas as pd

from harness import spec as spec_mod
from harness.errors import UsageError


def load_spec(path_or_mapping, scheduler=None, seed=None):
    """A validated spec from a YAML file or a mapping (its ``plugins`` relative to the file, or to the
    working directory for a mapping); ``scheduler`` and ``seed`` override the spec's."""
    if isinstance(path_or_mapping, spec_mod.Spec):
        return path_or_mapping if scheduler is None and seed is None else \
            load_spec(path_or_mapping.raw, scheduler, seed)
    if isinstance(path_or_mapping, dict):
        raw = dict(path_or_mapping)
        if scheduler is not None:
            base, _, flow = scheduler.partition(":")
            raw.update(scheduler=base, **({"flow_scheduler": flow} if flow else {}))
        if seed is not None:
            raw["seed"] = seed
        return spec_mod.from_mapping(raw)
    return spec_mod.load(str(path_or_mapping), scheduler=scheduler, seed=seed)


def schedule(spec, scheduler=None):
    """The plan, a harness.plan.Plan (``to_dict()``: what ``interleave schedule --json`` prints): every
    job's hosts, start and time-shift as a PlannedJob."""
    from harness.planners.schedule import schedule as plan
    return plan(load_spec(spec, scheduler))


def simulate(spec, scheduler=None, background=None, out=None, force=False):
    """The spec in the flow-level simulator (no root): a Result. With ``out``, also its results
    directory (as ``interleave simulate --out``: refused if it holds the emulator's or another spec's
    results, unless ``force``)."""
    from harness import provenance
    from harness.simulate import simulate_run
    s = load_spec(spec, scheduler)
    if background is not None:
        if not 0 <= background < 1:
            raise UsageError(f"background: {background} is not a fraction in [0, 1)")
        s.background = background
    provenance.refuse_other(out, s, "simulated", force, name="out", hint="force=True")
    times = {}
    summary = simulate_run(s, out, replace=force, times=times)
    return Result(summary, None if out is None else Path(out), times=times)


def run(spec, out, scheduler=None, quiet=True, log=lambda msg: None, force=False):
    """The spec emulated (needs root): writes the results directory ``out`` (one that exists is
    refused unless ``force``: it is then replaced when the run completes) and returns its Result."""
    from harness.runner import run as emulate
    if Path(out).exists() and not force:
        raise UsageError(f"out: {out} exists; choose another directory, or force=True to replace it")
    emulate(load_spec(spec, scheduler), str(out), quiet=quiet, log=log, replace=force)
    return read_results(out)


def read_results(directory):
    """The Result in a results directory (``interleave run``'s, or ``interleave simulate --out``'s)."""
    d = Path(directory)
    path = d / "summary.json"
    if not path.is_file():
        raise UsageError(f"{directory}: no summary.json (not a results directory, or the run did not finish)")
    return Result(json.loads(path.read_text()), d)


class Result:
    """One run's results: ``summary`` (summary.json as a dict), ``totals`` (dict), and DataFrames
    ``jobs`` (one row per job), ``iteration_ms`` (iteration_ms.csv, both backends), ``iterations``
    and ``links`` (emulated runs: iterations.csv and links.csv; None for a simulation)."""

    def __init__(self, summary, directory=None, times=None):
        self.summary, self.directory, self._times = summary, directory, times

    @property
    def simulated(self):
        return bool(self.summary.get("simulated"))

    @property
    def totals(self):
        return dict(self.summary.get("totals", {}))

    @property
    def jobs(self):
        """One row per job (the rows of jobs.csv: harness.metrics.job_rows), indexed by name."""
        from harness.metrics import job_rows
        rows = job_rows(self.summary) if self.summary.get("jobs") else []
        return pd.DataFrame(rows).set_index("job") if rows else pd.DataFrame()

    def _csv(self, name):
        if self.directory is None or not (Path(self.directory) / name).is_file():
            return None
        return pd.read_csv(Path(self.directory) / name)

    @property
    def iterations(self):
        return self._csv("iterations.csv")

    @property
    def iteration_ms(self):
        """iteration_ms.csv (both backends): each job's steady iteration times and how many iterations
        each stands for (emulated: 1; simulated: the model's times, weighted by the iterations run at
        each), so ``np.average(df.iteration_ms, weights=df.iterations)`` is the summary's mean."""
        from harness.metrics import DISTRIBUTION, DISTRIBUTION_COLUMNS, distribution_rows
        if self._times is not None:
            return pd.DataFrame(distribution_rows(self._times), columns=DISTRIBUTION_COLUMNS)
        return self._csv(DISTRIBUTION)

    @property
    def links(self):
        return self._csv("links.csv")

    def __repr__(self):
        t = self.totals
        kind = "simulated" if self.simulated else "emulated"
        return (f"<Result {self.summary.get('spec')} {self.summary.get('scheduler')} ({kind}): "
                f"{len(self.summary.get('jobs', {}))} jobs, mean iteration {t.get('iteration_ms_mean')} ms>")
