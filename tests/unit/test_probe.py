import pytest

from harness import probe
from harness.errors import EnvError, UsageError


def findings(**kw):
    f = {"root": True, "kernel": "x", "kernel_ovs_datapath": False, "dctcp": False,
         "congestion_controls": ["reno", "cubic"], "wmem_default": 8388608, "bpf_object": True,
         "ovs": {"installed": True, "version": "3.1.0", "ovsdb_server": True, "ovs_vswitchd": True, "schema": True},
         "tools": {"mnexec": True, "clang": True}, "python": {"mininet": True, "os_ken": True},
         "qdiscs": {"htb": True, "red": False, "netem": False, "clsact": True, "bpf": True}}
    f.update(kw)
    f["backends"], f["problems"] = probe.choose_backends(f)
    return f


def test_this_platform_picks_user_datapath_and_bpf():
    f = findings()
    assert f["backends"]["datapath"] == "user" and f["backends"]["ecn_marker"] == "bpf"
    assert f["backends"]["congestion_control"] == "cubic" and f["backends"]["link_delay"] is None
    assert f["problems"] == []


def test_stock_vm_kernel_picks_kernel_datapath_red_dctcp():
    f = findings(kernel_ovs_datapath=True, dctcp=True,
                 qdiscs={"htb": True, "red": True, "netem": True, "clsact": True, "bpf": True})
    assert f["backends"]["datapath"] == "kernel" and f["backends"]["ecn_marker"] == "red"
    assert f["backends"]["congestion_control"] == "dctcp" and f["backends"]["link_delay"] == "netem"


def test_red_only_with_the_kernel_datapath():
    """sch_red without the openvswitch module (a stock kernel whose OVS runs in userspace): RED cannot
    mark the userspace datapath's packets, so the doctor picks the BPF marker; asking for the pair
    is refused with the reason, and --datapath user alone drops the doctor's red."""
    stock = {"htb": True, "red": True, "netem": True, "clsact": True, "bpf": True}
    f = findings(qdiscs=stock)
    assert (f["backends"]["datapath"], f["backends"]["ecn_marker"]) == ("user", "bpf")
    k = findings(kernel_ovs_datapath=True, qdiscs=stock)
    assert probe.resolve(k, datapath="user")["ecn_marker"] == "bpf"
    assert probe.resolve(k, datapath="kernel", ecn_marker="bpf")["ecn_marker"] == "bpf"
    with pytest.raises(EnvError, match="RED cannot mark what the userspace datapath sends"):
        probe.resolve(k, datapath="user", ecn_marker="red")
    nobpf = findings(qdiscs={**stock, "bpf": False})
    assert nobpf["backends"]["ecn_marker"] is None
    assert any("RED cannot mark" in p["problem"] for p in nobpf["problems"])


def test_problems_come_with_fixes():
    f = findings(root=False, wmem_default=212992,
                 ovs={"installed": True, "version": "3.1.0", "ovsdb_server": False, "ovs_vswitchd": False},
                 qdiscs={"htb": True, "red": False, "netem": False, "clsact": True, "bpf": False})
    texts = " | ".join(p["problem"] for p in f["problems"])
    assert "not root" in texts and "no ECN marker" in texts
    assert "daemons are not running" not in texts          # without root their sockets cannot be asked
    down = findings(ovs={"installed": True, "version": "3.1.0", "ovsdb_server": False, "ovs_vswitchd": False})
    assert "daemons are not running" in " | ".join(p["problem"] for p in down["problems"])
    assert "wmem_default" in texts
    assert all(p["fix"] for p in f["problems"])
    with pytest.raises(EnvError, match="fix: run with sudo"):
        probe.require_ready(f)


def test_overrides_fail_clearly_when_impossible():
    f = findings()
    with pytest.raises(EnvError, match="no openvswitch module"):
        probe.resolve(f, datapath="kernel")
    with pytest.raises(EnvError, match="no sch_red"):
        probe.resolve(f, ecn_marker="red")
    with pytest.raises(UsageError):
        probe.resolve(f, ecn_marker="wred")
    assert probe.resolve(f, datapath="user", ecn_marker="bpf")["ecn_marker"] == "bpf"


def test_vswitchd_instances_default_and_what_doctor_says_of_more():
    assert findings()["backends"]["vswitchd_instances"] == probe.DEFAULT_VSWITCHD_INSTANCES
    assert findings(kernel_ovs_datapath=True)["backends"]["vswitchd_instances"] == 1
    assert "extra ones possible" in probe.render(findings())
    no_schema = findings(ovs={"installed": True, "version": "3.1.0", "ovsdb_server": True, "ovs_vswitchd": True,
                              "schema": False})
    assert "impossible: no OVS database schema" in probe.render(no_schema)


def test_vswitchd_instances_override():
    f, k = findings(), findings(kernel_ovs_datapath=True)
    assert probe.resolve(f, instances=3)["vswitchd_instances"] == 3
    assert probe.resolve(f, instances=1)["vswitchd_instances"] == 1
    with pytest.raises(UsageError, match="--vswitchd-instances: 0"):
        probe.resolve(f, instances=0)
    with pytest.raises(EnvError, match="for the userspace datapath"):
        probe.resolve(k, instances=2)
    assert probe.resolve(f, datapath="user", instances=2)["vswitchd_instances"] == 2
    no_schema = findings(ovs={"installed": True, "version": "3.1.0", "ovsdb_server": True, "ovs_vswitchd": True,
                              "schema": False})
    with pytest.raises(EnvError, match="no OVS database schema"):
        probe.resolve(no_schema, instances=2)


def test_render_names_backends():
    text = probe.render(findings())
    assert "datapath            user" in text and "ecn_marker          bpf" in text
    assert "vswitchd_instances" in text
    assert "ready" in text


def test_doctor_runs_without_root_as_prediction(monkeypatch):
    f = probe.doctor(root=False)
    assert f["root"] is False
    assert f["qdiscs"]["bpf"] is None            # unknown without root, not guessed as yes/no
    assert any("not root" in p["problem"] for p in f["problems"])


def test_doctor_runs_where_this_user_may_not_look(monkeypatch):
    """/sys/fs/bpf is root's (mode 0700): the doctor without root reads it as absent, not a crash."""
    from pathlib import Path
    real = Path.exists

    def exists(self, *a, **kw):
        if str(self).startswith("/sys/fs/bpf/"):
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *a, **kw)
    monkeypatch.setattr(Path, "exists", exists)
    assert probe.readable_exists("/sys/fs/bpf/tc") is False
    f = probe.doctor(root=False)
    assert "not root: cannot build a network" in [p["problem"] for p in f["problems"]]
