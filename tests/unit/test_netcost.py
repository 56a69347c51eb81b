"""harness.netcost: pairing a row at background b with its background-0 twin and with the rows of other
netsens settings, the ratios, the CLI."""
import json
from pathlib import Path

import pytest

from harness import netcost, sets

SPEC = str(Path(__file__).resolve().parents[2] / "experiments/sim/philly256.yaml")
TRACE = "{kind: poisson, jobs: 20, load: 1.2, workers: {2: 1}}"


def set_file(tmp_path):
    p = tmp_path / "regimes.yaml"
    p.write_text(f"""name: regimes
repeats: 2
runs:
  - {{spec: {SPEC}, label: t-bg0, background: 0, schedulers: [consolidate, netsens], set: {{trace: {TRACE}}}}}
  - {{spec: {SPEC}, label: t-bg0.75, background: 0.75, schedulers: [consolidate, netsens], set: {{trace: {TRACE}}}}}
  - {{spec: {SPEC}, label: t-bg0.75-tuned, background: 0.75, schedulers: [consolidate, netsens],
     set: {{trace: {TRACE}, netsens: {{timers: auto}}}}}}
  - {{spec: {SPEC}, label: other-bg0.75, background: 0.75, schedulers: [consolidate, netsens],
     set: {{trace: {{kind: poisson, jobs: 20, load: 0.9, workers: {{2: 1}}}}}}}}
  - {{spec: {SPEC}, label: t-bg0.75-oracle, background: 0.75, schedulers: [netsens],
     set: {{trace: {TRACE}, netsens: {{timers: auto}}}}}}
""")
    return p


def put(out, row, sched, k, jct, makespan=100.0, overhead=10.0, ok=True):
    d = sets.run_dir(out, row, sched, k)
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({"fidelity": {"ok": ok}, "jobs": {}, "totals": {
        "jct_s_mean": jct, "makespan_s": makespan, "communication_overhead_s": overhead}}))


def test_pairs_each_row_with_its_background_zero_twin_by_repeat(tmp_path):
    st, out = sets.load_set(set_file(tmp_path)), tmp_path / "out"
    for k, (c0, cb, nb) in enumerate([(100.0, 150.0, 120.0), (200.0, 260.0, 200.0)]):
        put(out, "t-bg0", "consolidate", k, c0)
        put(out, "t-bg0", "netsens", k, c0)
        for row in ("t-bg0.75", "t-bg0.75-tuned", "other-bg0.75"):
            put(out, row, "consolidate", k, cb)
            put(out, row, "netsens", k, nb)
    rows = {r["row"]: r for r in netcost.table(st, out)}
    assert set(rows) == {"t-bg0", "t-bg0.75", "t-bg0.75-tuned", "other-bg0.75"}
    assert rows["other-bg0.75"]["cost"] is None and rows["t-bg0"]["cost"] is None   # no twin at 0; at 0
    r = rows["t-bg0.75"]
    assert r["zero_row"] == "t-bg0" and rows["t-bg0.75-tuned"]["zero_row"] == "t-bg0"
    assert r["cost"]["jct_s_mean"] == pytest.approx((1.5 + 1.3) / 2)      # per-repeat ratios, averaged
    assert r["gain"]["jct_s_mean"] == pytest.approx((1.25 + 1.3) / 2)
    assert r["cost"]["pairs"] == 2
    md = netcost.markdown(st, list(rows.values()))
    assert "| t-bg0.75 | 0.75 | 2 | 1.40 [" in md
    assert "| other-bg0.75 | 0.75 | 2 | - | - |" in md


