"""The emulation tests' exclusion rule (tests.helpers.run_kept): a run the fidelity guard flags is
repeated at most twice and each repeat recorded; the test fails only when every try was flagged,
naming each run and the guard's notes."""
import json
import subprocess

import pytest

from tests import helpers

NOTE = "host CPU: 40% of the run's seconds were under 20% idle (at most 10% allowed)"


def fake_runs(monkeypatch, verdicts):
    """``interleave run`` replaced: each call answers the next verdict (True = kept) and records its --out."""
    outs = []

    def interleave(*args, timeout=None):
        out = args[args.index("--out") + 1]
        outs.append(out)
        ok = verdicts[len(outs) - 1]
        doc = {"fidelity": {"ok": ok, "notes": [] if ok else [NOTE]}, "totals": {}}
        return subprocess.CompletedProcess(args, 0, json.dumps(doc), "")
    monkeypatch.setattr(helpers, "interleave", interleave)
    monkeypatch.setattr(helpers, "GUARD_REPEATS_SEEN", [])
    return outs


def test_a_kept_first_run_is_not_repeated(monkeypatch, tmp_path):
    outs = fake_runs(monkeypatch, [True])
    s, d = helpers.run_kept("spec.yaml", tmp_path / "run")
    assert s["fidelity"]["ok"] and d == tmp_path / "run" and outs == [str(tmp_path / "run")]
    assert helpers.GUARD_REPEATS_SEEN == []


def test_a_flagged_run_is_repeated_and_reported(monkeypatch, tmp_path):
    outs = fake_runs(monkeypatch, [False, False, True])
    s, d = helpers.run_kept("spec.yaml", tmp_path / "run")
    assert d == tmp_path / "run.repeat2" and len(outs) == 3
    assert len(helpers.GUARD_REPEATS_SEEN) == 2
    assert all(NOTE in line and "flagged by the fidelity guard" in line for line in helpers.GUARD_REPEATS_SEEN)


def test_every_try_flagged_fails_naming_the_runs_and_the_signal(monkeypatch, tmp_path):
    fake_runs(monkeypatch, [False] * (helpers.GUARD_REPEATS + 1))
    with pytest.raises(pytest.fail.Exception) as e:
        helpers.run_kept("spec.yaml", tmp_path / "run")
    msg = str(e.value)
    assert f"{helpers.GUARD_REPEATS + 1} runs" in msg and "run.repeat2" in msg and NOTE in msg


def test_a_failed_command_names_the_run(monkeypatch, tmp_path):
    monkeypatch.setattr(helpers, "interleave", lambda *a, timeout=None: subprocess.CompletedProcess(a, 3, "", "boom"))
    with pytest.raises(AssertionError, match="run .*run: interleave run exited 3: boom"):
        helpers.run_kept("spec.yaml", tmp_path / "run")
