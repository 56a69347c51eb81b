"""netcheck end to end on each topology, through the CLI as a user runs it."""
import json

import pytest

from tests.emulation.conftest import interleave


@pytest.mark.parametrize("topology", ["dumbbell", "fattree", "leafspine"])
def test_netcheck_passes(topology):
    p = interleave("netcheck", "--topology", topology, "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    checks = {c["name"]: c for c in doc["checks"]}
    assert set(checks) == {"reachability", "routes", "shaped_rate", "ecn_congested", "ecn_idle", "counters"}
    assert checks["counters"]["mismatched"] == {} and checks["counters"]["off_path"] == {}
    assert all(c["ok"] for c in checks.values())
    assert checks["reachability"]["unreachable"] == []
    assert abs(checks["shaped_rate"]["ratio"] - 1) <= 0.10
    congested = checks["ecn_congested"]
    marks = sum(congested["marker_marks"].values())
    # the marker's count and the receiver's CE count see the same packets (none dropped after marking)
    assert marks > 0 and abs(congested["receiver_ce"] - marks) <= max(1, 0.01 * marks)
    # two flows share the bottleneck: together they fill it (within 10 %)
    expect = doc["link"]["rate_mbps"] * (9000 - 52) / 9014
    assert abs(sum(congested["goodput_mbps"]) / expect - 1) <= 0.10
    assert checks["ecn_idle"]["marker_marks"] == {} and checks["ecn_idle"]["receiver_ce"] == 0
    assert doc["backends"]["ecn_marker"] in ("bpf", "red")
    assert doc["timings"]["build_s"] <= 10 and doc["timings"]["teardown_s"] <= 5
