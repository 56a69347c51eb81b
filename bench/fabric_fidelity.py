#!/usr/bin/env python3
"""Fabric benchmark: emulated capacity under a long-flow load, against the max-min ideal.

Load: a permutation, host i sends one long TCP flow to host i + N/2 (every flow crosses pods on the
fat-tree). For each link rate: build the fabric (timed) with the doctor's backends (or
--datapath / --ecn-marker), run the flows for --seconds (the first --omit seconds not counted),
compare the summed goodput with the max-min fair allocation on the routes in use (converted to
goodput with the payload share of a frame), and each flow with its own max-min rate (the worst
flow's share and Jain's fairness index of the shares: the aggregate hides starvation), record
ovs-vswitchd CPU, tear down (timed). Prints a Markdown table; ``--publish FILE`` writes it into
FILE's block ``<!-- interleave bench fabric-fidelity-DATAPATH -->``; --json writes the raw numbers.
The rows are kept as this machine's measurement (harness.capacity: a run whose links are faster than
the rates measured faithful is warned), and with ``--reference`` as the reference host's.

Run as root: sudo .venv/bin/python bench/fabric_fidelity.py [--rates 10,20,50,100] [--repeats 3]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import capacity, probe  # noqa: E402
from harness.errors import InterleaveError  # noqa: E402
from harness.fidelity import cpu_idle  # noqa: E402
from harness.fabric import Fabric  # noqa: E402
from harness.lifecycle import RunLock  # noqa: E402
from harness.linkmodel import LinkParams  # noqa: E402
from harness.maxmin import maxmin_rates  # noqa: E402
from harness.netcheck import payload_share, process_cpu_s  # noqa: E402
from harness.routing import directed_links  # noqa: E402
from harness.sets import emit_bench  # noqa: E402
from topologies import by_name  # noqa: E402


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


def jain(xs):
    """Jain's fairness index: 1 when every share is equal, 1/n when one flow gets everything."""
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if any(xs) else 0.0


