"""CASSINI's Table 2 beside a set's runs: each snapshot job's communication time (comm_ms_mean, first
phase start to last phase end, mean over the kept repeats with its 95 % interval) against the
column Table 2 (workloads.table2) gives it: Themis's for a run under themis, Th+CASSINI's for one
under themis+cassini, and for a job run alone the shorter of the two (workloads.table2.alone);
emulated (``--out``) and simulated (``<out>-sim`` when it holds the set's runs), with the deviation
from the paper. A run entry's label names its snapshot (``snapshot1``, ``snapshot1-bg0.10``) or
``alone`` (snapshots 1 and 2, every job on links of its own).

    python -m harness.table2 experiments/sets/table2.yaml --out results/table2 [--publish results/cassini-testbed/README.md]

No root. Exit 2 on a bad set file or when ``--out`` holds none of its runs.
"""
import re
import sys
from pathlib import Path

from harness import sets
from harness.errors import UsageError
from workloads import table2

KIND = "table2"

# experiments/cassini/table2-alone.yaml's jobs: (snapshot, job there)
ALONE = {"wrn101": (1, "wrn101"), "vgg16-1400": (1, "vgg16"), "vgg19": (2, "vgg19"), "vgg16-1700": (2, "vgg16"),
         "resnet50": (2, "resnet50")}


def paper_ms(label, scheduler, job):
    """(Table 2's ms for this run's job, which column), or None when the label names no snapshot. A job
    run alone is held to its time alone (workloads.table2.alone)."""
    if label == "alone":
        r = table2.row(*ALONE.get(job, (None, None)))
        return table2.alone(r) if r else None
    m = re.match(r"snapshot(\d)", label)
    r = table2.row(int(m.group(1)), job) if m else None
    if r is None:
        return None
    return (r.cassini_ms, "Th+CASSINI") if scheduler.endswith("+cassini") else (r.themis_ms, "Themis")


def rows(st, out):
    """{(label, scheduler, job): (mean, ci, kept, excluded)} of the set's runs under ``out``."""
    got = {}
    for r in st["runs"]:
        for s in r["schedulers"]:
            runs, excluded = sets.kept_summaries(out, r["name"], s, r["repeats"])
            jobs = sorted({j for x in runs.values() for j in x["jobs"]})
            for j in jobs:
                mean, ci = sets.mean_ci([x["jobs"][j].get("comm_ms_mean") for x in runs.values() if j in x["jobs"]])
                got[(r["name"], s, j)] = (mean, ci, len(runs), excluded)
    return got


def cell(v, paper):
    if v is None or v[0] is None:
        return "no run", ""
    mean, ci, kept, excluded = v
    txt = f"{mean:.1f}" + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci and ci[0] != ci[1] else "") + f" ({kept}"
    txt += f", {excluded} excluded)" if excluded else ")"
    return txt, f"{mean / paper - 1:+.1%}"


def render(st, out):
    emu = rows(st, out)
    sim_dir = Path(str(out).rstrip("/") + "-sim")
    sim = rows(st, sim_dir) if sim_dir.is_dir() else {}
    if not any(v[2] for v in emu.values()) and not any(v[2] for v in sim.values()):
        raise UsageError(f"{out}: none of set {st['name']}'s runs")
    lines = [f"# Table 2 beside the runs of {st['name']}", "",
             "Communication time per iteration (ms), mean over the kept repeats [95 %] (repeats kept"
             + ", excluded by the fidelity guard), and its deviation from the paper's.", "",
             "| run | scheduler | job | Table 2 | emulated | off | simulated | off |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    order = {r["name"]: i for i, r in enumerate(st["runs"])}
    for key in sorted(set(emu) | set(sim), key=lambda k: (order[k[0]], k[1], k[2])):
        label, s, job = key
        p = paper_ms(label, s, job)
        if p is None:
            continue
        e, eo = cell(emu.get(key), p[0])
        m, mo = cell(sim.get(key), p[0])
        lines.append(f"| {label} | {s} | {job} | {p[0]} ({p[1]}) | {e} | {eo} | {m} | {mo} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    return sets.block_command("harness.table2", __doc__, KIND, "emulated", render, argv)


if __name__ == "__main__":
    sys.exit(main())
