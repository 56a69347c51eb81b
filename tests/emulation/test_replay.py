"""Replay agents on a real fabric: iteration timing, offsets, re-alignment, crash reporting."""
import signal
import time

import pytest

from harness.replay import AgentCrash, Replayer
from harness.spec import Job
from workloads.profiles import builtins

pytestmark = pytest.mark.root

VGG16 = builtins()["vgg16"]


@pytest.fixture
def no_leaks():
    """Overrides the per-test check: these tests share one fabric, checked by ``fab`` at the end."""
    yield


def start(rp, jobs, lead=1.5):
    t = time.clock_gettime(time.CLOCK_MONOTONIC)
    for i, (job, hosts, shift, extra) in enumerate(jobs):
        rp.start(job, VGG16, hosts, shift, t + lead, t, i, True, **(extra or {}))
    return rp


# How late the agent may decide after the previous iteration's end: timer lateness measured on this
# machine kind, idle (p99.9 3.2 ms, max 4.2 ms over 5,774 sleeps of 5 ms)
DECIDE_MS = 4.0


def test_job_alone_runs_at_its_profile_iteration(fab, tmp_path):
    """A job alone keeps its profile's iteration and communication time (within 5 %), and its leader
    re-aligns exactly when the rule says: when the previous iteration ended more than 5 % of an
    iteration after the next slot. Drift is real: each communication phase ends 0-5 ms after the
    profile's 114 ms (median 113.8-114.9 ms over 6 runs of 29 iterations here), the next iteration
    starts from there, and the lateness adds up until a re-alignment (1-3 per run measured)."""
    rp = start(Replayer(fab, tmp_path), [(Job("a", "vgg16", 2, 30), ["h1", "h3"], 0.0, None)])
    rp.wait(60)
    d = rp.iterations().query("worker == 0 and iteration > 0")
    it = (d.end - d.start).mean() * 1000
    comm = (d.comm_end - d.comm_start).mean() * 1000
    assert abs(it / 255 - 1) <= 0.05, it
    assert abs(comm / 114 - 1) <= 0.05, comm
    w0 = rp.iterations().query("worker == 0").sort_values("iteration")
    t0 = rp.configs["a"]["t0"] - rp.configs["a"]["run_start"]
    late_ms = ((w0.end - t0) * 1000 - (w0.slot + 1) * 255).shift(1)     # previous end vs the next slot
    rule = 0.05 * 255
    decided = w0.assign(late_ms=late_ms).iloc[1:]
    clear = decided[(decided.late_ms - rule).abs() > DECIDE_MS]     # not within the decision jitter
    assert (clear.realigned == (clear.late_ms > rule)).all(), clear[["iteration", "late_ms", "realigned"]]


def offsets(rp):
    df = rp.iterations().query("worker == 0 and iteration > 0")
    a = df[df.job == "a"].set_index("slot").comm_start
    b = df[df.job == "b"].set_index("slot").comm_start
    return (b - a).dropna() * 1000


def test_two_jobs_keep_a_120ms_offset(fab, tmp_path):
    """The replay's own precision, on disjoint paths (a inside s1, b inside s2): the first slot's
    offset is the shift within 2 % of an iteration, and every later slot's stays inside what the
    re-alignment rule allows: each job starts an iteration up to 5 % late without re-aligning, and
    decides up to ``DECIDE_MS`` after its previous iteration ended, so one job's slip moves the offset
    by at most 5 % + ``DECIDE_MS`` until it re-aligns. Measured on this machine kind: 6 quiet runs,
    first slot 119.7-120.5 ms and the largest deviation of any slot 0.3-8.5 ms (in one, job b slipped
    8 ms at slot 6 and kept that offset); beside a half-busy niced neighbour, one slot at 12.9 ms
    (job a late by more than 5 %, re-aligned at the next)."""
    rp = start(Replayer(fab, tmp_path), [(Job("a", "vgg16", 2, 40), ["h1", "h2"], 0.0, None),
                                         (Job("b", "vgg16", 2, 40), ["h3", "h4"], 120.0, None)])
    rp.wait(60)
    diff = offsets(rp)
    assert len(diff) >= 30, f"{len(diff)} slots with both jobs' iterations (at least 30)"
    assert abs(diff.iloc[0] - 120) <= 0.02 * 255, f"first slot's offset {diff.iloc[0]:.1f} ms (120 +- 5.1)"
    worst = (diff - 120).abs()
    band = 0.05 * 255 + DECIDE_MS
    assert (worst <= band).all(), f"slot {worst.idxmax()}: offset {diff[worst.idxmax()]:.1f} ms (120 +- {band:.2f})"


def test_offset_stays_in_the_realignment_band_on_a_shared_bottleneck(fab, tmp_path):
    # both cross s1-s2; at 120 ms the 114 ms Up phases leave 6 ms of slack on one side, so a slight
    # overrun of one job can delay the other: the mechanism guarantees the 5 % band (CASSINI §4.2)
    rp = start(Replayer(fab, tmp_path), [(Job("a", "vgg16", 2, 40), ["h1", "h3"], 0.0, None),
                                         (Job("b", "vgg16", 2, 40), ["h2", "h4"], 120.0, None)])
    rp.wait(60)
    diff = offsets(rp)
    assert len(diff) >= 30
    inside = ((diff - 120).abs() <= 0.05 * 255).mean()
    assert inside >= 0.9, diff.describe()


def test_forced_delay_of_one_worker_triggers_realignment(fab, tmp_path):
    # worker 1 (not the leader) stalls 60 ms before iteration 6; worker 0 waits for its data,
    # finds its next start off the grid by > 5 % and re-aligns
    extra = {"inject_delay_ms": {"1": {"6": 60}}}
    rp = start(Replayer(fab, tmp_path), [(Job("a", "vgg16", 2, 16), ["h1", "h3"], 0.0, extra)])
    summary = rp.wait(60)
    d = rp.iterations().query("worker == 0")
    assert d.realigned.sum() >= 1 and summary[("a", 0)]["realignments"] >= 1
    # drift may add re-alignments elsewhere (see the test above); the stall must cause one at 6 or 7
    assert d[d.iteration.isin([6, 7])].realigned.sum() >= 1, d[["iteration", "realigned"]]
    first = d[(d.realigned == 1) & (d.iteration >= 6)].iteration.min()
    # after re-aligning, starts sit on the plan grid again (within 5 % of the iteration)
    t0 = rp.configs["a"]["t0"] - rp.configs["a"]["run_start"]
    after = d[d.iteration >= first]
    dev = ((after.start - t0) * 1000) - after.slot * 255
    assert (dev.abs() <= 0.05 * 255).all()


def test_a_killed_agent_is_reported(fab, tmp_path):
    rp = start(Replayer(fab, tmp_path), [(Job("a", "vgg16", 2, 100), ["h1", "h3"], 0.0, None)])
    time.sleep(2.5)
    rp.procs[("a", 1)].send_signal(signal.SIGKILL)
    with pytest.raises(AgentCrash, match="job a worker 1 crashed"):
        rp.wait(30)
    rp.stop()
