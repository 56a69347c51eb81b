"""The link-rate warning: a run whose links are faster than the benchmark measured faithful is warned
with the figure, from this machine's record when it was made here, else from the reference host's."""
import json

from harness import capacity

# the reference host's userspace datapath, one row per repeat (docs/machines.md's ranges)
ROWS = [{"rate_mbps": r, "fidelity": f} for r, fs in ((10, (0.950, 0.967)), (20, (0.958, 0.965)),
                                                      (50, (0.879, 0.932)), (100, (0.637, 0.677))) for f in fs]


def test_rates_up_to_the_fastest_faithful_one_get_no_warning():
    assert capacity.warning(50, ROWS, "here") is None
    assert capacity.warning(12.5, ROWS, "here") is None


def test_a_rate_between_measured_ones_is_judged_by_the_next_one_measured():
    w = capacity.warning(60, ROWS, "measured here")
    assert "faithful (>= 0.8) up to 50 Mbit/s, fidelity 0.64 at 100 Mbit/s, measured here" in w
    assert "time_dilation" in w


def test_a_rate_above_every_measurement_says_so():
    w = capacity.warning(50000, ROWS, "measured here")
    assert "links at 50000 Mbit/s" in w and "not measured above 100 Mbit/s (fidelity 0.64 there)" in w


def test_no_faithful_rate_at_all_is_said():
    rows = [{"rate_mbps": 10, "fidelity": 0.5}]
    assert "faithful (>= 0.8) at no rate" in capacity.warning(5, rows, "x")


def test_no_measurement_no_warning():
    assert capacity.warning(50000, None, None) is None


def test_this_machines_record_is_used_only_on_this_machine(tmp_path):
    rec, ref = tmp_path / "rec.json", tmp_path / "ref"
    ref.mkdir()
    (ref / "user.json").write_text(json.dumps({"machine": {"cpu": "Other CPU", "cores": 64}, "rows": ROWS}))
    capacity.record([{"rate_mbps": 100, "fidelity": 0.95}], "user", path=rec, measured_utc="2026-12-06T00:00:00+00:00")
    rows, source = capacity.measurement("user", path=rec, reference_dir=ref)
    assert rows == [{"rate_mbps": 100, "fidelity": 0.95}] and "this machine (2026-12-06" in source
    doc = json.loads(rec.read_text())
    doc["user"]["machine"]["cpu"] = "a CPU this machine does not have"
    rec.write_text(json.dumps(doc))
    rows, source = capacity.measurement("user", path=rec, reference_dir=ref)
    assert rows == ROWS and "reference host (64-core Other CPU), not this machine" in source
    assert capacity.measurement("kernel", path=rec, reference_dir=ref) == (None, None)


def test_the_repository_has_the_reference_hosts_measurement():
    rows, source = capacity.measurement("user", path="/nonexistent", reference_dir=capacity.REFERENCE_DIR)
    assert rows and {"rate_mbps", "fidelity"} <= set(rows[0]) and "reference host" in source
