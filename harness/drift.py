"""Which runs of a set slowed part-way: per run, its steps over the first and the second half of the
run (the first step left out), their ratio, the host's CPU idle share over the first and second half
of its samples, and the datapath's cost (harness.fidelity.DATAPATH_COST). Reported, not judged: the
fidelity guard has no rule for a fabric that slows mid-run (results/echelon/README.md, "When the fabric
slows mid-run").

    python -m harness.drift experiments/sets/echelon.yaml --out results/echelon [--publish results/echelon/README.md]

No root. Exit 2 on a bad set file or when ``--out`` holds none of its runs.
"""
import json
import sys

import pandas as pd

from harness import sets
from harness.errors import UsageError
from harness.fidelity import DATAPATH_COST

KIND = "drift"


def halves(xs, skip=1):
    """(mean of the first half, mean of the second half) of ``xs`` (in order) after its first ``skip``."""
    s = list(xs)[skip:]
    if len(s) < 2:
        return None, None
    k = len(s) // 2
    return sum(s[:k]) / k, sum(s[k:]) / (len(s) - k)


def run_row(run):
    """One run directory's row: the largest late/early step ratio over its jobs (a step: the slowest
    worker's iteration), the CPU idle shares and the datapath's cost."""
    it = pd.read_csv(run / "iterations.csv")
    it["step_ms"] = 1000 * (it["end"] - it["start"])
    ratios = []
    for _job, g in it.groupby("job"):
        early, late = halves(g.groupby("iteration")["step_ms"].max().sort_index())
        if early:
            ratios.append(late / early)
    signals = json.loads((run / "summary.json").read_text())["fidelity"]
    signals = signals.get("signals", signals)
    idle_early, idle_late = halves(signals.get("cpu_idle_per_s") or [], skip=0)
    return {"late_over_early": max(ratios, default=None), "idle_early": idle_early, "idle_late": idle_late,
            **{k: signals.get(k) for k in DATAPATH_COST}}


def table(st, out):
    """A row per complete run of ``st`` under ``out``, in the set's order."""
    rows = []
    for r in st["runs"]:
        for s in r["schedulers"]:
            for k in range(r["repeats"]):
                d = sets.run_dir(out, r["name"], s, k)
                if (d / "summary.json").is_file() and (d / "iterations.csv").is_file():
                    rows.append({"run": f"{r['name']} {s} r{k}", **run_row(d)})
    return rows


def _f(x, spec):
    return "" if x is None else format(x, spec)


def markdown(rows):
    lines = ["Per run: the mean step of its second half over its first half (the largest over its jobs; the "
             "first step left out), the CPU idle share over the first and second half of its samples, and the "
             "datapath's cost (harness.fidelity.DATAPATH_COST). Not judged.", "",
             "| run | late / early step | CPU idle early / late | vswitchd CPU per packet | slow-path share "
             "| exact-match cache share | subtable lookups per hit | datapath flows |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['run']} | {_f(r['late_over_early'], '.3f')} | {_f(r['idle_early'], '.2f')} / "
                     f"{_f(r['idle_late'], '.2f')} | {_f(r['vswitchd_cpu_us_per_packet'], '.1f')} us | "
                     f"{_f(r['datapath_missed_share'], '.5f')} | {_f(r['datapath_emc_share'], '.3f')} | "
                     f"{_f(r['subtable_lookups_per_megaflow_hit'], '.2f')} | {_f(r['datapath_flows'], 'd')} |")
    return "\n".join(lines) + "\n"


def render(st, out):
    rows = table(st, out)
    if not rows:
        raise UsageError(f"{out}: no run of the set has results there")
    return f"# Drift: {st['name']}\n" + markdown(rows)


def main(argv=None):
    return sets.block_command("harness.drift", __doc__, KIND, "emulated", render, argv)


if __name__ == "__main__":
    sys.exit(main())
