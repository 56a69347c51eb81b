"""The fidelity guard's signals and verdict (harness.fidelity), on hand-made inputs."""
import os
from pathlib import Path

import pytest

from harness import fidelity


def test_idle_shares_are_per_window():
    assert fidelity.idle_shares([(0, 0), (50, 100), (60, 200), (60, 200)]) == [0.5, 0.1]


def agent(samples_ms, job="j1", worker=0):
    """An agent's summary line as agents.wire reports its sleeps' lateness."""
    from agents import wire
    wire.LATENESS[:] = [x / 1000 for x in samples_ms]
    try:
        return {"job": job, "worker": worker, "timer_late_ms": wire.lateness_ms()}
    finally:
        wire.LATENESS.clear()


def sig(idle, late=None, peak=0.9, allowed=1.02, iteration_ms=300.0, agents=None):
    agents = agents if agents is not None else ([agent([late] * 300)] if late is not None else [{}])
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
    assert not ok and "could not keep up" in notes[0] and "raise time_dilation" in notes[0]
    ok, _ = fidelity.verdict(sig([0.01] * (busy - 1) + [0.6] * (n - busy + 1)))
    assert ok


def test_late_timers_and_broken_shaping_flag_the_run():
    limit = fidelity.TIMER_FRAC * 300.0
    ok, notes = fidelity.verdict(sig([0.6] * 10, late=limit + 0.1))
    assert not ok and "ran late" in notes[0] and "raise time_dilation" in notes[0]
    assert fidelity.verdict(sig([0.6] * 10, late=limit - 0.1))[0]
    assert not fidelity.verdict(sig([0.6] * 10, late=limit - 0.1, iteration_ms=100.0))[0]   # relative to the iteration
    ok, notes = fidelity.verdict(sig([0.6] * 10, peak=1.2, allowed=1.02))
    assert not ok and "shaping is not holding" in notes[0]


def test_datapath_drops_are_read_per_port_and_flag_a_run():
    """dpctl/show -s (the format of OVS 3.1's userspace datapath, one port of another bridge with
    drops that are not ours): our ports' RX/TX dropped and errors plus lost upcalls."""

    from harness.fidelity import DATAPATH_DROP_FRAC, datapath_delta
    from harness.netcheck import parse_dpctl_stats
    text = (Path(__file__).parent / "fixtures/dpctl_show_s.txt").read_text()
    c = parse_dpctl_stats(text, {"ils2-eth1", "ils2-eth2"})
    assert c == {"lost": 3, "hit": 3089, "missed": 25, "flows": 25, "dropped": 7 + 1 + 2, "tx_packets": 1037}
    zero = {"lost": 0, "hit": 0, "missed": 0, "flows": 0, "dropped": 0, "socket_dropped": 0, "tx_packets": 0}
    d = datapath_delta(zero, {**c, "socket_dropped": 4})
    assert (d["drops"], d["packets"], d["missed"]) == (17, 1037, 25)
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
    from agents.timing import Dilation
    links = pd.DataFrame({"source": [], "tx_bytes": [], "direction": [], "time": []})
    m = {"idle": [0.6] * 30, "agents": {("n2", 0): agent([4.02] * 300, job="n2")}}
    dilated = guard(m, links, 58.0, Dilation(2.0), dumbbell(2))
    assert dilated["ok"] and dilated["timer_late_ms_allowed"] == 5.8
    assert dilated["timer_late_ms_p99_by_agent"] == {"n2.w0": 4.02}
    plain = guard(m, links, 58.0, Dilation(1.0), dumbbell(2))
    assert not plain["ok"] and plain["timer_late_ms_allowed"] == 2.9


def test_one_late_sleep_of_a_short_agent_is_judged_in_the_pool_and_a_starved_agent_alone():
    """The fig13 case: one agent with 47 sleeps, one 23.7 ms late, among agents on time: its own
    p99 is that sleep, the pool's is not. An agent late on 5 % of 300 sleeps is flagged alone."""
    limit = fidelity.TIMER_FRAC * 116.0
    on_time = [agent([0.5] * 400, job=f"j{i}") for i in range(20)]
    one_late = agent([1.0] * 46 + [23.7], job="xlm")
    s = sig([0.6] * 10, iteration_ms=116.0, agents=on_time + [one_late])
    assert s["timer_late_ms_p99_worst"] == 23.7 and s["timer_late_ms_p99_worst_judged"] == 0.5
    assert s["timer_late_ms_p99_pooled"] <= 0.55
    assert fidelity.verdict(s)[0]
    starved = agent([1.0] * 285 + [20.0] * 15, job="starved")
    s = sig([0.6] * 10, iteration_ms=116.0, agents=on_time + [starved])
    ok, notes = fidelity.verdict(s)
    assert s["timer_late_ms_p99_worst_judged"] == 20.0 > limit and not ok and "one agent" in notes[0]
    everyone_late = [agent([0.5] * 95 + [9.0] * 5, job=f"j{i}") for i in range(30)]
    ok, notes = fidelity.verdict(sig([0.6] * 10, iteration_ms=116.0, agents=everyone_late))
    assert not ok and "all agents' sleeps" in notes[0]


