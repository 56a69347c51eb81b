"""The demo experiment (make demo) as emulation tests: one short pair in ``make test`` (the demo's path
end to end: two runs, their report, CASSINI's Up phases interleaving), and CASSINI's effect over
three full pairs in ``make test-experiments``.

The experiment (``test_demo_cassini_beats_themis``): two VGG19 jobs sharing aggregation/core
links of the 24-host fat-tree, themis vs themis+cassini, three runs of each. Asserted: the results directories are complete (contract files); CASSINI ranks
first on the mean iteration over the three pairs; every CASSINI run sees under half the ECN marks of
the themis runs' mean (its Up phases interleave); the simulator ranks them the same way and is
within 10 % of the emulated CASSINI runs.

Spreads measured on this machine kind, quiet, 2026-12-01 (both the code before and after the trust
changes): CASSINI 312.0-319.8 ms mean (6 runs, 63-213 marks), themis 325.3-354.2 ms (3 runs,
712-1,075 marks); the demo set (experiments/sets/demo.yaml, 5 pairs, results/demo/README.md): CASSINI
315.5-327.5 ms (154-292 marks), themis 325.5-338.2 ms (620-1,333 marks), ratio of means 1.04
[1.01, 1.08]. With these spreads the mean of three themis runs falls below the mean of three
CASSINI runs about once in a thousand tries (difference 14 ms, its standard deviation 4.5 ms). Earlier (2026-11-29, another machine of the kind): CASSINI 304-309, themis
314-365. The themis baseline is chaotic: jobs that start together may drift apart into
interleaving by themselves (platform notes), so one pair can come out even; three pairs cannot by
luck. CASSINI's own mean sits 2-7 % above the profile's 298 ms: each communication phase ends a few
ms late on the 6-hop path (median 120-124 ms for the profile's 119), the grid drifts, and the
leader re-aligns (11-21 times a minute); that is the emulator's cost, reported in summary.json,
not asserted here.

Run at ``tests.helpers.TEST_DILATION`` (2): on the slower machines of this kind one of six
undilated runs was flagged by the guard in CI (2026-12-04). Measured at 2 on such a machine
(2026-12-04, two runs of this test, quiet): CASSINI 300.4-305.1 ms (0-36 marks), themis 320.6-362.2
ms (1,689-3,332 marks), every run kept, the guard's busy seconds at most 1.5 % (limit 10 %).
"""
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from harness import spec as spec_mod
from harness.simulate import simulate_spec
from tests.helpers import ROOT, TEST_DILATION, interleave, run_kept

pytestmark = pytest.mark.root

FILES = {"spec.yaml", "schedule.json", "environment.json", "iterations.csv", "links.csv", "summary.json",
         "jobs.csv", "iteration_ms.csv", "provenance.json"}
PAIRS = 3
SHORT_ITERATIONS = 12


def demo_spec(tmp_path, iterations=None):
    """experiments/demo.yaml at ``TEST_DILATION`` (and with ``iterations`` per job when given)."""
    raw = dict(yaml.safe_load((ROOT / "experiments/demo.yaml").read_text()), time_dilation=TEST_DILATION)
    if iterations:
        raw["jobs"] = [dict(j, iterations=iterations) for j in raw["jobs"]]
    spec = tmp_path / "demo.yaml"
    spec.write_text(yaml.safe_dump(raw))
    return spec


def run_pair(tmp_path, spec, i, iterations):
    """One themis and one themis+cassini run of ``spec`` (each repeated if the guard flags it):
    {scheduler: (summary, results directory)}, having checked each directory is complete and every
    job ran ``iterations``."""
    out = {}
    for sched in ("themis", "themis+cassini"):
        s, d = run_kept(spec, tmp_path / f"{sched.replace('+', '-')}-{i}", "--scheduler", sched, timeout=400)
        assert FILES <= {f.name for f in d.iterdir()}, f"run {d}: missing {sorted(FILES - {f.name for f in d.iterdir()})}"
        assert not d.with_name(d.name + ".partial").exists(), f"run {d}: a .partial directory was left"
        done = {n: j["iterations"] for n, j in s["jobs"].items()}
        assert set(done.values()) == {iterations}, f"run {d}: iterations {done} ({iterations} each expected)"
        dist = pd.read_csv(d / "iteration_ms.csv")      # the iterations the summary's statistics are over
        means = {n: g.iteration_ms.mean() for n, g in dist.groupby("job")}
        assert set(means) == set(s["jobs"]) and all(abs(means[n] - j["iteration_ms_mean"]) < 0.01
                                                    for n, j in s["jobs"].items()), (d, means)
        out[sched] = (s, d)
    return out


