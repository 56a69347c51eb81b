"""Capability probe behind ``interleave doctor``: what this machine can do, and the backends a run
will use. Probes that touch the kernel use a veth pair named ``ilprobe<pid>a/b`` that the probe
creates and deletes itself (``clean`` deletes one whose doctor died), under the run lock taken
without waiting: while a run holds it, the BPF probe is skipped (``null``) so that it cannot race
the run's pinned maps. Without root they are reported as ``null`` (unknown) and the choice is
predicted from what can be read (``/sys/module``, ``/proc``).

Backends (chosen by name, overridable with ``--datapath`` / ``--ecn-marker`` / ``--vswitchd-instances``):
  datapath            ``kernel`` (openvswitch module) | ``user`` (OVS userspace datapath, netdev)
  ecn_marker          ``red`` (tc RED, step marking) | ``bpf`` (tc clsact BPF virtual queue)
  vswitchd_instances  with ``user``: how many ovs-vswitchd share the switches (harness.ovsinstance);
                      ``DEFAULT_VSWITCHD_INSTANCES`` unless overridden, 1 with ``kernel``
"""
import os
import re
import shutil
import subprocess
from pathlib import Path

from harness.errors import EnvError, UsageError
from harness.lifecycle import PROBE_LINK, clean_probe_links, probe_lock
from harness.qdisc import BPF_OBJECT, BpfMarker

WMEM_WANTED = 8 * 1024 * 1024
# Datapaths the RED marker works with. Measured in the stock-kernel guest (make vm-test): with the
# userspace datapath, RED marked 0 of the congested packets and dropped 56 as "early" drops, since
# OVS's packet-socket transmits reach the qdisc untagged as IP and RED cannot set CE on them.
RED_DATAPATHS = ("kernel",)
# One: a second instance raises the capacity under the benchmark's full load but costs more CPU per
# packet at an experiment's load, where the agents need that CPU (docs/machines.md, "Benchmark:
# emulated capacity": measured both ways). --vswitchd-instances 2 is for all-to-all-heavy runs.
DEFAULT_VSWITCHD_INSTANCES = 1


def _run(argv, timeout=5):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)


def _read(path, default=""):
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


def module_present(name):
    """Built in or loaded (``/sys/module``), or loadable (``modprobe -n``)."""
    if Path("/sys/module", name).exists():
        return True
    if shutil.which("modprobe") and Path("/lib/modules", os.uname().release).exists():
        return _run(["modprobe", "-n", "-q", name])[0] == 0
    return False


class _ProbeLink:
    """A veth pair that exists only for the duration of a probe, named for this process's pid so
    that ``clean`` can tell a dead doctor's link from a live one (``lifecycle.clean_probe_links``)."""

    def __enter__(self):
        self.dev = f"{PROBE_LINK}{os.getpid()}a"
        peer = self.dev[:-1] + "b"
        rc, out = _run(["ip", "link", "add", self.dev, "type", "veth", "peer", "name", peer])
        if rc:
            raise OSError(out)
        return self.dev

    def __exit__(self, *exc):
        _run(["ip", "link", "del", self.dev])


