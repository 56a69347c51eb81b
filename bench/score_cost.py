#!/usr/bin/env python3
"""What a compatibility score costs a pair of jobs on its shared link (simulator, no root).

CASSINI's score of a link is 1 - E[excess]/C: the demand above the link's capacity C, averaged over
the circle at the best shifts. Under fair sharing those excess bits are carried after the overlap,
so each job of an equal pair finishes its communication about (1 - score) x T later than alone,
T its iteration time. Table 2's snapshot 4 scores its RoBERTa pair 0.8 and gives them 164 and 180
ms under Th+CASSINI (208 and 210 under Themis); the profile set table2 holds RoBERTa alone at
Table 2's Th+CASSINI time. This tool tests whether any network-bound RoBERTa profile reproduces
both: for each all-reduce rate and communication time C alone, the iteration T at which CASSINI's
circles score the pair 0.8 (bisection on harness.schedulers.circles.optimise), then snapshot 4's
spec (both jobs across the uplink s1>s7) with that profile under themis+cassini and themis, and
one job alone.

  .venv/bin/python bench/score_cost.py [--publish FILE]
--publish writes the table into FILE's block <!-- interleave bench score-cost -->.
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import spec as spec_mod  # noqa: E402
from harness.schedulers.circles import optimise  # noqa: E402
from harness.sets import emit_bench  # noqa: E402
from harness.simulate import simulate_spec  # noqa: E402
from workloads import table2  # noqa: E402
from workloads.profiles import from_dict  # noqa: E402

SPEC = ROOT / "experiments" / "cassini" / "snapshot4.yaml"
LINK_GBPS = 50.0
RATES = (37.0, 50.0)
COMM_MS = (120, 135, 150, 165, 180)


def profile(c_ms, t_ms, gbps):
    """A network-bound RoBERTa: its iteration ends with C ms of all-reduce at ``gbps``."""
    return {"model": "roberta", "parallelism": "data", "iteration_ms": round(t_ms, 1), "batch_size": 12,
            "workers": 2, "phases": [{"start_ms": round(t_ms - c_ms, 1), "duration_ms": c_ms, "gbps": gbps,
                                      "pattern": "ring_allreduce"}]}


def pair_score(c_ms, t_ms, gbps):
    p = from_dict("roberta", profile(c_ms, t_ms, gbps), "score_cost")
    return optimise([(p.iteration_ms, [p.demand])] * 2, capacity=LINK_GBPS).score


def period_at(score, c_ms, gbps):
    """The iteration time at which the pair scores ``score`` (the score grows with T)."""
    lo, hi = float(c_ms), 2.0 * c_ms
    if pair_score(c_ms, hi, gbps) < score:
        return None
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if pair_score(c_ms, mid, gbps) < score else (lo, mid)
    return hi


def comm(base, prof, jobs, scheduler):
    """{job: communication ms} of snapshot 4's spec with ``jobs`` of it, RoBERTa being ``prof``."""
    s = spec_mod.from_mapping({**base, "jobs": jobs, "profiles": {"roberta": prof}, "scheduler": scheduler})
    return {j: round(v["comm_ms_mean"], 1) for j, v in simulate_spec(s)["jobs"].items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--publish", metavar="FILE")
    args = ap.parse_args(argv)
    base = spec_mod.read_yaml(SPEC)
    rows = table2.snapshot(4)
    score = table2.SCORES[4]
    paper_c = {r.job: r.cassini_ms for r in rows}
    paper_t = {r.job: r.themis_ms for r in rows}
    lines = [f"Snapshot 4's RoBERTa pair on its shared uplink, each profile's iteration set so that CASSINI's circles "
             f"score the pair {score:g} (Table 2's); communication time per iteration (ms), simulated. Table 2: "
             f"Th+CASSINI {paper_c['roberta-a']} and {paper_c['roberta-b']}, Themis {paper_t['roberta-a']} and "
             f"{paper_t['roberta-b']}.", "",
             f"| all-reduce rate | alone, profile | iteration at score {score:g} | alone, simulated | Th+CASSINI (a, b) "
             "| over alone | (1 - score) x T / alone | Themis (a, b) | Th+CASSINI off Table 2 | alone off Table 2's "
             "Th+CASSINI |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for gbps in RATES:
        for c in COMM_MS:
            t = period_at(score, c, gbps)
            if t is None:
                continue
            prof, jobs = profile(c, t, gbps), base["jobs"]
            alone = comm(base, prof, jobs[:1], "themis")["roberta-a"]
            cas, them = comm(base, prof, jobs, "themis+cassini"), comm(base, prof, jobs, "themis")
            over = (cas["roberta-a"] + cas["roberta-b"]) / 2 / alone
            off = [cas[j] / paper_c[j] - 1 for j in ("roberta-a", "roberta-b")]
            off_alone = [alone / paper_c[j] - 1 for j in ("roberta-a", "roberta-b")]
            lines.append(f"| {gbps:g} Gbit/s | {c} ms | {t:.1f} ms | {alone:g} ms | {cas['roberta-a']:g}, "
                         f"{cas['roberta-b']:g} ms | {over:.2f}x | {1 + (1 - score) * t / alone:.2f}x | "
                         f"{them['roberta-a']:g}, {them['roberta-b']:g} ms | "
                         + ", ".join(f"{x:+.0%}" for x in off) + " | " + ", ".join(f"{x:+.0%}" for x in off_alone) + " |")
    emit_bench("score-cost", "\n".join(lines) + "\n", args.publish,
               ".venv/bin/python bench/score_cost.py --publish results/cassini-testbed/README.md")


if __name__ == "__main__":
    main()
