"""netcheck end to end on each topology, through the CLI as a user runs it."""
import pytest

from tests.helpers import assert_receivers_saw_the_marks, netcheck

pytestmark = pytest.mark.root


@pytest.mark.parametrize("topology", ["dumbbell", "fattree", "leafspine"])
def test_netcheck_passes(topology):
    doc, checks = netcheck("--topology", topology)
    assert set(checks) == {"reachability", "routes", "shaped_rate", "ecn_congested", "ecn_idle", "counters"}
    assert checks["counters"]["mismatched"] == {} and checks["counters"]["off_path"] == {}
    assert checks["reachability"]["unreachable"] == []
    assert abs(checks["shaped_rate"]["ratio"] - 1) <= 0.10
    congested = checks["ecn_congested"]
    assert_receivers_saw_the_marks(congested)
    # two flows share the bottleneck: together they fill it (within 10 %)
    expect = doc["link"]["rate_mbps"] * (9000 - 52) / 9014
    assert abs(sum(congested["goodput_mbps"]) / expect - 1) <= 0.10, congested["goodput_mbps"]
    idle = checks["ecn_idle"]
    if idle["emulator_kept_up"]:     # else marks were allowed by the stall rule (ok, asserted above)
        assert idle["marker_marks"] == {} and idle["receiver_ce"] == 0, idle
    assert doc["backends"]["ecn_marker"] in ("bpf", "red")
    assert doc["timings"]["build_s"] <= 10 and doc["timings"]["teardown_s"] <= 5, doc["timings"]
