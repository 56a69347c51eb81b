"""Table 2's snapshots at the scheduler level: for each experiments/snapshotN.yaml, the mean
compatibility score of the shared links under themis (every shift 0) and themis+cassini, and the
shifts CASSINI chose, beside the paper's score. Prints a Markdown table; ``--publish FILE`` writes it
into FILE's block ``<!-- interleave bench snapshot-scores -->``. No root: ``interleave schedule``.

Usage: .venv/bin/python scripts/snapshot_scores.py [--publish results/reproduction/README.md]
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.plan import Plan  # noqa: E402
from harness.sets import emit_bench  # noqa: E402
from workloads import table2  # noqa: E402

PAPER_SCORE = table2.SCORES      # CASSINI Table 2, "Compatibility score" column


def schedule(spec, scheduler):
    p = subprocess.run([sys.executable, "-m", "harness.cli", "schedule", str(spec), "--scheduler", scheduler, "--json"],
                       cwd=ROOT, capture_output=True, text=True, check=True)
    return Plan.from_dict(json.loads(p.stdout))


def score(plan):
    e = plan.epochs[0]
    note = " (fallback)" if e.get("fallback") else " (approximate)" if e.get("approximate") else ""
    return f"{e['score']:.3f}{note}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--publish", metavar="FILE")
    args = ap.parse_args()
    lines = ["| snapshot | jobs | paper's score | themis (shift 0) | themis+cassini | CASSINI's shifts |",
             "| --- | --- | --- | --- | --- | --- |"]
    for n in sorted(PAPER_SCORE):
        spec = ROOT / "experiments" / f"snapshot{n}.yaml"
        base, cas = schedule(spec, "themis"), schedule(spec, "themis+cassini")
        jobs = " + ".join(j.model for j in cas.jobs)
        shifts = ", ".join(f"{j.name} {j.time_shift_ms:g} ms" for j in cas.jobs if j.time_shift_ms) or "none"
        lines.append(f"| {n} | {jobs} | {PAPER_SCORE[n]} | {score(base)} | {score(cas)} | {shifts} |")
    emit_bench("snapshot-scores", "# snapshot scores\n\n" + "\n".join(lines) + "\n", args.publish,
               ".venv/bin/python scripts/snapshot_scores.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
