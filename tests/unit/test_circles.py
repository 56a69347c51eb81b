"""CASSINI's geometric abstraction and per-link optimisation, on the paper's own examples."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from harness.schedulers.circles import optimise, score_at, unified_perimeter
from workloads.profiles import builtins


def onoff(it, start, dur, gbps):
    """Demand function of a job with one Up phase [start, start+dur) at gbps."""
    return lambda t: np.where((np.mod(t, it) >= start) & (np.mod(t, it) < start + dur), gbps, 0.0)


def test_two_identical_half_up_jobs_interleave_perfectly():
    job = (200.0, [onoff(200, 100, 100, 50)])
    sol = optimise([job, job], capacity=50)
    assert sol.score == pytest.approx(1.0)
    assert sol.shifts_ms[0] == 0 and sol.shifts_ms[1] == pytest.approx(100.0)   # half the iteration


def test_colliding_jobs_score_below_one_and_scores_can_be_negative():
    full = (100.0, [onoff(100, 0, 100, 50)])                 # always at line rate
    assert optimise([full, full], capacity=50).score == pytest.approx(0.0)
    assert optimise([full, full, full], capacity=50).score == pytest.approx(-1.0)


def test_40_and_60_ms_jobs_on_a_120_ms_unified_circle():
    # NSDI'24 Fig. 5: iteration times 40 and 60 ms -> perimeter 120, j1 three times, j2 twice
    p, iq, q, approx = unified_perimeter([40, 60])
    assert (p, iq, approx) == (120, [40, 60], False)
    j1 = (40.0, [onoff(40, 0, 10, 50)])
    j2 = (60.0, [onoff(60, 0, 10, 50)])
    sol = optimise([j1, j2], capacity=50)
    assert sol.score == pytest.approx(1.0)
    # a rotation exists that separates every Up phase: check the chosen shift really does
    t = np.arange(0, 120, 0.25)
    d = j1[1][0](t - sol.shifts_ms[0]) + j2[1][0](t - sol.shifts_ms[1])
    assert d.max() <= 50
    assert 0 <= sol.shifts_ms[1] < 60 and sol.rotations[1] < sol.bins / 2     # Eq. 4: within 2*pi / r_j


def test_quantum_grows_when_lcm_exceeds_cap():
    p, iq, q, approx = unified_perimeter([255, 260], quantum_ms=5, max_perimeter_ms=10000)
    assert p <= 10000 and approx and q > 5
    p, iq, q, approx = unified_perimeter([255, 260], quantum_ms=5, max_perimeter_ms=20000)
    assert (p, approx) == (13260, False)


def prof_job(name):
    p = builtins()[name]
    return (p.iteration_ms, [p.demand])


def one_fn(*names):
    return [(builtins()[n].iteration_ms, builtins()[n].demand) for n in names]


def test_wideresnet101_and_vgg16_are_fully_compatible():
    # CASSINI Table 2 snapshot 1: score 1.0 (VGG16 shifted 150 ms in the paper)
    sol = optimise([prof_job("wideresnet101"), prof_job("vgg16")], capacity=50)
    assert sol.score == pytest.approx(1.0)
    # and without a shift they collide
    assert score_at(one_fn("wideresnet101", "vgg16"), 50, [0, 0]) < 1.0


def test_vgg19_and_vgg16_are_nearly_compatible():
    # CASSINI Table 2: score 1.0 (snapshot 2) and 0.9 (snapshot 3, other batch sizes)
    sol = optimise([prof_job("vgg19"), prof_job("vgg16")], capacity=50)
    assert 0.85 <= sol.score <= 1.0
    # periods 298 and 255 ms are incommensurate: over the unified circle their phases sweep past
    # each other, so the rotation can only help a little -- but never hurt
    assert sol.score >= score_at(one_fn("vgg19", "vgg16"), 50, [0, 0]) - 1e-9


def test_three_heavy_jobs_score_lower_than_two():
    two = optimise([prof_job("vgg16"), prof_job("vgg16")], capacity=50).score
    three = optimise([prof_job("vgg16")] * 3, capacity=50).score
    assert three < two


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([100.0, 150.0, 200.0, 300.0]), st.floats(0, 0.9),
                          st.floats(0.05, 0.5), st.floats(1, 60)), min_size=2, max_size=3))
def test_scores_never_above_one(jobs):
    js = [(it, [onoff(it, s * it, min(d, 1 - s) * it, g)]) for it, s, d, g in jobs]
    sol = optimise(js, capacity=50)
    assert sol.score <= 1.0 + 1e-12
    assert all(0 <= t < it for (it, _), t in zip(js, sol.shifts_ms))


def test_heuristic_finds_the_optimum_on_small_cases():
    rng = np.random.default_rng(7)
    worse = 0
    for _ in range(25):
        jobs = []
        for _j in range(4):
            it = 200.0
            start, dur = float(rng.uniform(0, 150)), float(rng.uniform(20, 50))
            jobs.append((it, [onoff(it, start, dur, float(rng.uniform(20, 50)))]))
        exact = optimise(jobs, capacity=50, exact_max_jobs=4)
        heur = optimise(jobs, capacity=50, exact_max_jobs=3)
        assert exact.exact and not heur.exact
        assert heur.score <= exact.score + 1e-9
        worse += heur.score < exact.score - 1e-9
    assert worse == 0
