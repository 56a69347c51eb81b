"""Open vSwitch instances of a run: the system's, and extra ones so the userspace datapath forwards on more cores.

The userspace datapath forwards every packet of its non-PMD ports (the veths, read and written
through AF_PACKET sockets) in the main thread of one ovs-vswitchd: one core's worth of forwarding.
A run with ``instances`` N > 1 starts N-1 more ovsdb-server + ovs-vswitchd pairs, each with its own
database, sockets and logs in a directory of the run (``OVS_RUNDIR``, which every OVS tool follows),
and gives each instance a share of the switches (``assign``). A userspace datapath is named after
its type and owns a tap device of that name (``ovs-netdev``), which one instance per network
namespace can hold; the extra instances run with ``--enable-dummy`` and put their bridges in the
``dummy`` datapath type: the same userspace datapath (dpif-netdev, the same AF_PACKET ports) whose
own port is not a kernel device. The processes are the run's
(ledger, killed with the run's process), the directory a run directory (removed by its clean).
"""
import os
import shutil
import subprocess
import time
from pathlib import Path

from harness import vswitchd
from harness.errors import EnvError
from harness.lifecycle import die_with_parent

SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
START_TIMEOUT_S = 10.0


class Instance:
    """One ovs-vswitchd with its ovsdb-server. ``rundir`` None is the system's instance."""

    def __init__(self, rundir=None):
        self.rundir = Path(rundir) if rundir else None
        self.datapath_type = "dummy" if rundir else "netdev"
        self.procs = []

    def __repr__(self):
        return f"Instance({str(self.rundir) if self.rundir else 'system'})"

    @property
    def env_prefix(self):
        """argv prefix that points an OVS tool at this instance."""
        return ["env", f"OVS_RUNDIR={self.rundir}"] if self.rundir else []

    def tool(self, *argv):
        return self.env_prefix + list(argv)

    def shell(self, cmd):
        """A shell command string with this instance's environment."""
        return f"env OVS_RUNDIR={self.rundir} {cmd}" if self.rundir else cmd

    def pid(self):
        """ovs-vswitchd's pid, or None when it is not running."""
        if self.rundir is None:
            return vswitchd.pid()
        try:
            p = int((self.rundir / "ovs-vswitchd.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return p if Path(f"/proc/{p}").exists() else None

    def start(self, ledger, log=lambda msg: None):
        """Create the database and start both daemons, each recorded in ``ledger`` as it starts."""
        if self.rundir is None:
            return self
        if not SCHEMA.exists():
            raise EnvError(f"{SCHEMA} is missing: cannot create another OVS database", "sudo make setup")
        ledger.add("dirs", str(self.rundir))
        if self.rundir.exists():
            shutil.rmtree(self.rundir)
        self.rundir.mkdir(parents=True)
        env = dict(os.environ, OVS_RUNDIR=str(self.rundir), OVS_LOGDIR=str(self.rundir), OVS_DBDIR=str(self.rundir))
        db, sock = self.rundir / "conf.db", self.rundir / "db.sock"
        subprocess.run(["ovsdb-tool", "create", str(db), str(SCHEMA)], check=True, capture_output=True)
        common = ["-vconsole:off", "-vsyslog:off", "-vfile:info", "--no-chdir"]
        self._spawn(["ovsdb-server", str(db), f"--remote=punix:{sock}", f"--pidfile={self.rundir}/ovsdb-server.pid",
                     f"--log-file={self.rundir}/ovsdb-server.log", *common], env, ledger, "ovsdb-server")
        self._wait(lambda: subprocess.run(self.tool("ovs-vsctl", "--timeout=1", "--no-wait", "init"),
                                          capture_output=True).returncode == 0, "ovsdb-server")
        self._spawn(["ovs-vswitchd", "--enable-dummy", f"unix:{sock}", f"--pidfile={self.rundir}/ovs-vswitchd.pid",
                     f"--log-file={self.rundir}/ovs-vswitchd.log", *common], env, ledger, "ovs-vswitchd")
        self._wait(lambda: subprocess.run(self.tool("ovs-appctl", "--timeout=1", "-t", "ovs-vswitchd", "version"),
                                          capture_output=True).returncode == 0, "ovs-vswitchd")
        log(f"started an ovs-vswitchd instance in {self.rundir}")
        return self

    def _spawn(self, argv, env, ledger, what):
        p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True, preexec_fn=die_with_parent)
        ledger.add_process(p.pid, what)
        self.procs.append(p)

    def _wait(self, ready, what):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                break
            if ready():
                return
            time.sleep(0.05)
        raise EnvError(f"{what} of the OVS instance in {self.rundir} did not start",
                       f"see {self.rundir}/{what}.log")

    def stop(self):
        """Stop the daemons (vswitchd first) and remove the directory; the ledger does the same for a run
        that died."""
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []
        if self.rundir is not None:
            shutil.rmtree(self.rundir, ignore_errors=True)


def instances(n, state_dir):
    """The system's instance and n-1 extra ones under ``state_dir``."""
    if n < 1:
        raise ValueError(f"vswitchd instances: {n} (at least 1)")
    return [Instance()] + [Instance(Path(state_dir) / f"ovs{i}") for i in range(1, n)]


def assign(switches, n):
    """{switch: instance index}: switches dealt in turn, so each layer of a fabric is split evenly."""
    return {s: i % n for i, s in enumerate(switches)}
