"""harness.drift: a run whose steps slow part-way stands out; bad input exits 2."""
import json

import pandas as pd
import pytest

from harness import drift, sets
from tests import helpers


def set_file(tmp_path):
    return helpers.set_file(tmp_path / "probe.yaml", "probe", 2, [("echelon-gpipe.yaml", "g", ["fixed:fair"])])


def make_run(d, steps_ms, idle):
    """A run directory with two workers of job a stepping ``steps_ms`` back to back."""
    d.mkdir(parents=True)
    rows, t = [], 0.0
    for k, ms in enumerate(steps_ms):
        for w, frac in ((0, 1.0), (1, 0.9)):
            rows.append({"job": "a", "worker": w, "iteration": k, "start": t, "end": t + frac * ms / 1000})
        t += ms / 1000
    pd.DataFrame(rows).to_csv(d / "iterations.csv", index=False)
    (d / "summary.json").write_text(json.dumps({"fidelity": {"ok": True, "signals": {
        "cpu_idle_per_s": idle, "vswitchd_cpu_us_per_packet": 90.0}}}))


def test_halves_leave_the_first_step_out():
    assert drift.halves([999, 1, 1, 3, 3]) == (1, 3)
    assert drift.halves([1, 1, 3, 3], skip=0) == (1, 3)
    assert drift.halves([5, 4]) == (None, None)


def test_a_run_that_slowed_part_way_stands_out(tmp_path, capsys):
    st, out = sets.load_set(set_file(tmp_path)), tmp_path / "out"
    make_run(sets.run_dir(out, "g", "fixed:fair", 0), [2000] + [1000] * 10, [0.5] * 10)
    make_run(sets.run_dir(out, "g", "fixed:fair", 1), [2000] + [1000] * 5 + [1200] * 5, [0.5] * 5 + [0.4] * 5)
    rows = {r["run"]: r for r in drift.table(st, out)}
    assert rows["g fixed:fair r0"]["late_over_early"] == pytest.approx(1.0)
    slowed = rows["g fixed:fair r1"]
    assert slowed["late_over_early"] == pytest.approx(1.2)
    assert (slowed["idle_early"], slowed["idle_late"]) == pytest.approx((0.5, 0.4))
    assert slowed["vswitchd_cpu_us_per_packet"] == 90.0 and slowed["datapath_emc_share"] is None
    assert drift.main([str(set_file(tmp_path)), "--out", str(out)]) == 0
    assert "| g fixed:fair r1 | 1.200 | 0.50 / 0.40 | 90.0 us |" in capsys.readouterr().out


def test_no_run_and_no_block_exit_2(tmp_path, capsys):
    sf = str(set_file(tmp_path))
    assert drift.main([sf, "--out", str(tmp_path / "none")]) == 2
    assert "no run of the set" in capsys.readouterr().err
    make_run(sets.run_dir(tmp_path / "out", "g", "fixed:fair", 0), [1000] * 4, [0.5] * 4)
    md = tmp_path / "README.md"
    md.write_text("nothing marked\n")
    assert drift.main([sf, "--out", str(tmp_path / "out"), "--publish", str(md)]) == 2
    assert "has no block" in capsys.readouterr().err
