"""Fabric lifecycle: a Mininet network realising a Topology, driven by the fabric controller.

Naming: OVS bridge of switch ``sN`` is ``ilsN`` (dpid N); its port P is interface ``ilsN-ethP``;
host ``hI`` keeps its name and its interface is ``hI-eth0`` inside its namespace.

What ``Fabric.start`` sets up, in order (each resource is in the ledger before it exists):
  0. with the userspace datapath, ovs-vswitchd's scheduling group raised (``harness.vswitchd``);
  1. the controller process (``controllers.launch``) on a free loopback port, given the routes;
  2. hosts (Mininet namespaces), switches (``OVSSwitch``, datapath ``user`` or ``kernel``), links;
  3. hosts: MTU, offloads off (the userspace datapath needs it), TCP ECN + congestion control,
     static ARP, HTB at the link rate on their NIC;
  4. switch ports: MTU (also ``mtu_request`` in OVS), offloads off, HTB + bfifo, the ECN marker;
  5. waits until the controller reports every switch synced (routes installed, barrier acked).
``Fabric.stop`` undoes it; the ledger pass after Mininet's own stop removes anything left.
"""
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from harness import ovsinstance, vswitchd
from harness.errors import EnvError, InterleaveError
from harness.lifecycle import die_with_parent
from harness.qdisc import MARKERS, htb_cmds
from harness.routing import compute_routes

