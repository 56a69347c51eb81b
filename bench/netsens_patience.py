"""netsens's ``patience`` on development seeds: mean JCT per row of the regime set at several values,
beside consolidation and the best fixed timers, on seeds the held-out evaluation never uses.

    .venv/bin/python bench/netsens_patience.py [--rows ROW,...] [--seeds 11,...] [--patience 1,2,4]
        [--fixed 600/60] [--workers 2] [--publish docs/schedulers.md]

Rows are labels of experiments/sets/netsens-regimes.yaml, each simulated with its trace, background
and overrides, the seed replaced by each development seed (the set's own seeds, 1001-1005, are the
held-out ones). Per row and setting: the mean JCT over the seeds and the mean of per-seed ratios
to ``patience`` 1 [95 % interval]. Deterministic: the figures do not depend on the machine's load
(the defaults take about 55 min on 2 workers).
"""
import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import sets  # noqa: E402
from harness.sets import emit_bench, fmt, mean_ci  # noqa: E402

SET = Path(__file__).resolve().parent.parent / "experiments/sets/netsens-regimes.yaml"
ROWS = ("philly-load1.2-bg0.75", "tail-load1.2-bg0.75", "large-load0.9-bg0.75", "large-load1.2-bg0.75",
        "pollux1-x0.003-bg0.75", "tail-load1.2-bg0", "tail-load1.2-bg0.5", "philly-load1.2-bg0.5",
        "large-load1.2-bg0.5")
SEEDS = (11, 12, 13, 14, 15, 101, 102, 103, 104, 105)


def one(job):
    """Mean JCT of one run entry of the set, seed and setting ('consolidate', 'patience=K' or
    'fixed=H/M')."""
    entry, seed, setting = job
    from harness.simulate import simulate_spec
    r = {**entry, "seed": seed}
    sched = "consolidate" if setting == "consolidate" else "netsens"
    spec = sets.run_spec(r, sched, 0)
    if setting.startswith("patience="):
        spec.netsens = {**spec.netsens, "timers": "adaptive", "patience": float(setting[9:])}
    elif setting.startswith("fixed="):
        hi, med = (float(x) for x in setting[6:].split("/"))
        spec.netsens = {**spec.netsens, "timers": {"high": [hi, hi], "medium": [med, med], "low": [0.0, 0.0]}}
    return simulate_spec(spec)["totals"]["jct_s_mean"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    ap.add_argument("--patience", default="1,2,4")
    ap.add_argument("--fixed", default="600/60")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--publish", metavar="FILE")
    args = ap.parse_args()
    rows, seeds = args.rows.split(","), [int(s) for s in args.seeds.split(",")]
    runs = {r["name"]: r for r in sets.load_set(SET)["runs"]}
    for row in rows:
        if row not in runs:
            sys.exit(f"netsens_patience: --rows: {row} is not a row of {SET}")
    settings = (["consolidate"] + [f"patience={p}" for p in args.patience.split(",")] +
                [f"fixed={f}" for f in args.fixed.split(",") if f])
    if "patience=1" not in settings:
        settings.insert(1, "patience=1")
    jobs = [(row, s, st) for row in rows for st in settings for s in seeds]
    jct = {}
    with ProcessPoolExecutor(args.workers) as ex:
        results = ex.map(one, [(runs[row], s, st) for row, s, st in jobs])
        for i, (job, v) in enumerate(zip(jobs, results), 1):
            jct[job] = v
            print(f"[{i}/{len(jobs)}] {job[0]} seed {job[1]} {job[2]}: mean JCT {v:.1f} s", file=sys.stderr, flush=True)
    head = " | ".join(s.replace("=", " ") for s in settings)
    lines = [f"# netsens-patience: mean JCT (s) over development seeds {args.seeds}; in brackets, the mean "
             "of per-seed ratios to patience 1 [95 % interval] (< 1: faster)", "",
             f"| row | {head} |", "| --- |" + " --- |" * len(settings)]
    for row in rows:
        cells = []
        for st in settings:
            v = [jct[(row, s, st)] for s in seeds]
            m, _ = mean_ci(v)
            rm, rci = mean_ci([a / jct[(row, s, "patience=1")] for a, s in zip(v, seeds)])
            cells.append(f"{m:.1f} ({fmt({'r': rm, 'r_ci': rci}, 'r', '', 3)})")
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    emit_bench("netsens-patience", "\n".join(lines) + "\n", args.publish,
               "python bench/netsens_patience.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
