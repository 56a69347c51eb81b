"""The stock kernel's backends, picked by doctor and exercised by netcheck, as the Vagrant user
gets them: the kernel OVS datapath, the RED marker, DCTCP, netem."""
import json

import pytest

from tests.helpers import interleave

pytestmark = pytest.mark.root


def netcheck(*args):
    p = interleave("netcheck", "--json", *args)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)
    checks = {c["name"]: c for c in doc["checks"]}
    assert all(c["ok"] for c in checks.values()), {n: c["detail"] for n, c in checks.items() if not c["ok"]}
    return doc, checks


def test_doctor_picks_the_stock_backends():
    p = interleave("doctor", "--json")
    assert p.returncode == 0, p.stderr
    f = json.loads(p.stdout)
    assert f["kernel_ovs_datapath"] and f["dctcp"], f
    assert f["qdiscs"]["red"] and f["qdiscs"]["netem"] and f["qdiscs"]["htb"], f["qdiscs"]
    p = interleave("doctor")
    for line in ("datapath            kernel", "ecn_marker          red", "congestion_control  dctcp",
                 "link_delay          netem"):
        assert line in p.stdout, p.stdout


@pytest.mark.parametrize("marker", ["red", "bpf"])
def test_kernel_datapath_netcheck(marker):
    """The kernel datapath with either marker: every check passes, the marker's marks are the
    receivers' CE packets (one marking queue) and the controller's CE arrivals behind it."""
    doc, checks = netcheck("--topology", "dumbbell", "--datapath", "kernel", "--ecn-marker", marker)
    assert doc["backends"]["datapath"] == "kernel" and doc["backends"]["ecn_marker"] == marker, doc["backends"]
    assert doc["backends"]["congestion_control"] == "dctcp", doc["backends"]
    congested = checks["ecn_congested"]
    marks = sum(congested["marker_marks"].values())
    assert marks > 0 and len(congested["marker_marks"]) == 1, congested
    assert abs(congested["receiver_ce"] - marks) <= max(1, 0.01 * marks), congested
    assert checks["counters"]["mismatched"] == {} and checks["counters"]["compared"], checks["counters"]
    assert abs(checks["shaped_rate"]["ratio"] - 1) <= 0.10, checks["shaped_rate"]


@pytest.mark.parametrize("topology", ["leafspine", "fattree"])
def test_stock_backends_on_the_24_host_fabrics(topology):
    """The doctor's choice (kernel datapath, RED, DCTCP) on the 24-host fabrics: every check passes,
    the controller's CE arrivals equal the RED marker's marks on the link they were compared on."""
    doc, checks = netcheck("--topology", topology)
    assert (doc["backends"]["datapath"], doc["backends"]["ecn_marker"]) == ("kernel", "red"), doc["backends"]
    assert checks["reachability"]["unreachable"] == []
    assert checks["counters"]["controller_caught_up"] and checks["counters"]["compared"], checks["counters"]
    assert abs(checks["shaped_rate"]["ratio"] - 1) <= 0.10, checks["shaped_rate"]
