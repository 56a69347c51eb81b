"""CASSINI's unified circle for jobs of unequal periods (``cassini.unequal_periods: unified``):
which pairs a shift can keep apart (``harmonic``), the periods jobs pad to (``unified_periods``),
the exact LCM the circle is scored on, the agents' group rule across periods, and the constructed
case of examples/unequal-periods.yaml planned and simulated."""
from pathlib import Path

import numpy as np
import pytest

from agents.agent import Group
from agents.timing import perimeter
from harness import spec as spec_mod
from harness.planners.schedule import schedule
from harness.schedulers.cassini import evaluate, harmonic, unified_periods
from harness.schedulers.circles import optimise, sliding_score, unified_perimeter
from harness.sim.engine import Simulator

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "unequal-periods.yaml"


def test_a_shift_separates_two_periods_only_if_their_spans_fit_in_the_gcd():
    assert harmonic(190.0, 285.0, 60.0, 35.0)          # GCD 95 = 60 + 35
    assert not harmonic(190.0, 285.0, 61.0, 35.0)
    assert not harmonic(58.0, 298.0, 21.0, 119.0)      # ResNet50 beside VGG19: GCD 2 ms
    assert harmonic(298.0, 298.0, 200.0, 200.0)        # one period: CASSINI aligns them whatever the spans
    assert harmonic(40.5, 60.75, 10.0, 10.0)           # GCD 20.25 (periods to a thousandth of a ms)


def test_a_new_job_pads_to_be_harmonic_with_the_jobs_it_shares_links_with():
    link_jobs = {"l1": ["new", "old"]}
    spans = {"new": 10.0, "old": 20.0}
    # 58 ms beside a running 300 ms job: 60 ms (GCD 60 >= 30), 2 ms of padding
    assert unified_periods(link_jobs, {"new": 58.0, "old": 300.0}, {"old": 300.0}, 5.0, spans)["new"] == 60.0
    # the padding may not exceed the allowance: 58 cannot reach a harmonic period within 1 ms
    assert unified_periods(link_jobs, {"new": 58.0, "old": 300.0}, {"old": 300.0}, 1.0, spans)["new"] == 58.0
    # harmonic with none: no padding (it would buy nothing)
    wide = {"new": 50.0, "old": 200.0}
    assert unified_periods(link_jobs, {"new": 58.0, "old": 298.0}, {"old": 298.0}, 5.0, wide)["new"] == 58.0
    # a job that shares no link keeps its period
    assert unified_periods({}, {"new": 58.0}, {}, 5.0, {"new": 10.0}) == {"new": 58.0}
    # two new jobs: the longer decides first and keeps its own; the shorter pads towards it
    both = unified_periods(link_jobs, {"new": 58.0, "old": 300.0}, {}, 5.0, spans)
    assert both == {"new": 60.0, "old": 300.0}


def test_unequal_periods_are_scored_on_their_exact_lcm():
    assert unified_perimeter([38.0, 57.0], exact=True)[:2] == (114.0, [38.0, 57.0])
    assert unified_perimeter([38.0, 57.0])[:2] == (440.0, [40, 55])          # quantised (free): 5 ms
    assert unified_perimeter([298.0, 298.0], exact=True)[:2] == (300, [300, 300])   # one period: as before
    p, _iq, _q, approx = unified_perimeter([257.3, 199.1], exact=True, max_perimeter_ms=10000)
    assert approx and p <= 10000                                             # too long: quantised
    assert perimeter([0.19, 0.285]) == pytest.approx(0.57)


def test_the_circle_finds_the_shift_that_keeps_both_phases_apart():
    def onoff(period, start, dur, gbps):
        return lambda t: gbps * (((t % period) >= start) & ((t % period) < start + dur))
    a, b = onoff(190, 130, 60, 45), onoff(285, 250, 35, 45)
    sol = optimise([(190.0, [a]), (285.0, [b])], capacity=50, exact_periods=True)
    assert sol.perimeter_ms == 570 and sol.bins == 72 * 3     # 5 degrees of the shorter period's circle
    # 60 + 35 ms fill the 95 ms GCD exactly: at most a bin's blur (2.6 ms) of overlap is left
    assert sol.score > 0.99
    t = np.arange(0, 570, 0.05)
    both = a(t - sol.shifts_ms[0]) + b(t - sol.shifts_ms[1])
    assert np.mean(both > 50) < 0.01


def onoff(period, start, dur, gbps):
    return lambda t: gbps * (((np.asarray(t) % period) >= start) & ((np.asarray(t) % period) < start + dur))


def test_jobs_that_slide_score_the_mean_over_their_offsets_as_their_exact_circle_does():
    # two on-off jobs meet with probability f1 * f2, and then exceed 50 Gbit/s by 37 + 37 - 50
    a, b = onoff(31, 10, 12, 37), onoff(47, 20, 25, 37)
    expected = 1 - (12 / 31) * (25 / 47) * 24 / 50
    assert sliding_score([(31.0, a), (47.0, b)], 50) == pytest.approx(expected, abs=5e-4)
    # periods 31 and 47 (GCD 1 ms) have an exact unified circle (1457 ms): no shift does better
    sol = optimise([(31.0, [a]), (47.0, [b])], capacity=50, exact_periods=True)
    assert not sol.approximate and sol.score == pytest.approx(expected, abs=0.005)
    # under the capacity together: nothing to lose
    assert sliding_score([(31.0, onoff(31, 0, 12, 20)), (47.0, b)], 60) == 1.0


