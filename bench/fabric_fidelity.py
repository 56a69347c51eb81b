#!/usr/bin/env python3
"""Fabric benchmark: emulated capacity under a long-flow load, against the max-min ideal.

Load: a permutation, host i sends one long TCP flow to host i + N/2 (every flow crosses pods on the
fat-tree). For each link rate: build the fabric (timed), run the flows for --seconds (the first
--omit seconds not counted), compare the summed goodput with the max-min fair allocation on the
routes in use (converted to goodput with the payload share of a frame), record ovs-vswitchd CPU,
tear down (timed). Prints a Markdown table; --json writes the raw numbers too.

Run as root: sudo .venv/bin/python bench/fabric_fidelity.py [--rates 10,20,50,100]
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.fabric import Fabric  # noqa: E402
from harness.lifecycle import RunLock  # noqa: E402
from harness.linkmodel import LinkParams  # noqa: E402
from harness.maxmin import maxmin_rates  # noqa: E402
from harness.netcheck import payload_share  # noqa: E402
from harness.routing import directed_links  # noqa: E402
from topologies import by_name  # noqa: E402


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def vswitchd_pid():
    return int(Path("/run/openvswitch/ovs-vswitchd.pid").read_text())


def sampling(path, period_s, wall_s):
    """(median interval ms, share of expected port samples received) from the controller's log."""
    from harness.telemetry import read_jsonl
    by = {}
    for r in read_jsonl(path):
        if r["kind"] == "port":
            by.setdefault(r["dpid"], []).append(r["t"])
    if not by:
        return None, 0.0
    gaps = [b - a for ts in by.values() for a, b in zip(ts, ts[1:])]
    got = sum(len(ts) for ts in by.values())
    return round(sorted(gaps)[len(gaps) // 2] * 1000, 1), round(got / (len(by) * wall_s / period_s), 3)


def run_one(topology, rate, seconds, omit, mtu, telemetry_ms=None):
    params = LinkParams.scaled(rate, mtu=mtu)
    topo = by_name(topology, link=params)
    n = len(topo.hosts)
    pairs = [(topo.hosts[i], topo.hosts[(i + n // 2) % n]) for i in range(n)]
    with RunLock() as lock:
        fab = Fabric(topo, lock.ledger, lock.dir)
        t0 = time.monotonic()
        fab.start()
        build = time.monotonic() - t0
        try:
            flows = {p: directed_links(fab.routes[p]) for p in pairs}
            cap = {d: params.rate_bps for p in flows for d in flows[p]}
            ideal = maxmin_rates(flows, cap)
            servers = [fab.net.get(d).popen(["iperf3", "-s", "-1", "-p", str(5201 + i)])
                       for i, (_s, d) in enumerate(pairs)]
            time.sleep(0.5)
            tm = None
            if telemetry_ms:
                import tempfile
                from harness.telemetry import Telemetry
                tmpdir = tempfile.mkdtemp(prefix="interleave-bench-")
                tm = Telemetry(fab, tmpdir, period_ms=telemetry_ms, marker=False).start()
            vpid = vswitchd_pid()
            c0, w0 = cpu_seconds(vpid), time.monotonic()
            clients = [fab.net.get(s).popen(["iperf3", "-c", topo.ip(d), "-p", str(5201 + i), "-t",
                                              str(seconds), "-O", str(omit), "-J"])
                       for i, (s, d) in enumerate(pairs)]
            got = []
            for c in clients:
                out, _ = c.communicate(timeout=seconds + omit + 30)
                try:
                    got.append(json.loads(out)["end"]["sum_received"]["bits_per_second"])
                except (ValueError, KeyError):
                    got.append(0.0)
            wall = time.monotonic() - w0
            cpu = (cpu_seconds(vpid) - c0) / wall
            samp = (None, None)
            if tm:
                tm.stop()
                samp = sampling(tm.of_path, telemetry_ms / 1000, wall)
            for s in servers:
                s.wait(10)
        finally:
            t1 = time.monotonic()
            fab.stop()
            teardown = time.monotonic() - t1
    ideal_goodput = sum(ideal.values()) * payload_share(mtu)
    return {"topology": topology, "rate_mbps": rate, "mtu": mtu, "flows": len(pairs),
            "queue_bytes": params.queue_bytes, "ecn_k_bytes": params.ecn_k_bytes,
            "aggregate_mbps": round(sum(got) / 1e6, 1), "ideal_mbps": round(ideal_goodput / 1e6, 1),
            "fidelity": round(sum(got) / ideal_goodput, 3),
            "min_flow_mbps": round(min(got) / 1e6, 2), "max_flow_mbps": round(max(got) / 1e6, 2),
            "vswitchd_cpu": round(cpu, 2), "build_s": round(build, 2), "teardown_s": round(teardown, 2),
            "telemetry_ms": telemetry_ms, "sample_interval_ms": samp[0], "samples_received": samp[1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="fattree")
    ap.add_argument("--rates", default="10,20,50,100")
    ap.add_argument("--mtu", type=int, default=9000)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--omit", type=int, default=2)
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--telemetry-ms", default="", help="comma list of polling periods to compare (0 = off), "
                                                        "at the first rate of --rates")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench needs root: sudo .venv/bin/python bench/fabric_fidelity.py")
    rows = []
    if args.telemetry_ms:
        rate = float(args.rates.split(",")[0])
        print(f"Telemetry polling during the load ({rate:g} Mbit/s links):\n")
        print("| polling period | aggregate / ideal (Mbit/s) | fidelity | vswitchd CPU | median sample interval | samples received |")
        print("| --- | --- | --- | --- | --- | --- |")
        for p in (float(x) for x in args.telemetry_ms.split(",")):
            r = run_one(args.topology, rate, args.seconds, args.omit, args.mtu, telemetry_ms=p or None)
            rows.append(r)
            print(f"| {'off' if not p else f'{p:g} ms'} | {r['aggregate_mbps']} / {r['ideal_mbps']} | {r['fidelity']} | "
                  f"{r['vswitchd_cpu']:.0%} | {r['sample_interval_ms'] if p else '-'} ms | "
                  f"{r['samples_received'] if p else '-'} |", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2))
        return
    print("| link | flows | aggregate / max-min ideal (Mbit/s) | fidelity | slowest..fastest flow | "
          "vswitchd CPU | build | teardown |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for rate in (float(r) for r in args.rates.split(",")):
        r = run_one(args.topology, rate, args.seconds, args.omit, args.mtu)
        rows.append(r)
        print(f"| {rate:g} Mbit/s | {r['flows']} | {r['aggregate_mbps']} / {r['ideal_mbps']} | {r['fidelity']} | "
              f"{r['min_flow_mbps']}..{r['max_flow_mbps']} | {r['vswitchd_cpu']:.0%} | {r['build_s']} s | "
              f"{r['teardown_s']} s |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
