"""Emulation tier: real namespaces, OVS and tc. Needs root (CI runs as root).

Every test here is checked for leaks: after it, no bridge, veth, BPF pin or process of ours may
remain that was not there before, and every global setting is as it was: all of /proc/sys/net
(root namespace) plus the other keys Mininet's fixLimits() would change (``SYSCTL_EXTRA``).
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="emulation tier needs root: sudo make test")
        for item in items:
            if "tests/emulation" in str(item.fspath):
                item.add_marker(skip)


SYSCTL_EXTRA = ("/proc/sys/kernel/pty/max", "/proc/sys/fs/file-max")


def sysctl_snapshot():
    """{path: value} of every readable sysctl under /proc/sys/net, and SYSCTL_EXTRA."""
    out = {}
    for root, _dirs, files in os.walk("/proc/sys/net"):
        for f in files:
            path = os.path.join(root, f)
            try:
                out[path] = Path(path).read_text()
            except OSError:
                pass
    for path in SYSCTL_EXTRA:
        out[path] = Path(path).read_text()
    return out


def sysctl_changes(before, after):
    """Keys present in both snapshots whose value differs (per-device keys come and go with
    devices; devices themselves are checked as veths and bridges)."""
    return {k: (before[k].strip(), after[k].strip()) for k in before.keys() & after.keys() if before[k] != after[k]}


def net_state():
    veths = set(subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True,
                               text=True).stdout.split("\n"))
    veths = {l.split(":")[1].strip().split("@")[0] for l in veths if l.strip()}
    bridges = set(subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout.split())
    pins = {p.name for p in Path("/sys/fs/bpf/tc/globals").glob("interleave_*")}
    procs = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "controllers.launch" in cmd or "mininet:h" in cmd:
                procs.add(int(d.name))
    allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text().strip()
    return {"veths": veths, "bridges": bridges, "pins": pins, "procs": procs, "allowed_cc": allowed,
            "sysctls": sysctl_snapshot()}


@pytest.fixture(autouse=True)
def no_leaks():
    before = net_state()
    yield
    after = net_state()
    for key in ("veths", "bridges", "pins", "procs"):
        leaked = after[key] - before[key]
        assert not leaked, f"leaked {key}: {sorted(leaked)[:10]}"
    assert after["allowed_cc"] == before["allowed_cc"]
    changed = sysctl_changes(before["sysctls"], after["sysctls"])
    assert not changed, f"global settings changed: {dict(list(changed.items())[:10])}"


def interleave(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout, env=dict(os.environ, PYTHONWARNINGS="ignore"))


@pytest.fixture(scope="module")
def fab():
    """One dumbbell fabric for a whole module (modules using it override the per-test leak check
    with a no-op ``no_leaks`` fixture; the leak check runs here, once, at the end)."""
    from harness.fabric import Fabric
    from harness.lifecycle import RunLock
    from topologies import dumbbell
    before = net_state()
    lock = RunLock()
    lock.acquire()
    f = Fabric(dumbbell(2), lock.ledger, lock.dir)
    f.start()
    yield f
    f.stop()
    lock.release()
    after = net_state()
    for key in ("veths", "bridges", "pins", "procs"):
        assert not after[key] - before[key], f"leaked {key}"
    assert not sysctl_changes(before["sysctls"], after["sysctls"])
