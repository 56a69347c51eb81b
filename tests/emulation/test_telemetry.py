"""Telemetry cross-checks on a real fabric: two sources counting the same packets must agree."""
import json
import time

import pytest

from harness.netcheck import KeepUpWatch, ce_received
from harness.telemetry import FLOW_STATS_SETTLE_S, Telemetry, ce_by_pair, mono, read_jsonl, wait_ce_quiet

pytestmark = pytest.mark.root


@pytest.fixture
def no_leaks():
    """Overrides the per-test check: these tests share one fabric, checked by ``fab`` at the end."""
    yield


def measure(fab, tmp_path, flows, seconds, rate_bps=None, watch=None):
    tm = Telemetry(fab, tmp_path, period_ms=100, ce_period_ms=100).start()
    run_start = mono()
    time.sleep(FLOW_STATS_SETTLE_S)     # flow counters catch up with earlier traffic first
    ce0 = {d: ce_received(fab, d) for _s, d in flows}
    watching = watch() if watch else None
    rates = iperf_bytes(fab, flows, seconds, rate_bps)
    kept = watching.stop() if watching else None
    wait_ce_quiet(tm.of_path)           # and with the last packets of this window
    ce1 = {d: ce_received(fab, d) for _s, d in flows}
    tm.stop()
    return tm, tm.links(run_start), rates, {d: ce1[d] - ce0[d] for d in ce0}, kept


def iperf_bytes(fab, flows, seconds, rate_bps):
    servers = [fab.net.get(d).popen(["iperf3", "-s", "-1", "-p", str(5301 + i)]) for i, (_s, d) in enumerate(flows)]
    time.sleep(0.3)
    clients = []
    for i, (s, d) in enumerate(flows):
        argv = ["iperf3", "-c", fab.topo.ip(d), "-p", str(5301 + i), "-t", str(seconds), "-J"]
        if rate_bps:
            argv += ["-b", str(int(rate_bps)), "--fq-rate", str(int(rate_bps))]
        clients.append(fab.net.get(s).popen(argv))
    got = [json.loads(c.communicate()[0])["end"]["sum_received"]["bytes"] for c in clients]
    for s in servers:
        s.wait(5)
    return got


def tm_start_of_flows(records, settle):
    return min(r["t"] for r in records) + settle - 0.05


def delta(df, direction, source, column):
    d = df[(df.direction == direction) & (df.source == source)][column].dropna()
    return d.iloc[-1] - d.iloc[0]


def test_congested_bottleneck_counters_agree(fab, tmp_path):
    flows = [("h1", "h3"), ("h2", "h4")]
    tm, df, app_bytes, receiver_ce, _ = measure(fab, tmp_path, flows, 5)
    of = read_jsonl(tm.of_path)
    # baseline: the last CE sample of each switch before the flows started (after the settle time)
    start = tm_start_of_flows(of, FLOW_STATS_SETTLE_S)
    first = [r for r in of if r["kind"] == "ce" and r["t"] <= start]
    # (a) CE packets seen by the controller at the last switch = CE packets the receivers got
    ce_last = ce_by_pair(of, fab.topo, fab.routes)
    ce_first = ce_by_pair(first, fab.topo, fab.routes)
    controller = sum(ce_last[f] - ce_first.get(f, 0) for f in flows)
    # the last hop (ToR -> host) has no next switch: its marks come from the marker's counters
    last_hop = sum(delta(df, f"s2>{d}", "marker", "ecn_marked") for _s, d in flows)
    receivers = sum(receiver_ce.values())
    assert receivers > 100, f"{receivers} CE packets at the receivers (more than 100: the bottleneck marks)"
    assert abs(controller + last_hop - receivers) <= 0.01 * receivers, \
        f"controller {controller} + last hop {last_hop} CE packets vs receivers {receivers} (within 1 %)"
    # the marker's count on the bottleneck port and the controller's CE arrivals behind it agree
    marked = delta(df, "s1>s2", "marker", "ecn_marked")
    arrived = delta(df, "s1>s2", "openflow", "ecn_marked")
    assert abs(marked - arrived) <= max(2, 0.01 * marked), \
        f"s1>s2: marker marked {marked}, controller saw {arrived} CE arrivals (within max(2, 1 %))"
    # (b) bytes from port statistics = bytes the applications received (+ frame headers, < 2 %)
    for (s, d), app in zip(flows, app_bytes):
        port = delta(df, f"s2>{d}", "openflow", "tx_bytes")
        assert 0.99 <= port / app <= 1.02, f"{d}: port {port} B / application {app} B = {port / app:.4f} (0.99-1.02)"
    # utilisation of the bottleneck while both flows ran is near 1 (rate from the link model)
    u = df[(df.direction == "s1>s2") & (df.source == "openflow")].utilization.dropna()
    assert u[u > 0.05].quantile(0.5) >= 0.9, f"s1>s2 median utilisation {u[u > 0.05].quantile(0.5):.3f} (at least 0.9)"


def test_no_congestion_no_marks(fab, tmp_path):
    """netcheck's ecn_idle rule on the counters of every source: a flow paced at half the rate
    makes no mark anywhere, unless the emulator measurably stalled long enough to release a
    backlog above K (KeepUpWatch); then the marks are not judged, but the sources still agree."""
    flows = [("h1", "h3")]
    params = fab.topo.link_between("h3", fab.topo.edge_of("h3")).params
    pace = 0.5 * params.rate_bps
    tm, df, _app, receiver_ce, kept = measure(fab, tmp_path, flows, 3, rate_bps=pace,
                                              watch=lambda: KeepUpWatch(fab, params, pace))
    marks = {source: df[df.source == source].groupby("direction").ecn_marked.agg(lambda x: x.max() - x.min())
             .fillna(0) for source in ("marker", "openflow")}
    if kept["kept_up"]:
        assert receiver_ce == {"h3": 0}, kept
        for source, m in marks.items():
            assert (m == 0).all(), (source, m[m != 0], kept)
    else:
        # a packet marked at two queues arrives once: the receiver sees between the busiest port's
        # marks and their sum
        per_port = marks["marker"][marks["marker"] > 0]
        busiest = per_port.max() if len(per_port) else 0
        assert busiest <= receiver_ce["h3"] <= per_port.sum(), (per_port, receiver_ce, kept)
    u = df[(df.direction == "s1>s2") & (df.source == "openflow")].utilization.dropna()
    assert 0.4 <= u[u > 0.05].quantile(0.5) <= 0.6, \
        f"s1>s2 median utilisation {u[u > 0.05].quantile(0.5):.3f} (0.4-0.6: paced at half the rate)"
