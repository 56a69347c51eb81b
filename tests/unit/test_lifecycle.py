import os
import subprocess
import sys
import time

import pytest

from harness.errors import EnvError
from harness.lifecycle import Ledger, RunLock, proc_starttime


@pytest.fixture
def state(tmp_path):
    return tmp_path / "state"


def test_ledger_persists_each_addition(state):
    state.mkdir()
    led = Ledger(state / "ledger.json")
    led.add("bridges", "ils1")
    led.add("bridges", "ils1")
    again = Ledger.load(state / "ledger.json")
    assert again.data["bridges"] == ["ils1"]


def test_second_lock_refuses_with_owner_pid(state):
    holder = subprocess.Popen([sys.executable, "-c", f"""
import sys, time; sys.path.insert(0, {str(os.getcwd())!r})
from harness.lifecycle import RunLock
l = RunLock({str(state)!r}); l.acquire(); print('held', flush=True); time.sleep(30)
"""], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(EnvError) as e:
            RunLock(state).acquire()
        assert f"pid {holder.pid}" in str(e.value) and "fix:" in str(e.value)
    finally:
        holder.kill()
        holder.wait()
    # the holder died without cleaning: the next acquire works and cleans its ledger
    lock = RunLock(state)
    lock.acquire()
    lock.release()


def test_a_run_waits_for_a_doctor_probe_instead_of_failing(state):
    """``doctor`` holds the run lock while it probes (a second or two): a run that starts then waits
    for it; a doctor that never lets go is reported after PROBE_WAIT_S like any holder."""
    from harness import lifecycle
    holder = subprocess.Popen([sys.executable, "-c", f"""
import sys, time; sys.path.insert(0, {str(os.getcwd())!r})
from harness.lifecycle import probe_lock
with probe_lock({str(state)!r}) as p:
    assert not p.busy
    print('probing', flush=True); time.sleep(0.8)
"""], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "probing"
        t = time.monotonic()
        lock = RunLock(state)
        lock.acquire()
        assert 0.2 < time.monotonic() - t < lifecycle.PROBE_WAIT_S
        lock.release()
    finally:
        holder.kill()
        holder.wait()


def test_stale_ledger_processes_are_stopped_only_if_same_process(state):
    state.mkdir()
    victim = subprocess.Popen(["sleep", "60"])
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        led = Ledger(state / "ledger.json")
        led.add_process(victim.pid, "controller")
        # a recycled pid: same number, different start time -> must not be touched
        led.add("processes", {"pid": bystander.pid, "starttime": proc_starttime(bystander.pid) + 1,
                              "what": "old"})
        lock = RunLock(state)
        assert lock.clean_stale() is True
        time.sleep(0.2)
        assert victim.poll() is not None
        assert bystander.poll() is None
        assert not (state / "ledger.json").exists()
    finally:
        for p in (victim, bystander):
            p.kill()
            p.wait()


def test_sysctl_restored_only_if_still_ours(state, tmp_path, monkeypatch):
    state.mkdir()
    led = Ledger(state / "ledger.json")
    led.data["sysctls"].append({"key": "net.ipv4.tcp_allowed_congestion_control", "old": "x", "new": "y"})
    written = []
    from pathlib import Path
    monkeypatch.setattr(Path, "read_text", lambda self: "z" if "proc/sys" in str(self) else "")
    monkeypatch.setattr(Path, "write_text", lambda self, v: written.append((str(self), v)))
    led.clean()
    assert written == []   # someone changed it since: leave their value alone
