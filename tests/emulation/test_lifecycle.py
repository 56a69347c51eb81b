"""Scoped lifecycle: killed runs are recovered, concurrent runs refused, others' state untouched."""
import os
import select
import signal
import subprocess
import sys

import pytest

from tests.helpers import ROOT, interleave, net_state, sysctl_changes

pytestmark = pytest.mark.root

HOLD = """
import sys, time
sys.path.insert(0, {root!r})
from harness.fabric import Fabric
from harness.lifecycle import RunLock
from topologies import dumbbell
lock = RunLock()
lock.acquire()
fab = Fabric(dumbbell(2), lock.ledger, lock.dir, instances={instances})
fab.start()
print("up", flush=True)
time.sleep(120)
"""


def start_holder(timeout=60, instances=1):
    p = subprocess.Popen([sys.executable, "-c", HOLD.format(root=str(ROOT), instances=instances)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    ready, _w, _x = select.select([p.stdout], [], [], timeout)
    if not ready:
        p.kill()
        p.wait()
        pytest.fail(f"the holder did not bring its fabric up within {timeout} s")
    line = p.stdout.readline().strip()
    assert line == "up", p.stderr.read()[-2000:] if p.poll() is not None else line
    return p


def test_killed_run_is_cleaned_and_foreign_state_survives():
    # named like ours (the il prefix) but recorded in no ledger: clean must leave them alone
    tag = os.getpid() % 10000
    foreign_br, foreign_veth = f"ilfgnbr{tag}", f"ilfgnv{tag}a"
    subprocess.run(["ovs-vsctl", "add-br", foreign_br, "--", "set", "bridge", foreign_br,
                    "datapath_type=netdev"], check=True)
    subprocess.run(["ip", "link", "add", foreign_veth, "type", "veth", "peer", "name", f"ilfgnv{tag}b"], check=True)
    try:
        holder = start_holder()
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        left = net_state()
        assert {"ils1", "ils2"} <= left["bridges"]        # the kill really left state behind
        p = interleave("clean")
        assert p.returncode == 0, p.stderr
        assert "cleaning leftovers of an earlier run" in p.stderr
        after = net_state()
        assert not {"ils1", "ils2"} & after["bridges"]
        assert not any(v.startswith("ils") for v in after["veths"])
        assert foreign_br in after["bridges"] and foreign_veth in after["veths"]
    finally:
        subprocess.run(["ovs-vsctl", "--if-exists", "del-br", foreign_br])
        subprocess.run(["ip", "link", "del", foreign_veth], capture_output=True)


def test_killed_run_with_two_vswitchd_instances_leaves_nothing():
    """kill -9 of a run whose switches are split over the system's vswitchd and one of its own: the
    extra instance dies with the run (its processes are the run's), and ``clean`` removes the rest:
    the system's bridge, every veth, the instance's directory."""
    before = net_state()
    holder = start_holder(instances=2)
    up = net_state()
    assert "ils1" in up["bridges"] and "ils2" not in up["bridges"]      # ils2 is in the run's instance
    assert up["ovs_dirs"] - before["ovs_dirs"] and up["procs"] - before["procs"]
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert "ils1" in net_state()["bridges"]
    p = interleave("clean")
    assert p.returncode == 0, p.stderr
    after = net_state()
    assert not any(v.startswith("ils") for v in after["veths"]) and "ils1" not in after["bridges"]
    assert after["ovs_dirs"] == before["ovs_dirs"] and after["procs"] == before["procs"]


def test_second_run_refused_while_one_is_active():
    holder = start_holder()
    try:
        p = interleave("netcheck", "--topology", "dumbbell")
        assert p.returncode == 3
        assert f"another interleave run (pid {holder.pid})" in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
        assert {"ils1", "ils2"} <= net_state()["bridges"]   # the active run was not disturbed
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.wait()
    # SIGTERM does not run teardown in the bare holder script: the next start recovers
    assert interleave("clean").returncode == 0


def test_sigterm_of_the_cli_tears_down():
    p = subprocess.Popen([sys.executable, "-m", "harness.cli", "netcheck", "--topology", "dumbbell"],
                         cwd=ROOT, stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    ready, _w, _x = select.select([p.stderr], [], [], 60)
    assert ready, "netcheck printed nothing within 60 s"
    for line in p.stderr:
        if "fabric up" in line:
            break
    p.send_signal(signal.SIGTERM)
    rest = p.stderr.read()
    assert p.wait(60) == 130
    assert "torn down" in rest
    assert not {"ils1", "ils2"} & net_state()["bridges"]


def test_controller_death_mid_run_ends_the_run_and_keeps_partial_data(tmp_path):
    """The controller is SIGKILLed while the demo's jobs run: the run stops with one clear line, the
    fabric is torn down (the autouse leak check), and the data so far stays under <out>.partial."""
    import json
    import time
    from harness.lifecycle import STATE_DIR
    out = tmp_path / "run"
    p = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "experiments/demo.yaml", "--out", str(out),
                          "--quiet"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONWARNINGS="ignore"))
    pid, deadline = None, time.monotonic() + 60
    agents = tmp_path / "run.partial" / "agents"
    while time.monotonic() < deadline and pid is None:
        time.sleep(0.5)
        ledger = STATE_DIR / "ledger.json"
        if ledger.exists() and agents.exists() and any(agents.glob("*.w0.csv")):
            procs = json.loads(ledger.read_text()).get("processes", [])
            pid = next((x["pid"] for x in procs if x["what"] == "controller"), None)
    assert pid is not None, "the run did not start its agents within 60 s"
    time.sleep(3)
    os.kill(pid, signal.SIGKILL)            # our run's own controller, from its ledger
    _o, err = p.communicate(timeout=120)
    assert p.returncode == 1, err[-2000:]
    assert "the controller died mid-run" in err
    assert not out.exists() and (tmp_path / "run.partial" / "controller.log").exists()
    assert not (tmp_path / "run.partial" / "summary.json").exists()


STAGED = """
import os, signal, sys
sys.path.insert(0, {root!r})
from harness.fabric import Fabric
from harness.lifecycle import RunLock
from topologies import dumbbell
lock = RunLock()
lock.acquire()
fab = Fabric(dumbbell(2), lock.ledger, lock.dir, cc="cubic")
stages = [("plan", fab._record_plan), ("controller", fab._start_controller), ("mininet", fab._build_mininet),
          ("hosts", fab._configure_hosts), ("ports", fab._configure_switch_ports), ("synced", fab.wait_synced)]
for name, step in [("lock", lambda: None)] + stages:
    step()
    if name == {stage!r}:
        print(name, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
"""
STAGES = ["lock", "plan", "controller", "mininet", "hosts", "ports", "synced"]


@pytest.mark.parametrize("stage", STAGES)
def test_kill_9_at_each_stage_then_clean_leaves_the_machine_as_found(stage):
    """kill -9 after each step of a fabric build, then ``interleave clean``: every sysctl under
    /proc/sys/net (and the fixLimits keys) as before, nothing of ours left (the autouse check too).
    The fabric asks for cubic, which this machine's allowed list may lack: from the "hosts" stage on,
    the kill leaves that global setting changed, and only clean can restore it."""
    before = net_state()
    p = subprocess.run([sys.executable, "-c", STAGED.format(root=str(ROOT), stage=stage)], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert p.returncode == -signal.SIGKILL and p.stdout.strip() == stage, p.stderr[-2000:]
    if stage in ("mininet", "hosts", "ports", "synced"):
        assert {"ils1", "ils2"} <= net_state()["bridges"]     # the kill really left state behind
    c = interleave("clean")
    assert c.returncode == 0, c.stderr
    after = net_state()
    assert not sysctl_changes(before["sysctls"], after["sysctls"])
    for key in ("veths", "bridges", "pins", "procs"):
        assert not after[key] - before[key], f"{stage}: left {key} {sorted(after[key] - before[key])[:5]}"
