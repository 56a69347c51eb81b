#!/usr/bin/env python3
"""Whether switch ports of an OVS port type keep the fabric's egress queues: two flows into one host.

The fabric shapes and marks at each switch egress port with tc (HTB, bfifo, the ECN marker). On a
dumbbell of 2 hosts per side at --rate-mbps, h1 and h2 each send one TCP flow to h3 for --seconds:
h3's link carries the link rate when the switch egress queues hold. The switch ports are then
re-typed (``ovs-vsctl set interface DEV type=TYPE``) and the flows run again. For each type the
table gives the two flows' summed goodput, the packets the switch egress queues (HTB) and the ECN
marker saw, and the marks, summed over the switch ports: a type whose transmits skip the qdisc
layer (AF_XDP sends through ``dev_direct_xmit``) gives goodput above the link rate, and no queue
or marks.

Run as root: sudo .venv/bin/python bench/afxdp_shaping.py [--types system,afxdp,afxdp-nonpmd]
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.fabric import Fabric  # noqa: E402
from harness.lifecycle import RunLock  # noqa: E402
from harness.linkmodel import LinkParams  # noqa: E402
from harness.sets import emit_bench  # noqa: E402
from topologies import dumbbell  # noqa: E402


def qdisc_packets(devs):
    """Packets the HTB root queues of ``devs`` have sent, summed."""
    out = json.loads(subprocess.run(["tc", "-s", "-j", "qdisc", "show"], capture_output=True, text=True).stdout or "[]")
    return sum(int(q.get("packets", 0)) for q in out if q.get("kind") == "htb" and q.get("dev") in devs)


def marker(fab):
    """(packets, marks) the ECN marker counted, summed over the switch egress ports."""
    c = fab.marker_counters().values()
    return sum(x.get("pkts", 0) for x in c), sum(x.get("marked", 0) for x in c)


def flows(fab, seconds):
    dst = fab.topo.hosts[2]
    servers = [fab.host(dst).popen(["iperf3", "-s", "-1", "-p", str(5301 + i)]) for i in range(2)]
    time.sleep(0.5)
    clients = [fab.host(src).popen(["iperf3", "-c", fab.topo.ip(dst), "-p", str(5301 + i), "-t", str(seconds), "-J"])
               for i, src in enumerate(fab.topo.hosts[:2])]
    total = 0.0
    for c in clients:
        out, _ = c.communicate(timeout=seconds + 30)
        try:
            total += json.loads(out)["end"]["sum_received"]["bits_per_second"]
        except (ValueError, KeyError):
            pass
    for s in servers:
        s.wait(10)
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", default="system,afxdp,afxdp-nonpmd")
    ap.add_argument("--rate-mbps", type=float, default=50.0)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--mtu", type=int, default=9000)
    ap.add_argument("--publish", metavar="FILE")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench needs root: sudo .venv/bin/python bench/afxdp_shaping.py")
    topo = dumbbell(2, link=LinkParams.scaled(args.rate_mbps, mtu=args.mtu))
    rows = []
    with RunLock() as lock, Fabric(topo, lock.ledger, lock.dir) as fab:
        devs = [dev for dev, *_ in fab.switch_ports()]
        for kind in args.types.split(","):
            vs = ["ovs-vsctl", "--timeout=20"]
            for dev in devs:
                vs += ["--", "set", "interface", dev, f"type={kind}"]
            subprocess.run(vs, check=True, capture_output=True)
            time.sleep(2)
            errors = subprocess.run(["ovs-vsctl", "--columns=name,error", "find", "interface", "error!=[]"],
                                    capture_output=True, text=True).stdout.strip()
            q0, m0 = qdisc_packets(devs), marker(fab)
            goodput = flows(fab, args.seconds)
            q1, m1 = qdisc_packets(devs), marker(fab)
            rows.append({"type": kind, "goodput_mbps": round(goodput / 1e6, 1), "queue_packets": q1 - q0,
                         "marker_packets": m1[0] - m0[0], "marks": m1[1] - m0[1], "port_errors": errors or None})
            print(rows[-1], file=sys.stderr, flush=True)
        back = [a for dev in devs for a in ("--", "set", "interface", dev, "type=system")]
        subprocess.run(["ovs-vsctl", "--timeout=20"] + back, capture_output=True)
    lines = [f"dumbbell, {args.rate_mbps:g} Mbit/s links, MTU {args.mtu}, two TCP flows into one host for "
             f"{args.seconds} s, switch ports of each OVS type; queues and marker summed over the switch "
             "egress ports.", "",
             "| port type | goodput, both flows (Mbit/s) | packets through the egress queues | packets the marker saw "
             "| ECN marks |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {r['type']} | {r['goodput_mbps']} | {r['queue_packets']} | {r['marker_packets']} | {r['marks']} |"
              for r in rows]
    emit_bench(f"afxdp-shaping-mtu{args.mtu}", "# AF_XDP ports and the egress queues\n\n" + "\n".join(lines) + "\n",
               args.publish, "sudo .venv/bin/python bench/afxdp_shaping.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
