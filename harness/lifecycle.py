"""Scoped lifecycle: one run at a time, and a ledger of everything a run creates.

Naming rules: every kernel object a run creates carries the ``il`` prefix (bridges ``ils1``,
switch ports ``ils1-eth2``); OVS bridges also carry ``external_ids:interleave-run=<run id>``.
Host namespaces are not named (Mininet holds them open with a shell process); the ledger records
each one's shell pid, its process start time and its netns inode, and every process a run starts
inherits ``INTERLEAVE_RUN=<run id>`` in its environment: a later clean kills a process only when
it is in a recorded namespace *and* carries that marker, so a reused inode number never makes a
stranger's process ours.

Global settings are changed only through the ledger, which records the old value first: sysctls
(``Ledger.set_sysctl``) and a daemon's scheduling group (``Ledger.set_autogroup``); clean restores
each when it still holds what we wrote (the same process, for a group). Removals that fail stay in the ledger
(the next start or ``interleave clean`` retries them), and teardown runs with SIGINT, SIGTERM and
SIGHUP blocked so that a second Ctrl-C cannot cut it short.

The ledger (``<state dir>/ledger.json``) is written *before* each resource is created, so a run
killed at any point leaves a record that the next start (or ``interleave clean``) removes. Never a
global cleanup: no ``mn -c``, no kill by process name, no deletion of bridges we did not record.
"""
import errno
import fcntl
import json
import os
import shutil
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


MARKER = "INTERLEAVE_RUN"


def carries_marker(pid, run_id):
    """True if ``pid``'s environment has ``INTERLEAVE_RUN=<run_id>`` (it was started by that run)."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"{MARKER}={run_id}".encode() in env


def read_autogroup_nice(pid):
    """The nice of ``pid``'s scheduling group: /proc/PID/autogroup reads '/autogroup-N nice K'."""
    return int(Path(f"/proc/{pid}/autogroup").read_text().split()[-1])


def write_autogroup_nice(pid, nice):
    Path(f"/proc/{pid}/autogroup").write_text(str(nice))


def _same_process(rec):
    return rec.get("starttime") is not None and proc_starttime(rec["pid"]) == rec["starttime"]


class Ledger:
    """The record of one run's resources, persisted after every change."""

    def __init__(self, path, data=None):
        self.path = Path(path)
        self.data = data or {"pid": os.getpid(), "run_id": f"{os.getpid()}-{int(time.time())}",
                             "started": time.time(), "processes": [], "namespaces": [], "bridges": [],
                             "links": [], "files": [], "dirs": [], "bpf_pins": [], "sysctls": [], "autogroups": []}

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
        if item not in self.data.setdefault(kind, []):
            self.data[kind].append(item)
            self._save()

    def add_process(self, pid, what):
        self.add("processes", {"pid": pid, "starttime": proc_starttime(pid), "what": what})

    def set_sysctl(self, key, value):
        """Set a root-namespace sysctl, recording the old value first; restored on clean if it still
        holds what we wrote (compared as a set of words: the kernel may print lists in its own order)."""
        path = Path("/proc/sys", key.replace(".", "/"))
        old = path.read_text().strip()
        if not same_sysctl(old, value):
            self.add("sysctls", {"key": key, "old": old, "new": value})
            path.write_text(value)

    def set_autogroup(self, pid, what, nice):
        """Set the nice of process ``pid``'s scheduling group (/proc/PID/autogroup), recording the
        process and the old value first; restored on clean if the process and our value are still there."""
        old = read_autogroup_nice(pid)
        if old != nice:
            self.add("autogroups", {"pid": pid, "starttime": proc_starttime(pid), "what": what,
                                    "old": old, "new": nice})
            write_autogroup_nice(pid, nice)

    def add_namespace(self, pid, what):
        self.add("namespaces", {"pid": pid, "starttime": proc_starttime(pid), "inode": netns_inode(pid),
                                "what": what})

    # ---- removal ---------------------------------------------------------
    def clean(self, log=lambda msg: None):
        """Remove everything recorded; tolerate what is already gone. What could not be removed
        stays in the ledger (saved) and is retried by the next clean; returns the list of it."""
        with signals_blocked():
            left = self._clean(log)
            if left:
                self._save()
                log("could not remove: " + ", ".join(left[:8]) + (" ..." if len(left) > 8 else "")
                    + "; kept in the ledger, retried by the next run or `interleave clean`")
            else:
                try:
                    self.path.unlink()
                except FileNotFoundError:
                    pass
            return left

    def _clean(self, log):
        d, run_id = self.data, self.data["run_id"]
        keep = {k: [] for k in ("processes", "namespaces", "bridges", "links", "files", "dirs", "bpf_pins",
                                "sysctls", "autogroups")}
        for rec in d["processes"]:
            if _same_process(rec):
                log(f"stopping {rec['what']} (pid {rec['pid']})")
                if not _kill(rec["pid"]):
                    keep["processes"].append(rec)
        for rec in d["namespaces"]:
            if not rec.get("inode"):
                continue
            stuck = [pid for pid in pids_in_netns(rec["inode"])
                     if pid != os.getpid() and carries_marker(pid, run_id) and not _kill(pid)]
            if stuck:
                keep["namespaces"].append(rec)
        if d["bridges"]:
            p = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True, text=True)
            if p.returncode:
                keep["bridges"] = list(d["bridges"])     # OVS not answering: retry later
            else:
                existing = set(p.stdout.split())
                ours = [b for b in d["bridges"] if b in existing and _bridge_is_ours(b, run_id)]
                if ours:
                    log(f"deleting {len(ours)} OVS bridge(s)")
                    subprocess.run(["ovs-vsctl", "--timeout=10"] +
                                   [a for b in ours for a in ("--", "--if-exists", "del-br", b)],
                                   capture_output=True)
                    after = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True, text=True)
                    keep["bridges"] = [b for b in ours if after.returncode or b in after.stdout.split()]
        for dev in d["links"]:
            if Path("/sys/class/net", dev).exists():
                subprocess.run(["ip", "link", "del", dev], capture_output=True)
                if Path("/sys/class/net", dev).exists():
                    keep["links"].append(dev)
        for rec in reversed(d.get("sysctls", [])):
            path = Path("/proc/sys", rec["key"].replace(".", "/"))
            try:
                if same_sysctl(path.read_text().strip(), rec["new"]):
                    path.write_text(rec["old"])
            except OSError:
                keep["sysctls"].insert(0, rec)
        for rec in reversed(d.get("autogroups", [])):
            try:
                if _same_process(rec) and read_autogroup_nice(rec["pid"]) == rec["new"]:
                    write_autogroup_nice(rec["pid"], rec["old"])
            except (OSError, ValueError):
                if _same_process(rec):
                    keep["autogroups"].insert(0, rec)
        for kind in ("bpf_pins", "files"):
            for p in d[kind]:
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
                except OSError:
                    keep[kind].append(p)
        for p in d.get("dirs", []):
            shutil.rmtree(p, ignore_errors=True)
            if Path(p).exists():
                keep["dirs"].append(p)
        d.update(keep)
        return [f"{k}: {x.get('what', x.get('key', x)) if isinstance(x, dict) else x}"
                for k, items in keep.items() for x in items]


