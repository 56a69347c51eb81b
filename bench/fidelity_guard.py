#!/usr/bin/env python3
"""Fidelity-guard benchmark: the demo under deliberate CPU load, and what the guard says.

For each load level (0, 1 or 2 busy loops, each pinned to its own core with sched_setaffinity) and
each scheduler (themis, themis+cassini), runs ``interleave run experiments/demo.yaml`` --repeats
times and reports the guard's signals (harness/fidelity.py: per-second CPU idle, agents' timer
lateness, link shaping, OVS's own drops), its verdict, and the mean iteration the run measured. The guard is right
when the quiet runs pass and the loaded ones are flagged; the thresholds in harness/fidelity.py are
chosen from these numbers. Prints a Markdown table; ``--publish FILE`` writes it into FILE's block
``<!-- interleave bench fidelity-guard -->`` ... ``<!-- end interleave bench fidelity-guard -->``.

Run as root, alone on the machine: sudo .venv/bin/python bench/fidelity_guard.py [--repeats 2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import fidelity  # noqa: E402
from harness.sets import emit_bench  # noqa: E402

BUSY = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"


def busy_loops(n):
    return [subprocess.Popen([sys.executable, "-c", BUSY, str(i % os.cpu_count())]) for i in range(n)]


def run(scheduler, out):
    p = subprocess.run([sys.executable, "-m", "harness.cli", "run", "experiments/demo.yaml", "--scheduler", scheduler,
                        "--out", str(out), "--quiet", "--json"], cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONWARNINGS="ignore"))
    if p.returncode:
        raise SystemExit(f"run failed: {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout)


def under(row, line):
    """The share of the run's seconds with less idle CPU than ``line`` (candidate thresholds)."""
    per = row.get("cpu_idle_per_s") or []
    return f"{sum(1 for x in per if x < line) / len(per):.0%}" if per else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--loads", default="0,1,2", help="busy loops per level, comma-separated")
    ap.add_argument("--publish", metavar="FILE")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for level in [int(x) for x in args.loads.split(",")]:
            for rep in range(args.repeats):
                for sched in ("themis", "themis+cassini"):
                    loops = busy_loops(level)
                    try:
                        s = run(sched, Path(tmp) / f"{level}-{rep}-{sched}")
                    finally:
                        for b in loops:
                            b.kill()
                            b.wait()
                    f = s["fidelity"]
                    rows.append({"busy_loops": level, "repeat": rep, "scheduler": sched,
                                 "iteration_ms_mean": s["totals"]["iteration_ms_mean"], **f})
                    print(f"load {level} repeat {rep} {sched}: {s['totals']['iteration_ms_mean']} ms, idle "
                          f"{f['cpu_idle_share']}, busy seconds {f['cpu_busy_seconds_share']}, timers p99 "
                          f"{f['timer_late_ms_p99_pooled']} ms pooled -> {'ok' if f['ok'] else 'FLAGGED'}", file=sys.stderr)
    lines = [f"Thresholds: a busy second has under {fidelity.IDLE_MIN:.0%} idle CPU, at most "
             f"{fidelity.BUSY_SECONDS_MAX:.0%} of a run's seconds may be busy; agents' timer lateness p99 (all "
             f"agents' timing sleeps together, and any agent with at least {fidelity.TIMER_MIN_SLEEPS}) at most "
             f"{fidelity.TIMER_FRAC:.0%} of the shortest iteration (VGG19: 298 ms, so "
             f"{fidelity.TIMER_FRAC * 298:.1f} ms); packets OVS lost itself at most "
             f"{fidelity.DATAPATH_DROP_FRAC:.1%} of those its ports sent.", "",
             "| busy loops | scheduler | repeat | mean iteration | CPU idle (mean) | idle, worst second | busy seconds "
             "| timers p99: pooled / worst agent | pacing p99 (pooled) | OVS drops / packets sent | guard "
             "| seconds under 20 / 30 / 40 % idle |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['busy_loops']} | {r['scheduler']} | {r['repeat']} | {r['iteration_ms_mean']} ms | "
                     f"{r['cpu_idle_share']:.0%} | {r['cpu_idle_min_1s']:.0%} | {r['cpu_busy_seconds_share']:.0%} | "
                     f"{r['timer_late_ms_p99_pooled']} / {r['timer_late_ms_p99_worst']} ms | "
                     f"{r['pacing_late_ms_p99_pooled']} ms | {r.get('datapath_drops')} / {r.get('datapath_packets')} | "
                     f"{'ok' if r['ok'] else 'flagged'} | {under(r, 0.2)} / {under(r, 0.3)} / {under(r, 0.4)} |")
    emit_bench("fidelity-guard", "# fidelity guard\n\n" + "\n".join(lines) + "\n", args.publish,
               "sudo .venv/bin/python bench/fidelity_guard.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
