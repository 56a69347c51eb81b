"""``interleave netcheck``: build the fabric, check it works as emulated, tear it down.

Checks (each gives ok, the measured figures, and a one-line detail):
  reachability    every ordered host pair answers one ping (fping from every host at once)
  routes          the routes read back from the switches (``ovs-ofctl dump-flows``, walked hop by
                  hop) and the controller's record of its acknowledged entries equal the computed ones
  delay           (links with delay_ms only) the far pair's smallest round trip carries every link's
                  propagation delay on both routes, plus at most DELAY_SLACK_MS of forwarding time
  shaped_rate     one TCP flow across the fabric reaches the link rate within +-10 % (goodput is
                  compared with rate x payload share of a frame, since HTB counts whole frames)
  ecn_congested   two full-rate flows whose routes meet on a switch-to-switch link (congested_flows):
                  the marker marks and the receivers see CE > 0
  ecn_idle        one flow paced at half the link rate: no marks anywhere, no CE at the receiver (the
                  bound and the "emulator could not keep up" verdict: check_ecn_idle)
  counters        during the congested check (once the controller's samples equal the switches' own
                  counters: telemetry.wait_ce_caught_up), the controller's CE-counting entries saw, on
                  each link the marker marked that has a next switch (at least one: else the check is
                  vacuous and fails), the packets the marker marked (within 1 %), and no CE packet on
                  links off the flows' paths
A check that cannot run (a tool missing) fails with the reason; nothing is skipped silently.
"""
import json
import os
import re
import time
from pathlib import Path

TCP_IP_HEADERS = 52   # IPv4 20 + TCP 20 + timestamps 12
ETH_HEADER = 14


def payload_share(mtu):
    return (mtu - TCP_IP_HEADERS) / (mtu + ETH_HEADER)


def ce_received(fab, host):
    """IpExtInCEPkts of ``host`` (CE-marked IP packets it received)."""
    text = fab.in_host(host, "cat /proc/net/netstat")
    lines = [l.split() for l in text.splitlines() if l.startswith("IpExt:")]
    return int(dict(zip(lines[0][1:], lines[1][1:]))["InCEPkts"])


def iperf(fab, pairs, seconds, rate_bps=None):
    """Run concurrent iperf3 flows [(src, dst)]; return received bits/s of each."""
    servers, clients = [], []
    for i, (_src, dst) in enumerate(pairs):
        servers.append(fab.net.get(dst).popen(["iperf3", "-s", "-1", "-p", str(5201 + i)]))
    time.sleep(0.3)
    for i, (src, dst) in enumerate(pairs):
        argv = ["iperf3", "-c", fab.topo.ip(dst), "-p", str(5201 + i), "-t", str(seconds), "-J"]
        if rate_bps:
            argv += ["-b", str(int(rate_bps)), "--fq-rate", str(int(rate_bps))]
        clients.append(fab.net.get(src).popen(argv))
    rates = []
    for c in clients:
        out, _ = c.communicate(timeout=seconds + 20)
        try:
            rates.append(json.loads(out)["end"]["sum_received"]["bits_per_second"])
        except (ValueError, KeyError):
            rates.append(0.0)
    for s in servers:
        try:
            s.wait(5)
        except Exception:
            s.kill()
    return rates


def _marks(fab):
    return {dev: c.get("marked", 0) for dev, c in fab.marker_counters().items()}


def check_reachability(fab):
    topo = fab.topo
    procs = {}
    for h in topo.hosts:
        others = [topo.ip(o) for o in topo.hosts if o != h]
        procs[h] = fab.net.get(h).popen(["fping", "-c1", "-t1000", "-q", *others])
    failed = []
    for h, p in procs.items():
        _out, err = p.communicate(timeout=30)
        if p.returncode:
            failed += [f"{h}->{line.split()[0]}" for line in err.decode().splitlines() if "100%" in line]
    pairs = len(topo.hosts) * (len(topo.hosts) - 1)
    return {"name": "reachability", "ok": not failed, "pairs": pairs, "unreachable": failed[:20],
            "detail": f"{pairs - len(failed)}/{pairs} host pairs reachable"}


def check_routes(fab):
    recorded, switches = fab.installed_routes(), fab.switch_routes()
    want = {f"{s}>{d}": p for (s, d), p in fab.routes.items()}
    wrong = sorted(k for k in want if switches.get(k) != want[k] or recorded.get(k) != want[k])
    return {"name": "routes", "ok": not wrong, "routes": len(want), "mismatched": wrong[:20],
            "detail": f"{len(want) - len(wrong)}/{len(want)} routes as computed in the switches' flow tables "
                      "and in the controller's record"}


