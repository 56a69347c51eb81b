"""netcheck end to end on each topology, through the CLI as a user runs it."""
import json

import pytest

from tests.helpers import interleave

pytestmark = pytest.mark.root


@pytest.mark.parametrize("topology", ["dumbbell", "fattree", "leafspine"])
def test_netcheck_passes(topology):
    p = interleave("netcheck", "--topology", topology, "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    checks = {c["name"]: c for c in doc["checks"]}
    assert set(checks) == {"reachability", "routes", "shaped_rate", "ecn_congested", "ecn_idle", "counters"}
    assert checks["counters"]["mismatched"] == {} and checks["counters"]["off_path"] == {}
    assert all(c["ok"] for c in checks.values()), {n: c["detail"] for n, c in checks.items() if not c["ok"]}
    assert checks["reachability"]["unreachable"] == []
    assert abs(checks["shaped_rate"]["ratio"] - 1) <= 0.10
    congested = checks["ecn_congested"]
    per_port = congested["marker_marks"].values()
    marks = sum(per_port)
    assert marks > 0, congested
    if len(congested["marker_marks"]) == 1:
        # one marking queue: the marker and the receiver count the same packets
        assert abs(congested["receiver_ce"] - marks) <= max(1, 0.01 * marks), congested
    else:
        # several queues marked (e.g. a ToR uplink and the last hop): a packet marked twice arrives
        # once, so the receiver sees between the busiest port's count and the sum
        assert max(per_port) * 0.99 <= congested["receiver_ce"] <= marks * 1.01, congested
    # two flows share the bottleneck: together they fill it (within 10 %)
    expect = doc["link"]["rate_mbps"] * (9000 - 52) / 9014
    assert abs(sum(congested["goodput_mbps"]) / expect - 1) <= 0.10, congested["goodput_mbps"]
    idle = checks["ecn_idle"]
    if idle["emulator_kept_up"]:     # else marks were allowed by the stall rule (ok, asserted above)
        assert idle["marker_marks"] == {} and idle["receiver_ce"] == 0, idle
    assert doc["backends"]["ecn_marker"] in ("bpf", "red")
    assert doc["timings"]["build_s"] <= 10 and doc["timings"]["teardown_s"] <= 5, doc["timings"]
