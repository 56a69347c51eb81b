#!/usr/bin/env python3
"""Scheduler speed: CASSINI's Algorithm 2 on the 24-host fat-tree, and the per-link optimisation's
growth with jobs per link and with the angle discretisation. No root needed.

  .venv/bin/python bench/schedule_speed.py [--repeat N] [--publish FILE]
Prints Markdown tables (median of --repeat runs); --publish writes them into FILE's block
<!-- interleave bench schedule-speed -->.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.routing import compute_routes  # noqa: E402
from harness.sets import emit_bench  # noqa: E402
from harness.schedulers import cassini  # noqa: E402
from harness.schedulers.circles import optimise  # noqa: E402
from harness.schedulers.placement import Random, candidates  # noqa: E402
from harness.spec import from_mapping  # noqa: E402
from workloads.profiles import builtins  # noqa: E402

MODELS = ["vgg16", "wideresnet101", "vgg19", "resnet50", "bert", "roberta", "camembert", "xlm",
          "vgg11", "gpt1", "dlrm", "gpt2"]


def timed(fn, repeat):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), out


def algorithm2(repeat):
    spec = from_mapping({"topology": {"name": "fattree"}, "scheduler": "random+cassini", "seed": 3,
                         "jobs": [{"name": f"j{i}", "model": m, "workers": 2} for i, m in enumerate(MODELS)]})
    routes = compute_routes(spec.topology)
    cands = candidates(Random(), spec.jobs, spec.topology, spec.profiles, spec.topology.hosts, n=10, seed=3)
    prof = {j.name: spec.profiles[j.model] for j in spec.jobs}
    t, (idx, evals) = timed(lambda: cassini.choose(cands, prof, routes, 50, spec.cassini), repeat)
    per_link = max(len(js) for e in evals for js in e.link_jobs.values())
    shared = sum(len(e.link_jobs) for e in evals) / len(evals)
    return t, len(cands), per_link, shared


def per_link(n_jobs, deg, repeat, exact_max):
    b = builtins()
    names = ["vgg16", "vgg16", "wideresnet101", "resnet50", "vgg19", "bert"][:n_jobs]
    jobs = [(b[m].iteration_ms, [b[m].demand]) for m in names]
    t, sol = timed(lambda: optimise(jobs, 50, discretization_deg=deg, exact_max_jobs=exact_max), repeat)
    return t, sol


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--publish", metavar="FILE", help="replace the block <!-- interleave bench schedule-speed --> in FILE")
    args = ap.parse_args()
    t, n, most, shared = algorithm2(args.repeat)
    lines = ["# schedule speed", "",
             f"Algorithm 2 over {n} candidates, 12 jobs of 2 workers placed at random on the 24-host fat-tree (up to "
             f"{most} jobs on a link, {shared:.0f} shared links per candidate), 5 degrees: **{t * 1000:.0f} ms** "
             f"(median of {args.repeat}). One link, by jobs on it and angle step:", "",
             "| jobs on the link | search | 10 deg | 5 deg | 2.5 deg | 1 deg |", "| --- | --- | --- | --- | --- | --- |"]
    for n_jobs in (2, 3, 4, 5, 6):
        for exact_max in ((3,) if n_jobs <= 3 else (3, n_jobs) if n_jobs == 4 else (3,)):
            cells = []
            for deg in (10, 5, 2.5, 1):
                if exact_max >= 4 and deg < 5:
                    cells.append("-")
                    continue
                tt, sol = per_link(n_jobs, deg, args.repeat, exact_max)
                cells.append(f"{tt * 1000:.1f} ms (score {sol.score:.3f})")
            kind = "exact" if n_jobs <= exact_max else "descent"
            lines.append(f"| {n_jobs} | {kind} | " + " | ".join(cells) + " |")
    emit_bench("schedule-speed", "\n".join(lines) + "\n", args.publish,
               ".venv/bin/python bench/schedule_speed.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
