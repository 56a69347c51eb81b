import json

import numpy as np
import pandas as pd
import pytest

from harness.replay import COLUMNS
from harness.report import report
from harness.linkmodel import LinkParams
from harness.planners.schedule import groups
from harness.metrics import iteration_times_ms
from harness.runner import max_window_utilization, shaping_allowance


def test_iteration_time_includes_a_realignment_pause():
    w0 = pd.DataFrame({"start": [0.0, 0.30, 0.90, 1.20], "end": [0.30, 0.60, 1.20, 1.50]})
    # the pause between 0.60 and 0.90 belongs to iteration 1
    assert iteration_times_ms(w0).round(3).tolist() == [300.0, 600.0, 300.0, 300.0]


def test_one_second_window_ignores_single_sample_spikes():
    t = np.arange(0, 5, 0.1)
    b = np.cumsum(np.full(len(t), 0.5 * 50e6 / 8 * 0.1))          # half the link rate
    b[20:] += 200_000                                               # a counter catching up at once
    links = pd.DataFrame({"time": t, "direction": "s1>s2", "tx_bytes": b, "source": "openflow"})
    assert max_window_utilization(links, {"s1>s2": 50e6}, 1.0) == pytest.approx(0.5 + 200_000 * 8 / 50e6, abs=0.01)
    # a link that really ran at twice its rate for over a second is caught
    links.tx_bytes = np.cumsum(np.full(len(t), 2 * 50e6 / 8 * 0.1))
    assert max_window_utilization(links, {"s1>s2": 50e6}, 1.0) == pytest.approx(2.0, abs=0.01)


def test_window_uses_the_counters_own_clock():
    # replies arrive bunched (receipt times squeezed) while the counters advance at exactly the rate
    counter_t = np.arange(0, 5, 0.1)
    b = counter_t * 50e6 / 8
    receipt = counter_t.copy()
    receipt[10:20] = receipt[10] + (receipt[10:20] - receipt[10]) * 0.9   # 10 replies in 0.81 s
    receipt[20:] -= 0.09
    links = pd.DataFrame({"time": receipt, "counter_time": counter_t + 1234.0, "direction": "s1>s2",
                          "tx_bytes": b, "source": "openflow"})
    assert max_window_utilization(links, {"s1>s2": 50e6}, 1.0) == pytest.approx(1.0, abs=0.001)
    assert max_window_utilization(links.drop(columns="counter_time"), {"s1>s2": 50e6}, 1.0) > 1.05
    # one HTB burst at 50 Mbit/s, MTU 9000: 27 KB = 0.4 % of a second, plus 1 % interpolation
    assert shaping_allowance(LinkParams.scaled(50), 1.0) == pytest.approx(1.0144, abs=1e-3)


def test_groups_join_only_compatible_links():
    epochs = [{"links": [{"jobs": ["a", "b"], "score": 1.0}, {"jobs": ["c", "d"], "score": 0.69}]}]
    assert groups("abcd", epochs)["c"] == {"c", "d"}
    g = groups("abcd", epochs, 0.9)
    assert g["a"] == {"a", "b"} and g["c"] == {"c"} and g["d"] == {"d"}


def fake_run(d, scheduler, it_ms, marks):
    d.mkdir()
    rows = []
    for job in ("a", "b"):
        for k in range(10):
            s = k * it_ms / 1000
            rows.append((job, 0, k, k, s, s + 0.1, s + 0.2, s + it_ms / 1000, 0))
    pd.DataFrame(rows, columns=COLUMNS).to_csv(d / "iterations.csv", index=False)
    pd.DataFrame({"time": [0.0, 0.1], "link": "s1-s2", "direction": "s1>s2", "tx_bytes": [0, 1000],
                  "utilization": [np.nan, 0.5], "ecn_marked": [np.nan, np.nan], "source": "openflow"}
                 ).to_csv(d / "links.csv", index=False)
    jobs = {j: {"model": "vgg16", "iterations": 10, "iteration_ms_mean": it_ms, "iteration_ms_p99": it_ms,
                "iteration_ms_profile": 255, "jct_s": 2.5, "ecn_marks": marks, "ecn_marks_per_iteration": marks / 10,
                "time_shift_ms": 0, "shift_error_ms_p50": 1, "realignments_per_minute": 0} for j in ("a", "b")}
    (d / "summary.json").write_text(json.dumps({"scheduler": scheduler, "jobs": jobs, "fidelity": {"ok": True, "notes": []},
                                               "totals": {"iteration_ms_mean": it_ms, "iteration_ms_p99": it_ms,
                                                          "ecn_marks": 2 * marks}}))
    (d / "schedule.json").write_text(json.dumps({"epochs": [{"links": [{"id": "s1>s2", "jobs": ["a", "b"]}]}]}))


def test_report_ratios_tables_and_plots(tmp_path):
    fake_run(tmp_path / "base", "themis", 300.0, 50)
    fake_run(tmp_path / "cas", "themis+cassini", 250.0, 5)
    out, md = report([tmp_path / "base", tmp_path / "cas"], tmp_path / "rep")
    assert "| themis+cassini (cas, emulated) | 1.2x | 1.2x | 10.0x |" in md
    assert {"report.md", "report.html", "iteration_cdf.png", "marks.png", "link_s1_to_s2.png"} <= \
        {f.name for f in out.iterdir()}


def test_report_refuses_incomplete_directories(tmp_path):
    from harness.errors import UsageError
    (tmp_path / "x.partial").mkdir()
    with pytest.raises(UsageError, match="not a complete results directory"):
        report([tmp_path / "x.partial"])