def far_pair(topo):
    """Two hosts whose route is the longest (first such pair in host order)."""
    return topo.hosts[0], topo.hosts[-1]


def check_shaped_rate(fab, seconds=3):
    src, dst = far_pair(fab.topo)
    params = fab.topo.link_between(src, fab.topo.edge_of(src)).params
    expect = params.rate_bps * payload_share(params.mtu)
    got = iperf(fab, [(src, dst)], seconds)[0]
    ratio = got / expect
    return {"name": "shaped_rate", "ok": abs(ratio - 1) <= 0.10, "flow": f"{src}->{dst}",
            "expected_mbps": round(expect / 1e6, 2), "measured_mbps": round(got / 1e6, 2),
            "ratio": round(ratio, 3), "detail": f"{got / 1e6:.1f} of {expect / 1e6:.1f} Mbit/s goodput ({ratio:.1%})"}


PINGS = 20
DELAY_SLACK_MS = 5.0


def parse_ping_rtts(text):
    """Round-trip times (ms) of the replies in ``ping`` output."""
    return [float(m) for m in re.findall(r"time=([0-9.]+) ms", text)]


def check_delay(fab):
    """Links with a propagation delay (netem): the far pair's round trip carries the delay of every
    link of both routes. The smallest of PINGS round trips (small packets: serialization is
    negligible) must lie between that delay and the delay plus DELAY_SLACK_MS (the fabric's own
    forwarding time)."""
    src, dst = far_pair(fab.topo)
    from harness.routing import path_delays
    delay = path_delays(fab.topo)
    expect = delay(fab.routes[(src, dst)]) + delay(fab.routes[(dst, src)])
    out = fab.in_host(src, f"ping -n -q -c {PINGS} -i 0.05 -W 2 {fab.topo.ip(dst)} >/dev/null; "
                           f"ping -n -c {PINGS} -i 0.05 -W 2 {fab.topo.ip(dst)}", check=False)
    rtts = parse_ping_rtts(out)
    lo = min(rtts) if rtts else None
    ok = lo is not None and expect <= lo <= expect + DELAY_SLACK_MS
    return {"name": "delay", "ok": ok, "pair": f"{src}->{dst}", "expected_rtt_ms": round(expect, 3),
            "min_rtt_ms": lo, "median_rtt_ms": sorted(rtts)[len(rtts) // 2] if rtts else None,
            "replies": len(rtts),
            "detail": (f"round trip {src}->{dst}: smallest {lo} ms of {len(rtts)} replies, links' delay "
                       f"{expect:.2f} ms (allowed up to {DELAY_SLACK_MS} ms more)")}


def congested_flows(topo, routes):
    """Two flows (src, dst), different sources and destinations, whose routes first meet on a
    switch-to-switch link and end on different last hops: two full-rate flows then congest that
    link (2 x its rate offered) and no other, so the marks happen where a next switch counts the CE
    packets (a last hop's marks are seen by the receiver only). Longest routes first."""
    from harness.routing import directed_links
    sw = set(topo.switches)
    hosts = topo.hosts
    pairs = sorted(((a, d) for a in hosts for d in hosts if a != d), key=lambda f: (-len(routes[f]), f))
    links = {f: directed_links(routes[f]) for f in pairs}
    for i, f in enumerate(pairs):
        for g in pairs[i + 1:]:
            if f[0] == g[0] or f[1] == g[1]:
                continue
            common = [l for l in links[f] if l in links[g]]
            if common and all(n in sw for n in common[0].split(">")) and links[f][-1] != links[g][-1]:
                return [f, g]
    raise RuntimeError(f"{topo.name}: no two routes share a switch-to-switch link")


def paced_burst_bytes(params, rate_bps):
    """The largest burst a TCP sender paced at ``rate_bps`` puts on the wire: Linux sends at most
    max(2 segments, 1 ms at the pacing rate) at once (tcp_tso_autosize)."""
    return max(2 * (params.mtu + ETH_HEADER), rate_bps / 8 * 0.001)


STALL_WINDOW_S = 0.1    # ecn_idle's CPU windows where vswitchd's run-queue wait cannot be read


WAIT_SAMPLE_S = 0.005   # how often the stall watcher reads vswitchd's run-queue wait


def vswitchd_schedstat(pid=None):
    """/proc/PID/schedstat of ovs-vswitchd's main thread (the userspace datapath's forwarding loop;
    the system's vswitchd, or the one of ``pid``), or None where it cannot be read."""
    from harness import vswitchd
    p = pid or vswitchd.pid()
    if p is None:
        return None
    try:
        path = Path(f"/proc/{p}/schedstat")
        path.read_text()
        return path
    except OSError:
        return None


def forwarding_threads(user_datapath=True, instances=None):
    """{name: schedstat path} of the threads that move an emulated packet: the main thread of each
    ovs-vswitchd of ``instances`` (harness.ovsinstance; default the system's; userspace datapath) and
    each CPU's ksoftirqd (softirqs deferred under load: the veth receive backlog and HTB's dequeue
    run there)."""
    out = {}
    for inst in (instances or [None]) if user_datapath else []:
        path = vswitchd_schedstat(inst.pid() if inst else None)
        if path is not None:
            out["ovs-vswitchd" + (f"/{inst.rundir.name}" if inst and inst.rundir else "")] = path
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            comm = (proc / "comm").read_text().strip()
            if comm.startswith("ksoftirqd/"):
                (proc / "schedstat").read_text()
                out[comm] = proc / "schedstat"
        except OSError:
            continue
    return out


def steal_clocks():
    """{"steal/cpuN": function giving CPU N's stolen seconds so far} from /proc/stat: time the
    hypervisor ran someone else on the virtual CPU, which no thread's run-queue wait shows; {} where
    the kernel does not count it."""
    tick = os.sysconf("SC_CLK_TCK")

    def reader(n):
        def stolen():
            for line in Path("/proc/stat").read_text().splitlines():
                if line.startswith(f"cpu{n} "):
                    return int(line.split()[8]) / tick
            raise ValueError(f"cpu{n} is gone")
        return stolen
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        f = line.split()
        if f and f[0].startswith("cpu") and f[0] != "cpu" and len(f) > 8:
            out[f"steal/{f[0]}"] = reader(f[0][3:])
    return out


def backlog_step(backlog, wait, dt, drain):
    """The stall backlog (s) after a sample of ``dt`` s in which a thread waited ``wait`` s in all.
    Where in the sample the wait fell is not known: it is taken at the end (the queue first drains
    for the running time, then the wait adds), the largest backlog those readings allow; a
    watcher that is itself held up (dt > WAIT_SAMPLE_S) so cannot hide a stall."""
    return max(0.0, backlog - drain * (dt - wait)) + wait


def stall_watcher(paths, drain=1.0):
    """Start reading each thread's run-queue wait (schedstat's second field: ns runnable but not
    running, added when the thread gets a CPU back; or a function giving seconds waited, as
    ``steal_clocks``) every WAIT_SAMPLE_S; the returned function
    stops and gives {thread: largest stall backlog in seconds} ({} without threads). Backlog: the
    packets that arrive while a forwarding thread waits reach the next queue at once; that queue
    drains ``drain`` seconds of arrivals per second the thread is not waiting (1 for a link loaded
    to half its rate): ``backlog_step``. One wait alone gives its own length; waits closer together
    than they drain add up."""
    import threading
    import time
    largest, stop, longest_dt = {name: 0.0 for name in paths}, threading.Event(), [0.0]

    def read():
        waits = {}
        for name, path in paths.items():
            try:
                waits[name] = path() if callable(path) else int(path.read_text().split()[1]) / 1e9
            except (OSError, ValueError, IndexError):
                pass                                # the thread is gone: its last value stays
        return waits, time.monotonic()

    def loop():
        (last, t0), backlog = read(), dict.fromkeys(paths, 0.0)
        while not stop.wait(WAIT_SAMPLE_S):
            now, t1 = read()
            for name in now:
                wait = min(now[name] - last.get(name, now[name]), t1 - t0)
                backlog[name] = backlog_step(backlog[name], wait, t1 - t0, drain)
                largest[name] = max(largest[name], backlog[name])
            longest_dt[0] = max(longest_dt[0], t1 - t0)
            last, t0 = {**last, **now}, t1
    t = threading.Thread(target=loop, daemon=True)
    t.start()

    def done():
        stop.set()
        t.join()
        return dict(largest), longest_dt[0]
    return done


# Receive-buffer cost (skb truesize) of one frame on a veth, by MTU: measured on this kernel with an
# unread packet socket and ten frames sent into its veth (/proc/net/packet's Rmem / 10).
TRUESIZE_BY_MTU = {1500: 2304, 9000: 13120}


def parse_packet_sockets(text):
    """[(ifindex, Rmem bytes)] of every packet socket in /proc/net/packet's text."""
    out = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) >= 7 and f[4].isdigit() and f[6].isdigit():
            out.append((int(f[4]), int(f[6])))
    return out