def probe_qdiscs():
    """{red, netem, htb, clsact, bpf} -> True/False by trying each on a throwaway veth."""
    tries = {
        "htb": [["tc", "qdisc", "add", "dev", "{dev}", "root", "handle", "1:", "htb"]],
        "red": [["tc", "qdisc", "add", "dev", "{dev}", "root", "red", "limit", "100000", "min", "10000",
                 "max", "20000", "avpkt", "1000", "burst", "11", "bandwidth", "10mbit", "probability", "1", "ecn"]],
        "netem": [["tc", "qdisc", "add", "dev", "{dev}", "root", "netem", "delay", "1ms"]],
        "clsact": [["tc", "qdisc", "add", "dev", "{dev}", "clsact"]],
        "bpf": [["tc", "qdisc", "add", "dev", "{dev}", "clsact"],
                ["tc", "filter", "add", "dev", "{dev}", "egress", "bpf", "da", "obj", str(BPF_OBJECT),
                 "sec", "classifier"]],
    }
    result = {}
    with probe_lock() as lock:
        clean_probe_links()
        pins_before = {p for p in BpfMarker().pins() if os.path.exists(p)}
        for name, cmds in tries.items():
            if name == "bpf" and (lock.busy or not BPF_OBJECT.exists()):
                # a run holds the lock: loading the object could race its pins; not probed
                result[name] = None if BPF_OBJECT.exists() else False
                continue
            with _ProbeLink() as dev:
                result[name] = all(_run([a.replace("{dev}", dev) for a in c])[0] == 0 for c in cmds)
        if not lock.busy:
            for pin in BpfMarker().pins():
                if pin not in pins_before and os.path.exists(pin):
                    os.unlink(pin)
    return result


def ovs_status():
    rc, out = _run(["ovs-vsctl", "--version"])
    version = re.search(r"(\d+\.\d+\.\d+)", out).group(1) if rc == 0 and re.search(r"\d+\.\d+\.\d+", out) else None
    db = _run(["ovs-vsctl", "-t", "2", "show"])[0] == 0 if version else False
    vswitchd = _run(["ovs-appctl", "-t", "ovs-vswitchd", "version"])[0] == 0 if version else False
    from harness.ovsinstance import SCHEMA
    return {"installed": version is not None, "version": version, "ovsdb_server": db, "ovs_vswitchd": vswitchd,
            "schema": SCHEMA.exists()}


def python_modules():
    found = {}
    for mod in ("mininet", "os_ken", "networkx", "yaml"):
        try:
            __import__(mod)
            found[mod] = True
        except Exception:
            found[mod] = False
    return found


def readable_exists(path):
    """Whether ``path`` exists, False where this user may not look (/sys/fs/bpf is root's: doctor
    runs without root too)."""
    try:
        return Path(path).exists()
    except OSError:
        return False


def doctor(root=None):
    """Probe the machine; return the findings and the chosen backends as a JSON-able dict."""
    root = os.geteuid() == 0 if root is None else root
    cc_avail = _read("/proc/sys/net/ipv4/tcp_available_congestion_control").split()
    findings = {
        "root": root,
        "kernel": os.uname().release,
        "ovs": ovs_status(),
        "kernel_ovs_datapath": module_present("openvswitch"),
        "tools": {t: shutil.which(t) is not None for t in
                  ("mnexec", "tc", "ip", "ethtool", "bpftool", "clang", "iperf3", "fping")},
        "bpf_object": BPF_OBJECT.exists(),
        "bpffs": readable_exists("/sys/fs/bpf/tc") or Path("/sys/fs/bpf").is_dir(),
        "dctcp": "dctcp" in cc_avail or module_present("tcp_dctcp"),
        "congestion_controls": cc_avail,
        "tcp_ecn_root_ns": _read("/proc/sys/net/ipv4/tcp_ecn", None),
        "wmem_default": int(_read("/proc/sys/net/core/wmem_default", "0") or 0),
        "python": python_modules(),
    }
    if root:
        try:
            findings["qdiscs"] = probe_qdiscs()
        except OSError as exc:
            findings["qdiscs"] = {"error": str(exc)}
    else:
        findings["qdiscs"] = {k: None for k in ("htb", "red", "netem", "clsact", "bpf")}
        findings["qdiscs"]["red"] = module_present("sch_red") or None
    findings["backends"], findings["problems"] = choose_backends(findings)
    return findings