def marks(s):
    return s["totals"]["ecn_marks"]


def test_a_short_demo_pair_interleaves_and_reports(tmp_path):
    """The demo's path at ``SHORT_ITERATIONS`` a job: both runs complete and kept by the guard, CASSINI's
    run sees under half the ECN marks of the themis run (its Up phases interleave), and the report
    of the two has its tables and plots. Measured at dilation 2 on this machine kind, one quiet
    pair each: at 12 iterations CASSINI 0 marks, themis 493; at 20, 0 and 766 (the experiment's
    full-length runs: CASSINI 0-36, themis 1,689-3,332)."""
    pair = run_pair(tmp_path, demo_spec(tmp_path, SHORT_ITERATIONS), 0, SHORT_ITERATIONS)
    (base, bd), (cas, cd) = pair["themis"], pair["themis+cassini"]
    assert marks(cas) < 0.5 * marks(base), \
        f"ECN marks: {cd.name} {marks(cas)}, {bd.name} {marks(base)} (CASSINI under half of themis)"
    p = interleave("report", str(bd), str(cd), "--out", str(tmp_path / "rep"))
    assert p.returncode == 0, p.stderr
    assert {"report.md", "report.html", "iteration_cdf.png", "marks.png"} <= {f.name for f in (tmp_path / "rep").iterdir()}
    # examples/notebook.py's emulated cell: the run's results as DataFrames beside the simulator's
    p = subprocess.run([sys.executable, str(ROOT / "examples" / "notebook.py"), str(cd)], capture_output=True,
                       text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0 and "emulated / simulated mean:" in p.stdout, p.stderr[-2000:]


@pytest.mark.experiment
def test_demo_cassini_beats_themis(tmp_path):
    spec = demo_spec(tmp_path)
    runs = {"themis": [], "themis+cassini": []}
    for i in range(PAIRS):
        for sched, (s, d) in run_pair(tmp_path, spec, i, 100).items():
            runs[sched].append((s, d))
    mean = {sched: sum(s["totals"]["iteration_ms_mean"] for s, _d in rs) / PAIRS for sched, rs in runs.items()}
    assert mean["themis+cassini"] < mean["themis"], f"mean iteration over {PAIRS} runs (ms): {mean}"
    base_marks = sum(marks(s) for s, _d in runs["themis"]) / PAIRS
    for s, d in runs["themis+cassini"]:
        assert marks(s) < 0.5 * base_marks, f"run {d}: {marks(s)} ECN marks (under half of themis's mean {base_marks:.0f})"
    # the simulator against the emulator on the same spec: CASSINI's runs within 10 %, and the same
    # ranking. Themis's emulated baseline is chaotic: its per-run agreement is in results/demo/README.md.
    sim = {s: simulate_spec(spec_mod.load("experiments/demo.yaml", scheduler=s))["totals"]
           for s in ("themis", "themis+cassini")}
    emu_cas, sim_cas = mean["themis+cassini"], sim["themis+cassini"]["iteration_ms_mean"]
    assert abs(sim_cas - emu_cas) <= 0.10 * emu_cas, f"simulated CASSINI {sim_cas:.1f} ms, emulated {emu_cas:.1f} (within 10 %)"
    assert sim_cas < sim["themis"]["iteration_ms_mean"], sim
    assert sim["themis+cassini"]["ecn_marks"] < 0.5 * sim["themis"]["ecn_marks"], sim