def held_watcher(ifindexes):
    """Start reading, every WAIT_SAMPLE_S, how many bytes wait unread in the packet sockets bound to
    ``ifindexes`` (ovs-vswitchd's receive sockets on the switch ports): frames the userspace datapath
    has not yet taken, for whatever reason (waiting for a CPU, or busy with statistics and OpenFlow,
    which no run-queue wait shows). The returned function stops and gives the largest Rmem seen on
    one socket (bytes of skb truesize)."""
    import threading
    stop, largest, want = threading.Event(), [0], set(ifindexes)

    def loop():
        while not stop.wait(WAIT_SAMPLE_S):
            try:
                held = [r for i, r in parse_packet_sockets(Path("/proc/net/packet").read_text()) if i in want]
            except OSError:
                continue
            largest[0] = max([largest[0], *held])
    t = threading.Thread(target=loop, daemon=True)
    t.start()

    def done():
        stop.set()
        t.join()
        return largest[0]
    return done


def queue_drops():
    """{dev: packets its leaf queue (bfifo or red) dropped} for every device of the root namespace,
    in one ``tc`` call (HTB counts its child's drops again: left out)."""
    import subprocess
    out = subprocess.run(["tc", "-s", "-j", "qdisc", "show"], capture_output=True, text=True).stdout
    drops = {}
    for q in json.loads(out or "[]"):
        if q.get("kind") in ("bfifo", "pfifo", "red"):
            drops[q["dev"]] = drops.get(q["dev"], 0) + int(q.get("drops", 0))
    return drops