REPO = Path(__file__).resolve().parent.parent
PREFIX = "il"
# TCP buffers of every host namespace (per-namespace sysctls, set inside each host: nothing global).
# A new namespace copies the root's values; these are the ones Mininet's fixLimits() used to give
# them through the root namespace, which every measurement in results/ was taken with.
HOST_TCP_MEM = "10240 87380 16777216"
OFFLOADS = ["tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(argv, input=None):
    p = subprocess.run(argv, input=input, capture_output=True, text=True)
    if p.returncode:
        raise InterleaveError(f"{' '.join(argv[:3])} failed: {(p.stderr or p.stdout).strip()[:400]}")
    return p.stdout


def tc_batch(cmds):
    """Run many ``tc`` argv lists in one ``tc -batch`` process."""
    if cmds:
        _run(["tc", "-force", "-batch", "-"], input="\n".join(" ".join(c[1:]) for c in cmds) + "\n")


def _raise_rlimits():
    """This process's open-file and process limits as Mininet wants them (process-local)."""
    import resource
    for which, want in ((resource.RLIMIT_NOFILE, 16384), (resource.RLIMIT_NPROC, 8192)):
        soft, hard = resource.getrlimit(which)
        if soft != resource.RLIM_INFINITY and soft < want:
            hard = hard if hard == resource.RLIM_INFINITY or hard >= want else want
            try:
                resource.setrlimit(which, (want, hard))
            except (ValueError, OSError):
                pass


class ControllerClient:
    """JSON-lines client of the controller's control socket."""

    def __init__(self, path):
        self.path = str(path)

    def call(self, op, timeout=10.0, **kw):
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(timeout)
            s.connect(self.path)
            f = s.makefile("rw")
            f.write(json.dumps({"op": op, **kw}) + "\n")
            f.flush()
            resp = json.loads(f.readline())
        if not resp.get("ok"):
            raise InterleaveError(f"controller: {resp.get('error')}")
        return resp


class Fabric:
    """A running emulated network. Use as a context manager, or call start()/stop()."""

    def __init__(self, topo, ledger, state_dir, datapath="user", marker="bpf", cc="cubic",
                 pins=None, instances=1, log=lambda msg: None):
        self.topo, self.ledger, self.state_dir = topo, ledger, Path(state_dir)
        self.datapath, self.cc, self.log = datapath, cc, log
        if instances > 1 and datapath != "user":
            raise EnvError(f"{instances} ovs-vswitchd instances are for the userspace datapath, not {datapath}",
                           "run with one instance, or --datapath user")
        self.instances = ovsinstance.instances(instances, self.state_dir)
        self.instance_of = {s: self.instances[i] for s, i in ovsinstance.assign(topo.switches, instances).items()}
        self.marker = MARKERS[marker]() if isinstance(marker, str) else marker
        if not getattr(self.marker, "per_job_queues", False) and any(l.params.sharing != "fifo" for l in topo.links):
            raise EnvError(f"link.sharing fair and priority are built for the bpf ECN marker only, not {self.marker.name}",
                           "run with --ecn-marker bpf, or link.sharing fifo")
        self.routes = compute_routes(topo, pins)
        self.net = None
        self.controller = None
        self.control_path = self.state_dir / "controller.sock"
        self.timings = {}
        self.settings = {}      # host settings held for the run (harness.vswitchd)

    @property
    def own_instances(self):
        """The OVS instances this run starts (all but the system's)."""
        return [inst for inst in self.instances if inst.rundir]

    # ---- names ----------------------------------------------------------
    def bridge(self, switch):
        return PREFIX + switch

    def port_dev(self, node, port):
        return f"{self.bridge(node)}-eth{port}" if node in self.topo.switches else f"{node}-eth{port}"

    def switch_ports(self):
        """[(dev, link params, link, direction id)] for every switch egress port."""
        out = []
        for link in self.topo.links:
            for did, frm, _to, port in link.directions():
                if frm in self.topo.switches:
                    out.append((self.port_dev(frm, port), link.params, link, did))
        return out

    def host(self, name):
        return self.net.get(name)

    # ---- lifecycle ------------------------------------------------------
    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        t0 = time.monotonic()
        self._record_plan()
        for inst in self.own_instances:
            inst.start(self.ledger, self.log)
        if self.datapath == "user":
            self.settings["vswitchd_group_nice"] = vswitchd.raise_group(self.ledger, self.log)
            for inst in self.own_instances:
                vswitchd.raise_group(self.ledger, self.log, of=inst.pid())
        self._start_controller()
        self._build_mininet()
        t_net = time.monotonic()
        self._configure_hosts()
        self._configure_switch_ports()
        self.wait_synced()
        self.timings["build_s"] = time.monotonic() - t0
        self.timings["mininet_s"] = t_net - t0
        self.log(f"fabric up: {len(self.topo.hosts)} hosts, {len(self.topo.switches)} switches "
                 f"in {self.timings['build_s']:.1f} s")
        return self

    def _record_plan(self):
        led = self.ledger
        for s in self.topo.switches:
            led.add("bridges", self.bridge(s))
        # the switch ends are enough: deleting one end of a veth pair deletes both, so a host end
        # left in the root namespace by a run killed mid-build goes with it (and a root-namespace
        # "hN-eth0" that is not ours is never touched)
        for dev, *_ in self.switch_ports():
            led.add("links", dev)
        for p in self.marker.pins():
            led.add("bpf_pins", p)

    def _start_controller(self):
        fabric_file = self.state_dir / "fabric.json"
        fabric_file.write_text(json.dumps({
            "topology": self.topo.to_dict(),
            "routes": {f"{s}>{d}": p for (s, d), p in self.routes.items()},
            "control": str(self.control_path)}))
        self.ledger.add("files", str(fabric_file))
        self.ledger.add("files", str(self.control_path))
        if self.control_path.exists():
            self.control_path.unlink()
        self.ofp_port = free_port()
        log = open(self.state_dir / "controller.log", "w")
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   PYTHONWARNINGS="ignore")
        self.controller = subprocess.Popen(
            [sys.executable, "-m", "controllers.launch", "--fabric", str(fabric_file),
             "--ofp-port", str(self.ofp_port)], stdout=log, stderr=subprocess.STDOUT, env=env,
            cwd=str(REPO), start_new_session=True, preexec_fn=die_with_parent)
        self.ledger.add_process(self.controller.pid, "controller")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.controller.poll() is not None:
                raise EnvError("the controller exited at start: see " + str(self.state_dir / "controller.log"),
                               "sudo make setup (installs os-ken)")
            try:
                self.client().call("status", timeout=1)
                return
            except (OSError, ValueError):
                time.sleep(0.1)
        raise EnvError("the controller did not come up within 20 s", "see " + str(self.state_dir / "controller.log"))

    def client(self):
        return ControllerClient(self.control_path)

    def _build_mininet(self):
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        from mininet.node import OVSSwitch, RemoteController
        from mininet.util import errRun

        setLogLevel("error")
        run_id = self.ledger.run_id
        # Mininet.init() would run fixLimits(), which rewrites global sysctls (tcp_rmem, rmem_max,
        # netdev_max_backlog, ...) and never restores them; it only raises this process's rlimits
        # otherwise, which we do ourselves. Host namespaces get their TCP buffers in _configure_hosts.
        Mininet.inited = True
        _raise_rlimits()

        class TaggedOVSSwitch(OVSSwitch):
            """OVSSwitch whose bridge carries our run id, so cleanup can prove ownership."""

            def bridgeOpts(self):
                return super().bridgeOpts() + f" external_ids:interleave-run={run_id}"

        def instance_class(inst):
            """The switch class of an extra OVS instance: every ovs-* command it runs goes to that instance
            (Mininet groups switches by class for its batched start and stop)."""
            def run_there(cmd, *args, **kw):
                return errRun(inst.shell(cmd), *args, shell=True)

            class InstanceSwitch(TaggedOVSSwitch):
                def startShell(self, *args, **kw):
                    super().startShell(*args, **kw)
                    self.cmd(f"export OVS_RUNDIR={inst.rundir}")

                def bridgeOpts(self):
                    return super().bridgeOpts().replace("datapath_type=netdev", f"datapath_type={inst.datapath_type}")

                @classmethod
                def batchStartup(cls, switches, run=errRun):
                    return super().batchStartup(switches, run=run_there)

                @classmethod
                def batchShutdown(cls, switches, run=errRun):
                    return super().batchShutdown(switches, run=run_there)
            InstanceSwitch.__name__ = InstanceSwitch.__qualname__ = f"OVSSwitch_{inst.rundir.name}"
            return InstanceSwitch

        classes = {inst: instance_class(inst) if inst.rundir else TaggedOVSSwitch for inst in self.instances}

        class ReadyController(RemoteController):
            """The controller is known to be up (its control socket answered): Mininet's own check
            runs telnet against the OpenFlow port and can crash decoding the HELLO's random bytes."""

            def checkListening(self):
                pass

        net = Mininet(build=False, autoSetMacs=False, autoStaticArp=False, controller=None,
                      waitConnected=False, cleanup=False)
        self.net = net
        net.addController(ReadyController("c0", ip="127.0.0.1", port=self.ofp_port))
        for h in self.topo.hosts:
            node = net.addHost(h, ip=f"{self.topo.ip(h)}/8", mac=self.topo.mac(h))
            self.ledger.add_namespace(node.pid, h)
        for s in self.topo.switches:
            net.addSwitch(self.bridge(s), cls=classes[self.instance_of[s]], dpid=f"{self.topo.dpid(s):016x}",
                          datapath=self.datapath, protocols="OpenFlow13", batch=True)
        for link in self.topo.links:
            a = net.get(self.bridge(link.a) if link.a in self.topo.switches else link.a)
            b = net.get(self.bridge(link.b) if link.b in self.topo.switches else link.b)
            net.addLink(a, b, port1=link.a_port, port2=link.b_port)
        net.build()
        net.start()

    def in_host(self, host, script, input=None, check=True):
        """Run a shell script inside ``host``'s namespace (synchronously, with its exit status)."""
        p = subprocess.run(["mnexec", "-a", str(self.net.get(host).pid), "sh", "-c", script],
                           input=input, capture_output=True, text=True)
        if check and p.returncode:
            raise InterleaveError(f"on {host}: {script.splitlines()[0][:80]}: {(p.stderr or p.stdout).strip()[:300]}")
        return p.stdout

    def _allow_cc(self):
        """Host namespaces may only pick congestion controls the root namespace allows."""
        key = "net.ipv4.tcp_allowed_congestion_control"
        allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text().split()
        if self.cc not in allowed:
            self.ledger.set_sysctl(key, " ".join(allowed + [self.cc]))

    def _configure_hosts(self):
        self._allow_cc()
        arp = [(self.topo.ip(h), self.topo.mac(h)) for h in self.topo.hosts]
        for h in self.topo.hosts:
            p = self.topo.link_between(h, self.topo.edge_of(h)).params
            dev = f"{h}-eth0"
            neigh = "".join(f"neigh replace {ip} lladdr {mac} dev {dev} nud permanent\n"
                            for ip, mac in arp if ip != self.topo.ip(h))
            script = "\n".join([
                "set -e",
                f"ip link set {dev} mtu {p.mtu}",
                f"ethtool -K {dev} {' '.join(OFFLOADS)} >/dev/null 2>&1 || true",
                f"sysctl -qw net.ipv4.tcp_ecn=1 net.ipv4.tcp_congestion_control={self.cc}",
                f"sysctl -qw net.ipv4.tcp_rmem='{HOST_TCP_MEM}' net.ipv4.tcp_wmem='{HOST_TCP_MEM}'",
                *(" ".join(c) for c in htb_cmds(dev, p, classes="priority" if p.sharing == "priority" else "fifo")),
                "ip -batch -",
            ])
            self.in_host(h, script, input=neigh)

    def _configure_switch_ports(self):
        ports = self.switch_ports()
        mtus = {dev: p.mtu for dev, p, *_ in ports}
        _run(["ip", "-batch", "-"], input="".join(f"link set {d} mtu {m}\n" for d, m in mtus.items()))
        owner = {self.port_dev(frm, port): frm for link in self.topo.links
                 for _did, frm, _to, port in link.directions() if frm in self.topo.switches}
        for inst in self.instances:
            vs = inst.tool("ovs-vsctl", "--timeout=20")
            for dev, mtu in mtus.items():
                if self.instance_of[owner[dev]] is inst:
                    vs += ["--", "set", "interface", dev, f"mtu_request={mtu}"]
            _run(vs)
        for dev in mtus:
            subprocess.run(["ethtool", "-K", dev, *OFFLOADS], capture_output=True)
        cmds = []
        for dev, params, *_ in ports:
            cmds += self.marker.queue_cmds(dev, params)
        tc_batch(cmds)
        self.ifindex = {dev: int(Path(f"/sys/class/net/{dev}/ifindex").read_text()) for dev in mtus}
        self.marker.configure({self.ifindex[dev]: params for dev, params, *_ in ports})

    def wait_synced(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        want = set(self.topo.dpid(s) for s in self.topo.switches)
        st = {}
        while time.monotonic() < deadline:
            st = self.client().call("status")
            if want <= set(st["synced"]):
                return st
            time.sleep(0.1)
        raise InterleaveError(f"switches not synced with the controller after {timeout:.0f} s: "
                              f"connected {st.get('connected')}, synced {st.get('synced')}")

    def installed_routes(self):
        """The controller's record of what it installed (acknowledged entries, walked)."""
        return self.client().call("routes")["routes"]

    def switch_routes(self):
        """Routes read back from the switches themselves (``ovs-ofctl dump-flows`` of every bridge),
        walked hop by hop: {"src>dst": path or None}."""
        from controllers.flows import COOKIE_ROUTE
        from harness.routing import parse_route_flows, walk_flows
        tables = {s: parse_route_flows(_run(self.instance_of[s].tool("ovs-ofctl", "-O", "OpenFlow13", "--no-names", "dump-flows",
                                             self.bridge(s))), COOKIE_ROUTE) for s in self.topo.switches}
        return {f"{a}>{b}": walk_flows(self.topo, tables, a, b) for (a, b) in self.routes}

    def switch_ce_counters(self):
        """{dpid: {"srcmac>dstmac": packets}} of the CE-counting entries, read from the switches
        themselves (``ovs-ofctl dump-flows``), as the controller's samples report them."""
        from controllers.flows import COOKIE_CE
        from harness.routing import parse_ce_flows
        return {self.topo.dpid(s): parse_ce_flows(_run(self.instance_of[s].tool(
                    "ovs-ofctl", "-O", "OpenFlow13", "--no-names", "dump-flows", self.bridge(s),
                    f"cookie={COOKIE_CE:#x}/-1")), COOKIE_CE)
                for s in self.topo.switches}

    def pin(self, src, dst, path):
        from harness.routing import check_path
        check_path(self.topo, src, dst, path)
        self.client().call("pin", src=src, dst=dst, path=list(path))
        self.routes[(src, dst)] = list(path)
        self.wait_synced()

    def marker_counters(self):
        """{dev: counters} of every switch egress port from the ECN marker."""
        return self.marker.counters(self.ifindex)

    def _kill_host_processes(self):
        """Anything still running inside our host namespaces (daemons included) would keep the
        namespace and its veth alive after Mininet stops the host shells."""
        from harness.lifecycle import _kill, pids_in_netns
        shells = {rec["pid"] for rec in self.ledger.data["namespaces"]}
        for rec in self.ledger.data["namespaces"]:
            for pid in pids_in_netns(rec["inode"]):
                if pid not in shells and pid != os.getpid():
                    _kill(pid, grace=0.5)

    def stop(self):
        from harness.lifecycle import signals_blocked
        with signals_blocked():
            self._stop()

    def _stop(self):
        t0 = time.monotonic()
        if self.net is not None:
            self._kill_host_processes()
            try:
                self.net.stop()
            except Exception as exc:  # the ledger pass below removes what is left
                self.log(f"mininet stop: {exc}")
            self.net = None
        if self.controller is not None:
            self.controller.terminate()
            try:
                self.controller.wait(5)
            except subprocess.TimeoutExpired:
                self.controller.kill()
                self.controller.wait()
            self.controller = None
        for inst in self.own_instances:
            inst.stop()
        self.marker.cleanup()
        self.timings["teardown_s"] = time.monotonic() - t0
