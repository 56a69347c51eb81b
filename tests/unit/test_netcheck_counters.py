"""netcheck's counters comparison on a dumbbell, from hand-made CE samples: equal counts pass, a
shortfall fails, and a shortfall that the queues' measured drops explain passes."""
from types import SimpleNamespace

from harness.netcheck import _counters_check
from harness.routing import compute_routes
from topologies import dumbbell


def fake_fabric():
    topo = dumbbell(2)
    return SimpleNamespace(topo=topo, routes=compute_routes(topo), port_dev=lambda node, port: f"il{node}-eth{port}")


def check(seen_at_s2, marked, drops=None):
    fab = fake_fabric()
    topo, flows = fab.topo, [("h1", "h3"), ("h2", "h4")]
    s2 = topo.dpid("s2")
    key = {f: f"{topo.mac(f[0])}>{topo.mac(f[1])}" for f in flows}
    base = [{"kind": "ce", "dpid": s2, "ce": {key[f]: 0 for f in flows}}]
    end = [{"kind": "ce", "dpid": s2, "ce": {key[flows[0]]: seen_at_s2 // 2, key[flows[1]]: seen_at_s2 - seen_at_s2 // 2}}]
    dev = fab.port_dev("s1", topo.port("s1", "s2"))
    return _counters_check(fab, base, base + end, {dev: marked}, flows, {dev: drops} if drops else None)


def test_equal_counts_on_the_switch_link_pass():
    r = check(300, 300)
    assert r["ok"] and r["compared"] == ["s1>s2"]


def test_a_shortfall_fails_unless_the_queue_dropped_that_many():
    assert not check(290, 300)["ok"]
    r = check(290, 300, drops=8)
    assert r["ok"] and r["queue_drops"] == {"s1>s2": 8}


SS_TEXT = """Netid State  Recv-Q Send-Q Local Address:Port      Peer Address:PortProcess
p_raw UNCONN 0      0                  *:ils1-eth1             *     users:(("ovs-vswitchd",pid=9305,fd=40)) ino:1 sk:1
\tver:0 cpy_thresh:0 flags( running auxdata ) skmem:(r0,rb212992,t0,tb8388608,f0,w0,o176,bl0,d0)
p_raw UNCONN 0      0                  *:ils2-eth1             *     users:(("ovs-vswitchd",pid=9305,fd=44)) ino:2 sk:4
\tver:0 cpy_thresh:0 flags( running auxdata ) skmem:(r0,rb212992,t0,tb8388608,f0,w0,o176,bl0,d7)
p_raw UNCONN 0      0                  *:eth0             *     users:(("dhclient",pid=1,fd=4)) ino:3 sk:5
\tver:0 cpy_thresh:0 flags( running ) skmem:(r0,rb212992,t0,tb8388608,f0,w0,o176,bl0,d3)
p_raw UNCONN 0      0                [0]:*                     *     users:(("ovs-vswitchd",pid=9305,fd=54)) ino:4 sk:7
\tver:0 cpy_thresh:0 flags( 0 ) skmem:(r0,rb212992,t0,tb8388608,f0,w0,o0,bl0,d0)
"""


def test_socket_drops_are_read_per_device_for_vswitchd_only():
    from harness.netcheck import parse_socket_drops
    assert parse_socket_drops(SS_TEXT) == {"ils1-eth1": 0, "ils2-eth1": 7}


def test_a_shortfall_the_next_switchs_receive_socket_dropped_passes():
    fab = fake_fabric()
    topo, flows = fab.topo, [("h1", "h3"), ("h2", "h4")]
    s2 = topo.dpid("s2")
    key = {f: f"{topo.mac(f[0])}>{topo.mac(f[1])}" for f in flows}
    base = [{"kind": "ce", "dpid": s2, "ce": {key[f]: 0 for f in flows}}]
    end = [{"kind": "ce", "dpid": s2, "ce": {key[flows[0]]: 145, key[flows[1]]: 145}}]
    egress = fab.port_dev("s1", topo.port("s1", "s2"))
    arrival = fab.port_dev("s2", topo.port("s2", "s1"))
    assert not _counters_check(fab, base, base + end, {egress: 300}, flows, None, {arrival: 3})["ok"]
    r = _counters_check(fab, base, base + end, {egress: 300}, flows, None, {arrival: 8})
    assert r["ok"] and r["datapath_rx_drops"] == {"s1>s2": 8} and r["queue_drops"] == {}


def test_stall_backlog_adds_waits_closer_together_than_they_drain():
    from harness.netcheck import backlog_step
    b = backlog_step(0.0, 0.019, 0.020, 1.0)              # a 19 ms wait in a 20 ms sample: 19 ms
    assert abs(b - 0.019) < 1e-9
    b = backlog_step(b, 0.0, 0.005, 1.0)                  # 5 ms running drains 5 ms at half load
    assert abs(b - 0.014) < 1e-9
    b = backlog_step(b, 0.019, 0.020, 1.0)                # the next wait lands on the rest: 32 ms
    assert abs(b - 0.032) < 1e-9 and b > 0.0288          # more than K / pace: a mark is possible
    assert backlog_step(0.010, 0.0, 0.050, 1.0) == 0.0    # never below empty
    assert abs(backlog_step(0.0, 0.030, 0.080, 1.0) - 0.030) < 1e-9   # a late sample hides no wait


def test_packet_sockets_are_read_with_their_unread_bytes():
    """/proc/net/packet captured during two congesting flows on the dumbbell (userspace datapath):
    ovs-vswitchd's receive socket on each switch port, one holding 19,560 bytes (1.5 jumbo frames)."""
    from pathlib import Path
    from harness.netcheck import parse_packet_sockets
    socks = dict(parse_packet_sockets((Path(__file__).parent / "fixtures" / "proc_net_packet.txt").read_text()))
    assert set(socks) == {0, 1359, 1360, 1361, 1362, 1363, 1364}
    assert socks[1359] == 19560 and sum(socks.values()) == 19560


def chain_check(marker, upstream_marks, marks, seen):
    """Two marking links in series on one flow of the fat-tree (the stock tier's case): the upstream
    link marked ``upstream_marks``, the next one ``marks``; the controller counted ``seen`` CE
    arrivals behind the next one and the upstream marks behind the upstream one."""
    from harness.netcheck import congested_flows
    from harness.qdisc import BpfMarker, RedMarker
    from topologies import fattree
    topo = fattree()
    routes = compute_routes(topo)
    fab = SimpleNamespace(topo=topo, routes=routes, port_dev=lambda node, port: f"il{node}-eth{port}",
                          marker={"red": RedMarker, "bpf": BpfMarker}[marker]())
    flows = congested_flows(topo, routes)
    path = routes[flows[0]]
    (a, b), (_b, c) = zip(path[1:3], path[2:4])            # the flow's first two switch-to-switch hops
    key = f"{topo.mac(flows[0][0])}>{topo.mac(flows[0][1])}"
    base = [{"kind": "ce", "dpid": topo.dpid(n), "ce": {key: 0}} for n in (b, c)]
    end = [{"kind": "ce", "dpid": topo.dpid(b), "ce": {key: upstream_marks}},
           {"kind": "ce", "dpid": topo.dpid(c), "ce": {key: seen}}]
    marks_by_dev = {fab.port_dev(a, topo.port(a, b)): upstream_marks, fab.port_dev(b, topo.port(b, c)): marks}
    return _counters_check(fab, base, base + end, marks_by_dev, flows)


def test_a_red_marker_counting_ce_packets_again_passes_behind_an_upstream_mark():
    """Measured in the stock tier (fat-tree, RED): 379 marks upstream, 23 on the next link, 383 CE
    arrivals behind it and at the receivers: 19 of the 23 were packets already CE. With RED that is
    consistent; a marker that counts only the packets it turned (BPF) must add up exactly."""
    assert chain_check("red", 379, 23, 383)["ok"]
    r = chain_check("bpf", 379, 23, 383)
    assert not r["ok"] and list(r["mismatched"].values()) == [{"marker": 23, "upstream_marks": 379, "controller": 383}]
    assert chain_check("bpf", 379, 23, 402)["ok"]


def test_a_red_marker_still_fails_a_controller_that_missed_or_invented_marks():
    assert not chain_check("red", 379, 23, 20)["ok"]      # fewer than the link's own marks
    assert not chain_check("red", 379, 23, 410)["ok"]     # more than all marks upstream and here
