"""The ovs-vswitchd daemon as a run sees it: its pid and its scheduling group.

With the userspace datapath every emulated packet crosses ovs-vswitchd. Where the kernel groups
processes by session for the CPU (``kernel.sched_autogroup_enabled = 1``), vswitchd's session
competes with any other session as one group, whatever that session's nice (docs/testing.md: what a
busy neighbour does to the fabric). A run raises vswitchd's group for its lifetime (``Ledger.set_autogroup``: recorded first, restored
at stop or by ``interleave clean``).
"""
from pathlib import Path

PIDFILES = ("/run/openvswitch/ovs-vswitchd.pid", "/var/run/openvswitch/ovs-vswitchd.pid")
AUTOGROUP_SWITCH = Path("/proc/sys/kernel/sched_autogroup_enabled")
RUN_NICE = -10      # the group's nice during a run (the default group's is 0)


def pid():
    """ovs-vswitchd's pid from its pidfile, or None when it is not running (or not readable)."""
    for pidfile in PIDFILES:
        try:
            p = int(Path(pidfile).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if Path(f"/proc/{p}").exists():
            return p
    return None


def autogroups_on():
    try:
        return AUTOGROUP_SWITCH.read_text().strip() == "1"
    except OSError:
        return False


def raise_group(ledger, log=lambda msg: None, of=None):
    """Give vswitchd's scheduling group (the system's, or that of the vswitchd with pid ``of``) ``RUN_NICE`` for the run
    of ``ledger`` (restored by its clean). Returns the group's nice during the run, or None where
    groups are off or vswitchd is not running (nothing changed)."""
    p = of or pid()
    if p is None or not autogroups_on():
        return None
    try:
        ledger.set_autogroup(p, "ovs-vswitchd", RUN_NICE)
    except OSError as exc:
        log(f"ovs-vswitchd's scheduling group left as it is: {exc}")
        return None
    return RUN_NICE
