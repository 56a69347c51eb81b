"""Scheduler plug-ins: the examples through schedule and simulate, a plug-in named by --plugin, its
composition with CASSINI, the Python API, and one-line errors for plug-ins that cannot be used.
Each case runs the CLI in a process of its own (the registry is per process)."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def ok_json(*args, cwd=ROOT):
    p = cli(*args, "--json", cwd=cwd)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def one_line(p, *fragments):
    """Exit 2 and one error line, the last (simulate announces the run before a plug-in can fail in it)."""
    lines = p.stderr.strip().splitlines()
    errors = [l for l in lines if l.startswith("interleave ")]
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in p.stderr, p.stderr[-2000:]
    for f in fragments:
        assert f in errors[0], errors[0]
    return errors[0]


def host_no(h):
    return int(h[1:])


def test_placement_example_takes_the_highest_free_hosts():
    plan = ok_json("schedule", EXAMPLES / "highest-free.yaml")
    hosts = {j["name"]: j["hosts"] for j in plan["jobs"]}
    # arrival order, each job the top of what is left of h1..h24
    assert hosts == {"vgg19-a": ["h22", "h23", "h24"], "vgg19-b": ["h19", "h20", "h21"],
                     "resnet50-a": ["h15", "h16", "h17", "h18"], "bert-a": ["h13", "h14"]}
    assert all(j["time_shift_ms"] == 0 for j in plan["jobs"])


def test_placement_example_composes_with_cassini():
    plan = ok_json("schedule", EXAMPLES / "highest-free.yaml", "--scheduler", "highest-free+cassini")
    assert plan["scheduler"] == "highest-free+cassini"
    assert plan["candidates_considered"] > 1          # the racks offered in other orders gave alternatives
    for j in plan["jobs"]:
        assert len(j["hosts"]) == {"vgg19-a": 3, "vgg19-b": 3, "resnet50-a": 4, "bert-a": 2}[j["name"]]
    assert len({h for j in plan["jobs"] for h in j["hosts"]}) == 12
    sim = ok_json("simulate", EXAMPLES / "highest-free.yaml", "--scheduler", "highest-free+cassini")
    assert sim["scheduler"] == "highest-free+cassini" and set(sim["jobs"]) == {j["name"] for j in plan["jobs"]}


def test_event_example_waits_for_a_rack_at_most_its_timer():
    sim = ok_json("simulate", EXAMPLES / "rack-or-wait.yaml")
    spec = yaml.safe_load((EXAMPLES / "rack-or-wait.yaml").read_text())
    workers = {j["name"]: j["workers"] for j in spec["jobs"]}
    plan = ok_json("schedule", EXAMPLES / "rack-or-wait.yaml")
    for j in plan["jobs"]:
        assert len(j["hosts"]) == workers[j["name"]]
        racks = {(host_no(h) - 1) // 3 for h in j["hosts"]}          # 3 hosts an edge switch
        waited = j["placed_at_s"] - j["arrival_s"]
        assert len(racks) == 1 or waited >= 5.0 - 1e-6, (j["name"], j["hosts"], waited)
    assert sim["totals"]["makespan_s"] > 0 and set(sim["jobs"]) == set(workers)


def test_plugin_flag_and_a_name_of_its_own(tmp_path):
    (tmp_path / "rev.py").write_text(textwrap.dedent("""
        import interleave

        @interleave.register_scheduler("reverse")
        class Reverse(interleave.PlacementPolicy):
            def place(self, job, free_hosts, cluster):
                return list(reversed(free_hosts))[:job.workers]
    """))
    spec = {"name": "rev", "topology": {"name": "fattree", "k": 4, "hosts_per_edge": 3},
            "jobs": [{"name": "a", "model": "vgg19", "workers": 2, "iterations": 10},
                     {"name": "b", "model": "vgg19", "workers": 2, "iterations": 10}]}
    (tmp_path / "rev.yaml").write_text(yaml.safe_dump(spec))
    plan = ok_json("schedule", "rev.yaml", "--plugin", "rev.py", "--scheduler", "reverse+cassini", cwd=tmp_path)
    assert plan["scheduler"] == "reverse+cassini" and plan["candidates_considered"] > 1
    hosts = [h for j in plan["jobs"] for h in j["hosts"]]
    assert len(hosts) == len(set(hosts)) == 4, plan["jobs"]
    plain = ok_json("schedule", "rev.yaml", "--plugin", "rev.py", "--scheduler", "reverse", cwd=tmp_path)
    assert [j["hosts"] for j in plain["jobs"]] == [["h23", "h24"], ["h21", "h22"]]
    p = cli("schedule", "rev.yaml", "--scheduler", "reverse", cwd=tmp_path)      # not loaded: unknown
    one_line(p, "scheduler", "'reverse'", "themis")


def test_python_api_loads_simulated_results_into_dataframes(tmp_path):
    script = textwrap.dedent(f"""
        import interleave
        spec = interleave.load_spec({str(EXAMPLES / 'highest-free.yaml')!r})
        sim = interleave.simulate(spec, scheduler="highest-free+cassini")
        print(sim.jobs.shape[0], sorted(sim.jobs.columns)[:3], sim.totals["iteration_ms_mean"] > 0)
        plan = interleave.schedule(spec)
        print(plan.jobs[0].hosts)
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    first, second = p.stdout.strip().splitlines()
    assert first.startswith("4 ") and first.endswith("True")
    assert second == "['h22', 'h23', 'h24']"
    out = tmp_path / "sim"
    assert cli("simulate", EXAMPLES / "highest-free.yaml", "--out", out).returncode == 0
    p = subprocess.run([sys.executable, "-c", f"import interleave; r = interleave.read_results({str(out)!r}); "
                        "print(r.simulated, len(r.jobs), r.iterations)"], capture_output=True, text=True, cwd=ROOT)
    assert p.stdout.split() == ["True", "4", "None"], p.stderr[-2000:]