def datapath_rx_drops():
    """{dev: packets dropped on arrival at ovs-vswitchd's packet socket on dev} (the userspace
    datapath's receive side: a socket whose buffer filled while vswitchd waited for a CPU), read
    from ``ss``; {} where vswitchd holds no packet sockets."""
    import subprocess
    return parse_socket_drops(subprocess.run(["ss", "-f", "link", "-a", "-m", "-p"], capture_output=True,
                                             text=True).stdout)


def parse_socket_drops(ss_text, owner="ovs-vswitchd"):
    """{bound device: skmem drop counter ``d``} summed over ``owner``'s packet sockets in the output
    of ``ss -f link -a -m -p`` (each socket: a header line, then an indented skmem line)."""
    import re
    drops, dev = {}, None
    for line in ss_text.splitlines():
        if not line[:1].isspace():
            head = re.search(r"\*:(\S+)\s.*\"" + re.escape(owner) + r"\"", line)
            dev = head.group(1) if head else None
            continue
        mem = re.search(r"skmem:\(.*\bd(\d+)\)", line)
        if mem and dev:
            drops[dev] = drops.get(dev, 0) + int(mem.group(1))
    return drops


def parse_dpctl_stats(text, ports):
    """From ``ovs-appctl dpctl/show -s``: {"lost": upcalls the datapath lost, "hit" / "missed": its
    flow-cache lookups that found a flow / went up to vswitchd's slow path (all datapaths' sums),
    "dropped": RX and TX dropped + errors summed over ``ports`` (names), "tx_packets": their TX packets}."""
    import re
    lookups = [tuple(map(int, m)) for m in re.findall(r"lookups: hit:(\d+) missed:(\d+) lost:(\d+)", text)]
    hit, missed, lost = (sum(x[i] for x in lookups) for i in range(3))
    dropped = tx = 0
    port = None
    for line in text.splitlines():
        head = re.match(r"\s+port \d+: (\S+)", line)
        if head:
            port = head.group(1)
            continue
        if port not in ports:
            continue
        rx = re.match(r"\s+RX packets:\d+ errors:(\d+) dropped:(\d+)", line)
        txm = re.match(r"\s+TX packets:(\d+) errors:(\d+) dropped:(\d+)", line)
        if rx:
            dropped += int(rx.group(1)) + int(rx.group(2))
        elif txm:
            tx += int(txm.group(1))
            dropped += int(txm.group(2)) + int(txm.group(3))
    flows = sum(int(x) for x in re.findall(r"^\s*flows: (\d+)", text, re.M))
    return {"lost": lost, "hit": hit, "missed": missed, "flows": flows, "dropped": dropped, "tx_packets": tx}


