"""Interleave from Python, as in a notebook: CASSINI's demo pair simulated under two schedulers, the
two compared per job, and (given a directory) an emulated run of the same spec beside them.

    .venv/bin/python examples/notebook.py                          # no root: the simulator only
    sudo .venv/bin/interleave run experiments/demo.yaml --out results/demo-emulated
    .venv/bin/python examples/notebook.py results/demo-emulated    # and the emulated run

Each cell below is what a notebook cell would hold.
"""
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import interleave

# cell 1: the spec, simulated under the baseline and under CASSINI (no root, a fraction of a second)
DEMO = Path(__file__).resolve().parent.parent / "experiments" / "demo.yaml"     # wherever this runs from
spec = interleave.load_spec(DEMO)
runs = {s: interleave.simulate(spec, scheduler=s) for s in ("themis", "themis+cassini")}

# cell 2: one table, one row per (scheduler, job)
jobs = pd.concat({s: r.jobs[["iteration_ms_mean", "iteration_ms_profile", "time_shift_ms", "alignment"]]
                  for s, r in runs.items()}, names=["scheduler", "job"])
print(jobs.to_string(), "\n")

# cell 3: the speed-up CASSINI's shifts give, per job
base, cas = (runs[s].jobs.iteration_ms_mean for s in ("themis", "themis+cassini"))
print("speed-up (themis / themis+cassini):", (base / cas).round(2).to_dict(), "\n")

# cell 4: an emulated run's results beside them, the same DataFrames
if len(sys.argv) > 1:
    emu = interleave.read_results(sys.argv[1])
    d = emu.iteration_ms                                 # every steady iteration of every job
    print(emu)
    print(d.groupby("job").iteration_ms.describe(percentiles=[0.5, 0.99]).round(1).to_string())
    sched = emu.summary["scheduler"]
    sim = (runs.get(sched) or interleave.simulate(spec, scheduler=sched)).iteration_ms   # the same scheduler's
    mean = {j: np.average(g.iteration_ms, weights=g.iterations) for j, g in sim.groupby("job")}
    print("emulated / simulated mean:", {j: round(m / mean[j], 3) for j, m in d.groupby("job").iteration_ms.mean().items()})
