"""How far the simulator's mean-field stand-in (harness.sim.meanfield) is from the fluid model on the
components it replaces: the link-sharing components of free-running jobs that a scheduler produces on
the 1,000-job / 1,024-host trace (default: ``random``, whose spread placements make the largest).

    .venv/bin/python bench/meanfield_error.py [--scheduler random] [--per-size 8] [--spec SPEC]
        [--budget 600] [--publish docs/simulator.md]

Runs the trace in the simulator with the fluid model everywhere, and for the first ``--per-size``
components of free-running jobs in each size class (4-7, 8-11, 12-23, 24-47, 48 or more jobs: below
harness.sim.engine.MEANFIELD_MIN_JOBS too, to show where the stand-in would be worse) computes both (until ``--budget`` seconds have passed):
per-job iteration time error of the mean field relative to the fluid run (median and 95th percentile
of its size, mean signed), the component's mean iteration time error, and the wall time of each. ``--publish FILE`` writes the table into FILE's block
``<!-- interleave bench meanfield-error -->``. Run it on a quiet machine.
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import spec as spec_mod  # noqa: E402
from harness.sets import emit_bench  # noqa: E402
from harness.sim import engine, meanfield  # noqa: E402
from harness.simulate import simulate_spec  # noqa: E402

SPEC = Path(__file__).resolve().parent.parent / "experiments/sim/poisson1000-fattree1024.yaml"
BINS = ((4, 7), (8, 11), (12, 23), (24, 47), (48, 10_000))


class Enough(Exception):
    pass


def size_bin(n):
    return next((b for b in BINS if b[0] <= n <= b[1]), None)


def collect(spec, per_size, budget_s):
    """[(size, fluid per-job ms, meanfield per-job ms, fluid s, meanfield s)] of the first
    ``per_size`` components of free-running jobs per size class that the simulation computes."""
    rows = []
    fluid = engine.simulate
    taken = {b: 0 for b in BINS}
    deadline = time.perf_counter() + budget_s

    def both(jobs, capacity, **kw):
        if time.perf_counter() > deadline:
            raise Enough
        b = size_bin(len(jobs))
        if b is None or taken[b] >= per_size or not all(j.alignment == "free" for j in jobs):
            return fluid(jobs, capacity, **kw)
        t = time.perf_counter()
        out = fluid(jobs, capacity, **kw)
        tf = time.perf_counter() - t
        taken[b] += 1
        t = time.perf_counter()
        mf, _marks, _comm, _send = meanfield.iteration_times(jobs, capacity)
        tm = time.perf_counter() - t
        names = [j.name for j in jobs]
        rows.append((len(jobs), np.array([np.mean(out.iteration_ms[n]) for n in names]),
                     np.array([mf[n] for n in names]), tf, tm))
        print(f"component {len(rows)}: {len(jobs)} jobs, fluid {tf:.2f} s, mean field {tm * 1000:.1f} ms",
              file=sys.stderr, flush=True)
        if all(v >= per_size for v in taken.values()):
            raise Enough
        return out

    engine.simulate = both
    old = engine.MEANFIELD_MIN_JOBS
    engine.MEANFIELD_MIN_JOBS = 10 ** 9           # the fluid model everywhere while collecting
    try:
        simulate_spec(spec)
    except Enough:
        pass
    finally:
        engine.simulate, engine.MEANFIELD_MIN_JOBS = fluid, old
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scheduler", default="random")
    ap.add_argument("--per-size", type=int, default=8)
    ap.add_argument("--budget", type=float, default=600.0, help="stop collecting after this many seconds")
    ap.add_argument("--spec", default=str(SPEC))
    ap.add_argument("--publish", metavar="FILE")
    args = ap.parse_args()
    spec = spec_mod.load(args.spec, scheduler=args.scheduler)
    rows = collect(spec, args.per_size, args.budget)
    lines = [f"# meanfield-error: `{Path(args.spec).name}`, scheduler {args.scheduler}, the first {args.per_size} "
             f"components of free-running jobs per size class ({len(rows)} in all)", "",
             "| jobs per component | components | per-job error, median | p95 | mean signed | component mean, "
             "median error | fluid wall, mean | mean-field wall, mean |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for lo, hi in BINS:
        sel = [r for r in rows if lo <= r[0] <= hi]
        if not sel:
            continue
        err = np.concatenate([(m - f) / f for _n, f, m, _a, _b in sel])
        comp = np.array([(m.mean() - f.mean()) / f.mean() for _n, f, m, _a, _b in sel])
        label = f"{lo}-{hi}" if hi < 10_000 else f">= {lo}"
        lines.append(f"| {label} | {len(sel)} | {np.median(np.abs(err)):.1%} | {np.quantile(np.abs(err), 0.95):.1%} | "
                     f"{err.mean():+.1%} | {np.median(np.abs(comp)):.1%} | {np.mean([r[3] for r in sel]):.2f} s | "
                     f"{np.mean([r[4] for r in sel]) * 1000:.1f} ms |")
    emit_bench("meanfield-error", "\n".join(lines) + "\n", args.publish,
               "python bench/meanfield_error.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
