"""Which runs of a set slowed part-way: per run, its steps over the first and the second half of the
run (the first step left out), their ratio, the host's CPU idle share over the first and second half
of its samples, and the datapath's cost (harness.fidelity.DATAPATH_COST). Reported, not judged: the
fidelity guard has no rule for a fabric that slows mid-run (results/README.md, "When the fabric
slows mid-run").

    python -m harness.drift results/echelon [--publish results/README.md]

No root. Exit 2 when the directory holds no run.
"""
import argparse
import json
import re
import sys
from pathlib import Path

import pandas as pd

from harness import sets
from harness.errors import UsageError
from harness.fidelity import DATAPATH_COST


def halves(steps):
    """(mean of the first half, mean of the second half) of ``steps`` (in order), the first left out."""
    s = list(steps)[1:]
    if len(s) < 2:
        return None, None
    k = len(s) // 2
    return sum(s[:k]) / k, sum(s[k:]) / (len(s) - k)


def run_row(run):
    """One run directory's row: the largest late/early step ratio over its jobs (a step: the slowest
    worker's iteration), the CPU idle shares and the datapath's cost."""
    it = pd.read_csv(run / "iterations.csv")
    it["step_ms"] = 1000 * (it["end"] - it["start"])
    worst = None
    for _job, g in it.groupby("job"):
        early, late = halves(g.groupby("iteration")["step_ms"].max().sort_index())
        if early:
            r = late / early
            worst = r if worst is None or r > worst else worst
    signals = json.loads((run / "summary.json").read_text())["fidelity"]
    signals = signals.get("signals", signals)
    idle_early, idle_late = halves([None] + list(signals.get("cpu_idle_per_s") or []))
    return {"run": str(run), "late_over_early": worst, "idle_early": idle_early, "idle_late": idle_late,
            **{k: signals.get(k) for k in DATAPATH_COST}}


def table(out):
    runs = sorted((p.parent for p in Path(out).glob("**/summary.json") if (p.parent / "iterations.csv").exists()),
                  key=lambda p: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(p))])
    if not runs:
        raise UsageError(f"{out}: no run (a directory with summary.json and iterations.csv)")
    return [dict(run_row(r), run=str(r.relative_to(out))) for r in runs]


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


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m harness.drift", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="a results directory (a set's --out or one run)")
    ap.add_argument("--publish", metavar="FILE", help="replace the block <!-- interleave drift NAME --> in FILE")
    a = ap.parse_args(argv)
    name = Path(a.out).name
    try:
        if a.publish:
            sets.check_publish({"name": name}, a.publish, kind="drift")
        md = "# Drift\n" + markdown(table(a.out))
    except UsageError as exc:
        print(f"drift: {exc}", file=sys.stderr)
        return 2
    print(md)
    if a.publish:
        command = "python -m harness.drift " + " ".join(argv if argv is not None else sys.argv[1:])
        sets.publish({"name": name}, md, a.publish, command, kind="drift")
    return 0


if __name__ == "__main__":
    sys.exit(main())
