"""What the network costs a placement that ignores it, beside what netsens wins back, and what
other timers would have won.

Reads a set's results (``interleave reproduce SET --simulate --out DIR``) whose rows repeat one
trace at several backgrounds. For every row that runs ``consolidate`` and ``netsens``: the row's
own consolidate / netsens ratios (the gain). At background b > 0 it also pairs the row's
consolidate runs with the consolidate runs of the same trace at background 0 (same spec, same ``set`` overrides apart from ``netsens``, same repeat = same seed):
consolidation's mean JCT and makespan at b over those at 0 is what the network costs a placement
that never looks at it (at 0 no placement is slowed; consolidation decides the same way at any
background). Rows of the same trace and background that run only netsens, with other settings
(``-fixed``, ``-oracle``), are paired with that row: their gain over its consolidate runs, and the
defaults' times over theirs. A row tuned by ``timers: auto`` (the tuner's grid on each repeat's own
trace: the best setting per seed) also yields the best single setting for the whole row, found
afterwards: the grid's candidate with the lowest objective averaged over the row's repeats, and the
defaults' objective over that candidate's, per repeat. A ratio's interval is over the per-repeat
ratios (harness.sets.ratio_row).

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


def _runs(out, r, scheduler):
    return sets.summaries(out, r["name"], scheduler, r["repeats"])


def best_fixed(default_runs, tuned_runs):
    """The tuner's single best candidate over a row's repeats, from the grids its ``timers: auto``
    runs tried: {"timers", "objective", "default_over": {objective metric: mean of per-repeat
    defaults / candidate, _ci, "pairs"}}; None when the runs carry no grid."""
    grids = {k: (s.get("params") or {}).get("tuning") for k, s in tuned_runs.items()}
    grids = {k: g for k, g in grids.items() if g and g.get("tried")}
    paired = sorted(set(grids) & set(default_runs))
    if not paired:
        return None
    objective = grids[paired[0]]["objective"]
    metric = "jct_s_mean" if objective == "jct_mean" else "makespan_s"
    per = {}
    for k in paired:
        for c in grids[k]["tried"]:
            per.setdefault(repr(c["timers"]), (c["timers"], {}))[1][k] = c[objective]
    timers, values = min((v for v in per.values() if len(v[1]) == len(paired)),
                         key=lambda v: (sum(v[1].values()), v[0]["high"][0], v[0]["medium"][0]))
    m, ci = sets.mean_ci([default_runs[k]["totals"][metric] / values[k] for k in paired])
    return {"timers": timers, "objective": metric,
            "default_over": {metric: m, metric + "_ci": ci, "pairs": len(paired)}}


def table(st, out):
    """[{row, background, zero_row, cost, gain, twins}] for every row of ``st`` with both schedulers:
    ``gain`` ratio_row(C(b), N(b)); ``cost`` ratio_row(C(b), C(0)) when b > 0 and the trace has a
    background-0 row, else None; ``twins`` {twin row: {"gain": ratio_row(C(b), T), "default_over":
    ratio_row(N(b), T), "best_fixed": best_fixed(N(b), T)}} for the rows that run only netsens
    (other settings) on the same trace and background, T their netsens runs."""
    key = {r["name"]: (_trace_key(r), r["background"] or 0) for r in st["runs"]}
    zero = {_trace_key(r): r for r in st["runs"] if not r["background"] and BASE in r["schedulers"]}
    only = [r for r in st["runs"] if OTHER in r["schedulers"] and BASE not in r["schedulers"]]
    rows = []
    for r in st["runs"]:
        if BASE not in r["schedulers"] or OTHER not in r["schedulers"]:
            continue
        c_b, n_b = _runs(out, r, BASE), _runs(out, r, OTHER)
        if not (c_b and n_b):
            continue
        z = zero.get(_trace_key(r)) if r["background"] else None
        c_0 = _runs(out, z, BASE) if z is not None else None
        twins = {}
        for o in only:
            t_runs = _runs(out, o, OTHER) if key[o["name"]] == key[r["name"]] else None
            if t_runs:
                twins[o["name"]] = {"gain": sets.ratio_row(c_b, t_runs, {}, {}),
                                    "default_over": sets.ratio_row(n_b, t_runs, {}, {}),
                                    "best_fixed": best_fixed(n_b, t_runs)}
        rows.append({"row": r["name"], "background": r["background"] or 0,
                     "zero_row": z["name"] if c_0 else None,
                     "cost": sets.ratio_row(c_b, c_0, {}, {}) if c_0 else None,
                     "gain": sets.ratio_row(c_b, n_b, {}, {}), "twins": twins})
    return rows


def _worse(ratio_row, m):
    """'worse' when the ratio's whole interval is below 1 (the second slower beyond the interval)."""
    ci = ratio_row.get(m + "_ci")
    return ci is not None and ci[1] < 1


