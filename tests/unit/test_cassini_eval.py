"""CASSINI's evaluation on the paper's testbed (issue 13): the leaf-spine snapshot specs put their
jobs on a common link, periods within the tolerance run on one beat (the shift that is scored is
the one kept), batch sizes scale compute, and ``ideal`` is every job alone."""
from pathlib import Path

import pytest

from harness import cli, spec as spec_mod
from harness.routing import compute_routes
from harness.schedulers.cassini import common_periods
from harness.planners.schedule import schedule
from harness.sim.engine import Simulator
from workloads.profiles import at_batch, builtins

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = sorted((ROOT / "experiments" / "cassini").glob("snapshot*.yaml"))
PINNED = SNAPSHOTS + [ROOT / "experiments" / "cassini" / "fig2.yaml"]     # specs whose jobs share s1>s7


def directed_links(route):
    return {f"{u}>{v}" for u, v in zip(route, route[1:])}


@pytest.mark.parametrize("path", PINNED, ids=lambda p: p.stem)
def test_every_snapshot_job_crosses_the_shared_uplink(path):
    spec = spec_mod.load(path)
    assert spec.topology.name == "leafspine"
    routes = compute_routes(spec.topology)
    for job in spec.jobs:
        a, b = job.hosts
        assert "s1>s7" in directed_links(routes[(a, b)]), (job.name, routes[(a, b)])


def test_periods_within_the_tolerance_share_the_longest():
    link_jobs = {"l1": ["a", "b"]}
    assert common_periods(link_jobs, {"a": 255.0, "b": 260.0}, {}, 0.05) == {"a": 260.0, "b": 260.0}
    assert common_periods(link_jobs, {"a": 255.0, "b": 260.0}, {}, 0.0) == {"a": 255.0, "b": 260.0}
    assert common_periods(link_jobs, {"a": 200.0, "b": 260.0}, {}, 0.05) == {"a": 200.0, "b": 260.0}
    # a running job keeps its period: a faster newcomer adopts it, a slower one cannot
    assert common_periods(link_jobs, {"a": 250.0, "b": 255.0}, {"b": 255.0}, 0.05) == {"a": 255.0, "b": 255.0}
    assert common_periods(link_jobs, {"a": 260.0, "b": 255.0}, {"b": 255.0}, 0.05) == {"a": 260.0, "b": 255.0}
    # jobs on no shared link keep their own
    assert common_periods({}, {"a": 255.0, "b": 260.0}, {}, 0.05) == {"a": 255.0, "b": 260.0}


def test_batch_size_scales_compute_not_communication():
    vgg16 = builtins()["vgg16"]                     # batch 1400: 141 ms compute, then 114 ms Up
    p = at_batch(vgg16, 1700)
    assert p.phases[0].start_ms == pytest.approx(141 * 1700 / 1400, abs=1e-3)
    assert p.phases[0].duration_ms == 114 and p.phases[0].gbps == vgg16.phases[0].gbps
    assert p.iteration_ms == pytest.approx(141 * 1700 / 1400 + 114, abs=1e-3)
    assert p.batch_size == 1700 and "proportional" in p.provenance["iteration_ms"]


def test_a_job_batch_size_gives_it_its_own_profile():
    spec = spec_mod.load(ROOT / "experiments" / "cassini" / "snapshot2.yaml")
    vgg16 = next(j for j in spec.jobs if j.name == "vgg16")
    assert vgg16.model == "vgg16@1700" and spec.profiles["vgg16@1700"].batch_size == 1700
    vgg19 = next(j for j in spec.jobs if j.name == "vgg19")
    assert vgg19.model == "vgg19"                   # its profile's own batch: no variant


def test_the_cassini_plan_runs_snapshot1_on_one_period_and_scores_that():
    spec = spec_mod.load(ROOT / "experiments" / "cassini" / "snapshot1.yaml")
    plan = schedule(spec).to_dict()
    jobs = {j["name"]: j for j in plan["jobs"]}
    assert jobs["vgg16"]["iteration_ms"] == 255 and jobs["vgg16"]["period_ms"] == 260
    assert jobs["wrn101"]["period_ms"] == 260
    assert {j["alignment"] for j in jobs.values()} == {"group"}
    assert all(link["score"] == 1.0 for link in plan["epochs"][0]["links"])
    summary = Simulator(spec).run()
    # both jobs interleave on the 260 ms beat: no contention left, vgg16 pays its 5 ms of padding
    assert summary["jobs"]["vgg16"]["iteration_ms_mean"] == pytest.approx(260, abs=0.5)
    assert summary["jobs"]["vgg16"]["iteration_ms_profile"] == 255
    assert summary["totals"]["ecn_marks"] == 0


def test_ideal_is_every_job_alone_in_the_simulator():
    spec = spec_mod.load(ROOT / "experiments" / "demo.yaml", scheduler="ideal")
    alone = Simulator(spec).run()
    shared = Simulator(spec_mod.load(ROOT / "experiments" / "demo.yaml", scheduler="themis")).run()
    for name, j in alone["jobs"].items():
        assert j["iteration_ms_mean"] == pytest.approx(spec.profiles[j["model"]].iteration_ms)
        assert shared["jobs"][name]["iteration_ms_mean"] > j["iteration_ms_mean"] * 1.05


def test_ideal_cannot_be_emulated(capsys):
    code = cli.main(["run", str(ROOT / "experiments" / "demo.yaml"), "--scheduler", "ideal"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "use interleave simulate" in err[0]


def test_the_screening_set_covers_every_experiment_of_the_paper_on_leafspine():
    from harness.sets import load_set
    s = load_set(ROOT / "experiments" / "sets" / "cassini-sim.yaml")
    names = {r["name"] for r in s["runs"]}
    assert {f"leafspine-snapshot{i}" for i in range(1, 6)} | {"fig11-load80", "fig11-load90", "fig11-load100",
                                                              "fig12", "fig13", "fig14"} <= names
    for r in s["runs"]:
        assert spec_mod.load(r["spec_path"]).topology.name == "leafspine"
        assert "ideal" in r["schedulers"] and r["schedulers"][0] == "themis"


def test_ring_allreduce_lasts_longer_on_more_workers():
    from workloads.profiles import at_workers
    vgg16 = builtins()["vgg16"]                     # measured on 2 workers: the ring sends 1 x the model
    on4 = at_workers(vgg16, 4)                      # 2(4-1)/4 = 1.5 x
    assert on4.phases[0].duration_ms == pytest.approx(114 * 1.5) and on4.phases[0].start_ms == 141
    assert on4.iteration_ms == pytest.approx(141 + 114 * 1.5)
    assert at_workers(vgg16, 2) == vgg16
    assert at_workers(vgg16, 1).phases[0].duration_ms == 0     # one worker reduces nothing


def test_allreduce_ring_gives_each_job_its_worker_count_profile():
    raw = spec_mod.read_yaml(ROOT / "experiments" / "cassini" / "fig13.yaml")
    spec = spec_mod.from_mapping({**raw, "allreduce": "ring"})
    for j in spec.jobs:
        prof = spec.profiles[j.model]
        if prof.parallelism == "data" and j.workers != 2:
            assert j.model.endswith(f"x{j.workers}") and prof.workers == j.workers
    with pytest.raises(spec_mod.SpecError, match="allreduce"):
        spec_mod.from_mapping({**raw, "allreduce": "tree"})
