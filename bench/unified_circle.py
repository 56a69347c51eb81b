#!/usr/bin/env python3
"""CASSINI's unified circle on jobs of unequal periods: when can a time-shift keep them apart?

Two jobs of periods a and b start their iterations at offsets that take every value of one class
modulo gcd(a, b); one shift keeps their communication apart for good only if both communication
spans fit in that GCD (harness.schedulers.cassini.harmonic). With ``unequal_periods: unified`` a
job may pad its period by up to ``cassini.quantum_ms`` to become harmonic with the jobs it shares
links with. This tool measures, in the simulator (no root):

1. the constructed case of examples/unequal-periods.yaml (38 and 57 ms, spans 10 and 8 ms), under
   themis, and themis+cassini with ``unequal_periods: free`` and ``unified``;
2. on the paper's traces (experiments/cassini: Fig. 11 at loads 0.8-1.0, Fig. 13, Fig. 14; seeds
   spec seed + 0..repeats-1, as the sets draw them), every pair of jobs of unequal periods that
   shares a link in the themis+cassini plan: how many are harmonic as they are, with padding up to
   5 ms and up to 30 ms on each job, and how their spans compare with the best GCD reachable.

  .venv/bin/python bench/unified_circle.py [--repeats 3] [--publish FILE]
--publish writes the tables into FILE's block <!-- interleave bench unified-circle -->.
"""
import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import interleave  # noqa: E402
from agents.timing import common_divisor  # noqa: E402
from harness.schedulers.cassini import padded_periods  # noqa: E402
from harness.sets import emit_bench  # noqa: E402

TRACES = ["fig11-load80", "fig11-load90", "fig11-load100", "fig13", "fig14"]
PADS = (0, 5, 30)


def best_gcd(a, b, pad):
    return max(common_divisor([x, y]) for x in padded_periods(a, pad) for y in padded_periods(b, pad))


def pairs_of(trace, seed):
    spec = interleave.load_spec(ROOT / "experiments" / "cassini" / f"{trace}.yaml", scheduler="themis+cassini",
                                seed=seed)
    plan = interleave.schedule(spec)
    it = {j.name: j.iteration_ms for j in plan.jobs}
    span = {j.name: spec.profiles[j.model].comm_span_ms for j in plan.jobs}
    model = {j.name: j.model for j in plan.jobs}
    seen = set()
    for e in plan.epochs:
        for link in e["links"]:
            for a, b in itertools.combinations(sorted(link["jobs"]), 2):
                if it[a] != it[b]:
                    seen.add((a, b))
    return [(model[a], model[b], it[a], it[b], span[a] + span[b]) for a, b in sorted(seen)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--publish", metavar="FILE", help="replace the block <!-- interleave bench unified-circle --> in FILE")
    args = ap.parse_args()
    lines = ["# unified circle", "",
             f"Pairs of jobs of unequal periods sharing a link in the themis+cassini plans of the paper's traces "
             f"(seeds: the spec's + 0..{args.repeats - 1}); harmonic: both communication spans fit in the GCD of "
             f"the two periods, each period padded by at most the given ms:", "",
             "| trace | pairs | of them within 5 % (common_period's) | harmonic as they are | padding <= 5 ms | "
             "padding <= 30 ms | spans / best GCD at 5 ms (median, min) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for trace in TRACES:
        seed0 = interleave.load_spec(ROOT / "experiments" / "cassini" / f"{trace}.yaml").seed
        pairs = [p for r in range(args.repeats) for p in pairs_of(trace, seed0 + r)]
        counts = [sum(best_gcd(a, b, pad) >= s - 1e-9 for _ma, _mb, a, b, s in pairs) for pad in PADS]
        near = sum(abs(a - b) <= 0.05 * max(a, b) for _ma, _mb, a, b, _s in pairs)
        ratio = [s / best_gcd(a, b, 5) for _ma, _mb, a, b, s in pairs]
        lines.append(f"| {trace} | {len(pairs)} | {near} | " + " | ".join(str(c) for c in counts) + " | "
                     + (f"{np.median(ratio):.1f}, {min(ratio):.1f}" if ratio else "-") + " |")
    emit_bench("unified-circle", "\n".join(lines) + "\n", args.publish,
               ".venv/bin/python bench/unified_circle.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
