"""What a results directory was made from: a set re-runs a run whose spec or code changed,
``simulate --out`` refuses another backend's or another spec's directory (harness.provenance)."""
import json
from pathlib import Path

import yaml

from harness import provenance, sets, spec as spec_mod
from tests.helpers import ROOT, cli_main

DEMO = ROOT / "experiments" / "demo.yaml"


def demo_copy(tmp_path, **changes):
    raw = yaml.safe_load(DEMO.read_text())
    raw.update(changes)
    p = tmp_path / "demo.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


def one_run_set(tmp_path, spec):
    p = tmp_path / "set.yaml"
    p.write_text(f"runs: [{{spec: {spec}, schedulers: [themis]}}]\n")
    return sets.load_set(p)


def test_a_set_reruns_a_run_whose_spec_changed_and_says_so(tmp_path):
    spec, out, logs = demo_copy(tmp_path), tmp_path / "out", []
    sets.execute(one_run_set(tmp_path, spec), out, sets.simulated_run, log=logs.append)
    d = sets.run_dir(out, "demo", "themis", 0)
    first = json.loads((d / "summary.json").read_text())["totals"]["iteration_ms_mean"]
    rec = provenance.read(d)
    assert rec["backend"] == "simulated" and rec["scheduler"] == "themis" and rec["code"] == provenance.code_version()

    logs.clear()                                   # unchanged: kept, and said so
    sets.execute(one_run_set(tmp_path, spec), out, sets.simulated_run, log=logs.append)
    assert any(m.endswith(f"{d}: done earlier, kept") for m in logs), logs

    demo_copy(tmp_path, background={"load": 0.5})  # the spec changed under the set
    logs.clear()
    sets.execute(one_run_set(tmp_path, spec), out, sets.simulated_run, log=logs.append)
    assert any("it ran at background load 0.0, not 0.5: set aside as themis-r0.stale-1" in m for m in logs), logs
    again = json.loads((d / "summary.json").read_text())["totals"]["iteration_ms_mean"]
    assert again > first                           # the background load's run, not the old numbers
    assert json.loads((d.with_name("themis-r0.stale-1") / "summary.json").read_text())["totals"]["iteration_ms_mean"] == first


def test_keep_stale_keeps_the_old_run_and_says_why(tmp_path):
    spec, out, logs = demo_copy(tmp_path), tmp_path / "out", []
    sets.execute(one_run_set(tmp_path, spec), out, sets.simulated_run, log=logs.append)
    demo_copy(tmp_path, seed=7)
    logs.clear()
    sets.execute(one_run_set(tmp_path, spec), out, sets.simulated_run, log=logs.append, keep_stale=True)
    assert any("kept with --keep-stale although its spec differs from the spec now (changed: seed)" in m
               for m in logs), logs
    assert not list(out.rglob("*.stale-*"))


def test_another_code_version_is_stale(tmp_path, monkeypatch):
    spec_path, d = demo_copy(tmp_path), tmp_path / "run"
    spec = spec_mod.load(spec_path, scheduler="themis")
    sets.simulated_run(spec, d)
    assert provenance.stale(d, spec, "simulated") is None
    assert provenance.stale(d, spec, "emulated") == "it holds simulated results"
    monkeypatch.setattr(provenance, "code_version", lambda: "9.9.9+gdeadbeef")
    assert "it was made by code" in provenance.stale(d, spec, "simulated")
    assert provenance.stale(d, spec, "simulated", code=False) is None


def test_a_directory_from_before_provenance_is_compared_by_its_spec(tmp_path):
    spec_path, d = demo_copy(tmp_path), tmp_path / "run"
    spec = spec_mod.load(spec_path, scheduler="themis")
    sets.simulated_run(spec, d)
    (d / provenance.FILE).unlink()
    assert provenance.stale(d, spec, "simulated") is None
    other = spec_mod.load(spec_path, scheduler="themis", seed=99)
    assert provenance.stale(d, other, "simulated") == "its spec.yaml differs from the spec now (changed: seed)"


