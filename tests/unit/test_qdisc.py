import json
from pathlib import Path

import pytest

from harness.linkmodel import LinkParams
from harness.qdisc import BpfMarker, RedMarker, htb_cmds, parse_bpftool_dump, parse_red_stats

FIX = Path(__file__).parent / "fixtures"


def test_htb_then_bfifo():
    p = LinkParams.scaled(50)
    cmds = htb_cmds("ils1-eth1", p)
    assert cmds[0] == ["tc", "qdisc", "replace", "dev", "ils1-eth1", "root", "handle", "1:", "htb", "default", "1"]
    assert cmds[1][cmds[1].index("rate") + 1] == "50000000bit"
    assert cmds[1][cmds[1].index("ceil") + 1] == "50000000bit"
    assert int(cmds[1][cmds[1].index("burst") + 1]) >= 3 * 9000
    assert cmds[2][-3:] == ["bfifo", "limit", "300000"]


def test_bpf_marker_attaches_on_clsact_egress():
    m = BpfMarker(obj="/x/ecn_marker.o")
    cmds = m.queue_cmds("ils1-eth1", LinkParams.default())
    assert ["tc", "qdisc", "replace", "dev", "ils1-eth1", "clsact"] in cmds
    filt = cmds[-1]
    assert filt[:6] == ["tc", "filter", "replace", "dev", "ils1-eth1", "egress"]
    assert filt[filt.index("obj") + 1] == "/x/ecn_marker.o" and "da" in filt


def test_bpf_config_bytes_match_the_c_struct():
    p = LinkParams.default()
    raw = BpfMarker.config_value(p)
    assert len(raw) == 32
    rate, k, limit, levels = (int.from_bytes(raw[i:i + 8], "little") for i in (0, 8, 16, 24))
    assert (rate, k, limit, levels) == (50_000_000, 90_000, 300_000, 0)
    prio = BpfMarker.config_value(LinkParams.from_spec({"sharing": "priority"}))
    assert int.from_bytes(prio[24:], "little") == 4
    line = BpfMarker(pin_dir="/p").config_batch({460: p})[0]
    assert line.startswith("map update pinned /p/interleave_ecn_cfg key hex cc 01 00 00 value hex 80 f0 fa 02")


def test_parse_real_bpftool_dump():
    counters = parse_bpftool_dump((FIX / "bpftool_ecn_q_dump.json").read_text())
    assert set(counters) == {455, 456, 457, 458, 459, 460}
    assert counters[460]["pkts"] == 3 and counters[460]["marked"] == 0
    assert "lock" not in counters[460]
    # raw-byte keys (no BTF) are decoded too
    raw = json.loads((FIX / "bpftool_ecn_q_dump.json").read_text())
    assert int.from_bytes(bytes(int(b, 16) for b in raw[0]["key"]), "little") in counters


def test_red_backend_step_marks_at_k():
    p = LinkParams.scaled(50, mtu=1500)
    red = RedMarker().queue_cmds("x", p)[-1]
    assert red[red.index("min") + 1] == str(p.ecn_k_bytes)
    assert int(red[red.index("max") + 1]) == p.ecn_k_bytes + 1500
    assert "ecn" in red and red[red.index("probability") + 1] == "1.0"
    assert red[red.index("limit") + 1] == str(p.queue_bytes)


def test_red_stats_parse():
    assert parse_red_stats((FIX / "tc_qdisc_htb_bpf.json").read_text()) == {}
    text = json.dumps([{"kind": "htb", "dev": "a"}, {"kind": "red", "dev": "a", "bytes": 10, "packets": 2,
                                                    "drops": 1, "options": {"marked": 7}}])
    assert parse_red_stats(text) == {"a": {"marked": 7, "pkts": 2, "bytes": 10, "overflow": 1}}
    # a stock kernel's output (the guest of make vm-test): netem root, HTB under it, RED under HTB
    stats = parse_red_stats((FIX / "tc_qdisc_netem_htb_red.json").read_text())
    assert set(stats) == {"ils1-eth1", "ils1-eth2", "ils2-eth1", "ils2-eth2"}
    assert stats["ils1-eth2"] == {"marked": 0, "pkts": 904, "bytes": 7907673, "overflow": 0}


def test_a_delayed_link_puts_netem_at_the_root_and_the_queue_under_it():
    """netem first (packets wait out the delay), then HTB and the marking queue: the queue RED and
    the drops see is the real one; the tree as the stock kernel built it (the fixture)."""
    p = LinkParams.from_spec({"rate_mbps": 20, "delay_ms": 2})
    cmds = RedMarker().queue_cmds("ils1-eth1", p)
    assert cmds[0][:8] == ["tc", "qdisc", "replace", "dev", "ils1-eth1", "root", "handle", "9:"]
    assert cmds[0][cmds[0].index("delay") + 1] == "2000us" and int(cmds[0][cmds[0].index("limit") + 1]) >= 1000
    assert cmds[1][5:10] == ["parent", "9:1", "handle", "1:", "htb"]
    built = {q["kind"]: q for q in json.loads((FIX / "tc_qdisc_netem_htb_red.json").read_text())
             if q["dev"] == "ils1-eth1"}
    assert built["netem"]["root"] and built["htb"]["parent"] == "9:1" and built["red"]["parent"] == "1:1"
    assert built["netem"]["options"]["delay"]["delay"] == 0.002
    assert htb_cmds("x", LinkParams.scaled(20))[0][5] == "root"          # no delay: no netem


