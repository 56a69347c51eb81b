"""Pinned paths really carry the traffic; a reconnecting switch gets its flows back."""
import subprocess
import time

import pytest

from harness.fabric import Fabric
from harness.lifecycle import RunLock
from harness.routing import compute_routes
from topologies import dumbbell, fattree

pytestmark = pytest.mark.root


@pytest.fixture
def fabric_of(request):
    made = []

    def make(topo):
        lock = RunLock()
        lock.acquire()
        made.append([lock, None])
        fab = Fabric(topo, lock.ledger, lock.dir)
        made[-1][1] = fab
        fab.start()
        return fab
    yield make
    for lock, fab in made:                 # the lock is released however start or stop ended
        try:
            if fab is not None:
                fab.stop()
        finally:
            lock.release()


def egress_pkts(fab, node, peer):
    dev = fab.port_dev(node, fab.topo.port(node, peer))
    return fab.marker_counters().get(dev, {}).get("pkts", 0)


def test_pin_moves_traffic_to_the_pinned_core(fabric_of):
    topo = fattree()
    fab = fabric_of(topo)
    default = fab.routes[("h1", "h24")]
    g = topo.graph()
    core = next(c for c, l in topo.switches.items() if l == "core" and c not in default)
    up = next(a for a in g[core] if "s1" in g[a])
    down = next(a for a in g[core] if "s8" in g[a])
    pinned = ["h1", "s1", up, core, down, "s8", "h24"]
    old_core = default[3]
    fab.pin("h1", "h24", pinned)
    assert fab.installed_routes()["h1>h24"] == pinned
    before_new, before_old = egress_pkts(fab, core, down), egress_pkts(fab, old_core, default[4])
    fab.in_host("h1", "ping -c 200 -i 0.005 -q 10.0.0.24 >/dev/null")
    new = egress_pkts(fab, core, down) - before_new
    old = egress_pkts(fab, old_core, default[4]) - before_old
    assert new >= 200, f"{new} packets left the pinned core {core} towards {down} (all 200 echo requests)"
    assert old < 20, f"{old} packets on the old path {old_core}>{default[4]} (fewer than 20: other pairs' strays)"


def test_reconnecting_switch_gets_its_flows_back(fabric_of):
    fab = fabric_of(dumbbell(2))
    br = fab.bridge("s1")
    target = subprocess.run(["ovs-vsctl", "get-controller", br], capture_output=True, text=True).stdout.strip()
    subprocess.run(["ovs-vsctl", "del-controller", br], check=True)
    subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "del-flows", br], check=True)
    assert subprocess.run(["mnexec", "-a", str(fab.net.get("h1").pid), "ping", "-c1", "-W1", "10.0.0.3"],
                          capture_output=True).returncode != 0
    subprocess.run(["ovs-vsctl", "set-controller", br, target], check=True)
    fab.wait_synced()
    deadline = time.time() + 10
    while time.time() < deadline:
        st = fab.client().call("status")
        if 1 in st["synced"]:
            break
        time.sleep(0.2)
    fab.in_host("h1", "ping -c3 -W1 10.0.0.3 >/dev/null")
    assert fab.installed_routes() == {f"{s}>{d}": p for (s, d), p in compute_routes(fab.topo).items()}
