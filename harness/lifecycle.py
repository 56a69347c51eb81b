"""Scoped lifecycle: one run at a time, and a ledger of everything a run creates.

Naming rules: every kernel object a run creates carries the ``il`` prefix (bridges ``ils1``,
switch ports ``ils1-eth2``); OVS bridges also carry ``external_ids:interleave-run=<run id>``.
Host namespaces are not named (Mininet holds them open with a shell process); the ledger records
each one's shell pid, its process start time and its netns inode, so that a later clean kills
exactly the processes inside *our* namespaces and nothing else.

The ledger (``<state dir>/ledger.json``) is written *before* each resource is created, so a run
killed at any point leaves a record that the next start (or ``interleave clean``) removes. Never a
global cleanup: no ``mn -c``, no kill by process name, no deletion of bridges we did not record.
"""
import errno
import fcntl
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from harness.errors import EnvError

STATE_DIR = Path(os.environ.get("INTERLEAVE_STATE_DIR", "/run/interleave"))


def proc_starttime(pid):
    """Start time of ``pid`` in clock ticks since boot (field 22 of /proc/pid/stat), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def netns_inode(pid):
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def pids_in_netns(inode):
    """Every process whose network namespace is ``inode``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.stat(entry / "ns" / "net").st_ino == inode:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _same_process(rec):
    return rec.get("starttime") is not None and proc_starttime(rec["pid"]) == rec["starttime"]


class Ledger:
    """The record of one run's resources, persisted after every change."""

    def __init__(self, path, data=None):
        self.path = Path(path)
        self.data = data or {"pid": os.getpid(), "run_id": f"{os.getpid()}-{int(time.time())}",
                             "started": time.time(), "processes": [], "namespaces": [], "bridges": [],
                             "links": [], "files": [], "bpf_pins": [], "sysctls": []}

    @classmethod
    def load(cls, path):
        try:
            return cls(path, json.loads(Path(path).read_text()))
        except (OSError, ValueError):
            return None

    @property
    def run_id(self):
        return self.data["run_id"]

    def _save(self):
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)

    def add(self, kind, item):
        if item not in self.data[kind]:
            self.data[kind].append(item)
            self._save()

    def add_process(self, pid, what):
        self.add("processes", {"pid": pid, "starttime": proc_starttime(pid), "what": what})

    def set_sysctl(self, key, value):
        """Set a root-namespace sysctl, recording the old value; restored on clean if unchanged since."""
        path = Path("/proc/sys", key.replace(".", "/"))
        old = path.read_text().strip()
        if old != value:
            self.add("sysctls", {"key": key, "old": old, "new": value})
            path.write_text(value)

    def add_namespace(self, pid, what):
        self.add("namespaces", {"pid": pid, "starttime": proc_starttime(pid), "inode": netns_inode(pid),
                                "what": what})

    # ---- removal ---------------------------------------------------------
    def clean(self, log=lambda msg: None):
        """Remove everything recorded, newest first; tolerate what is already gone."""
        d = self.data
        for rec in d["processes"]:
            if _same_process(rec):
                log(f"stopping {rec['what']} (pid {rec['pid']})")
                _kill(rec["pid"])
        for rec in d["namespaces"]:
            if rec.get("inode") and (_same_process(rec) or netns_inode(rec["pid"]) is None):
                for pid in pids_in_netns(rec["inode"]):
                    if pid != os.getpid():
                        _kill(pid)
        if d["bridges"]:
            existing = set(subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True,
                                          text=True).stdout.split())
            ours = [b for b in d["bridges"] if b in existing and _bridge_is_ours(b, d["run_id"])]
            if ours:
                log(f"deleting {len(ours)} OVS bridge(s)")
                subprocess.run(["ovs-vsctl", "--timeout=10"] +
                               [a for b in ours for a in ("--", "--if-exists", "del-br", b)],
                               capture_output=True)
        for dev in d["links"] + [b for b in d["bridges"]]:
            if Path("/sys/class/net", dev).exists():
                subprocess.run(["ip", "link", "del", dev], capture_output=True)
        for rec in reversed(d.get("sysctls", [])):
            path = Path("/proc/sys", rec["key"].replace(".", "/"))
            try:
                if path.read_text().strip() == rec["new"]:
                    path.write_text(rec["old"])
            except OSError:
                pass
        for p in d["bpf_pins"] + d["files"]:
            try:
                os.unlink(p)
            except OSError:
                pass
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


def _kill(pid, grace=1.0):
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.time() + grace
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        # reap if it is our child
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.02)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _bridge_is_ours(bridge, run_id):
    p = subprocess.run(["ovs-vsctl", "--timeout=5", "--if-exists", "get", "bridge", bridge,
                        "external_ids:interleave-run"], capture_output=True, text=True)
    val = p.stdout.strip().strip('"')
    # A bridge we recorded but whose tag never got written (killed mid-creation) is ours by name.
    return p.returncode == 0 and val in (run_id, "")


class RunLock:
    """Exclusive lock on the state directory: a second concurrent run refuses with a clear message.

    On entry, a ledger left by a run that died is cleaned first (its resources, not anyone else's).
    """

    def __init__(self, state_dir=None, log=lambda msg: None):
        self.dir = Path(state_dir or STATE_DIR)
        self.log = log
        self.fd = None
        self.ledger = None

    def __enter__(self):
        self.acquire()
        return self

    def acquire(self):
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except PermissionError:
            raise EnvError(f"cannot create {self.dir}", "run as root (sudo)")
        self.fd = os.open(self.dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            owner = os.pread(self.fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(self.fd)
            self.fd = None
            raise EnvError(f"another interleave run (pid {owner}) is using the fabric",
                           "wait for it to finish, or stop it (Ctrl-C / kill its pid); "
                           "then run again")
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)
        self.clean_stale()
        self.ledger = Ledger(self.dir / "ledger.json")
        self.ledger._save()
        return self.ledger

    def clean_stale(self):
        """Remove what a dead run recorded. Returns True if there was something."""
        stale = Ledger.load(self.dir / "ledger.json")
        if stale is None:
            return False
        self.log(f"cleaning leftovers of an earlier run (pid {stale.data.get('pid')})")
        stale.clean(self.log)
        return True

    def release(self):
        if self.ledger is not None:
            self.ledger.clean(self.log)
            self.ledger = None
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def __exit__(self, *exc):
        self.release()