def parse_pmd_stats(text):
    """From ``ovs-appctl dpif-netdev/pmd-stats-show`` (the userspace datapath), summed over its
    threads: the lookups the exact-match cache served (``emc_hits``), those the megaflow classifier
    served (``megaflow_hits``) and the classifier's subtable lookups for them (``subtable_lookups``:
    megaflow hits times the average per hit, which the command prints to 2 decimals); {} when the
    text has none (a kernel datapath)."""
    import re
    out = {}
    for thread in re.split(r"\n(?=\S)", text):
        emc = re.search(r"emc hits: (\d+)", thread)
        mega = re.search(r"megaflow hits: (\d+)", thread)
        per = re.search(r"avg\. subtable lookups per megaflow hit: ([\d.]+)", thread)
        if not (emc and mega and per):
            continue
        out["emc_hits"] = out.get("emc_hits", 0) + int(emc.group(1))
        out["megaflow_hits"] = out.get("megaflow_hits", 0) + int(mega.group(1))
        out["subtable_lookups"] = out.get("subtable_lookups", 0.0) + int(mega.group(1)) * float(per.group(1))
    return out


def datapath_counters(fab):
    """The OVS datapath's own losses on ``fab``'s switch ports (the fidelity guard's ``datapath``
    signal): dpctl's per-port drops and errors and lost upcalls, plus the packets the userspace
    datapath's receive sockets dropped (``datapath_rx_drops``); and, reported beside them, its
    lookups (hit / missed), its flows, the userspace datapath's cache and classifier hits
    (``parse_pmd_stats``) and the CPU time ovs-vswitchd has used (``vswitchd_cpu_s``); each summed
    over the fabric's OVS instances."""
    import subprocess

    from harness.ovsinstance import Instance
    ports = {dev for dev, *_ in fab.switch_ports()}
    c = {}
    for inst in getattr(fab, "instances", None) or [Instance()]:
        one = parse_dpctl_stats(subprocess.run(inst.tool("ovs-appctl", "dpctl/show", "-s"), capture_output=True,
                                               text=True).stdout, ports)
        one.update(parse_pmd_stats(subprocess.run(inst.tool("ovs-appctl", "dpif-netdev/pmd-stats-show"),
                                                  capture_output=True, text=True).stdout))
        one["vswitchd_cpu_s"] = process_cpu_s(inst.pid())
        for k, v in one.items():
            c[k] = None if v is None or (k in c and c[k] is None) else c.get(k, 0) + v
    c["socket_dropped"] = sum(n for dev, n in datapath_rx_drops().items() if dev in ports)
    return c