def emulated_looking(d):
    """A directory as ``interleave run`` leaves it (the files that matter here)."""
    d.mkdir()
    raw = yaml.safe_load(DEMO.read_text())
    (d / "spec.yaml").write_text(yaml.safe_dump(raw))
    (d / "summary.json").write_text(json.dumps({"scheduler": "themis", "totals": {}, "fidelity": {"ok": True}, "jobs": {}}))
    (d / "iterations.csv").write_text("job,worker,iteration,start,end\n")
    (d / "environment.json").write_text("{}")


def test_simulate_out_refuses_an_emulated_directory_unless_forced(tmp_path, capsys):
    d = tmp_path / "emu"
    emulated_looking(d)
    p = cli_main(capsys, "simulate", str(DEMO), "--out", str(d))
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert f"--out: {d} holds other results (it holds emulated results)" in p.stderr and "--force" in p.stderr
    assert json.loads((d / "summary.json").read_text())["totals"] == {}          # untouched
    p = cli_main(capsys, "simulate", str(DEMO), "--out", str(d), "--force")
    assert p.returncode == 0, p.stderr
    assert sorted(f.name for f in d.iterdir()) == ["iteration_ms.csv", "jobs.csv", "provenance.json", "spec.yaml",
                                                  "summary.json"]
    assert provenance.read(d)["backend"] == "simulated"


def test_simulate_out_refuses_another_specs_results_and_rewrites_its_own(tmp_path, capsys):
    d = tmp_path / "sim"
    assert cli_main(capsys, "simulate", str(DEMO), "--out", str(d)).returncode == 0
    (d / "notes.txt").write_text("mine")
    p = cli_main(capsys, "simulate", str(DEMO), "--out", str(d))                    # the same spec: rewritten
    assert p.returncode == 0, p.stderr
    assert (d / "notes.txt").read_text() == "mine"
    p = cli_main(capsys, "simulate", str(DEMO), "--scheduler", "themis", "--out", str(d))
    assert p.returncode == 2 and "it holds scheduler themis+cassini's results, not themis's" in p.stderr, p.stderr


def test_run_out_refuses_a_directory_that_exists_before_anything_is_built(tmp_path, capsys):
    """``run --out`` into a simulated run's directory: one line naming what it holds, exit 2, before
    the root check and the fabric (the test runs as any user); ``--force`` is the way to replace it."""
    d = tmp_path / "sim"
    assert cli_main(capsys, "simulate", str(DEMO), "--out", str(d)).returncode == 0
    p = cli_main(capsys, "run", str(DEMO), "--out", str(d))
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert f"--out: {d} exists (it holds simulated results); choose another directory, or --force" in p.stderr
    (tmp_path / "other").mkdir()
    p = cli_main(capsys, "run", str(DEMO), "--out", str(tmp_path / "other"))
    assert p.returncode == 2 and f"--out: {tmp_path / 'other'} exists; choose another directory" in p.stderr


def test_a_refusal_names_every_difference_not_only_the_first(tmp_path, capsys):
    """Another spec with another background and scheduler written over the demo's directory: the one
    line names the scheduler, the background and the other keys that changed."""
    d = tmp_path / "sim"
    assert cli_main(capsys, "simulate", str(DEMO), "--out", str(d)).returncode == 0
    raw = yaml.safe_load(DEMO.read_text())
    raw.update(background={"load": 0.2}, scheduler="themis", seed=7)
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(raw))
    p = cli_main(capsys, "simulate", str(other), "--out", str(d))
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert ("it holds scheduler themis+cassini's results, not themis's; it ran at background load 0.0, not 0.2; "
            "its spec differs from the spec now (changed: seed)") in p.stderr, p.stderr


def test_a_background_given_on_the_command_line_is_the_only_reason_named(tmp_path, capsys):
    """The same spec at another --background: the refusal names the background only (it said a
    plug-in or profile file had changed too)."""
    d = tmp_path / "sim"
    assert cli_main(capsys, "simulate", str(DEMO), "--out", str(d)).returncode == 0
    p = cli_main(capsys, "simulate", str(DEMO), "--background", "0.5", "--out", str(d))
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "(it ran at background load 0.0, not 0.5); choose another directory" in p.stderr, p.stderr
