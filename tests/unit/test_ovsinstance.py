"""Extra ovs-vswitchd instances: how switches are dealt, how tools are pointed, how measurements are named."""
from pathlib import Path

import pytest

from harness import capacity, ovsinstance


def test_switches_are_dealt_in_turn():
    switches = [f"s{i}" for i in range(1, 21)]
    got = ovsinstance.assign(switches, 2)
    assert [got[s] for s in switches[:4]] == [0, 1, 0, 1]
    assert sorted(got.values()).count(0) == sorted(got.values()).count(1) == 10
    assert set(ovsinstance.assign(switches, 1).values()) == {0}
    with pytest.raises(ValueError):
        ovsinstance.instances(0, "/tmp")


def test_the_first_instance_is_the_systems_and_extras_point_tools_at_their_directory(tmp_path):
    system, extra = ovsinstance.instances(2, tmp_path)
    assert system.rundir is None and system.tool("ovs-vsctl", "show") == ["ovs-vsctl", "show"]
    assert system.datapath_type == "netdev" and system.shell("ovs-vsctl show") == "ovs-vsctl show"
    assert extra.rundir == Path(tmp_path) / "ovs1" and extra.datapath_type == "dummy"
    assert extra.tool("ovs-ofctl", "dump-flows", "ils2") == ["env", f"OVS_RUNDIR={tmp_path}/ovs1", "ovs-ofctl",
                                                           "dump-flows", "ils2"]
    assert extra.shell("ovs-vsctl add-br x").startswith(f"env OVS_RUNDIR={tmp_path}/ovs1 ")
    assert extra.pid() is None         # never started


def test_measurements_are_kept_per_instance_count():
    assert capacity.key("user") == "user" and capacity.key("user", 1) == "user"
    assert capacity.key("user", 2) == "user-x2"