def choose_backends(f):
    """Pick datapath / ecn_marker / congestion control; list problems with their fixes."""
    problems = []
    q = f["qdiscs"]
    datapath = "kernel" if f["kernel_ovs_datapath"] else "user"
    backends = {
        "datapath": datapath,
        "ecn_marker": "red" if q.get("red") and datapath in RED_DATAPATHS else ("bpf" if q.get("bpf") is not False else None),
        "congestion_control": "dctcp" if f["dctcp"] else "cubic",
        "link_delay": "netem" if q.get("netem") else None,
        "vswitchd_instances": DEFAULT_VSWITCHD_INSTANCES if datapath == "user" else 1,
    }
    if q.get("red") is None and q.get("bpf") is None:
        backends["ecn_marker"] = "bpf (predicted; probing needs root)"
    if not f["root"]:
        problems.append({"problem": "not root: cannot build a network", "fix": "run with sudo"})
    ovs = f["ovs"]
    if not ovs["installed"]:
        problems.append({"problem": "Open vSwitch is not installed", "fix": "sudo make setup"})
    elif not (ovs["ovsdb_server"] and ovs["ovs_vswitchd"]) and f["root"]:
        # without root their sockets cannot be opened: whether they run is not known
        problems.append({"problem": "Open vSwitch daemons are not running", "fix": "sudo scripts/setup.sh (starts them)"})
    if not f["tools"]["mnexec"] or not f["python"]["mininet"]:
        problems.append({"problem": "Mininet (Debian package, with mnexec) is missing", "fix": "sudo make setup"})
    if not f["python"]["os_ken"]:
        problems.append({"problem": "os-ken is not importable", "fix": "sudo make setup (installs it into .venv)"})
    if backends["ecn_marker"] is None:
        fix = ("sudo make setup (compiles harness/bpf/ecn_marker.c)" if not f["bpf_object"]
               else "a kernel with sch_red, or with clsact + cls_bpf")
        red = "sch_red missing" if not q.get("red") else "RED cannot mark what the userspace datapath sends"
        problems.append({"problem": f"no ECN marker: {red} and the BPF marker does not load", "fix": fix})
    if backends["datapath"] == "user" and f["wmem_default"] < WMEM_WANTED:
        problems.append({"problem": f"net.core.wmem_default={f['wmem_default']} is below {WMEM_WANTED}: "
                                    "OVS userspace drops packets on throttled ports outside the queue",
                         "fix": "sudo scripts/setup.sh (raises it, then restart ovs-vswitchd)"})
    if backends["link_delay"] is None:
        backends["link_delay_note"] = "no sch_netem: links have no emulated delay or loss on this machine"
    return backends, problems


def resolve(findings, datapath=None, ecn_marker=None, delay=False, instances=None):
    """Backends for a run: the doctor's choice, or the user's override if the machine can do it.
    A ``--datapath`` override without ``--ecn-marker`` keeps a marker that works with it (and with
    ``kernel``, one vswitchd instance); ``delay``: the links have a propagation delay, which needs
    netem; ``instances``: how many ovs-vswitchd share the switches (userspace datapath)."""
    b = dict(findings["backends"])
    b.setdefault("vswitchd_instances", 1)
    if delay and b["link_delay"] is None:
        raise EnvError("links with a propagation delay (link.delay_ms) need sch_netem, which this kernel lacks",
                       "set link.delay_ms to 0 here, or run on a stock kernel (the Vagrant VM; make vm-test)")
    if datapath is not None:
        if datapath not in ("kernel", "user"):
            raise UsageError(f"--datapath: {datapath!r} is not allowed (kernel or user)")
        if datapath == "kernel" and not findings["kernel_ovs_datapath"]:
            raise EnvError("--datapath kernel: this kernel has no openvswitch module",
                           "use --datapath user (the default here)")
        b["datapath"] = datapath
        if datapath == "kernel":
            b["vswitchd_instances"] = 1
        if ecn_marker is None and b["ecn_marker"] == "red" and datapath not in RED_DATAPATHS:
            ecn_marker = "bpf"
    if ecn_marker is not None:
        if ecn_marker not in ("red", "bpf"):
            raise UsageError(f"--ecn-marker: {ecn_marker!r} is not allowed (red or bpf)")
        if not findings["qdiscs"].get(ecn_marker):
            raise EnvError(f"--ecn-marker {ecn_marker}: this machine cannot do it "
                           f"({'no sch_red in the kernel' if ecn_marker == 'red' else 'the BPF marker does not load'})",
                           "omit --ecn-marker to use the doctor's choice")
        if ecn_marker == "red" and b["datapath"] not in RED_DATAPATHS:
            raise EnvError(f"--ecn-marker red with --datapath {b['datapath']}: RED cannot mark what the userspace "
                           "datapath sends (its packet-socket transmits reach the queue without an IP protocol "
                           "tag, so RED drops ECN-capable packets instead of marking them)",
                           "use --ecn-marker bpf with the userspace datapath, or --datapath kernel")
        b["ecn_marker"] = ecn_marker
    if instances is not None:
        if instances < 1:
            raise UsageError(f"--vswitchd-instances: {instances} is not allowed (1 or more)")
        if instances > 1 and b["datapath"] != "user":
            raise EnvError(f"--vswitchd-instances {instances} with --datapath {b['datapath']}: extra vswitchd "
                           "instances are for the userspace datapath (the kernel forwards on every core already)",
                           "omit --vswitchd-instances, or use --datapath user")
        if instances > 1 and not findings["ovs"].get("schema"):
            raise EnvError(f"--vswitchd-instances {instances}: no OVS database schema to create another instance "
                           "from", "sudo make setup (installs openvswitch-switch)")
        b["vswitchd_instances"] = instances
    return b