def test_the_notebook_example_runs_without_root_and_gives_the_speed_up():
    """examples/notebook.py, simulator only (its emulated cell runs in tests/emulation/test_demo.py):
    CASSINI's demo pair 1.19x faster per job, as docs/walkthrough.md shows."""
    p = subprocess.run([sys.executable, str(ROOT / "examples" / "notebook.py")], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "speed-up (themis / themis+cassini): {'vgg19-a': 1.19, 'vgg19-b': 1.19}" in p.stdout, p.stdout


def test_a_simulated_result_has_its_iteration_times_without_a_directory():
    import numpy as np

    import interleave
    r = interleave.simulate(str(ROOT / "experiments" / "demo.yaml"), scheduler="themis")
    d = r.iteration_ms
    assert list(d.columns) == ["job", "iteration_ms", "iterations"] and set(d.job) == {"vgg19-a", "vgg19-b"}
    for name, g in d.groupby("job"):
        assert abs(np.average(g.iteration_ms, weights=g.iterations) - r.jobs.loc[name, "iteration_ms_mean"]) < 0.01
        assert not g.iteration_ms.duplicated().any()                  # one row per modelled time


BAD = {
    "not_a_policy": ("""
        import interleave

        @interleave.register_scheduler("mine")
        class Mine:
            def place(self, job, free_hosts, cluster):
                return free_hosts[:job.workers]
        """, ["bad.py", "not a subclass of interleave.PlacementPolicy"]),
    "clash": ("""
        import interleave

        @interleave.register_scheduler("themis")
        class Mine(interleave.PlacementPolicy):
            def place(self, job, free_hosts, cluster):
                return free_hosts[:job.workers]
        """, ["bad.py", "'themis' is already registered (a built-in)"]),
    "raises_in_place": ("""
        import interleave

        @interleave.register_scheduler("mine")
        class Mine(interleave.PlacementPolicy):
            def place(self, job, free_hosts, cluster):
                return free_hosts[job.workers + 100]
        """, ["bad.py:7", "Mine.place raised IndexError"]),
    "wrong_count": ("""
        import interleave

        @interleave.register_scheduler("mine")
        class Mine(interleave.PlacementPolicy):
            def place(self, job, free_hosts, cluster):
                return free_hosts[:1]
        """, ["bad.py", "bad.py:6", "Mine.place gave job a ['h1']; it needs 2 distinct hosts"]),
    "raises_at_load": ("""
        import interleave
        import no_such_module_here
        """, ["bad.py:3", "ModuleNotFoundError"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_plugin_that_cannot_be_used_gets_one_line_and_exit_2(tmp_path, case):
    code, fragments = BAD[case]
    (tmp_path / "bad.py").write_text(textwrap.dedent(code))
    spec = {"name": "bad", "plugins": ["bad.py"], "scheduler": "mine",
            "topology": {"name": "fattree", "k": 4, "hosts_per_edge": 3},
            "jobs": [{"name": "a", "model": "vgg19", "workers": 2, "iterations": 10}]}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    # simulate too where the failure comes at decision time (the simulator calls the policy itself)
    for command in ("schedule", "simulate") if case in ("raises_in_place", "wrong_count") else ("schedule",):
        one_line(cli(command, tmp_path / "spec.yaml"), f"interleave {command}: ", *fragments)


def test_a_place_that_raises_in_a_set_on_two_workers_stops_it_as_serially(tmp_path):
    """Bad input found on a Dask worker is bad input: one line, exit 2, no worker traceback."""
    (tmp_path / "bad.py").write_text(textwrap.dedent(BAD["raises_in_place"][0]))
    spec = {"name": "bad", "plugins": ["bad.py"], "scheduler": "mine",
            "topology": {"name": "fattree", "k": 4, "hosts_per_edge": 3},
            "jobs": [{"name": "a", "model": "vgg19", "workers": 2, "iterations": 10}]}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    (tmp_path / "set.yaml").write_text("name: bad\nruns: [{spec: spec.yaml, schedulers: [themis, mine]}]\n")
    for workers in ("1", "2"):
        p = cli("reproduce", tmp_path / "set.yaml", "--simulate", "--workers", workers, "--out", tmp_path / f"o{workers}")
        one_line(p, "interleave reproduce: ", *BAD["raises_in_place"][1])
        assert "Compute Failed" not in p.stderr, p.stderr[-2000:]


def test_a_missing_plugin_file_is_named(tmp_path):
    spec = {"name": "x", "plugins": ["nowhere.py"], "topology": {"name": "fattree"},
            "jobs": [{"name": "a", "model": "vgg19", "workers": 2, "iterations": 10}]}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    one_line(cli("schedule", tmp_path / "spec.yaml"), "plugins[0]", "nowhere.py: no such plug-in file")
    one_line(cli("schedule", tmp_path / "spec.yaml", "--plugin", tmp_path / "gone.py"), "gone.py: no such plug-in file")


def test_topology_example_builds_and_lists_its_parameters(tmp_path):
    plan = ok_json("schedule", EXAMPLES / "star.yaml")
    assert plan["topology"]["name"] == "star"
    assert [j["time_shift_ms"] for j in plan["jobs"]][0] == 0 and plan["jobs"][1]["time_shift_ms"] > 0
    shared = {link["id"] for link in plan["links"] if len(link["jobs"]) == 2}
    assert shared and all("s4" in lid for lid in shared)            # the core switch of 3 racks is s4
    sim = ok_json("simulate", EXAMPLES / "star.yaml")
    assert set(sim["jobs"]) == {"vgg19-a", "vgg19-b"}
    spec = yaml.safe_load((EXAMPLES / "star.yaml").read_text())
    spec["topology"]["pods"] = 2
    spec["plugins"] = [str(EXAMPLES / "plugins" / "star.py")]
    (tmp_path / "typo.yaml").write_text(yaml.safe_dump(spec))
    one_line(cli("schedule", tmp_path / "typo.yaml"), "topology.pods",
             "a parameter of star: racks (default 4), hosts_per_rack (default 3)")
    one_line(cli("netcheck", "--topology", "star", "--param", "racks=3"), "topology.name", "'star'", "fattree")


def test_a_profile_from_a_file_as_interleave_profile_writes_it(tmp_path):
    measured = {"model": "toy-measured", "parallelism": "data", "iteration_ms": 200.0, "reference_gbps": 50.0,
                "workers": 2, "phases": [{"start_ms": 120.0, "duration_ms": 60.0, "gbps": 20.0,
                                          "pattern": "ring_allreduce"}],
                "provenance": {"iteration_ms": "measured by interleave profile"}, "notes": "a test"}
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "toy.yaml").write_text(yaml.safe_dump(measured))
    spec = {"name": "toy", "profiles": {"toy": {"file": "profiles/toy.yaml"}},
            "topology": {"name": "fattree"}, "jobs": [{"name": "a", "model": "toy", "workers": 2, "iterations": 5}]}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    plan = ok_json("schedule", tmp_path / "spec.yaml")
    assert plan["jobs"][0]["iteration_ms"] == 200.0
    spec["profiles"]["toy"] = {"file": "profiles/none.yaml"}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    one_line(cli("schedule", tmp_path / "spec.yaml"), "profiles.toy.file", "not found")


def test_the_profile_file_example_runs_the_measured_profile():
    """examples/profile-from-file.yaml: the profile interleave profile wrote, used as is; CASSINI
    shifts the two jobs that share the pods' uplinks."""
    measured = yaml.safe_load((EXAMPLES / "profiles" / "toy-measured.yaml").read_text())
    assert measured["provenance"]["iteration_ms"].startswith("measured by `interleave profile")
    plan = ok_json("schedule", EXAMPLES / "profile-from-file.yaml")
    assert {j["iteration_ms"] for j in plan["jobs"]} == {measured["iteration_ms"]}
    assert {j["alignment"] for j in plan["jobs"]} == {"group"}
    sim = ok_json("simulate", EXAMPLES / "profile-from-file.yaml")
    assert set(sim["jobs"]) == {"toy-a", "toy-b"} and sim["totals"]["iteration_ms_mean"] > 0


def test_every_example_runs_as_a_simulated_set_on_two_workers(tmp_path):
    """reproduce --simulate --workers 2 over the examples: the workers load each spec's plug-ins
    and profile files as the submitting side did."""
    rows = [("star.yaml", "themis+cassini"), ("rack-or-wait.yaml", "rack-or-wait"),
            ("highest-free.yaml", "highest-free, highest-free+cassini"), ("profile-from-file.yaml", "themis+cassini")]
    (tmp_path / "set.yaml").write_text("name: examples\nruns:\n" + "".join(
        f"  - {{spec: {EXAMPLES / spec}, schedulers: [{s}]}}\n" for spec, s in rows))
    p = cli("reproduce", tmp_path / "set.yaml", "--simulate", "--workers", "2", "--out", tmp_path / "out", "--quiet")
    assert p.returncode == 0, p.stderr[-2000:]
    table = (tmp_path / "out" / "table.csv").read_text()
    for spec, _ in rows:
        assert spec.removesuffix(".yaml") in table, table
    assert "Missing runs" not in (tmp_path / "out" / "table.md").read_text()
