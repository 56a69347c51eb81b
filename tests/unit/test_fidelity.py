"""The fidelity guard's signals and verdict (harness.fidelity), on hand-made inputs."""
from harness import fidelity


def test_idle_shares_are_per_window():
    assert fidelity.idle_shares([(0, 0), (50, 100), (60, 200), (60, 200)]) == [0.5, 0.1]


def sig(idle, late=None, peak=0.9, allowed=1.02, iteration_ms=300.0):
    agents = [{"timer_late_ms": {"p99": late}}] if late is not None else [{}]
    return fidelity.signals(idle, agents, peak, allowed, iteration_ms)


def test_a_quiet_run_passes_and_congestion_is_not_a_fault():
    ok, notes = fidelity.verdict(sig([0.6] * 60, late=1.0, peak=1.0))
    assert ok and not notes


def test_busy_seconds_beyond_the_allowance_flag_the_run():
    n = 100
    busy = int(fidelity.BUSY_SECONDS_MAX * n) + 1
    s = sig([0.01] * busy + [0.6] * (n - busy))
    assert s["cpu_busy_seconds_share"] > fidelity.BUSY_SECONDS_MAX
    ok, notes = fidelity.verdict(s)
    assert not ok and "could not keep up" in notes[0]
    ok, _ = fidelity.verdict(sig([0.01] * (busy - 1) + [0.6] * (n - busy + 1)))
    assert ok


def test_late_timers_and_broken_shaping_flag_the_run():
    limit = fidelity.TIMER_FRAC * 300.0
    assert not fidelity.verdict(sig([0.6] * 10, late=limit + 0.1))[0]
    assert fidelity.verdict(sig([0.6] * 10, late=limit))[0]
    assert not fidelity.verdict(sig([0.6] * 10, late=limit, iteration_ms=100.0))[0]   # relative to the iteration
    ok, notes = fidelity.verdict(sig([0.6] * 10, peak=1.2, allowed=1.02))
    assert not ok and "shaping is not holding" in notes[0]


def test_datapath_drops_are_read_per_port_and_flag_a_run():
    """dpctl/show -s (the format of OVS 3.1's userspace datapath, one port of another bridge with
    drops that are not ours): our ports' RX/TX dropped and errors plus lost upcalls."""
    from pathlib import Path

    from harness.fidelity import DATAPATH_DROP_FRAC, datapath_delta
    from harness.netcheck import parse_dpctl_stats
    text = (Path(__file__).parent / "fixtures/dpctl_show_s.txt").read_text()
    c = parse_dpctl_stats(text, {"ils2-eth1", "ils2-eth2"})
    assert c == {"lost": 3, "dropped": 7 + 1 + 2, "tx_packets": 1037}
    zero = {"lost": 0, "dropped": 0, "socket_dropped": 0, "tx_packets": 0}
    d = datapath_delta(zero, {**c, "socket_dropped": 4})
    assert (d["drops"], d["packets"]) == (17, 1037)
    base = dict(cpu_busy_seconds_share=0.0, timer_late_ms_p99_worst=1.0, timer_late_ms_allowed=10.0,
                max_link_utilization_1s=0.9, shaping_allowance=1.01)
    ok, notes = fidelity.verdict({**base, "datapath_drops": d["drops"], "datapath_packets": d["packets"]})
    assert not ok and "OVS lost 17 packets itself" in notes[0]
    few = int(DATAPATH_DROP_FRAC * 100_000)
    assert fidelity.verdict({**base, "datapath_drops": few, "datapath_packets": 100_000}) == (True, [])
    assert fidelity.verdict({**base, "datapath_drops": None, "datapath_packets": None}) == (True, [])


def test_timer_lateness_is_judged_on_the_wall_clock_of_a_dilated_run():
    """Agents sleep on the wall clock: with time_dilation 2 a 58 ms iteration lasts 116 ms, so 4 ms
    of lateness is within 5 % of it (5.8 ms) but not of the undilated 58 ms (2.9 ms)."""
    import pandas as pd
    from harness.runner import guard
    from topologies import dumbbell
    from workloads.timing import Dilation
    links = pd.DataFrame({"source": [], "tx_bytes": [], "direction": [], "time": []})
    m = {"idle": [0.6] * 30, "agents": {("n2", 0): {"job": "n2", "worker": 0, "timer_late_ms": {"p99": 4.0}}}}
    plan = {"jobs": [{"iteration_ms": 58.0}]}
    dilated = guard(m, links, plan, Dilation(2.0), dumbbell(2))
    assert dilated["ok"] and dilated["timer_late_ms_allowed"] == 5.8
    assert dilated["timer_late_ms_p99_by_agent"] == {"n2.w0": 4.0}
    plain = guard(m, links, plan, Dilation(1.0), dumbbell(2))
    assert not plain["ok"] and plain["timer_late_ms_allowed"] == 2.9
