"""``interleave netcheck``: build the fabric, check it works as emulated, tear it down.

Checks (each gives ok, the measured figures, and a one-line detail):
  reachability    every ordered host pair answers one ping (fping from every host at once)
  routes          the routes read back from the switches (``ovs-ofctl dump-flows``, walked hop by
                  hop) and the controller's record of its acknowledged entries equal the computed ones
  shaped_rate     one TCP flow across the fabric reaches the link rate within +-10 % (goodput is
                  compared with rate x payload share of a frame, since HTB counts whole frames)
  ecn_congested   two full-rate flows into one host: the marker marks and the receiver sees CE > 0
  ecn_idle        one flow paced at half the link rate: no marks anywhere, no CE at the receiver
  counters        during the congested check (once the controller's samples equal the switches' own
                  counters: wait_ce_caught_up), the controller's CE-counting entries saw, on each
                  link the marker marked, the packets the marker marked (within 1 %), and no CE
                  packet on links off the flows' paths
A check that cannot run (a tool missing) fails with the reason; nothing is skipped silently.
"""
import json
import time

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


def check_ecn(fab, seconds=4):
    import tempfile

    from harness.telemetry import Telemetry, read_jsonl, wait_ce_caught_up, wait_ce_quiet
    topo = fab.topo
    a, b, dst = topo.hosts[0], topo.hosts[1], topo.hosts[-1]
    params = topo.link_between(dst, topo.edge_of(dst)).params
    # congested: two full-rate senders into one receiver, the controller polling its counters
    tmp = tempfile.TemporaryDirectory(prefix="interleave-netcheck-")
    tm = Telemetry(fab, tmp.name, period_ms=200, marker=False, ce_period_ms=200).start()
    wait_ce_quiet(tm.of_path)       # counters caught up with earlier traffic ...
    m0, ce0, base = _marks(fab), ce_received(fab, dst), read_jsonl(tm.of_path)
    rates = iperf(fab, [(a, dst), (b, dst)], seconds)
    wait_ce_quiet(tm.of_path)       # ... and with the last packets of this window
    wait_ce_caught_up(fab, tm.of_path)
    m1, ce1 = _marks(fab), ce_received(fab, dst)
    tm.stop()
    counters = _counters_check(fab, base, read_jsonl(tm.of_path), {d: m1[d] - m0.get(d, 0) for d in m1},
                               [(a, dst), (b, dst)])
    tmp.cleanup()
    marked = {d: m1[d] - m0.get(d, 0) for d in m1 if m1[d] - m0.get(d, 0)}
    congested = {"name": "ecn_congested", "ok": sum(marked.values()) > 0 and ce1 - ce0 > 0,
                 "flows": [f"{a}->{dst}", f"{b}->{dst}"], "goodput_mbps": [round(r / 1e6, 2) for r in rates],
                 "marker_marks": marked, "receiver_ce": ce1 - ce0,
                 "detail": f"{sum(marked.values())} packets marked at {sorted(marked) or 'no port'}, "
                           f"{ce1 - ce0} CE packets at {dst}"}
    # idle: one flow at half the rate
    m0, ce0 = m1, ce1
    rate = iperf(fab, [(a, dst)], seconds, rate_bps=params.rate_bps * 0.5)[0]
    m1, ce1 = _marks(fab), ce_received(fab, dst)
    marked = {d: m1[d] - m0.get(d, 0) for d in m1 if m1[d] - m0.get(d, 0)}
    idle = {"name": "ecn_idle", "ok": not marked and ce1 == ce0 and rate > 0,
            "flows": [f"{a}->{dst} at {params.rate_mbps * 0.5:g} Mbit/s"], "goodput_mbps": [round(rate / 1e6, 2)],
            "marker_marks": marked, "receiver_ce": ce1 - ce0,
            "detail": f"{sum(marked.values())} marks, {ce1 - ce0} CE packets with the link half loaded"}
    return [congested, idle, counters]


def _counters_check(fab, base, records, marks_by_dev, flows):
    """``base``: the telemetry records up to the window's start (its latest CE sample per switch is
    the baseline); ``records``: all of them, up to the window's end."""
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
    dir_of = {}
    for link in topo.links:
        for did, frm, _to, port in link.directions():
            if frm in topo.switches:
                dir_of[fab.port_dev(frm, port)] = did
    marked = {dir_of[dev]: n for dev, n in marks_by_dev.items() if n}
    on_path = {f"{u}>{v}" for s, d in flows for u, v in zip(fab.routes[(s, d)], fab.routes[(s, d)][1:])}
    last_hop = {f"{fab.routes[f][-2]}>{fab.routes[f][-1]}" for f in flows}
    # CE arrivals accumulate downstream: on a marked link the controller sees its marks plus
    # upstream ones; compare where the first marking link is (what the marker counts there)
    mism = {}
    for did, n in marked.items():
        if did in last_hop:
            continue                                  # no next switch: counted at the receiver
        upstream = sum(m for d2, m in marked.items() if d2 != did and d2 in on_path
                       and _upstream(fab, flows, d2, did))
        if abs(seen.get(did, 0) - n - upstream) > max(2, 0.01 * n):
            mism[did] = {"marker": n, "controller": seen.get(did, 0)}
    stray = {d: n for d, n in seen.items() if n and d not in on_path}
    ok = bool(len(ces) >= 2 and not mism and not stray and (marked or sum(seen.values()) == 0))
    return {"name": "counters", "ok": ok, "marker_marks": marked, "controller_ce_arrivals":
            {d: n for d, n in seen.items() if n}, "mismatched": mism, "off_path": stray,
            "detail": (f"controller saw {sum(seen.values())} CE arrivals on {sorted(d for d, n in seen.items() if n)}; "
                       f"marker marked {sum(marked.values())} on {sorted(marked)}"
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
    for fn in (check_reachability, check_routes, check_shaped_rate, check_ecn):
        log(f"check: {fn.__name__[6:]}")
        res = fn(fab)
        for r in res if isinstance(res, list) else [res]:
            checks.append(r)
            log(f"  {'PASS' if r['ok'] else 'FAIL'} {r['name']}: {r['detail']}")
    return checks
