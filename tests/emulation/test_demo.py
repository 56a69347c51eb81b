"""The demo experiment (make demo) as an emulation test: the direction of CASSINI's effect.

Two VGG19 jobs sharing aggregation/core links of the 24-host fat-tree, themis vs themis+cassini.
Asserted: the results directories are complete (contract files), CASSINI's mean iteration is not
worse, and its jobs see fewer ECN marks (under half of themis's). The simulator (harness.sim) is
validated on the same spec: within 10 % of the emulated CASSINI run, and the same ranking.

Tolerances, from measured runs on this machine kind (2026-11-29): CASSINI 304-309 ms mean (4 runs,
6-83 marks), themis 314-365 ms (5 runs, 840-2619 marks). The themis baseline is chaotic: jobs that
start together may drift apart into interleaving by themselves (platform notes), and then run at
the profile's 298 ms; CASSINI's group alignment costs it 2.0-3.7 % above the profile. "Not worse"
therefore allows 5 %: a baseline that interleaved by luck must not fail the test, a CASSINI that
lost its interleaving (mean 325 ms and more, seen with the machine loaded) does.
"""
import json

from harness import spec as spec_mod
from harness.sim import simulate_spec
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
    # the simulator against the emulator on the same spec: CASSINI's run (deterministic: 304-309 ms
    # measured) within 10 %, and the same ranking. Themis's emulated baseline is chaotic (314-369 ms
    # over 8 runs, the fluid model says 355 ms): its per-run agreement is in results/README.md.
    sim = {s: simulate_spec(spec_mod.load("experiments/demo.yaml", scheduler=s))["totals"]
           for s in ("themis", "themis+cassini")}
    emu_cas = cas["totals"]["iteration_ms_mean"]
    assert abs(sim["themis+cassini"]["iteration_ms_mean"] - emu_cas) <= 0.10 * emu_cas, (sim, emu_cas)
    assert sim["themis+cassini"]["iteration_ms_mean"] < sim["themis"]["iteration_ms_mean"]
    assert sim["themis+cassini"]["ecn_marks"] < 0.5 * sim["themis"]["ecn_marks"]
    p = interleave("report", str(tmp_path / "themis"), str(tmp_path / "themis-cassini"), "--out", str(tmp_path / "rep"))
    assert p.returncode == 0, p.stderr
    assert {"report.md", "report.html", "iteration_cdf.png", "marks.png"} <= {f.name for f in (tmp_path / "rep").iterdir()}