def process_cpu_s(pid):
    """User + system CPU seconds of process ``pid`` (/proc/PID/stat), or None when it cannot be read."""
    if pid is None:
        return None
    try:
        return parse_proc_cpu_s(open(f"/proc/{pid}/stat").read(), os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def parse_proc_cpu_s(stat_text, ticks_per_s):
    """utime + stime (fields 14 and 15 of /proc/PID/stat, after the parenthesised command) in seconds."""
    fields = stat_text[stat_text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / ticks_per_s


def drops_since(before, now):
    """The per-device increase between two ``queue_drops``/``datapath_rx_drops`` readings."""
    return {d: n - before.get(d, 0) for d, n in now.items() if n - before.get(d, 0) > 0}


def cpu_sampler(period_s=1.0):
    """A function returning the idle shares of each ``period_s`` window since it was made (the
    fidelity guard's signal), sampling /proc/stat in a thread."""
    import threading
    from harness.fidelity import cpu_idle, idle_shares
    samples, stop = [cpu_idle()], threading.Event()

    def loop():
        while not stop.wait(period_s):
            samples.append(cpu_idle())
    t = threading.Thread(target=loop, daemon=True)
    t.start()

    def done():
        stop.set()
        t.join()
        samples.append(cpu_idle())
        return idle_shares(samples)
    return done


def check_ecn(fab, seconds=4):
    import tempfile

    from harness.telemetry import Telemetry, read_jsonl, wait_ce_caught_up, wait_ce_quiet
    topo = fab.topo
    flows = congested_flows(topo, fab.routes)
    dsts = [d for _s, d in flows]
    # congested: two full-rate flows meeting on one switch link, the controller polling its counters
    tmp = tempfile.TemporaryDirectory(prefix="interleave-netcheck-")
    tm = Telemetry(fab, tmp.name, period_ms=200, marker=False, ce_period_ms=200).start()
    wait_ce_quiet(tm.of_path)       # counters caught up with earlier traffic ...
    m0, ce0, base = _marks(fab), sum(ce_received(fab, d) for d in dsts), read_jsonl(tm.of_path)
    q0, rx0 = queue_drops(), datapath_rx_drops()
    rates = iperf(fab, flows, seconds)
    wait_ce_quiet(tm.of_path)       # ... and with the last packets of this window
    catch_up = {}
    caught_up_s = wait_ce_caught_up(fab, tm.of_path, stats=catch_up)
    m1, ce1 = _marks(fab), sum(ce_received(fab, d) for d in dsts)
    drops, rx_drops = drops_since(q0, queue_drops()), drops_since(rx0, datapath_rx_drops())
    tm.stop()
    counters = _counters_check(fab, base, read_jsonl(tm.of_path), {d: m1[d] - m0.get(d, 0) for d in m1}, flows,
                               drops, rx_drops)
    tmp.cleanup()
    counters["controller_caught_up"] = caught_up_s is not None
    counters["caught_up_s"] = caught_up_s
    counters["catch_up"] = catch_up
    if caught_up_s is None:
        counters["detail"] += ("; the controller's CE samples never equalled the switches' own counters "
                               "(telemetry.wait_ce_caught_up): its sampling fell behind")
    marked = {d: m1[d] - m0.get(d, 0) for d in m1 if m1[d] - m0.get(d, 0)}
    names = [f"{s}->{d}" for s, d in flows]
    congested = {"name": "ecn_congested", "ok": sum(marked.values()) > 0 and ce1 - ce0 > 0,
                 "flows": names, "goodput_mbps": [round(r / 1e6, 2) for r in rates],
                 "marker_marks": marked, "receiver_ce": ce1 - ce0,
                 "detail": f"{sum(marked.values())} packets marked at {sorted(marked) or 'no port'}, "
                           f"{ce1 - ce0} CE packets at {', '.join(dsts)}"}
    return [congested, check_ecn_idle(fab, flows[0], seconds), counters]


class KeepUpWatch:
    """Whether the emulator kept up while one flow paced at ``pace_bps`` crossed a link of
    ``params``: started on creation, read by ``stop()``. A datapath that stalls for T releases
    pace x T bytes at once, and a mark needs T > K / pace (29 ms at 25 Mbit/s on a 50 Mbit/s link);
    stalls closer together than the queue drains add up. The evidence read: the largest backlog
    that each forwarding thread's waits for a CPU build (``forwarding_threads``, ``stall_watcher``),
    summed over the threads a packet crosses in series, plus the time the hypervisor took the CPUs
    away (steal); where no thread can be read, any STALL_WINDOW_S window under the fidelity guard's
    IDLE_MIN CPU idle. A backlog of at least K / pace is such a stall. With the userspace datapath,
    also the frames left unread in its receive sockets (``held_watcher``, converted from truesize to
    frames by TRUESIZE_BY_MTU): at least K of them are released into the next queue at once."""

    def __init__(self, fab, params, pace_bps):
        self.stall_s = params.ecn_k_bytes * 8 / pace_bps             # the shortest stall that can mark
        self.pace_bps, self.frame_bytes = pace_bps, params.mtu + ETH_HEADER
        self.truesize = TRUESIZE_BY_MTU.get(params.mtu)
        user = getattr(fab, "datapath", "user") == "user"
        threads = forwarding_threads(user, getattr(fab, "instances", None))
        threads = {**threads, **steal_clocks()} if threads else threads
        self.idle_of = cpu_sampler(STALL_WINDOW_S)
        self.waits = stall_watcher(threads, drain=(params.rate_bps - pace_bps) / pace_bps)
        ifindex = getattr(fab, "ifindex", {})
        self.held = held_watcher(ifindex.values()) if user and ifindex and self.truesize else None

    def stop(self):
        """{"kept_up", "waited_s" (None without threads), "backlog_ms", "sample_max_ms",
        "cpu_idle_min", "cpu_busy_windows", "stall_to_mark_ms", "why" (a stall), "why_not" (none)}."""
        from harness.fidelity import IDLE_MIN
        idle, (backlogs, sample_max) = self.idle_of(), self.waits()
        # a packet crosses the threads in series (softirq, vswitchd, softirq): their stalls add up
        waited = sum(backlogs.values()) if backlogs else None
        evidence = ([f"threads' waits for a CPU {waited * 1000:.0f} ms ("
                     + (" + ".join(f"{n} {b * 1000:.0f} ms" for n, b in sorted(backlogs.items(), key=lambda x: -x[1])
                                   if b >= 0.0005) or "none") + ")"] if waited is not None else [])
        held = self.held() if self.held else None
        if held:        # frames left unread, as the time the paced flow takes to send them
            unread = held / self.truesize * self.frame_bytes * 8 / self.pace_bps
            backlogs["unread in a vswitchd socket"] = unread
            evidence.append(f"frames left unread in a vswitchd socket {unread * 1000:.0f} ms")
            waited = max(waited or 0.0, unread)
        busy = sum(1 for x in idle if x < IDLE_MIN)
        kept_up = busy == 0 if waited is None else waited < self.stall_s
        if waited is None:
            why = f"{busy} of {len(idle)} windows of {STALL_WINDOW_S * 1000:.0f} ms under {IDLE_MIN:.0%} CPU idle"
            why_not = "the CPU was never saturated"
        else:
            why = (f"the datapath fell behind by {waited * 1000:.0f} ms of the flow ({'; '.join(evidence)}; "
                   f"a mark needs {self.stall_s * 1000:.0f} ms)")
            why_not = f"the datapath fell behind by at most {waited * 1000:.0f} ms of the flow ({'; '.join(evidence)})"
        return {"kept_up": kept_up, "waited_s": waited,
                "backlog_ms": {n: round(b * 1000, 1) for n, b in sorted(backlogs.items())},
                "sample_max_ms": round(sample_max * 1000, 1), "cpu_idle_min": round(min(idle), 3) if idle else None,
                "cpu_busy_windows": busy, "stall_to_mark_ms": round(self.stall_s * 1000, 1), "why": why,
                "why_not": why_not}


def check_ecn_idle(fab, flow, seconds):
    """One flow paced at half the link rate. Bound: its bursts (``paced_burst_bytes``) arrive at a
    queue that drains twice as fast as they come, so the queue never holds more than one burst; a
    burst under K is never marked, and a faithful fabric marks nothing (tolerance 0). Marks then mean
    that packets arrived in a burst the sender did not send: the datapath stalled and released a
    backlog (``KeepUpWatch``): reported as the emulator not keeping up (the marking is not judged).
    Without such a stall, marks fail the check."""
    src, dst = flow
    params = fab.topo.link_between(dst, fab.topo.edge_of(dst)).params
    pace = params.rate_bps * 0.5
    burst = paced_burst_bytes(params, pace)
    allowed = 0 if burst < params.ecn_k_bytes else None          # None: K below one burst, not judged
    m0, ce0 = _marks(fab), ce_received(fab, dst)
    watch = KeepUpWatch(fab, params, pace)
    rate = iperf(fab, [flow], seconds, rate_bps=pace)[0]
    kept = watch.stop()
    m1, ce1 = _marks(fab), ce_received(fab, dst)
    marked = {d: m1[d] - m0.get(d, 0) for d in m1 if m1[d] - m0.get(d, 0)}
    n = sum(marked.values())
    clean = allowed is None or (n <= allowed and ce1 - ce0 <= allowed)
    out = {"name": "ecn_idle", "ok": rate > 0 and (clean or not kept["kept_up"]),
           "flows": [f"{src}->{dst} at {params.rate_mbps * 0.5:g} Mbit/s"], "goodput_mbps": [round(rate / 1e6, 2)],
           "marker_marks": marked, "receiver_ce": ce1 - ce0, "burst_bytes": int(burst),
           "k_bytes": params.ecn_k_bytes, "allowed_marks": allowed,
           "cpu_idle_min": kept["cpu_idle_min"], "cpu_busy_windows": kept["cpu_busy_windows"],
           "stall_backlog_ms": kept["backlog_ms"], "stall_sample_max_ms": kept["sample_max_ms"],
           "stall_to_mark_ms": kept["stall_to_mark_ms"], "emulator_kept_up": kept["kept_up"],
           "detail": f"{n} marks, {ce1 - ce0} CE packets with the link half loaded (allowed {allowed}: "
                     f"a paced burst of {int(burst)} B < K = {params.ecn_k_bytes} B)"}
    if not clean and not kept["kept_up"]:
        out["detail"] += (f"; the emulator could not keep up: {kept['why']}, so the marks come from a stalled "
                          "datapath's backlog: marking not judged")
    elif not clean:
        out["detail"] += f"; not a stall: {kept['why_not']}"
    return out


def _counters_check(fab, base, records, marks_by_dev, flows, drops_by_dev=None, rx_drops_by_dev=None):
    """``base``: the telemetry records up to the window's start (its latest CE sample per switch is
    the baseline); ``records``: all of them, up to the window's end. A marked packet that is dropped
    before the next switch counts it never arrives: by the egress queue (the marker marks before the
    queue; a stalled datapath can overflow it: ``drops_by_dev``, keyed by egress device) or by the
    next switch's receive socket (``rx_drops_by_dev``, keyed by the receiving device). The comparison
    on a link allows the drops on that link and upstream of it."""
    from harness.telemetry import ce_arrivals
    topo = fab.topo
    ces = [r for r in records if r["kind"] == "ce"]
    first, last = {}, {}
    for r in [r for r in base if r["kind"] == "ce"]:
        first[r["dpid"]] = r["ce"]
    for r in ces:
        first.setdefault(r["dpid"], r["ce"])
        last[r["dpid"]] = r["ce"]
    before, after = ce_arrivals(topo, fab.routes, first), ce_arrivals(topo, fab.routes, last)
    seen = {d: after.get(d, 0) - before.get(d, 0) for d in after}
    dir_of, arriving_on = {}, {}
    for link in topo.links:
        (ab, a, b, a_port), (ba, _b, _a, b_port) = link.directions()
        for did, frm, port, to, to_port in ((ab, a, a_port, b, b_port), (ba, b, b_port, a, a_port)):
            if frm in topo.switches:
                dir_of[fab.port_dev(frm, port)] = did
            if to in topo.switches:
                arriving_on[fab.port_dev(to, to_port)] = did
    marked = {dir_of[dev]: n for dev, n in marks_by_dev.items() if n}
    dropped = {dir_of[dev]: n for dev, n in (drops_by_dev or {}).items() if n and dev in dir_of}
    rx_dropped = {arriving_on[dev]: n for dev, n in (rx_drops_by_dev or {}).items() if n and dev in arriving_on}
    for did, n in rx_dropped.items():
        dropped[did] = dropped.get(did, 0) + n
    on_path = {f"{u}>{v}" for s, d in flows for u, v in zip(fab.routes[(s, d)], fab.routes[(s, d)][1:])}
    last_hop = {f"{fab.routes[f][-2]}>{fab.routes[f][-1]}" for f in flows}
    # CE arrivals accumulate downstream: behind a marked link the controller sees its marks plus
    # the upstream ones. A marker that also counts the CE packets it marks again (RED) counts some
    # packets twice: behind its link the controller sees at least its marks and at most its marks
    # plus the upstream ones.
    remarks = getattr(getattr(fab, "marker", None), "counts_ce_as_marked", False)
    mism = {}
    for did, n in marked.items():
        if did in last_hop:
            continue                                  # no next switch: counted at the receiver
        upstream = sum(m for d2, m in marked.items() if d2 != did and d2 in on_path
                       and _upstream(fab, flows, d2, did))
        lost = dropped.get(did, 0) + sum(x for d2, x in dropped.items() if d2 != did and d2 in on_path
                                         and _upstream(fab, flows, d2, did))
        tol, got = max(2, 0.01 * n), seen.get(did, 0)
        low = (n if remarks else n + upstream) - tol - lost
        if not low <= got <= n + upstream + tol:
            mism[did] = {"marker": n, "upstream_marks": upstream, "controller": got}
    stray = {d: n for d, n in seen.items() if n and d not in on_path}
    compared = sorted(d for d in marked if d not in last_hop)
    # nothing compared (the marks only at last hops) would make the check vacuous: it fails
    ok = bool(len(ces) >= 2 and compared and not mism and not stray)
    return {"name": "counters", "ok": ok, "compared": compared, "marker_marks": marked, "queue_drops": {d: n - rx_dropped.get(d, 0) for d, n in dropped.items() if n > rx_dropped.get(d, 0)},
            "datapath_rx_drops": rx_dropped,
            "controller_ce_arrivals":
            {d: n for d, n in seen.items() if n}, "mismatched": mism, "off_path": stray,
            "detail": (f"controller saw {sum(seen.values())} CE arrivals on {sorted(d for d, n in seen.items() if n)}; "
                       f"marker marked {sum(marked.values())} on {sorted(marked)}; compared on {compared or 'NO link'}"
                       + (f"; MISMATCH {mism}" if mism else "") + (f"; OFF-PATH {stray}" if stray else ""))}


def _upstream(fab, flows, a, b):
    """Is directed link ``a`` before ``b`` on some flow's route?"""
    for f in flows:
        hops = [f"{u}>{v}" for u, v in zip(fab.routes[f], fab.routes[f][1:])]
        if a in hops and b in hops and hops.index(a) < hops.index(b):
            return True
    return False


def run_checks(fab, log=lambda msg: None):
    checks = []
    delayed = any(l.params.delay_ms > 0 for l in fab.topo.links)
    fns = (check_reachability, check_routes, *([check_delay] if delayed else []), check_shaped_rate, check_ecn)
    t0 = time.monotonic()
    for i, fn in enumerate(fns, 1):
        log(f"check {i}/{len(fns)}: {fn.__name__[6:]} ({time.monotonic() - t0:.0f} s into the checks)")
        res = fn(fab)
        for r in res if isinstance(res, list) else [res]:
            checks.append(r)
            log(f"  {'PASS' if r['ok'] else 'FAIL'} {r['name']}: {r['detail']}")
    return checks
