"""Affinity graph, Algorithm 1 and Theorem 1; Algorithm 2 on crafted placements."""
import pytest
from hypothesis import given, settings, strategies as st

from harness.schedulers import affinity, cassini
from workloads.profiles import Phase, Profile

PARAMS = {"discretization_deg": 5.0, "quantum_ms": 5.0, "max_perimeter_ms": 10000.0, "exact_max_jobs": 3,
          "aggregate": "mean", "candidates": 10}


@st.composite
def loop_free_graphs(draw):
    """A random tree alternating jobs and links (so the bipartite graph has no loop)."""
    n_jobs = draw(st.integers(2, 7))
    periods = {f"j{i}": draw(st.sampled_from([100, 150, 200, 250, 300])) for i in range(n_jobs)}
    link_jobs, weights = {}, {}
    attached = ["j0"]
    for i in range(1, n_jobs):
        job = f"j{i}"
        # either a new link to an attached job, or join an existing link
        if link_jobs and draw(st.booleans()):
            link = draw(st.sampled_from(sorted(link_jobs)))
        else:
            link = f"l{len(link_jobs)}"
            link_jobs[link] = [draw(st.sampled_from(attached))]
        link_jobs[link].append(job)
        attached.append(job)
    for link, js in link_jobs.items():
        for j in js:
            weights[(j, link)] = draw(st.floats(0, periods[j] - 1e-3))
    return link_jobs, weights, periods


@settings(max_examples=200, deadline=None)
@given(loop_free_graphs())
def test_theorem1_relative_shifts_preserved_on_loop_free_graphs(case):
    link_jobs, weights, periods = case
    g = affinity.build(link_jobs, weights)
    assert not affinity.has_loop(g)
    shifts = affinity.assign(g, periods)
    assert set(shifts) == {n[1] for n in g if n[0] == "job"}
    assert all(0 <= shifts[j] < periods[j] for j in shifts)
    assert affinity.preserved(g, shifts, periods, tol_ms=1e-6) == []


def test_chain_j1_l1_j2_l2_j3_keeps_both_links():
    # NSDI'24 Fig. 7/8b and Eqs. 7-9
    periods = {"j1": 200, "j2": 200, "j3": 200}
    w = {("j1", "l1"): 30.0, ("j2", "l1"): 130.0, ("j2", "l2"): 20.0, ("j3", "l2"): 120.0}
    g = affinity.build({"l1": ["j1", "j2"], "l2": ["j2", "j3"]}, w)
    t = affinity.assign(g, periods)
    assert t["j1"] == 0
    assert t["j2"] == pytest.approx((-30 + 130) % 200)                        # Eq. 8
    assert t["j3"] == pytest.approx((-30 + 130 - 20 + 120) % 200)            # Eq. 9
    assert affinity.preserved(g, t, periods) == []


def test_reference_job_keeps_its_shift():
    g = affinity.build({"l1": ["a", "b"]}, {("a", "l1"): 10.0, ("b", "l1"): 60.0})
    t = affinity.assign(g, {"a": 100, "b": 100}, reference=lambda js: "b", initial={"b": 5.0})
    assert t["b"] == 5.0 and t["a"] == pytest.approx((5 - 60 + 10) % 100)


def half(it=200.0):
    return Profile("half", "data", it, (Phase(it / 2, it / 2, 40.0, "ring_allreduce"),))


def fake_routes(pairs):
    """Routes through named 'switches': {(src, dst): [src, *switches, dst]}."""
    return {(s, d): [s, *sw, d] for (s, d), sw in pairs.items()}


