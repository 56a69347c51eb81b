#!/usr/bin/env python3
"""Where the time Th+CASSINI leaves above `ideal` goes, on the paper's Poisson traces (simulator).

For each trace (experiments/cassini: Fig. 11 at loads 0.9 and 1.0) and each seed (the spec's + 0..
repeats-1, as the sets draw them) the trace runs under themis, themis+cassini and ideal (every job
alone). Reported:

1. the mean iteration (iteration-weighted, as the sets' tables) of each, and the share of Themis's
   gap to ideal that Th+CASSINI recovers, (themis/th+cassini - 1) / (themis/ideal - 1), on the means
   over the seeds, with each ratio's mean [95 %] over the seeds;
2. the time Th+CASSINI spends above ideal (each job's mean iteration minus its ideal one, weighted
   by its iterations, so that the shares add up to mean - ideal's mean; Themis's total beside it)
   split by what the simulator's CASSINI could do about each job's shared links:
   - held: the job kept its shift with a group (alignment ``group``);
   - unequal periods: it ran free and some job it shared a link with has a period no shift can
     keep apart from its own (harness.schedulers.cassini.harmonic, either period padded by at most
     ``cassini.quantum_ms``);
   - incompatible: it ran free beside jobs of harmonic periods only (the link's score at the best
     shifts is under ``cassini.align_min_score``: their communication does not fit in the beat);
   - not shared: no shared link in any epoch (it was slowed by nothing CASSINI scores);
3. how many of the placements CASSINI made had a single candidate (the free servers admit one
   placement, so the score cannot choose);
4. all of it again with ``cassini.unequal_score: sliding`` (links that no shift can separate scored
   as their jobs will meet, at the mean over their offsets): what placement alone can add when its
   scores are not those of a beat that never occurs.

With ``--common-periods X,Y,..`` Th+CASSINI runs once per ``cassini.common_period`` given (jobs
whose periods are within that fraction of each other padded onto the longest, CASSINI's jobs only):
what padding onto shared beats buys against what it costs.

With ``--one-period MS`` the traces run with every model's iteration padded to MS ms (its phases
unchanged; workloads.profiles.stretched) under all three schedulers, and Th+CASSINI with its default
scores only: the counterfactual in which every pair of jobs can keep a shift, which tests whether
unequal periods are what keeps Th+CASSINI from the rest of the gap.

  .venv/bin/python bench/cassini_residual.py [--repeats 20] [--one-period MS | --common-periods X,..] [--publish FILE]
--publish writes the tables into FILE's block <!-- interleave bench cassini-residual --> (with
``--one-period``: ``cassini-residual-one-period``; with ``--common-periods``:
``cassini-residual-common-period``).
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import spec as spec_mod  # noqa: E402
from harness.schedulers.cassini import harmonic, padded_periods  # noqa: E402
from harness.sets import emit_bench, mean_ci  # noqa: E402
from harness.sim.engine import Simulator  # noqa: E402
from workloads.profiles import PROFILE_DIR  # noqa: E402

TRACES = ["fig11-load90", "fig11-load100"]
SCHEDULERS = ("themis", "themis+cassini", "ideal")
VARIANTS = {"themis+cassini": {}, "themis+cassini, sliding scores": {"unequal_score": "sliding"}}
KINDS = ("held", "unequal periods", "incompatible", "not shared")


def run(path, seed, scheduler, overrides=None):
    spec = spec_mod.load(path, scheduler=scheduler, seed=seed, overrides=overrides or None)
    sim = Simulator(spec)
    return spec, sim, sim.run()


def separable(a, b, span_a, span_b, pad):
    """Can some shift keep two jobs apart, each period padded by at most ``pad`` ms?"""
    return any(harmonic(x, y, span_a, span_b) for x in padded_periods(a, pad) for y in padded_periods(b, pad))


def kinds(spec, sim, summary):
    """{job: kind} for a themis+cassini run (module docstring)."""
    span = {j.name: spec.profiles[j.model].comm_span_ms for j in spec.jobs}
    period = {j.name: sim.period_of.get(j.name, spec.profiles[j.model].iteration_ms) for j in spec.jobs}
    partners = {j.name: set() for j in spec.jobs}
    for e in sim.epochs:
        for link in e.get("links", []):
            for n in link["jobs"]:
                partners[n] |= set(link["jobs"]) - {n}
    pad = spec.cassini["quantum_ms"]
    out = {}
    for n, j in summary["jobs"].items():
        if j["alignment"] == "group":
            out[n] = "held"
        elif not partners[n]:
            out[n] = "not shared"
        elif any(not separable(period[n], period[p], span[n], span[p], pad) for p in partners[n]):
            out[n] = "unequal periods"
        else:
            out[n] = "incompatible"
    return out


def above_ideal(summary, ideal):
    """{job: its share of (mean iteration - ideal's mean iteration)} (iteration-weighted)."""
    n = {k: j["iterations"] for k, j in ideal["jobs"].items()}
    total = sum(n.values())
    return {k: (summary["jobs"][k]["iteration_ms_mean"] - ideal["jobs"][k]["iteration_ms_mean"]) * n[k] / total
            for k in n}


def one_period(models, period_ms):
    """A spec's ``profiles``: each built-in model of ``models`` with its iteration padded to ``period_ms``."""
    out = {}
    for m in models:
        d = spec_mod.read_yaml(PROFILE_DIR / f"{m}.yaml")
        if period_ms < d["iteration_ms"]:
            raise SystemExit(f"cassini_residual: --one-period {period_ms:g} is shorter than {m}'s {d['iteration_ms']} ms")
        out[m] = {**d, "iteration_ms": period_ms}
    return out


def fmt(m_ci):
    m, ci = m_ci
    return f"{m:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--one-period", type=float, metavar="MS",
                    help="every model's iteration padded to MS ms, under every scheduler (module docstring)")
    ap.add_argument("--publish", metavar="FILE", help="replace the block <!-- interleave bench cassini-residual --> in FILE")
    ap.add_argument("--common-periods", metavar="X,..", help="Th+CASSINI once per cassini.common_period given")
    args = ap.parse_args()
    if args.one_period and args.common_periods:
        ap.error("--one-period and --common-periods are two experiments: give one")
    variants = {"themis+cassini": {}} if args.one_period else VARIANTS
    if args.common_periods:
        variants = {f"{float(x):g}": {"common_period": float(x)} for x in args.common_periods.split(",")}
    setting = "`cassini.common_period`" if args.common_periods else "CASSINI's scores"
    gains = [f"| trace | seeds | Themis | ideal | Themis / ideal | {setting} | Th+CASSINI | Themis / Th+CASSINI | "
             "share of the gap recovered (on the means) |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    split = [f"| trace | {setting} | Themis above ideal | Th+CASSINI above ideal | " + " | ".join(KINDS) + " |",
             "| --- | --- | --- | --- |" + " --- |" * len(KINDS)]
    single = []
    for trace in TRACES:
        path = ROOT / "experiments" / "cassini" / f"{trace}.yaml"
        raw = spec_mod.read_yaml(path)
        seed0 = raw["seed"]
        base = {"profiles": one_period(raw["trace"]["models"], args.one_period)} if args.one_period else {}
        # each variant's cassini block: the spec's own with the variant's settings on top
        over = {v: {**base, "cassini": {**raw.get("cassini", {}), **c}} for v, c in variants.items()}
        means = {s: [] for s in ("themis", "ideal", *variants)}
        by_kind = {v: dict.fromkeys(KINDS, 0.0) for v in variants}
        themis_above, placed, one = 0.0, dict.fromkeys(variants, 0), dict.fromkeys(variants, 0)
        for r in range(args.repeats):
            runs = {s: run(path, seed0 + r, s, base) for s in ("themis", "ideal")}
            runs.update({v: run(path, seed0 + r, "themis+cassini", over[v]) for v in variants})
            for s, (_spec, _sim, summary) in runs.items():
                means[s].append(summary["totals"]["iteration_ms_mean"])
            ideal = runs["ideal"][2]
            themis_above += sum(above_ideal(runs["themis"][2], ideal).values()) / args.repeats
            for v in variants:
                spec, sim, summary = runs[v]
                kind = kinds(spec, sim, summary)
                for k, x in above_ideal(summary, ideal).items():
                    by_kind[v][kind[k]] += x / args.repeats
                placed[v] += len(sim.epochs)
                one[v] += sum(1 for e in sim.epochs if e.get("candidates_considered") == 1)
            print(f"{trace} seed {seed0 + r}: " + ", ".join(f"{s} {m[-1]:.1f}" for s, m in means.items()), file=sys.stderr)
        th, idl = (sum(means[s]) / len(means[s]) for s in ("themis", "ideal"))
        gap = mean_ci([a / b for a, b in zip(means["themis"], means["ideal"])])
        for v, c in variants.items():
            tc = sum(means[v]) / len(means[v])
            gain = mean_ci([a / b for a, b in zip(means["themis"], means[v])])
            scores = v if args.common_periods else c.get("unequal_score", "circle")
            gains.append(f"| {trace} | {args.repeats} | {th:.1f} ms | {idl:.1f} ms | {fmt(gap)}x | {scores} | {tc:.1f} ms | "
                         f"{fmt(gain)}x | {(th / tc - 1) / (th / idl - 1):.2f} |")
            tot = sum(by_kind[v].values())
            split.append(f"| {trace} | {scores} | {themis_above:.1f} ms | {tot:.1f} ms | "
                         + " | ".join(f"{by_kind[v][k]:.1f} ms ({by_kind[v][k] / tot:.0%})" if tot else f"{by_kind[v][k]:.1f} ms"
                                    for k in KINDS) + " |")
            single.append(f"{trace} ({scores}): {one[v]} of {placed[v]}")
    kind = "one period" if args.one_period else "common period" if args.common_periods else ""
    name = "cassini-residual" + (f"-{kind.replace(' ', '-')}" if kind else "")
    md = ("# cassini residual" + (f", {kind}" if kind else "") + "\n\n"
          + (f"Every model's iteration padded to {args.one_period:g} ms, under every scheduler. " if args.one_period else "")
          + ("Th+CASSINI with jobs whose periods are within `cassini.common_period` of each other padded onto the "
             "longest; the default is the spec's 0.05. " if args.common_periods else "")
          + "Mean iteration over the seeds (the spec's seed + 0.."
          f"{args.repeats - 1}), and the ratios' mean [95 %] over the seeds"
          + (":" if args.common_periods else "; CASSINI's scores of links whose jobs no shift keeps apart: `circle` "
             "(the default: the best shifts on the unified circle) or `sliding` (`cassini.unequal_score: sliding`):")
          + "\n\n" + "\n".join(gains)
          + "\n\nTime above ideal (mean over the seeds, ms of the mean iteration); Th+CASSINI's split by what "
          "CASSINI could do about each job's shared links (held: kept its shift with a group; unequal "
          "periods: beside a job whose period no shift keeps apart from its own; incompatible: beside "
          "harmonic jobs only, their communication too long for the beat; not shared: no shared link):\n\n"
          + "\n".join(split)
          + "\n\nPlacements of Th+CASSINI with a single candidate (the free servers admit one): "
          + "; ".join(single) + ".\n")
    emit_bench(name, md, args.publish,
               ".venv/bin/python bench/cassini_residual.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