def run_one(topology, rate, seconds, omit, mtu, backends, telemetry_ms=None):
    params = LinkParams.scaled(rate, mtu=mtu)
    topo = by_name(topology, link=params)
    n = len(topo.hosts)
    pairs = [(topo.hosts[i], topo.hosts[(i + n // 2) % n]) for i in range(n)]
    with RunLock() as lock:
        fab = Fabric(topo, lock.ledger, lock.dir, datapath=backends["datapath"], marker=backends["ecn_marker"],
                     cc=backends["congestion_control"], instances=backends["vswitchd_instances"])
        t0 = time.monotonic()
        fab.start()
        build = time.monotonic() - t0
        tmpdir = None
        try:
            flows = {p: directed_links(fab.routes[p]) for p in pairs}
            cap = {d: params.rate_bps for p in flows for d in flows[p]}
            ideal = maxmin_rates(flows, cap)
            servers = [fab.net.get(d).popen(["iperf3", "-s", "-1", "-p", str(5201 + i)])
                       for i, (_s, d) in enumerate(pairs)]
            time.sleep(0.5)
            tm = None
            if telemetry_ms:
                from harness.telemetry import Telemetry
                tmpdir = tempfile.mkdtemp(prefix="interleave-bench-")     # removed below, run or not
                tm = Telemetry(fab, tmpdir, period_ms=telemetry_ms, marker=False).start()
            from harness.netcheck import datapath_rx_drops, queue_drops
            ports0 = (queue_drops(), datapath_rx_drops(), fab.marker_counters())
            vpids = [inst.pid() for inst in fab.instances]
            c0, w0, m0 = sum(process_cpu_s(p) for p in vpids), time.monotonic(), cpu_idle()
            clients = [fab.net.get(s).popen(["iperf3", "-c", topo.ip(d), "-p", str(5201 + i), "-t",
                                              str(seconds), "-O", str(omit), "-J"])
                       for i, (s, d) in enumerate(pairs)]
            got, retrans = [], []
            for c in clients:
                out, _ = c.communicate(timeout=seconds + omit + 30)
                try:
                    end = json.loads(out)["end"]
                    got.append(end["sum_received"]["bits_per_second"])
                    retrans.append(end["sum_sent"].get("retransmits"))
                except (ValueError, KeyError):
                    got.append(0.0)
                    retrans.append(None)
            wall, m1 = time.monotonic() - w0, cpu_idle()
            ports1 = (queue_drops(), datapath_rx_drops(), fab.marker_counters())
            cpu = (sum(process_cpu_s(p) for p in vpids) - c0) / wall
            idle = (m1[0] - m0[0]) / max(1, m1[1] - m0[1])
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
            if tmpdir:
                shutil.rmtree(tmpdir, ignore_errors=True)
    share = payload_share(mtu)
    ideal_goodput = sum(ideal.values()) * share
    own = [g / (ideal[p] * share) for g, p in zip(got, pairs)]
    load, users = {}, {}
    for p in pairs:
        for d in flows[p]:
            load[d] = load.get(d, 0.0) + ideal[p]
            users.setdefault(d, set()).add(p)
    # a flow's bottlenecks: the switch egress queues (where the marker is) that max-min fills and that
    # two or more flows share (a queue one flow fills at its sender's rate never builds), counted once
    # per set of flows sharing them (the next hop of the same flows is fed at its rate: no queue)
    saturated = {d for d, x in load.items()
                 if x >= cap[d] * (1 - 1e-9) and len(users[d]) > 1 and d.split(">")[0] in topo.switches}
    per_flow = [{"src": s, "dst": d, "path": fab.routes[(s, d)], "goodput_mbps": round(g / 1e6, 2),
                 "maxmin_mbps": round(ideal[(s, d)] * share / 1e6, 2), "own_share": round(o, 3), "retransmits": r,
                 "bottlenecks": len({frozenset(users[x]) for x in saturated & set(flows[(s, d)])})}
                for (s, d), g, o, r in zip(pairs, got, own, retrans)]
    worst = lambda cond: min((f["own_share"] for f in per_flow if cond(f["bottlenecks"])), default=None)
    delta = lambda a, b: {k: b[k] - a.get(k, 0) for k in b if b[k] - a.get(k, 0)}
    per_port = {"queue_drops": delta(ports0[0], ports1[0]), "socket_drops": delta(ports0[1], ports1[1]),
                "marks": delta({k: v.get("marked", 0) for k, v in ports0[2].items()},
                               {k: v.get("marked", 0) for k, v in ports1[2].items()})}
    return {"topology": topology, "rate_mbps": rate, "mtu": mtu, "flows": len(pairs),
            "datapath": backends["datapath"], "ecn_marker": backends["ecn_marker"],
            "congestion_control": backends["congestion_control"],
            "worst_flow_share": round(min(own), 3), "jain_index": round(jain(own), 3),
            "worst_one_bottleneck": worst(lambda n: n == 1), "worst_two_bottlenecks": worst(lambda n: n >= 2),
            "queue_bytes": params.queue_bytes, "ecn_k_bytes": params.ecn_k_bytes,
            "aggregate_mbps": round(sum(got) / 1e6, 1), "ideal_mbps": round(ideal_goodput / 1e6, 1),
            "fidelity": round(sum(got) / ideal_goodput, 3),
            "min_flow_mbps": round(min(got) / 1e6, 2), "max_flow_mbps": round(max(got) / 1e6, 2),
            "vswitchd_instances": backends["vswitchd_instances"], "cpu_model": capacity.machine().get("cpu"),
            "vswitchd_cpu": round(cpu, 2), "cpu_idle": round(idle, 3), "build_s": round(build, 2), "teardown_s": round(teardown, 2),
            "telemetry_ms": telemetry_ms, "sample_interval_ms": samp[0], "samples_received": samp[1],
            "per_flow": per_flow, "per_port": per_port}


def span(vals, fmt="{:.3f}"):
    lo, hi = fmt.format(min(vals)), fmt.format(max(vals))
    return lo if lo == hi else f"{lo}-{hi}"


def fidelity_table(rows, machine):
    """The benchmark's Markdown table of ``rows`` (one backend), one line per link rate."""
    r0, rates = rows[0], sorted({r["rate_mbps"] for r in rows})
    n = r0.get("vswitchd_instances", 1)
    lines = [f"{r0['topology']}, {len(rows) // len(rates)} run(s) per link rate, datapath {r0['datapath']}"
             f"{f' in {n} ovs-vswitchd instances' if n > 1 else ''}, ECN marker {r0['ecn_marker']}, "
             f"{r0['congestion_control']}+ECN; {machine['cores']} CPU(s) ({machine['cpu']}); ranges over the runs. "
             "Own share = a flow's goodput / its max-min rate; vswitchd CPU in cores, summed over the instances; "
             "CPU idle = the machine's idle share during the flows. A flow's bottlenecks: the switch queues "
             "max-min fills that it shares with other flows (bench/parking_lot.py: TCP gives a flow behind two "
             "less than max-min on any fabric).", "",
             "| link | flows | aggregate / max-min ideal (Mbit/s) | fidelity | worst flow's own share | "
             "worst, one bottleneck | worst, two | Jain index | slowest..fastest flow (Mbit/s) | vswitchd CPU | "
             "CPU idle | build | teardown |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for rate in rates:
        rs = [r for r in rows if r["rate_mbps"] == rate]
        lines.append(f"| {rate:g} Mbit/s | {rs[0]['flows']} | {span([r['aggregate_mbps'] for r in rs], '{:.1f}')} / "
                     f"{rs[0]['ideal_mbps']} | {span([r['fidelity'] for r in rs])} | "
                     f"{span([r['worst_flow_share'] for r in rs])} | {span([r['worst_one_bottleneck'] for r in rs])} | "
                     f"{span([r['worst_two_bottlenecks'] for r in rs])} | {span([r['jain_index'] for r in rs])} | "
                     f"{min(r['min_flow_mbps'] for r in rs)}..{max(r['max_flow_mbps'] for r in rs)} | "
                     f"{span([r['vswitchd_cpu'] for r in rs], '{:.0%}')} | {span([r['cpu_idle'] for r in rs], '{:.0%}')} | "
                     f"{span([r['build_s'] for r in rs], '{:.1f}')} s | {span([r['teardown_s'] for r in rs], '{:.1f}')} s |")
    return "# fabric fidelity\n\n" + "\n".join(lines) + "\n"


def report_only(path, publish):
    """Render a reference file's rows (``--reference`` wrote it) again, published with its command."""
    doc = json.loads(Path(path).read_text())
    key = capacity.key(doc["rows"][0]["datapath"], doc["rows"][0].get("vswitchd_instances", 1))
    emit_bench(f"fabric-fidelity-{key}", fidelity_table(doc["rows"], doc["machine"]), publish,
               doc.get("command", "sudo .venv/bin/python bench/fabric_fidelity.py"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="fattree")
    ap.add_argument("--rates", default="10,20,50,100")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--mtu", type=int, default=9000)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--omit", type=int, default=2)
    ap.add_argument("--datapath", choices=["kernel", "user"], help="override the doctor's choice")
    ap.add_argument("--ecn-marker", choices=["red", "bpf"], help="override the doctor's choice")
    ap.add_argument("--vswitchd-instances", type=int, help="ovs-vswitchd processes sharing the switches "
                    "(userspace datapath; override the doctor's choice)")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--reference", action="store_true", help="also write the rows as the reference host's "
                    "(results/fabric-fidelity/KEY.json, KEY user or user-xN: what a run on an unmeasured "
                    "machine is warned by)")
    ap.add_argument("--publish", metavar="FILE")
    ap.add_argument("--report-only", metavar="REFERENCE_JSON", help="render a reference file's rows again "
                    "(results/fabric-fidelity/KEY.json) and publish them with the command that measured them")
    ap.add_argument("--telemetry-ms", default="", help="comma list of polling periods to compare (0 = off), "
                                                        "at the first rate of --rates")
    args = ap.parse_args()
    if args.report_only:
        return report_only(args.report_only, args.publish)
    if os.geteuid() != 0:
        sys.exit("bench needs root: sudo .venv/bin/python bench/fabric_fidelity.py")
    findings = probe.doctor()
    try:
        backends = probe.resolve(findings, args.datapath, args.ecn_marker, instances=args.vswitchd_instances)
        probe.require_ready(findings)
    except InterleaveError as exc:
        sys.exit(f"fabric_fidelity: {exc}")
    rows = []
    if args.telemetry_ms:
        rate = float(args.rates.split(",")[0])
        lines = [f"{args.topology}, {rate:g} Mbit/s links under the benchmark's load, the controller's telemetry polling "
                 f"port statistics at each period (off: no telemetry); {args.repeats} run(s) per period, ranges over "
                 f"the runs; datapath {backends['datapath']}, {os.cpu_count()} CPU(s).", "",
                 "| polling period | aggregate / ideal (Mbit/s) | fidelity | vswitchd CPU | median sample interval | "
                 "samples received |", "| --- | --- | --- | --- | --- | --- |"]
        for p in (float(x) for x in args.telemetry_ms.split(",")):
            rs = [run_one(args.topology, rate, args.seconds, args.omit, args.mtu, backends, telemetry_ms=p or None)
                  for _ in range(args.repeats)]
            rows += rs
            print(f"{'off' if not p else f'{p:g} ms'}: fidelity {[r['fidelity'] for r in rs]}", file=sys.stderr, flush=True)
            lines.append(f"| {'off' if not p else f'{p:g} ms'} | {span([r['aggregate_mbps'] for r in rs], '{:.1f}')} / "
                         f"{rs[0]['ideal_mbps']} | {span([r['fidelity'] for r in rs])} | "
                         f"{span([r['vswitchd_cpu'] for r in rs], '{:.0%}')} | "
                         f"{span([r['sample_interval_ms'] for r in rs], '{:g}') + ' ms' if p else '-'} | "
                         f"{span([r['samples_received'] for r in rs], '{:.0%}') if p else '-'} |")
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2))
        emit_bench("telemetry-polling", "# telemetry polling\n\n" + "\n".join(lines) + "\n", args.publish,
                   "sudo .venv/bin/python bench/fabric_fidelity.py " + " ".join(sys.argv[1:]))
        return
    n = backends["vswitchd_instances"]
    for rate in (float(r) for r in args.rates.split(",")):
        for i in range(args.repeats):
            rows.append(run_one(args.topology, rate, args.seconds, args.omit, args.mtu, backends))
            r = rows[-1]
            print(f"{rate:g} Mbit/s run {i + 1}/{args.repeats}: fidelity {r['fidelity']}, worst flow "
                  f"{r['worst_flow_share']}, Jain {r['jain_index']}, vswitchd CPU {r['vswitchd_cpu']}, "
                  f"CPU idle {r['cpu_idle']}", file=sys.stderr, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    key = capacity.key(backends["datapath"], n)
    capacity.record(rows, key, measured_utc=when)
    print(f"recorded as this machine's measurement: {capacity.MACHINE_RECORD}", file=sys.stderr)
    if args.reference:
        ref = capacity.REFERENCE_DIR / f"{key}.json"
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(json.dumps({"machine": capacity.machine(), "measured_utc": when, "rows": rows,
                                   "command": "sudo .venv/bin/python bench/fabric_fidelity.py " + " ".join(sys.argv[1:])},
                                  indent=2) + "\n")
        print(f"written as the reference host's: {ref}", file=sys.stderr)
    emit_bench(f"fabric-fidelity-{key}", fidelity_table(rows, capacity.machine()), args.publish,
               "sudo .venv/bin/python bench/fabric_fidelity.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
