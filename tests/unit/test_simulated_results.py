"""Results without root: a report of simulated runs, a simulated set's reports and flat CSVs."""
import numpy as np
import pandas as pd

from tests.helpers import ROOT, cli_main

DEMO = ROOT / "experiments" / "demo.yaml"


def test_a_report_of_two_simulated_runs_has_its_tables_and_plots(tmp_path, capsys):
    dirs = []
    for s in ("themis", "themis+cassini"):
        d = tmp_path / s
        p = cli_main(capsys, "simulate", str(DEMO), "--scheduler", s, "--out", str(d))
        assert p.returncode == 0, p.stderr
        jobs = pd.read_csv(d / "jobs.csv")
        assert list(jobs.job) == ["vgg19-a", "vgg19-b"] and jobs.iteration_ms_mean.gt(0).all()
        dist = pd.read_csv(d / "iteration_ms.csv")
        for _i, j in jobs.iterrows():             # the distribution's weighted mean is the summary's
            x = dist[dist.job == j.job]
            assert abs(np.average(x.iteration_ms, weights=x.iterations) - j.iteration_ms_mean) < 0.01, (x, j)
            assert abs(x.iterations.sum() - j.iterations) < 1, (x.iterations.sum(), j.iterations)
        dirs.append(str(d))
    p = cli_main(capsys, "report", *dirs, "--out", str(tmp_path / "rep"))
    assert p.returncode == 0, p.stderr
    made = {f.name for f in (tmp_path / "rep").iterdir()}
    assert {"report.md", "report.html", "iterations.png", "marks.png", "iteration_cdf.png"} <= made
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "themis+cassini (themis+cassini, simulated)" in md and "| 150 ms |" in md, md


def test_a_simulated_set_writes_reports_and_flat_tables(tmp_path, capsys):
    st = tmp_path / "set.yaml"
    st.write_text(f"repeats: 2\nruns: [{{spec: {DEMO}, schedulers: [themis, themis+cassini]}}]\n")
    out = tmp_path / "out"
    p = cli_main(capsys, "reproduce", str(st), "--simulate", "--out", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    assert (out / "demo" / "report" / "report.md").is_file() and (out / "demo" / "report" / "iterations.png").is_file()
    table, ratios, jobs = (pd.read_csv(out / f) for f in ("table.csv", "ratios.csv", "jobs.csv"))
    assert list(table.scheduler) == ["themis", "themis+cassini"] and table.runs.eq(2).all()
    assert (ratios.base[0], ratios.other[0], ratios.pairs[0]) == ("themis", "themis+cassini", 2)
    assert ratios.iteration_ms_mean[0] > 1 and len(jobs) == 4
    assert "## Ratios" in p.stdout and "## Per job" not in p.stdout and "jobs.csv" in p.stdout
    assert "every repeat equal" in p.stdout            # the demo's repeats are deterministic in the simulator
    assert "[1/4]" not in p.stderr                     # --quiet: no routine line per run
