"""Simulator speed: the 1,000-job Poisson trace on the 1,024-host fat-tree (target < 60 s).

    .venv/bin/python bench/sim_speed.py [--schedulers themis,themis+cassini,...] [--repeats 3]
        [--publish docs/simulator.md]

Prints wall time per scheduler (mean [95 % interval] over the repeats) and the number of
fluid-model runs; the spec is experiments/sim/poisson1000-fattree1024.yaml. ``--publish FILE``
writes the table into FILE's block ``<!-- interleave bench sim-speed -->``. Run it on a quiet machine.
"""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import spec as spec_mod  # noqa: E402
from harness.sets import emit_bench, fmt, mean_ci  # noqa: E402
from harness.simulate import simulate_spec  # noqa: E402

SPEC = Path(__file__).resolve().parent.parent / "experiments/sim/poisson1000-fattree1024.yaml"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schedulers", default="themis,themis+cassini,pollux,ideal,netsens,consolidate,tiresias,random")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--spec", default=str(SPEC))
    ap.add_argument("--publish", metavar="FILE")
    args = ap.parse_args()
    lines = [f"# sim-speed: `{Path(args.spec).name}`, {args.repeats} repeat(s) per scheduler", "",
             "| scheduler | wall time, mean [95 % interval] | fluid runs | mean-field runs | jobs | makespan | mean JCT |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for sched in args.schedulers.split(","):
        walls = []
        for _ in range(args.repeats):
            spec = spec_mod.load(args.spec, scheduler=sched)
            t = time.perf_counter()
            s = simulate_spec(spec)
            walls.append(time.perf_counter() - t)
            print(f"{sched}: {walls[-1]:.1f} s", file=sys.stderr, flush=True)
        row = dict(zip(("m", "m_ci"), mean_ci(walls)))
        lines.append(f"| {sched} | {fmt(row, 'm', ' s', 1)} | {s['simulator']['fluid_runs']} | {s['simulator']['meanfield_runs']} | {len(s['jobs'])} | "
                     f"{s['totals']['makespan_s']} s | {s['totals']['jct_s_mean']} s |")
    emit_bench("sim-speed", "\n".join(lines) + "\n", args.publish, "python bench/sim_speed.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