def markdown(st, rows):
    lines = [f"# {st['name']}: the network's cost to consolidation, and netsens's gain", "",
             f"Cost: {BASE} at background b over {BASE} on the same trace and seeds at background 0 (paired by "
             f"repeat; at 0 no placement is slowed). Gain: {BASE} / {OTHER} on the row itself. Means of per-repeat "
             "ratios [95 % interval]; > 1: the second is faster. Below 1 beyond the interval: marked **worse**.", "",
             "| row | b | repeats | cost: mean JCT | cost: makespan | gain: mean JCT | gain: makespan | gain: comm. overhead |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for x in rows:
        cost = ([sets.fmt(x["cost"], m, "x", 2) for m, _ in SHOWN[:2]] if x["cost"] else ["-", "-"])
        gain = [sets.fmt(x["gain"], m, "x", 2) + (" **worse**" if _worse(x["gain"], m) else "") for m, _ in SHOWN]
        lines.append(f"| {x['row']} | {x['background']:g} | {x['gain']['pairs']} | " + " | ".join(cost + gain) + " |")
    twins = [(x, name, t) for x in rows for name, t in x["twins"].items()]
    if twins:
        lines += ["", f"Rows running {OTHER} with other settings, paired by repeat with their trace's {BASE} runs "
                  f"(gain) and with {OTHER}'s defaults (defaults / these: > 1, these settings were faster).", "",
                  "| row | settings of | gain: mean JCT | gain: makespan | defaults / these: mean JCT | "
                  "defaults / these: makespan |", "| --- | --- | --- | --- | --- | --- |"]
        for x, name, t in twins:
            lines.append(f"| {name} | {x['row']} | " + " | ".join(
                [sets.fmt(t["gain"], m, "x", 2) for m, _ in SHOWN[:2]] +
                [sets.fmt(t["default_over"], m, "x", 3) for m, _ in SHOWN[:2]]) + " |")
    best = [(x, name, t["best_fixed"]) for x, name, t in twins if t["best_fixed"]]
    if best:
        lines += ["", f"The best single fixed setting per row, found afterwards from the tuned rows' grids (the "
                  "candidate with the lowest objective averaged over the row's repeats), and the defaults' "
                  "objective over that setting's, paired by repeat (> 1: the setting was faster).", "",
                  "| row | best setting (rack = pod timer, s) | defaults / best setting |", "| --- | --- | --- |"]
        for x, name, b in best:
            tm = b["timers"]
            lines.append(f"| {x['row']} | high {tm['high'][0]:g}, medium {tm['medium'][0]:g} | "
                         f"{sets.fmt(b['default_over'], b['objective'], '', 3)} ({dict(SHOWN)[b['objective']]}) |")
    return "\n".join(lines) + "\n"


def render(st, out):
    rows = table(st, out)
    if not rows:
        raise UsageError(f"{out}: no row of the set has both {BASE} and {OTHER} results")
    return markdown(st, rows)


def main(argv=None):
    return sets.block_command("harness.netcost", __doc__, KIND, "simulated", render, argv)


if __name__ == "__main__":
    sys.exit(main())