def test_rows_of_other_settings_pair_with_their_traces_consolidate_and_defaults(tmp_path):
    st, out = sets.load_set(set_file(tmp_path)), tmp_path / "out"
    for k, (cb, nb, ob) in enumerate([(150.0, 120.0, 100.0), (260.0, 200.0, 250.0)]):
        put(out, "t-bg0.75", "consolidate", k, cb)
        put(out, "t-bg0.75", "netsens", k, nb)
        put(out, "t-bg0.75-oracle", "netsens", k, ob)
        put(out, "other-bg0.75", "consolidate", k, cb)
        put(out, "other-bg0.75", "netsens", k, cb * 1.2)        # mean JCT worse, makespan level
    rows = {r["row"]: r for r in netcost.table(st, out)}
    t = rows["t-bg0.75"]["twins"]["t-bg0.75-oracle"]
    assert t["gain"]["jct_s_mean"] == pytest.approx((1.5 + 260 / 250) / 2)
    assert t["default_over"]["jct_s_mean"] == pytest.approx((1.2 + 0.8) / 2)
    assert rows["other-bg0.75"]["twins"] == {}                 # another trace: not its twin
    md = netcost.markdown(st, list(rows.values()))
    assert "| t-bg0.75-oracle | t-bg0.75 | 1.27 [" in md
    other = next(line for line in md.splitlines() if line.startswith("| other-bg0.75 |"))
    assert other.count("**worse**") == 1
    assert [line for line in md.splitlines() if line.startswith("|") and "**worse**" in line] == [other]


def test_a_run_the_fidelity_guard_excluded_is_left_out_of_the_pairs(tmp_path):
    st, out = sets.load_set(set_file(tmp_path)), tmp_path / "out"
    for k in range(2):
        put(out, "t-bg0", "consolidate", k, 100.0, ok=(k == 0))
        put(out, "t-bg0.75", "consolidate", k, 150.0 + 50 * k)
        put(out, "t-bg0.75", "netsens", k, 100.0)
    r = next(x for x in netcost.table(st, out) if x["row"] == "t-bg0.75")
    assert r["cost"]["pairs"] == 1 and r["cost"]["jct_s_mean"] == pytest.approx(1.5)
    assert r["gain"]["pairs"] == 2


def test_cli_without_results_says_so_in_one_line(tmp_path, capsys):
    assert netcost.main([str(set_file(tmp_path)), "--out", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("netcost: ") and "both consolidate and netsens" in err[0]


def test_the_best_single_setting_is_the_grid_candidate_best_over_all_repeats(tmp_path):
    """Per seed the tuner picks 600/0 once and 0/0 once; over both repeats 60/15 is best (110 + 210
    against 100 + 240 and 130 + 200), and the defaults are compared with it repeat by repeat."""
    st, out = sets.load_set(set_file(tmp_path)), tmp_path / "out"
    grids = [{(600.0, 0.0): 100.0, (60.0, 15.0): 110.0, (0.0, 0.0): 130.0},
             {(600.0, 0.0): 240.0, (60.0, 15.0): 210.0, (0.0, 0.0): 200.0}]
    for k, (nb, grid) in enumerate(zip([121.0, 189.0], grids)):
        put(out, "t-bg0.75", "consolidate", k, 300.0)
        put(out, "t-bg0.75", "netsens", k, nb)
        put(out, "t-bg0.75-oracle", "netsens", k, min(grid.values()))
        d = sets.run_dir(out, "t-bg0.75-oracle", "netsens", k) / "summary.json"
        s = json.loads(d.read_text())
        s["params"] = {"tuning": {"objective": "jct_mean", "tried": [
            {"timers": {"high": [h, h], "medium": [m, m], "low": [0.0, 0.0]}, "jct_mean": v}
            for (h, m), v in grid.items()]}}
        d.write_text(json.dumps(s))
    b = next(x for x in netcost.table(st, out) if x["row"] == "t-bg0.75")["twins"]["t-bg0.75-oracle"]["best_fixed"]
    assert (b["timers"]["high"][0], b["timers"]["medium"][0]) == (60.0, 15.0)
    assert b["default_over"]["jct_s_mean"] == pytest.approx((1.1 + 0.9) / 2)
    assert b["default_over"]["pairs"] == 2
    md = netcost.markdown(st, netcost.table(st, out))
    assert "| t-bg0.75 | high 60, medium 15 | 1.000 [" in md


def test_rows_without_a_grid_have_no_best_single_setting(tmp_path):
    st, out = sets.load_set(set_file(tmp_path)), tmp_path / "out"
    for k in range(2):
        put(out, "t-bg0.75", "consolidate", k, 150.0)
        put(out, "t-bg0.75", "netsens", k, 120.0)
        put(out, "t-bg0.75-oracle", "netsens", k, 110.0)
    rows = netcost.table(st, out)
    assert next(x for x in rows if x["row"] == "t-bg0.75")["twins"]["t-bg0.75-oracle"]["best_fixed"] is None
    assert "best single fixed setting" not in netcost.markdown(st, rows)