def require_ready(findings):
    """Raise EnvError with the first problem's fix if a network cannot be built here."""
    for p in findings["problems"]:
        raise EnvError(p["problem"], p["fix"])


def render(f):
    """Human-readable doctor report."""
    yes = lambda v: "yes" if v else ("unknown (needs root)" if v is None else "no")
    q = f["qdiscs"]
    lines = [
        f"root:                    {yes(f['root'])}",
        f"kernel:                  {f['kernel']}",
        f"Open vSwitch:            {f['ovs']['version'] or 'not installed'}"
        f" (ovsdb-server {'up' if f['ovs']['ovsdb_server'] else 'down'},"
        f" ovs-vswitchd {'up' if f['ovs']['ovs_vswitchd'] else 'down'})",
        f"kernel OVS datapath:     {yes(f['kernel_ovs_datapath'])}",
        f"sch_htb:                 {yes(q.get('htb'))}",
        f"sch_red:                 {yes(q.get('red'))}",
        f"sch_netem:               {yes(q.get('netem'))}",
        f"tc BPF (clsact+cls_bpf): {yes(q.get('bpf'))} (object {'built' if f['bpf_object'] else 'missing'},"
        f" clang {'yes' if f['tools']['clang'] else 'no'})",
        f"dctcp:                   {yes(f['dctcp'])} (available: {' '.join(f['congestion_controls'])})",
        f"net.core.wmem_default:   {f['wmem_default']}",
        "",
        "backends a run would use:",
        f"  datapath            {f['backends']['datapath']}",
        f"  ecn_marker          {f['backends']['ecn_marker']}",
        f"  congestion_control  {f['backends']['congestion_control']} (+ECN)",
        f"  link_delay          {f['backends']['link_delay'] or 'none (' + f['backends'].get('link_delay_note', '') + ')'}",
        f"  vswitchd_instances  {f['backends'].get('vswitchd_instances', 1)}"
        + (f" (--vswitchd-instances N: N ovs-vswitchd processes share the switches; extra ones "
           f"{'possible' if f['ovs'].get('schema') else 'impossible: no OVS database schema'})"
           if f['backends']['datapath'] == "user" else ""),
    ]
    if f["problems"]:
        lines += ["", "problems:"] + [f"  - {p['problem']}\n    fix: {p['fix']}" for p in f["problems"]]
    else:
        lines += ["", "ready: this machine can build the emulated fabric"]
    return "\n".join(lines)
