#!/usr/bin/env python3
"""TCP's own allocation on a faithful fabric: the parking lot, where max-min and TCP part ways.

Three switches in a line (s1 - s2 - s3, links at --rate-mbps), three long TCP flows: A from s1 to
s3 crosses both switch links, B (s1 to s2) and C (s2 to s3) one each. Max-min gives each flow half
a link; TCP marked at both queues gives A less: proportional fairness (alpha 1) A a third, TCP
Reno's window law (alpha 2) 0.41 (harness.maxmin.alpha_fair_rates). The load is three flows, far
below what the datapath carries (its CPU and the machine's idle share are in the table), so what A
gets here is TCP's allocation, not the emulator's: the yardstick for the benchmark's starved flows
(bench/fabric_fidelity.py). The control, on the same fabric: D and E, two flows through the one
link s1 - s2, where every allocation gives each half. Per run: each flow's goodput as a share of a
link's goodput, beside the three allocations.

Run as root: sudo .venv/bin/python bench/parking_lot.py [--repeats 3] [--seconds 20] [--publish FILE]
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import probe  # noqa: E402
from harness.fabric import Fabric  # noqa: E402
from harness.fidelity import cpu_idle  # noqa: E402
from harness.lifecycle import RunLock  # noqa: E402
from harness.linkmodel import LinkParams  # noqa: E402
from harness.maxmin import alpha_fair_rates, maxmin_rates  # noqa: E402
from harness.netcheck import process_cpu_s  # noqa: E402
from harness.sets import emit_bench  # noqa: E402
from topologies.base import Topology  # noqa: E402

SCENARIOS = {"parking lot": {"A": ["s1>s2", "s2>s3"], "B": ["s1>s2"], "C": ["s2>s3"]},
             "control": {"D": ["s1>s2"], "E": ["s1>s2"]}}
ENDS = {"A": ("s1", "s3"), "B": ("s1", "s2"), "C": ("s2", "s3"), "D": ("s1", "s2"), "E": ("s1", "s2")}


def parking_lot(params, flows):
    """The line of three switches with a sending and a receiving host per flow of ``flows``."""
    topo = Topology("parking_lot", {})
    sw = {name: topo.add_switch("edge") for name in ("s1", "s2", "s3")}
    hosts = {}
    for f in flows:
        for end, at in zip((">", "<"), ENDS[f]):
            hosts[f + end] = topo.add_host()
            topo.add_link(hosts[f + end], sw[at], params)
    topo.add_link(sw["s1"], sw["s2"], params)
    topo.add_link(sw["s2"], sw["s3"], params)
    return topo, {f: (hosts[f + ">"], hosts[f + "<"]) for f in flows}


def run_one(rate, seconds, omit, backends, flows):
    topo, pairs = parking_lot(LinkParams.scaled(rate, mtu=9000), flows)
    with RunLock() as lock, Fabric(topo, lock.ledger, lock.dir, datapath=backends["datapath"],
                                   marker=backends["ecn_marker"], cc=backends["congestion_control"],
                                   instances=backends["vswitchd_instances"]) as fab:
        servers = [fab.host(d).popen(["iperf3", "-s", "-1", "-p", str(5201 + i)])
                   for i, (_s, d) in enumerate(pairs.values())]
        time.sleep(0.5)
        pids = [inst.pid() for inst in fab.instances]
        c0, m0, w0 = sum(process_cpu_s(p) for p in pids), cpu_idle(), time.monotonic()
        clients = [fab.host(s).popen(["iperf3", "-c", topo.ip(d), "-p", str(5201 + i), "-t", str(seconds), "-O",
                                      str(omit), "-J"]) for i, (s, d) in enumerate(pairs.values())]
        got = {}
        for f, c in zip(pairs, clients):
            out, _ = c.communicate(timeout=seconds + omit + 30)
            got[f] = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
        wall, m1 = time.monotonic() - w0, cpu_idle()
        cpu = (sum(process_cpu_s(p) for p in pids) - c0) / wall
        for s in servers:
            s.wait(10)
    link = max(sum(got[f] for f in flows if x in flows[f]) for x in ("s1>s2", "s2>s3"))   # a saturated link's goodput
    return {"goodput_mbps": {f: round(v, 2) for f, v in got.items()},
            "share": {f: round(v / link, 3) for f, v in got.items()}, "vswitchd_cpu": round(cpu, 2),
            "cpu_idle": round((m1[0] - m0[0]) / max(1, m1[1] - m0[1]), 3)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate-mbps", type=float, default=50.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--omit", type=int, default=3)
    ap.add_argument("--json", help="also write the runs to this file")
    ap.add_argument("--publish", metavar="FILE")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench needs root: sudo .venv/bin/python bench/parking_lot.py")
    findings = probe.doctor()
    backends = probe.resolve(findings)
    probe.require_ready(findings)
    runs = {}
    for name, flows in SCENARIOS.items():
        runs[name] = []
        for i in range(args.repeats):
            runs[name].append(run_one(args.rate_mbps, args.seconds, args.omit, backends, flows))
            print(f"{name} run {i + 1}/{args.repeats}: {runs[name][-1]}", file=sys.stderr, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=2))
    span = lambda xs, fmt="{:.2f}": fmt.format(min(xs)) + ("" if min(xs) == max(xs) else "-" + fmt.format(max(xs)))
    lines = [f"{args.rate_mbps:g} Mbit/s links, {backends['congestion_control']}+ECN, datapath "
             f"{backends['datapath']} ({backends['vswitchd_instances']} vswitchd instance(s)), {args.repeats} runs of "
             f"{args.seconds} s per scenario (first {args.omit} s not counted); shares of a saturated link's goodput, "
             "range over the runs.", "",
             "| scenario | flow | links crossed | measured share | max-min | alpha 1 (proportional) | "
             "alpha 2 (TCP Reno's law) | vswitchd CPU | machine idle |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    cap = {"s1>s2": 1.0, "s2>s3": 1.0}
    for name, flows in SCENARIOS.items():
        ideal = [maxmin_rates(flows, cap), alpha_fair_rates(flows, cap, 1), alpha_fair_rates(flows, cap, 2)]
        rs = runs[name]
        for f, links in flows.items():
            lines.append(f"| {name} | {f} | {len(links)} | {span([r['share'][f] for r in rs])} | "
                         + " | ".join(f"{v[f]:.2f}" for v in ideal)
                         + f" | {span([r['vswitchd_cpu'] for r in rs], '{:.0%}')} | "
                         f"{span([r['cpu_idle'] for r in rs], '{:.0%}')} |")
    lines += ["", f"A's mean share {statistics.mean(r['share']['A'] for r in runs['parking lot']):.3f}."]
    emit_bench("parking-lot", "# TCP's allocation: the parking lot\n\n" + "\n".join(lines) + "\n", args.publish,
               "sudo .venv/bin/python bench/parking_lot.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
