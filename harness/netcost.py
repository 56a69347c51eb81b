"""What the network costs a placement that ignores it, beside what netsens wins back.

Reads a set's results (``interleave reproduce SET --simulate --out DIR``) whose rows repeat one
trace at several backgrounds. For every row at background b > 0 that runs ``consolidate`` and
``netsens``, it pairs the row's consolidate runs with the consolidate runs of the same trace at
background 0 (same spec, same ``set`` overrides apart from ``netsens``, same repeat = same seed):
consolidation's mean JCT and makespan at b over those at 0 is what the network costs a placement
that never looks at it (at 0 no placement is slowed; consolidation decides the same way at any
background). Beside it, the row's own consolidate / netsens ratios. A ratio's interval is over the
per-repeat ratios (harness.sets.ratio_row).

    python -m harness.netcost experiments/sets/netsens-regimes.yaml --out results/netsens-regimes \\
        --publish results/netsens/README.md
"""
import sys

from harness import sets
from harness.errors import UsageError

BASE, OTHER = "consolidate", "netsens"
SHOWN = (("jct_s_mean", "mean JCT"), ("makespan_s", "makespan"), ("communication_overhead_s", "comm. overhead"))
KIND = "netcost"


def _trace_key(run):
    over = {k: v for k, v in (run["set"] or {}).items() if k != OTHER}
    return str(run["spec_path"]), repr(sorted(over.items()))


def table(st, out):
    """[{row, background, zero_row, cost: ratio_row(C(b), C(0)), gain: ratio_row(C(b), N(b))}] for
    every row of ``st`` at background > 0 with both schedulers and a background-0 twin."""
    zero = {_trace_key(r): r for r in st["runs"] if not r["background"] and BASE in r["schedulers"]}
    rows = []
    for r in st["runs"]:
        if not r["background"] or BASE not in r["schedulers"] or OTHER not in r["schedulers"]:
            continue
        z = zero.get(_trace_key(r))
        if z is None:
            continue
        c_b = sets.summaries(out, r["name"], BASE, r["repeats"])
        c_0 = sets.summaries(out, z["name"], BASE, z["repeats"])
        n_b = sets.summaries(out, r["name"], OTHER, r["repeats"])
        if not (c_b and c_0 and n_b):
            continue
        rows.append({"row": r["name"], "background": r["background"], "zero_row": z["name"],
                     "cost": sets.ratio_row(c_b, c_0, {}, {}), "gain": sets.ratio_row(c_b, n_b, {}, {})})
    return rows


def markdown(st, rows):
    lines = [f"# {st['name']}: the network's cost to consolidation, and netsens's gain", "",
             f"Cost: {BASE} at background b over {BASE} on the same trace and seeds at background 0 (paired by "
             f"repeat; at 0 no placement is slowed). Gain: {BASE} / {OTHER} on the row itself. Means of per-repeat "
             "ratios [95 % interval]; > 1: the second is faster.", "",
             "| row | b | repeats | cost: mean JCT | cost: makespan | gain: mean JCT | gain: makespan | gain: comm. overhead |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for x in rows:
        cells = [sets.fmt(x["cost"], m, "x", 2) for m, _ in SHOWN[:2]] + [sets.fmt(x["gain"], m, "x", 2) for m, _ in SHOWN]
        lines.append(f"| {x['row']} | {x['background']:g} | {x['gain']['pairs']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render(st, out):
    rows = table(st, out)
    if not rows:
        raise UsageError(f"{out}: no row of the set at background > 0 has {BASE} and {OTHER} results "
                         "and a background-0 twin with them")
    return markdown(st, rows)


def main(argv=None):
    return sets.block_command("harness.netcost", __doc__, KIND, "simulated", render, argv)


if __name__ == "__main__":
    sys.exit(main())