def test_three_job_chain_through_algorithm_2():
    # j1 and j2 share x>y; j2 and j3 share y>z; each link wants a half-iteration offset
    routes = fake_routes({("a1", "a2"): ["x", "y"], ("a2", "a1"): ["q1"],
                          ("b1", "b2"): ["x", "y", "z"], ("b2", "b1"): ["q2"],
                          ("c1", "c2"): ["y", "z"], ("c2", "c1"): ["q3"]})
    prof = {"j1": half(), "j2": half(), "j3": half()}
    ev = cassini.evaluate({"j1": ["a1", "a2"], "j2": ["b1", "b2"], "j3": ["c1", "c2"]}, prof, routes, 50, PARAMS)
    assert ev.loop_free and ev.accepted
    assert ev.link_jobs == {"x>y": ["j1", "j2"], "y>z": ["j2", "j3"]}
    assert ev.score == pytest.approx(1.0)
    assert (ev.shifts["j2"] - ev.shifts["j1"]) % 200 == pytest.approx(100)
    assert (ev.shifts["j3"] - ev.shifts["j2"]) % 200 == pytest.approx(100)


def test_links_with_the_same_jobs_are_one_group_not_a_loop():
    # both directions of a bottleneck carry the same two jobs: no loop, one shared shift
    routes = fake_routes({("a1", "a2"): ["x", "y"], ("a2", "a1"): ["y", "x"],
                          ("b1", "b2"): ["x", "y"], ("b2", "b1"): ["y", "x"]})
    ev = cassini.evaluate({"j1": ["a1", "a2"], "j2": ["b1", "b2"]}, {"j1": half(), "j2": half()}, routes, 50, PARAMS)
    assert ev.loop_free and ev.groups == 1 and set(ev.link_jobs) == {"x>y", "y>x"}


def test_inconsistent_loop_is_rejected_and_choose_falls_back():
    # three half-on jobs pairwise on three different links: each link wants a half-period offset,
    # which cannot hold around a triangle (1/2 + 1/2 + 1/2 != 0 mod 1)
    routes = fake_routes({("a1", "a2"): ["x1", "x2"], ("a2", "a1"): ["z1", "z2"],
                          ("b1", "b2"): ["x1", "x2", "y1", "y2"], ("b2", "b1"): ["q"],
                          ("c1", "c2"): ["y1", "y2"], ("c2", "c1"): ["z1", "z2"]})
    prof = {"j1": half(), "j2": half(), "j3": half()}
    place = {"j1": ["a1", "a2"], "j2": ["b1", "b2"], "j3": ["c1", "c2"]}
    ev = cassini.evaluate(place, prof, routes, 50, PARAMS)
    assert not ev.loop_free and not ev.consistent and not ev.accepted
    idx, evals = cassini.choose([place], prof, routes, 50, PARAMS)
    assert idx is None and len(evals) == 1


def test_joint_mode_optimises_a_looped_component_consistently():
    # the same triangle as above, with cassini.loops: joint (an extension; the default rejects it)
    routes = fake_routes({("a1", "a2"): ["x1", "x2"], ("a2", "a1"): ["z1", "z2"],
                          ("b1", "b2"): ["x1", "x2", "y1", "y2"], ("b2", "b1"): ["q"],
                          ("c1", "c2"): ["y1", "y2"], ("c2", "c1"): ["z1", "z2"]})
    prof = {"j1": half(), "j2": half(), "j3": half()}
    place = {"j1": ["a1", "a2"], "j2": ["b1", "b2"], "j3": ["c1", "c2"]}
    ev = cassini.evaluate(place, prof, routes, 50, {**PARAMS, "loops": "joint"})
    assert not ev.loop_free and ev.consistent and ev.accepted
    assert any("jointly" in n for n in ev.notes)
    # the shifts it reports give exactly the link scores it reports (they hold on every link)
    rescored = cassini.score_placement(place, prof, routes, 50, PARAMS, ev.shifts)
    assert rescored == pytest.approx(ev.link_scores, abs=1e-9)
    # and they beat running everything unshifted
    zero = cassini.score_placement(place, prof, routes, 50, PARAMS, {j: 0.0 for j in place})
    assert sum(rescored.values()) > sum(zero.values())


def test_components_join_transitively_and_ignore_outsiders():
    from harness.schedulers.affinity import components
    c = components(["a", "b", "c", "d"], [["a", "b"], ["b", "c", "x"]])
    assert c["a"] == c["c"] == ["a", "b", "c"] and c["d"] == ["d"]