def test_pooled_p99_is_within_one_bin_of_the_exact_quantile():
    import numpy as np
    from agents import wire
    rng = np.random.default_rng(4)
    samples = [list(rng.exponential(1.5, size=n)) for n in (50, 300, 1000)]
    exact = float(np.sort(np.concatenate(samples))[int(0.99 * sum(map(len, samples))) - 1])
    pooled = fidelity.pooled_p99([agent(s)["timer_late_ms"] for s in samples])
    assert exact <= pooled + 1e-9 <= exact + wire.LATE_BIN_MS + 1e-9


def test_datapath_cost_is_reported_from_lookups_and_vswitchd_cpu_and_never_judged():
    """The slow path's share of lookups and vswitchd's CPU per packet are in the signals; however
    large, they do not flag a run; a reading without them (an older one, or vswitchd's pid file
    unreadable) reports None."""
    from harness.fidelity import datapath_cost, datapath_delta, signals
    before = {"lost": 0, "hit": 1000, "missed": 10, "dropped": 0, "socket_dropped": 0, "tx_packets": 500,
              "vswitchd_cpu_s": 2.0}
    after = {**before, "hit": 1900, "missed": 110, "tx_packets": 10_500, "vswitchd_cpu_s": 3.5}
    d = datapath_delta(before, after)
    assert datapath_cost(d) == {"datapath_missed_share": 0.1, "vswitchd_cpu_us_per_packet": 150.0,
                                "datapath_emc_share": None, "subtable_lookups_per_megaflow_hit": None,
                                "datapath_flows": None}
    sig = signals([0.6] * 10, [], 0.5, 1.01, 300.0, d)
    assert (sig["datapath_missed_share"], sig["vswitchd_cpu_us_per_packet"]) == (0.1, 150.0)
    assert fidelity.verdict(sig) == (True, [])
    old = datapath_delta({k: v for k, v in before.items() if k != "vswitchd_cpu_s"}, after)
    assert datapath_cost(old)["vswitchd_cpu_us_per_packet"] is None
    assert set(datapath_cost(None).values()) == {None}


def test_the_userspace_datapaths_cache_and_classifier_are_read_per_run():
    """pmd-stats-show's main thread (as printed during a run on this machine) and a second thread
    (made up, to check the sum): the run's share of exact-match-cache hits and subtable lookups per
    classifier hit come from the difference of two readings; a kernel datapath prints none."""
    from harness.fidelity import datapath_cost, datapath_delta
    from harness.netcheck import parse_pmd_stats
    p = parse_pmd_stats((Path(__file__).parent / "fixtures/pmd_stats_show.txt").read_text())
    assert p == {"emc_hits": 23644 + 600, "megaflow_hits": 84907 + 400,
                 "subtable_lookups": pytest.approx(84907 * 2.0 + 400 * 1.5)}
    assert parse_pmd_stats("please specify an existing datapath") == {}
    base = {"lost": 0, "hit": 0, "missed": 0, "dropped": 0, "socket_dropped": 0, "tx_packets": 0, "flows": 10}
    before = {**base, "emc_hits": 100, "megaflow_hits": 1000, "subtable_lookups": 2000.0}
    after = {**base, "flows": 240, "emc_hits": 400, "megaflow_hits": 1900, "subtable_lookups": 4250.0}
    cost = datapath_cost(datapath_delta(before, after))
    assert (cost["datapath_emc_share"], cost["subtable_lookups_per_megaflow_hit"], cost["datapath_flows"]) == \
        (0.25, 2.5, 240)
    assert datapath_cost(datapath_delta(base, base))["datapath_emc_share"] is None


def test_process_cpu_is_read_after_the_command_name():
    """/proc/PID/stat's command may hold spaces and parentheses: utime and stime are fields 14 and 15
    counted after its closing parenthesis."""
    from harness.netcheck import parse_proc_cpu_s, process_cpu_s
    stat = "1234 (ovs (vswitchd) x) S 1 1234 1234 0 -1 4194560 5 0 0 0 250 50 0 0 20 0 3 0 100 0 0"
    assert parse_proc_cpu_s(stat, 100) == 3.0
    assert process_cpu_s(None) is None                  # vswitchd not running
    assert process_cpu_s(2 ** 22 + 1) is None           # above pid_max: no such process
    assert process_cpu_s(os.getpid()) >= 0
