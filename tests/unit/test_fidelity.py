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
