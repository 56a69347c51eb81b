"""The timing rule (agents.timing): the wrap, the grid, the re-alignment threshold, dilation; and
the alignment each scheduler's jobs get in schedule.json (harness.schedulers.policy.alignment)."""
import pytest
from hypothesis import given, strategies as st

from harness import spec as spec_mod
from harness.planners.schedule import schedule
from harness.schedulers.policy import alignment
from tests.helpers import ROOT
from agents import timing


@given(st.floats(-1e4, 1e4), st.floats(1, 5000))
def test_wrap_lands_in_half_open_half_period(x, period):
    d = timing.wrap(x, period)
    assert -period / 2 < d <= period / 2 + 1e-9
    assert (x - d) / period == pytest.approx(round((x - d) / period), abs=1e-6)


def test_grid_start_waits_for_the_slot_or_the_next_one():
    t0, p = 10.0, 0.255
    assert timing.grid_start(10.0 + 3 * p - 0.002, t0, p) == (pytest.approx(10.0 + 3 * p), False)   # early
    assert timing.grid_start(10.0 + 3 * p + 0.01, t0, p) == (pytest.approx(10.0 + 3 * p + 0.01), False)
    late = 10.0 + 3 * p + timing.REALIGN_FRAC * p * 1.01                                      # over 5 %
    assert timing.grid_start(late, t0, p) == (pytest.approx(10.0 + 4 * p), True)


def test_first_slot_is_the_first_not_before_earliest():
    assert timing.first_slot(0.0, 1.0, 0.1, 0.5) == 0
    k = timing.first_slot(5.3, 1.0, 0.1, 0.5)
    assert timing.slot_time(1.0, 0.1, k, 0.5) >= 5.3 > timing.slot_time(1.0, 0.1, k - 1, 0.5)


def test_dilation_round_trips():
    d = timing.Dilation(4)
    assert d.wall(0.255) == pytest.approx(1.02) and d.model(d.wall(7.5)) == pytest.approx(7.5)
    assert d.rate(50) == 12.5


def test_alignment_rule():
    assert alignment(False, True, ["a", "b"]) == "group"
    assert alignment(False, True, ["a"]) == "free"
    assert alignment(False, False, ["a", "b"]) == "free"
    assert alignment(True, False, ["a"]) == "grid"
    assert alignment(True, False, ["a", "b"]) == "group"


def test_schedule_records_every_jobs_timing():
    sp = spec_mod.load(ROOT / "experiments" / "demo.yaml")
    jobs = schedule(sp).to_dict()["jobs"]
    assert {j["alignment"] for j in jobs} == {"group"}
    assert all(j["group"] == sorted(x["name"] for x in jobs) for j in jobs)
    base = schedule(spec_mod.load(ROOT / "experiments" / "demo.yaml", scheduler="themis")).to_dict()["jobs"]
    assert {(j["alignment"], j["group"]) for j in base} == {("free", None)}
    prog = schedule(spec_mod.load(ROOT / "experiments" / "echelon-tensor.yaml")).to_dict()["jobs"]
    assert {j["alignment"] for j in prog} == {"grid"}
