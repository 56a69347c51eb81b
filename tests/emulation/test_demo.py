"""The demo experiment (make demo) as an emulation test: CASSINI's effect, over three pairs of runs.

Two VGG19 jobs sharing aggregation/core links of the 24-host fat-tree, themis vs themis+cassini,
three runs of each. Asserted: the results directories are complete (contract files); CASSINI ranks
first on the mean iteration over the three pairs; every CASSINI run sees under half the ECN marks of
the themis runs' mean (its Up phases interleave); the simulator ranks them the same way and is
within 10 % of the emulated CASSINI runs.

Spreads measured on this machine kind, quiet, 2026-12-01 (both the code before and after the trust
changes): CASSINI 312.0-319.8 ms mean (6 runs, 63-213 marks), themis 325.3-354.2 ms (3 runs,
712-1,075 marks); the demo set (experiments/sets/demo.yaml, 5 pairs, results/README.md): CASSINI
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
import pytest
import json

import yaml

from harness import spec as spec_mod
from harness.simulate import simulate_spec
from tests.helpers import ROOT, TEST_DILATION, interleave

pytestmark = pytest.mark.root

FILES = {"spec.yaml", "schedule.json", "environment.json", "iterations.csv", "links.csv", "summary.json"}


PAIRS = 3


def test_demo_cassini_beats_themis(tmp_path):
    raw = yaml.safe_load((ROOT / "experiments/demo.yaml").read_text())
    spec = tmp_path / "demo.yaml"
    spec.write_text(yaml.safe_dump(dict(raw, time_dilation=TEST_DILATION)))
    runs = {"themis": [], "themis+cassini": []}
    for i in range(PAIRS):
        for sched in runs:
            out = tmp_path / f"{sched.replace('+', '-')}-{i}"
            p = interleave("run", str(spec), "--scheduler", sched, "--out", str(out), "--quiet",
                           "--json", timeout=400)
            assert p.returncode == 0, p.stderr[-2000:]
            assert FILES <= {f.name for f in out.iterdir()}
            assert not (tmp_path / (out.name + ".partial")).exists()
            runs[sched].append(json.loads(p.stdout))
    assert all(r["fidelity"]["ok"] for rs in runs.values() for r in rs), [r["fidelity"] for rs in runs.values() for r in rs]
    assert all(j["iterations"] == 100 for rs in runs.values() for r in rs for j in r["jobs"].values())
    mean = {s: sum(r["totals"]["iteration_ms_mean"] for r in rs) / PAIRS for s, rs in runs.items()}
    assert mean["themis+cassini"] < mean["themis"], mean
    base_marks = sum(r["totals"]["ecn_marks"] for r in runs["themis"]) / PAIRS
    assert all(r["totals"]["ecn_marks"] < 0.5 * base_marks for r in runs["themis+cassini"]), \
        ([r["totals"]["ecn_marks"] for r in runs["themis+cassini"]], base_marks)
    # the simulator against the emulator on the same spec: CASSINI's runs within 10 %, and the same
    # ranking. Themis's emulated baseline is chaotic: its per-run agreement is in results/README.md.
    sim = {s: simulate_spec(spec_mod.load("experiments/demo.yaml", scheduler=s))["totals"]
           for s in ("themis", "themis+cassini")}
    emu_cas = mean["themis+cassini"]
    assert abs(sim["themis+cassini"]["iteration_ms_mean"] - emu_cas) <= 0.10 * emu_cas, (sim, emu_cas)
    assert sim["themis+cassini"]["iteration_ms_mean"] < sim["themis"]["iteration_ms_mean"]
    assert sim["themis+cassini"]["ecn_marks"] < 0.5 * sim["themis"]["ecn_marks"]
    p = interleave("report", str(tmp_path / "themis-0"), str(tmp_path / "themis-cassini-0"), "--out", str(tmp_path / "rep"))
    assert p.returncode == 0, p.stderr
    assert {"report.md", "report.html", "iteration_cdf.png", "marks.png"} <= {f.name for f in (tmp_path / "rep").iterdir()}