def test_fair_sharing_gives_each_dscp_class_its_own_queue():
    from harness.linkmodel import LinkError
    from harness.qdisc import FAIR_CLASSES
    p = LinkParams.from_spec({"rate_mbps": 50, "sharing": "fair"})
    assert p.sharing == "fair" and LinkParams.from_spec({"rate_mbps": 50}).sharing == "fifo"
    cmds = BpfMarker().queue_cmds("ils1-eth1", p)
    classes = [c for c in cmds if c[:2] == ["tc", "class"] and "1:1" in c and c[c.index("classid") + 1] != "1:1"]
    assert len(classes) == FAIR_CLASSES
    for c in classes:        # an equal guaranteed share each, the whole rate to borrow, one MTU a round
        assert c[c.index("rate") + 1] == f"{p.rate_bps // FAIR_CLASSES}bit"
        assert c[c.index("ceil") + 1] == f"{p.rate_bps}bit" and c[c.index("quantum") + 1] == str(p.mtu + 14)
    filters = [c for c in cmds if c[:2] == ["tc", "filter"] and "u32" in c]
    # job DSCP d (TOS d << 2) lands in class d mod 8: the filter matches the TOS bits 2-4
    matched = {int(c[c.index("dsfield") + 1], 16) >> 2: c[c.index("flowid") + 1] for c in filters}
    assert matched == {d: f"1:{0x10 + d:x}" for d in range(FAIR_CLASSES)}
    assert all(c[c.index("dsfield") + 2] == "0x1c" for c in filters)
    assert any("clsact" in c for c in cmds)               # the marker still attaches
    with pytest.raises(LinkError):
        LinkParams.from_spec({"rate_mbps": 50, "sharing": "wfq"})


def test_fair_sharing_with_the_red_marker_is_refused_before_anything_is_built(tmp_path):
    from harness.errors import EnvError
    from harness.fabric import Fabric
    from topologies import dumbbell
    topo = dumbbell(2, link=LinkParams.from_spec({"rate_mbps": 50, "sharing": "fair"}))
    with pytest.raises(EnvError, match="bpf ECN marker only"):
        Fabric(topo, None, tmp_path, marker="red")
    assert Fabric(topo, None, tmp_path, marker="bpf").net is None      # accepted, nothing built yet


def test_priority_sharing_gives_one_leaf_per_level_served_most_urgent_first():
    from agents.wire import PRIORITY_LEVELS, priority_tos
    p = LinkParams.from_spec({"rate_mbps": 50, "sharing": "priority"})
    cmds = htb_cmds("s1-eth1", p, classes=p.sharing)
    leaves = [c for c in cmds if c[1] == "class" and c[c.index("parent") + 1] == "1:1"]
    assert [c[c.index("prio") + 1] for c in leaves] == [str(k) for k in range(PRIORITY_LEVELS)]
    for c in leaves:                       # a floor each, all of the rate to borrow
        assert c[c.index("rate") + 1] == "500000bit" and c[c.index("ceil") + 1] == "50000000bit"
    assert sum(1 for c in cmds if "bfifo" in c) == PRIORITY_LEVELS
    # the u32 filters read the TOS byte's class selector; each level's TOS lands on its leaf
    filters = {c[c.index("dsfield") + 1]: c[c.index("flowid") + 1] for c in cmds if c[1] == "filter"}
    assert all(c[c.index("dsfield") + 2] == "0xe0" for c in cmds if c[1] == "filter")
    for level in range(PRIORITY_LEVELS):
        tos = priority_tos(level, dscp=5)
        leaf = filters.get(f"0x{tos & 0xe0:02x}", "1:" + cmds[0][cmds[0].index("default") + 1])
        assert leaf == f"1:{0x30 + level:x}"
    # unmarked traffic (TOS 0: iperf, the connections' headers) is the least urgent
    assert cmds[0][cmds[0].index("default") + 1] == f"{0x30 + PRIORITY_LEVELS - 1:x}"


def test_priority_tos_keeps_the_jobs_low_bits_and_rejects_a_level_out_of_range():
    from agents.wire import PRIORITY_LEVELS, priority_tos
    assert priority_tos(0, dscp=3) == ((PRIORITY_LEVELS - 1) << 3 | 3) << 2
    assert priority_tos(PRIORITY_LEVELS - 1, dscp=11) == 3 << 2      # class selector 0, low bits of 11
    with pytest.raises(ValueError):
        priority_tos(PRIORITY_LEVELS)


def test_bpf_marker_builds_the_sharing_the_link_names():
    for sharing, leaves in (("fifo", 0), ("fair", 8), ("priority", 4)):
        p = LinkParams.from_spec({"sharing": sharing})
        cmds = BpfMarker(obj="/x.o").queue_cmds("s1-eth1", p)
        assert sum(1 for c in cmds if c[1] == "class" and c[c.index("parent") + 1] == "1:1") == leaves
