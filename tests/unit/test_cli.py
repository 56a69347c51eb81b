import json
import re
import subprocess
import sys

import pytest

from harness import cli
from tests.helpers import ROOT


def run(*args):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONWARNINGS": "ignore"})


@pytest.mark.parametrize("args", [["--help"], []])
def test_help_and_no_arguments_list_the_commands(args):
    p = run(*args)
    assert p.returncode == 0
    for c in ("doctor", "netcheck", "schedule", "simulate", "run", "report", "reproduce", "clean"):
        assert re.search(rf"\n    {c}\b", p.stdout), (c, p.stdout)


@pytest.mark.parametrize("args,needle", [
    (["netcheck", "--topology", "ring"], "topology.name: 'ring' is not allowed (one of dumbbell, fattree, leafspine)"),
    (["netcheck", "--rate-mbps", "fast"], "invalid float value: 'fast'"),
    (["bogus"], "invalid choice: 'bogus'"),
])
def test_bad_arguments_one_line_exit_2(args, needle):
    p = run(*args)
    assert p.returncode == 2
    assert needle in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args,needle", [
    (["netcheck", "--rate-mbps", "0"], "link.rate_mbps: 0.0 is not allowed"),
    (["netcheck", "--rate-mbps", "-3"], "link.rate_mbps: -3.0 is not allowed"),
    (["netcheck", "--topology", "dumbbell", "--hosts-per-side", "0"], "topology.hosts_per_side: 0"),
    (["netcheck", "--mtu", "20000"], "link.mtu: 20000"),
])
def test_bad_values_exit_2_before_anything_is_built(args, needle, monkeypatch):
    built = []
    monkeypatch.setattr("harness.fabric.Fabric.start", lambda self: built.append(1))
    rc = cli.main(args)
    assert rc == 2 and not built


def test_bad_values_message_on_stderr():
    p = run("netcheck", "--rate-mbps", "0")
    assert p.returncode == 2
    assert p.stderr.strip() == ("interleave netcheck: link.rate_mbps: 0.0 is not allowed (a number > 0)")


def test_not_root_is_environment_error(monkeypatch, capsys):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert cli.main(["netcheck", "--topology", "dumbbell"]) == 3
    err = capsys.readouterr().err
    assert "needs root" in err and "sudo" in err
    assert cli.main(["clean"]) == 3


def test_doctor_json_is_one_document():
    p = run("doctor", "--json")
    assert p.returncode == 0
    doc = json.loads(p.stdout)
    assert {"datapath", "ecn_marker", "congestion_control"} <= set(doc["backends"])


def test_an_emulated_set_refuses_a_scheduler_that_runs_jobs_alone(tmp_path, monkeypatch, capsys):
    """``ideal`` exists only in the simulator; an emulated set asking for it stops before any run
    (without this it ran as its base placement on a shared fabric under the name ``ideal``)."""
    monkeypatch.setattr("os.geteuid", lambda: 0)
    ran = []
    monkeypatch.setattr("harness.sets.execute", lambda *a, **k: ran.append(1))
    rc = cli.main(["reproduce", str(ROOT / "experiments" / "sets" / "cassini-sim.yaml"), "--out", str(tmp_path / "o")])
    assert rc == 2 and not ran
    assert "runs[0].schedulers: 'ideal' is not allowed" in capsys.readouterr().err
