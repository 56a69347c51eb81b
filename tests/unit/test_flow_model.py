"""The flow model's view of the emulator (harness.sim.flows with harness.sim.calibration): the
shapers' bursts, a flow's fixed latency, strict priority levels, the agents' late wake-ups."""
import pytest

from harness.linkmodel import LinkParams
from harness.routing import compute_routes, directed_links
from harness.sim import calibration
from harness.sim.flows import model_flow_times
from topologies import fattree

KB = 1000
LINK = LinkParams.from_spec({"rate_mbps": 50})          # 6,250,000 bytes/s


@pytest.fixture(scope="module")
def routes():
    return compute_routes(fattree(4, 3, LINK))


def test_a_lone_flow_sends_its_burst_at_once_and_the_rest_at_the_link_rate(routes):
    (small,) = model_flow_times([("h1", "h7", 20 * KB)], routes, LINK, 30 * KB, 0.002)
    (big,) = model_flow_times([("h1", "h7", 160 * KB)], routes, LINK, 30 * KB, 0.002)
    assert small == pytest.approx(0.002)                                  # within the burst: latency only
    assert big == pytest.approx((160 - 30) * KB / 6.25e6 + 0.002)


def test_flows_starting_together_split_a_shared_links_tokens(routes):
    # h1 -> h7 and h2 -> h8 share their edge switch's uplink (routes of the 24-host fat-tree)
    both = model_flow_times([("h1", "h7", 40 * KB), ("h2", "h8", 40 * KB)], routes, LINK, 30 * KB, 0.0)
    assert both[0] == pytest.approx(both[1])
    assert both[0] == pytest.approx((80 - 30) * KB / 6.25e6)             # 50 KB left, sharing the link


def test_a_flow_released_later_finds_the_shared_links_tokens_taken(routes):
    # the benchmark's staggered pair: h2 -> h8 released 5 ms after h1 -> h7 (a fourth element)
    lead, late = model_flow_times([("h1", "h7", 160 * KB), ("h2", "h8", 160 * KB, 0.005)], routes, LINK, 30 * KB, 0.0)
    # the leader: 30 KB at once, 5 ms alone (31.25 KB), the remaining 98.75 KB at half the rate
    assert lead == pytest.approx(0.005 + 98.75 * KB / 3.125e6)
    # the second: no tokens left on the shared uplink; half the rate until the leader ends, then all
    assert late == pytest.approx(98.75 * KB / 3.125e6 + 61.25 * KB / 6.25e6)


def test_the_uncalibrated_model_adds_one_packet_of_store_and_forward_per_hop(routes):
    (t,) = model_flow_times([("h1", "h7", 160 * KB)], routes, LINK, 0.0, 0.0, store_and_forward=True)
    assert t == pytest.approx(160 * KB / 6.25e6 + 6 * (9000 + 38) * 8 / 50e6)


def step_of_two(policy, priorities=(None, None), **kw):
    """Two 1-micro-batch, 2-stage pipelines whose activation flows share h1/h2's edge uplink."""
    from harness.sim.flows import JobStep, simulate_steps
    from workloads import echelon
    r = compute_routes(fattree(4, 3, LINK))
    cap = {l: 0.05 for p in r.values() for l in directed_links(p)}
    steps = [JobStep(n, echelon.pipeline(n, 2, 1, 10, 10, 160 * KB), hosts, 0.0, p)
             for n, hosts, p in (("a", ["h1", "h7"], priorities[0]), ("b", ["h2", "h8"], priorities[1]))]
    return simulate_steps(steps, r, cap, policy, **kw)


def test_priority_levels_serve_the_urgent_flow_first():
    out = step_of_two("priority", priorities=([0, 0], [3, 3]))
    a, b = out["a"]["finish_s"]["act:0:0"], out["b"]["finish_s"]["act:0:0"]
    alone = 160 * KB / 6.25e6
    assert a - 0.010 == pytest.approx(alone)                # released at 10 ms, as if alone
    assert b - 0.010 == pytest.approx(2 * alone)            # after it
    fair = step_of_two("fair")
    assert fair["a"]["finish_s"]["act:0:0"] - 0.010 == pytest.approx(2 * alone)     # fair: together


def test_late_wake_ups_lengthen_every_compute_op():
    base = step_of_two("fair")["a"]["step_s"]
    late = step_of_two("fair", op_lateness_s=[0.001])["a"]["step_s"]
    # four ops on the step's critical path (F0, F1, B1, B0), each 1 ms longer
    assert late - base == pytest.approx(0.004)
    draws = {step_of_two("fair", op_lateness_s=[0.0, 0.002], seed=s)["a"]["step_s"] for s in range(6)}
    assert len(draws) > 1                                   # one value drawn per op, by the seed


def test_calibrated_where_measured_and_store_and_forward_elsewhere():
    fifo = calibration.emulator_model(LINK, scale=1000.0)
    fit = calibration.LINK_MODEL["fifo"]
    assert fifo["burst_bytes"] == pytest.approx(fit["burst"] * LINK.burst_bytes * 1000)
    assert fifo["flow_latency_s"] == fit["flow_latency_s"] and fifo["hop_latency_s"] == 0.0
    assert len(fifo["op_lateness_s"]) == len(calibration.OP_LATENESS_MS)
    fair = calibration.emulator_model(LinkParams.from_spec({"rate_mbps": 50, "sharing": "fair"}))
    assert fair == {"hop_latency_s": calibration.hop_latency_s(LINK), "flow_latency_s": 0.0, "burst_bytes": 0.0,
                    "op_lateness_s": (), "start_cost_s": 0.0}


def test_flows_starting_together_on_disjoint_paths_wait_for_each_others_start(routes):
    disjoint = [("h1", "h7"), ("h13", "h19"), ("h10", "h4"), ("h22", "h16")]      # no fabric link in common
    (alone,) = model_flow_times([("h1", "h7", 10 * KB)], routes, LINK, 30 * KB, 0.002, start_cost_s=0.0005)
    four = model_flow_times([(a, b, 10 * KB) for a, b in disjoint], routes, LINK, 30 * KB, 0.002, start_cost_s=0.0005)
    assert alone == pytest.approx(0.002)                   # no backlog: the flow's own start is in its latency
    assert four == pytest.approx([0.002 + 3 * 0.0005] * 4)  # served together: each waits for the other three


@pytest.mark.parametrize("gap_ms, waits_ms", [(0.5, 1.5), (1.0, 1.0), (3.0, 0.0)])
def test_the_start_backlog_drains_with_time(gap_ms, waits_ms):
    """Two jobs on disjoint paths whose first flows (10 KB, within the burst) start gap_ms apart:
    the second finds what is left of the first's 2 ms of start work."""
    from harness.sim.flows import JobStep, simulate_steps
    from workloads import echelon
    r = compute_routes(fattree(4, 3, LINK))
    cap = {l: 0.05 for p in r.values() for l in directed_links(p)}
    steps = [JobStep(n, echelon.pipeline(n, 2, 1, 10, 10, 10 * KB), hosts, start)
             for n, hosts, start in (("a", ["h1", "h7"], 0.0), ("b", ["h13", "h19"], gap_ms / 1000))]
    out = simulate_steps(steps, r, cap, "fair", burst_bytes=30 * KB, start_cost_s=0.002)
    assert out["a"]["finish_s"]["act:0:0"] == pytest.approx(0.010)
    assert out["b"]["finish_s"]["act:0:0"] == pytest.approx(0.010 + waits_ms / 1000)
