"""Simulator speed: the 1,000-job Poisson trace on the 1,024-host fat-tree (target < 60 s).

    .venv/bin/python bench/sim_speed.py [--schedulers themis,netsens,consolidate] [--repeats 3]

Prints wall time per scheduler (median of repeats) and the number of fluid-model runs; the spec is
experiments/sim/poisson1000-fattree1024.yaml. Run it on a quiet machine.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import spec as spec_mod  # noqa: E402
from harness.simulate import simulate_spec  # noqa: E402

SPEC = Path(__file__).resolve().parent.parent / "experiments/sim/poisson1000-fattree1024.yaml"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schedulers", default="themis,netsens,consolidate")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--spec", default=str(SPEC))
    args = ap.parse_args()
    print("| scheduler | wall s (median) | runs | fluid runs | jobs | makespan s | mean JCT s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for sched in args.schedulers.split(","):
        walls = []
        for _ in range(args.repeats):
            spec = spec_mod.load(args.spec, scheduler=sched)
            t = time.perf_counter()
            s = simulate_spec(spec)
            walls.append(time.perf_counter() - t)
        print(f"| {sched} | {statistics.median(walls):.1f} | {args.repeats} | {s['simulator']['fluid_runs']} | "
              f"{len(s['jobs'])} | {s['totals']['makespan_s']} | {s['totals']['jct_s_mean']} |", flush=True)


if __name__ == "__main__":
    main()
