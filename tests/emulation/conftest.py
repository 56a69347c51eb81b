"""Emulation tier: real namespaces, OVS and tc. Its tests carry the ``root`` marker (tests/conftest.py
skips them without root; CI runs as root).

Every test here is checked for leaks: after it, no bridge, veth, BPF pin or process of ours may
remain that was not there before, and every global setting is as it was (tests.helpers.net_state).
Leftovers of a run killed before the session (what ``interleave clean`` removes) are cleaned first:
otherwise the first test's run would clean them and its leak check would see the change.
"""
import contextlib
import os

import pytest

from tests.helpers import assert_no_leaks, net_state


@pytest.fixture(scope="session", autouse=True)
def earlier_runs_cleaned():
    if os.geteuid() == 0:
        from harness.lifecycle import RunLock
        lock = RunLock(log=lambda msg: print(f"emulation tests: {msg}"))
        lock.acquire()      # cleans a dead run's ledger, as ``interleave clean`` does
        lock.release()
    yield


@pytest.fixture(autouse=True)
def no_leaks():
    before = net_state()
    yield
    assert_no_leaks(before, net_state())


@contextlib.contextmanager
def running_fabric(topo):
    """A started Fabric of ``topo`` under the run lock, stopped and leak-checked on exit; the lock is
    released however the fabric's start or stop ends."""
    from harness.fabric import Fabric
    from harness.lifecycle import RunLock
    before = net_state()
    lock = RunLock()
    lock.acquire()
    try:
        f = Fabric(topo, lock.ledger, lock.dir)
        try:
            f.start()
            yield f
        finally:
            f.stop()
    finally:
        lock.release()
    assert_no_leaks(before, net_state())


@pytest.fixture(scope="module")
def fab():
    """One dumbbell fabric for a whole module (modules using it override the per-test leak check
    with a no-op ``no_leaks`` fixture; the leak check runs here, once, at the end)."""
    from topologies import dumbbell
    with running_fabric(dumbbell(2)) as f:
        yield f
