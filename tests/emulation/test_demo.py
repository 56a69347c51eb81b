"""The demo experiment (make demo) as an emulation test: the direction of CASSINI's effect.

Two VGG19 jobs sharing aggregation/core links of the 24-host fat-tree, themis vs themis+cassini.
Asserted: the results directories are complete (contract files), CASSINI's mean iteration is not
worse, and its jobs see fewer ECN marks (under half of themis's).

Tolerances, from measured runs on this machine kind (2026-11-29): CASSINI 304-309 ms mean (4 runs,
6-83 marks), themis 314-365 ms (5 runs, 840-2619 marks). The themis baseline is chaotic: jobs that
start together may drift apart into interleaving by themselves (platform notes), and then run at
the profile's 298 ms; CASSINI's group alignment costs it 2.0-3.7 % above the profile. "Not worse"
therefore allows 5 %: a baseline that interleaved by luck must not fail the test, a CASSINI that
lost its interleaving (mean 325 ms and more, seen with the machine loaded) does.
"""
import json

from tests.emulation.conftest import interleave

FILES = {"spec.yaml", "schedule.json", "environment.json", "iterations.csv", "links.csv", "summary.json"}


def test_demo_cassini_beats_themis(tmp_path):
    runs = {}
    for sched in ("themis", "themis+cassini"):
        out = tmp_path / sched.replace("+", "-")
        p = interleave("run", "experiments/demo.yaml", "--scheduler", sched, "--out", str(out), "--quiet", "--json",
                       timeout=400)
        assert p.returncode == 0, p.stderr[-2000:]
        assert FILES <= {f.name for f in out.iterdir()}
        assert not (tmp_path / (out.name + ".partial")).exists()
        runs[sched] = json.loads(p.stdout)
    base, cas = runs["themis"], runs["themis+cassini"]
    assert base["fidelity"]["ok"] and cas["fidelity"]["ok"], (base["fidelity"], cas["fidelity"])
    assert cas["totals"]["iteration_ms_mean"] <= 1.05 * base["totals"]["iteration_ms_mean"], (cas["totals"], base["totals"])
    assert cas["totals"]["iteration_ms_mean"] <= 1.05 * 298, cas["totals"]   # and CASSINI keeps its interleaving
    assert cas["totals"]["ecn_marks"] < 0.5 * base["totals"]["ecn_marks"], (cas["totals"], base["totals"])
    assert all(j["iterations"] == 100 for r in runs.values() for j in r["jobs"].values())
    p = interleave("report", str(tmp_path / "themis"), str(tmp_path / "themis-cassini"), "--out", str(tmp_path / "rep"))
    assert p.returncode == 0, p.stderr
    assert {"report.md", "report.html", "iteration_cdf.png", "marks.png"} <= {f.name for f in (tmp_path / "rep").iterdir()}