def test_unequal_score_sliding_scores_only_the_links_no_shift_can_separate(monkeypatch):
    import harness.schedulers.cassini as cassini_mod

    class Prof:
        def __init__(self, it, start, span):
            self.iteration_ms, self.comm_span_ms, self.phases = it, span, []
            self.fn = onoff(it, start, span, 37)
    link, demands = "s1>s7", {}
    monkeypatch.setattr(cassini_mod, "link_demands", lambda placement, profiles_of, routes, memo=None: demands)

    def score(jobs, **params):
        demands[link] = {n: p.fn for n, p in jobs.items()}
        return evaluate({n: [n] for n in jobs}, jobs, None, 50.0, {**spec_mod.CASSINI_KEYS, **params}).link_scores[link]
    # xlm-like (357 ms, 241 ms of communication) beside wideresnet-like (260, 53): not harmonic
    unequal = {"x": Prof(357.0, 116, 241.0), "w": Prof(260.0, 207, 53.0)}
    expected = 1 - (241 / 357) * (53 / 260) * 24 / 50
    assert score(unequal, unequal_score="sliding") == pytest.approx(expected, abs=5e-4)
    assert score(unequal) > expected + 1e-3         # the rounded circle's optimum: a beat that never occurs
    # one period: shifted apart, as without the setting
    assert score({"x": Prof(300.0, 0, 100.0), "w": Prof(300.0, 0, 100.0)}, unequal_score="sliding") == pytest.approx(1.0)


def test_unequal_score_takes_circle_or_sliding():
    raw = {"name": "x", "topology": {"name": "leafspine", "hosts_per_tor": 4}, "scheduler": "themis+cassini",
           "jobs": [{"name": "a", "model": "vgg19"}], "cassini": {"unequal_score": "mean"}}
    with pytest.raises(spec_mod.SpecError, match="cassini.unequal_score"):
        spec_mod.from_mapping(raw)


def write_beat(d, job, start, lag, period):
    (d / f"{job}.beat").write_text(f"{start!r} {lag!r} {period!r}")


def test_the_group_rule_compares_lags_modulo_the_groups_perimeter(tmp_path):
    cfg = {"job": "a", "beat_dir": str(tmp_path), "iteration_ms": 190.0, "group_perimeter_ms": 570.0,
           "group": [{"job": "a", "shift_ms": 0.0}, {"job": "b", "shift_ms": 34.3}]}
    g = Group(cfg, t0=10.0, it_s=0.19)
    start = 10.0 + 5 * 0.19                     # slot 5, on time: own lag 0
    write_beat(tmp_path, "b", start - 0.05, 0.012, 0.285)
    assert g.lag(start, 5) == pytest.approx(0.012)        # b is 12 ms behind its grid: wait for it
    write_beat(tmp_path, "b", start - 0.05, 0.565, 0.285)   # 565 ms = -5 ms modulo 570: b is ahead
    assert g.lag(start, 5) == 0.0
    write_beat(tmp_path, "b", start - 0.6, 0.012, 0.285)    # older than two of b's iterations: finished
    assert g.lag(start, 5) == 0.0
    g.publish(start + 0.003, 5)
    t, lag, period = (float(x) for x in (tmp_path / "a.beat").read_text().split())
    assert lag == pytest.approx(0.003) and period == pytest.approx(0.19)


def test_the_example_plans_a_group_across_periods_and_simulates_without_collisions():
    spec = spec_mod.load(EXAMPLE)
    plan = schedule(spec)
    jobs = plan.by_name
    assert [jobs[n].alignment for n in "ab"] == ["group", "group"]
    assert jobs["a"].group == ["a", "b"] and plan.epochs[0]["links"][0]["score"] > 0.99
    unified = Simulator(spec).run()
    themis = Simulator(spec_mod.load(EXAMPLE, scheduler="themis")).run()
    ideal = Simulator(spec_mod.load(EXAMPLE, scheduler="ideal")).run()
    # the fluid model is deterministic: the shifts hold and the jobs run as if alone
    assert unified["totals"]["iteration_ms_mean"] <= ideal["totals"]["iteration_ms_mean"] * 1.005
    assert unified["totals"]["ecn_marks"] == 0 and themis["totals"]["ecn_marks"] > 0
    assert themis["totals"]["iteration_ms_mean"] >= unified["totals"]["iteration_ms_mean"] * 1.03
    assert all(j["padding_ms"] == 0 for j in unified["jobs"].values())


def test_free_keeps_only_jobs_of_one_period_together():
    spec = spec_mod.load(EXAMPLE)
    spec.cassini["unequal_periods"] = "free"
    plan = schedule(spec)
    assert [j.alignment for j in plan.jobs] == ["free", "free"]
    assert plan.params["unequal_periods"] == "free"


def test_the_schedule_table_shows_the_period_kept_and_a_free_jobs_first_shift():
    from harness.cli import render_schedule
    rows = {r.split()[0]: r for r in render_schedule(schedule(spec_mod.load(ROOT / "experiments" / "snapshot1.yaml")))
            .splitlines()[2:4]}
    assert "260.0 (+5.0)" in rows["vgg16"] and "group" in rows["vgg16"]     # 255 ms padded to WideResNet's 260
    spec = spec_mod.load(EXAMPLE)
    spec.cassini["unequal_periods"] = "free"
    plan = schedule(spec)
    b = next(j for j in plan.jobs if j.name == "b")
    assert b.alignment == "free" and b.time_shift_ms > 0
    assert f"({b.time_shift_ms:.1f})" in render_schedule(plan)               # where it starts; nothing holds it