def die_with_parent():
    """In a child before exec (``preexec_fn``): SIGKILL when the run's process dies, even between
    its creation and the ledger entry (prctl PR_SET_PDEATHSIG)."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def same_sysctl(a, b):
    """Two sysctl values are the same setting: equal, or the same words in another order."""
    return a == b or sorted(a.split()) == sorted(b.split())


class signals_blocked:
    """Block SIGINT/SIGTERM/SIGHUP for a block (teardown); delivered when it ends. Reentrant."""
    SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}

    def __enter__(self):
        self.old = signal.pthread_sigmask(signal.SIG_BLOCK, self.SIGNALS)
        return self

    def __exit__(self, *exc):
        signal.pthread_sigmask(signal.SIG_SETMASK, self.old)


def _kill(pid, grace=1.0):
    """SIGTERM, then SIGKILL after ``grace``; True once the process is gone (or a zombie)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.time() + grace
    while time.time() < deadline:
        if not _alive(pid):
            return True
        # reap if it is our child
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.02)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    for _ in range(100):
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return False


def _alive(pid):
    """Running (a zombie has exited: it holds no namespace and no socket)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


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
        waited = 0.0
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            owner = os.pread(self.fd, 64, 0).decode(errors="replace").strip()
            # a doctor's probe (or a holder between taking the lock and writing its pid) lets go
            # within a second or two: wait for it rather than fail
            if (not owner or owner.startswith(PROBE_OWNER)) and waited < PROBE_WAIT_S:
                time.sleep(0.1)
                waited += 0.1
                continue
            os.close(self.fd)
            self.fd = None
            raise EnvError(f"another interleave run (pid {owner or '?'}) is using the fabric",
                           "wait for it to finish, or stop it (Ctrl-C / kill its pid); "
                           "then run again")
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)
        self.clean_stale()
        self.ledger = Ledger(self.dir / "ledger.json")
        self.ledger._save()
        os.environ[MARKER] = self.ledger.run_id      # inherited by everything this run starts
        return self.ledger

    def clean_stale(self):
        """Remove what a dead run recorded (and probe links of dead ``doctor`` processes).
        Returns True if there was something."""
        clean_probe_links(self.log)
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
            os.environ.pop(MARKER, None)
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def __exit__(self, *exc):
        self.release()


PROBE_LINK = "ilprobe"


def clean_probe_links(log=lambda msg: None):
    """Delete ``ilprobe<pid>a`` veths whose ``doctor`` process (pid, which names them) is gone."""
    for dev in Path("/sys/class/net").glob(PROBE_LINK + "*a"):
        pid = dev.name[len(PROBE_LINK):-1]
        if pid.isdigit() and not _alive(int(pid)):
            log(f"deleting probe link {dev.name} of a dead doctor (pid {pid})")
            subprocess.run(["ip", "link", "del", dev.name], capture_output=True)


PROBE_OWNER = "doctor-probe"     # what a probe writes into the lock file while it holds it
PROBE_WAIT_S = 10.0              # how long a run waits for a probe to let go of the lock


class probe_lock:
    """Held while ``doctor`` touches the kernel: the run lock, taken without waiting. ``busy`` is
    True when a run holds it (the probe then must not load or unlink BPF pins)."""

    def __init__(self, state_dir=None):
        self.dir = Path(state_dir or STATE_DIR)
        self.fd, self.busy = None, False

    def __enter__(self):
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.busy = True
        else:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, f"{PROBE_OWNER} {os.getpid()}\n".encode(), 0)
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            if not self.busy:
                os.ftruncate(self.fd, 0)
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
