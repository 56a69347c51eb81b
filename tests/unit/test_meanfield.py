"""The simulator's mean-field stand-in for large components (harness.sim.meanfield): hand-computed
cases, properties, and where the engine uses it."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from harness import spec as spec_mod
from harness.sim import engine, meanfield
from harness.sim.fluid import SimJob
from harness.simulate import simulate_spec
from workloads.profiles import Phase, Profile


def prof(it, phases):
    return Profile("p", "data", it, tuple(Phase(s, d, g, "ring_allreduce") for s, d, g in phases))


def job(name, p, links):
    return SimJob(name, p, ["x", "y"], 0.0, None, [dict(links) for _ in p.phases], alignment="free")


def test_alone_a_job_runs_at_its_profile():
    it, marks, comm, _s = meanfield.iteration_times([job("a", prof(100, [(40, 30, 50)]), {"l": 1})], {"l": 50.0})
    assert it["a"] == pytest.approx(100.0) and marks["a"] == 0 and comm["a"] == pytest.approx(30.0)


def test_two_jobs_sharing_a_link_meet_at_random():
    # each sends 50 Gbit/s for 50 ms of a 100 ms iteration on one 50 Gbit/s link. The other job's
    # phase is on a share u = s / (50 + s) of the time (s: a phase's length); while it is, each gets
    # half: E[ms per unit volume] = (1 + u) / 50, so s = 2500 (1 + u) / 50, i.e. s^2 - 50 s - 2500 = 0:
    # s = 25 + 25 sqrt(5), iteration 50 + s (hand computed; the fluid model's lockstep start gives 150)
    p = prof(100, [(50, 50, 50)])
    it, marks, _c, _s = meanfield.iteration_times([job("a", p, {"l": 1}), job("b", p, {"l": 1})], {"l": 50.0})
    assert it["a"] == pytest.approx(75 + 25 * math.sqrt(5), rel=1e-4)
    assert it["b"] == pytest.approx(it["a"])
    assert marks["a"] > 0


def test_a_phase_below_the_fair_share_is_not_slowed():
    # 20 Gbit/s phases on a 50 Gbit/s link: two together still fit
    p = prof(100, [(50, 50, 20)])
    it, _m, _c, _s = meanfield.iteration_times([job("a", p, {"l": 1}), job("b", p, {"l": 1})], {"l": 50.0})
    assert it["a"] == pytest.approx(100.0)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(20, 300), st.floats(0.1, 0.9), st.floats(5, 50),
                          st.lists(st.sampled_from("abcde"), min_size=1, max_size=3, unique=True)),
                min_size=1, max_size=8),
       st.floats(10, 100))
def test_never_faster_than_the_profile_and_slower_with_less_capacity(specs, cap):
    jobs = [job(f"j{k}", prof(it, [(it * (1 - f), it * f, g)]), {l: 1 for l in ls})
            for k, (it, f, g, ls) in enumerate(specs)]
    wide, _m, _c, _s = meanfield.iteration_times(jobs, {l: cap for l in "abcde"})
    narrow, _m, _c, _s = meanfield.iteration_times(jobs, {l: cap / 2 for l in "abcde"})
    for j in jobs:
        assert wide[j.name] >= j.profile.iteration_ms * (1 - 1e-9)
        assert narrow[j.name] >= wide[j.name] * (1 - 1e-6)


def test_the_engine_uses_it_for_large_components_of_free_jobs_only(monkeypatch):
    monkeypatch.setattr(engine, "MEANFIELD_MIN_JOBS", 2)
    themis = simulate_spec(spec_mod.load("experiments/demo.yaml", scheduler="themis"))           # jobs run free
    assert themis["simulator"]["meanfield_runs"] >= 1 and themis["simulator"]["fluid_runs"] == 0
    # two VGG19 sharing their links: slower than alone (298 ms), faster than the lockstep start the
    # fluid model runs (355.1 ms, test_sim.test_demo_spec_matches_the_papers_direction)
    assert 298.0 < themis["totals"]["iteration_ms_mean"] < 355.1
    cassini = simulate_spec(spec_mod.load("experiments/demo.yaml", scheduler="themis+cassini"))   # grouped
    assert cassini["simulator"]["meanfield_runs"] == 0
    assert cassini["totals"]["iteration_ms_mean"] == pytest.approx(298.0)


def test_the_result_is_the_fixed_point_of_the_stated_rule():
    # brute force, written out from the module docstring: each job's phase takes volume x
    # E[max(1/c, (m + N)/cap)] on its slowest link, N ~ Binomial(n, lambda / n) over the other jobs'
    # connections there, lambda from their duties (phase time / iteration time)
    rng = np.random.default_rng(1)
    jobs = []
    for k in range(12):
        it, f = rng.uniform(50, 300), rng.uniform(0.2, 0.8)
        links = rng.choice(list("abcdefg"), size=3, replace=False)
        jobs.append(SimJob(f"j{k}", prof(it, [(it * (1 - f), it * f, float(rng.choice([15, 20, 37])))]), ["x", "y"],
                           0.0, None, [{l: int(rng.integers(1, 3)) for l in links}], alignment="free"))
    cap = {l: 12.5 for l in "abcdefg"}
    it, _m, _c, _s = meanfield.iteration_times(jobs, cap)
    send = {j.name: it[j.name] - (j.profile.iteration_ms - j.profile.phases[0].duration_ms) for j in jobs}
    duty = {n: send[n] / it[n] for n in it}
    for j in jobs:
        ph = j.profile.phases[0]
        worst = 1 / ph.gbps
        for l, m in j.phase_links[0].items():
            others = [(o, o.phase_links[0][l]) for o in jobs if o is not j and l in o.phase_links[0]]
            n = sum(mm for _o, mm in others)
            p = sum(duty[o.name] * mm for o, mm in others) / n if n else 0.0
            worst = max(worst, sum(math.comb(n, k) * p ** k * (1 - p) ** (n - k) * max(1 / ph.gbps, (m + k) / cap[l])
                                   for k in range(n + 1)))
        assert send[j.name] == pytest.approx(ph.gbps * ph.duration_ms * worst, rel=1e-3)
