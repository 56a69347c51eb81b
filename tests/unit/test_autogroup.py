"""A run's change to a daemon's scheduling group is recorded first and undone by the ledger's clean
(only while the same process still holds the value the run wrote)."""
import subprocess

import pytest

from harness import vswitchd
from harness.lifecycle import Ledger, read_autogroup_nice, write_autogroup_nice

pytestmark = pytest.mark.skipif(not vswitchd.autogroups_on(), reason="kernel.sched_autogroup_enabled is 0 here")


@pytest.fixture
def daemon():
    """A process in a session of its own (so a scheduling group of its own), like ovs-vswitchd."""
    p = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield p.pid
    p.kill()
    p.wait()


@pytest.fixture
def ledger(tmp_path):
    return Ledger(tmp_path / "ledger.json")


def test_the_group_is_raised_then_restored(daemon, ledger):
    before = read_autogroup_nice(daemon)
    ledger.set_autogroup(daemon, "daemon", before + 5)     # raising a nice needs no privilege
    assert read_autogroup_nice(daemon) == before + 5
    assert Ledger.load(ledger.path).data["autogroups"] == [ledger.data["autogroups"][0]]
    assert ledger.clean() == []
    assert read_autogroup_nice(daemon) == before


def test_a_value_someone_else_set_since_is_left_alone(daemon, ledger):
    before = read_autogroup_nice(daemon)
    ledger.set_autogroup(daemon, "daemon", before + 5)
    write_autogroup_nice(daemon, before + 7)
    assert ledger.clean() == []
    assert read_autogroup_nice(daemon) == before + 7


def test_a_process_gone_or_replaced_is_not_touched(daemon, ledger):
    before = read_autogroup_nice(daemon)
    ledger.set_autogroup(daemon, "daemon", before + 5)
    ledger.data["autogroups"][0]["starttime"] -= 1          # as if the pid now named another process
    assert ledger.clean() == []
    assert read_autogroup_nice(daemon) == before + 5


def test_nothing_is_changed_when_vswitchd_is_not_running(ledger, monkeypatch):
    monkeypatch.setattr(vswitchd, "pid", lambda: None)
    assert vswitchd.raise_group(ledger) is None
    assert ledger.data["autogroups"] == []
