#!/usr/bin/env python3
"""TCP over the emulated fabric against the flow model (harness.sim.flows): the calibration of the
model's link. On the 24-host fat-tree at the echelon specs' link (50 Mbit/s, 9000-byte
MTU), per queue sharing (fifo, priority), it times flows released together (finish - release, as
agents.stage reports them): one flow alone over 2 and 6 hops at sizes 10 KB-640 KB, two flows
sharing a path's fabric links (40 KB and 160 KB each; 160 KB with the second released 2, 5 or
10 ms after the first: what a head start is worth), three flows into one host (160 KB each),
two such pairs at once (eight agents, as in the echelon specs), two and four flows on disjoint
paths (40 KB; 160 KB), a ring of four ranks and two such rings sharing links (40 KB each: one
all-reduce step of the tensor spec); the run's telemetry samples the fabric meanwhile, as in a run.
Every agent's sleep lateness (agents.wire: how late it woke from the sleep that times an op) is
pooled into 20 quantiles: the model lengthens each compute op by one of them, drawn at random.
It then fits the model's three link parameters to every flow time: ``burst_bytes`` (what a flow
sends at once through the shapers' token buckets), ``flow_latency_s`` (a flow's fixed cost:
connection wake-up, the last packet's store-and-forward) and ``start_cost_s`` (the fabric's start
backlog: flows starting together wait for each other, the 2-core machine forwarding their first
packets one after another), by least squares over a grid, and prints per
scenario the measured median and the model's time with the fitted and with the uncalibrated link
(no burst, one packet of store-and-forward per hop). The fitted values are
harness.sim.calibration.LINK_MODEL and OP_LATENESS_MS.

  sudo .venv/bin/python bench/tcp_sharing.py [--steps 12] [--out results/calibration/tcp_sharing.json]
      [--publish results/echelon/README.md]      (--report-only: render --out's measurements again;
      --no-telemetry: without the run's telemetry, for comparison)
"""
import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.linkmodel import LinkParams  # noqa: E402
from harness.sim.flows import model_flow_times, released_together  # noqa: E402
from harness.spec import Job  # noqa: E402
from topologies import fattree  # noqa: E402

KB = 1000
DISJOINT = [("h1", "h7"), ("h13", "h19"), ("h10", "h4"), ("h22", "h16")]     # no fabric link in common
RING_A = [("h1", "h7"), ("h7", "h13"), ("h13", "h19"), ("h19", "h1")]        # echelon-tensor's job a
RING_B = [("h2", "h8"), ("h8", "h14"), ("h14", "h20"), ("h20", "h2")]        # and job b
# (name, [(src host, dst host, bytes[, delay s])]): flows released together each step (a delay staggers one)
SCENARIOS = ([(f"alone 6 hops {s} KB", [("h1", "h7", s * KB)]) for s in (10, 20, 40, 80, 160, 320, 640)]
             + [(f"alone 2 hops {s} KB", [("h1", "h2", s * KB)]) for s in (40, 160)]
             + [(f"pair {s} KB", [("h1", "h7", s * KB), ("h2", "h8", s * KB)]) for s in (40, 160)]
             + [(f"pair 160 KB, second {d} ms later", [("h1", "h7", 160 * KB), ("h2", "h8", 160 * KB, d / 1000)])
                for d in (2, 5, 10)]
             + [("incast 3 x 160 KB", [("h7", "h1", 160 * KB), ("h13", "h1", 160 * KB), ("h19", "h1", 160 * KB)]),
                ("two pairs 160 KB", [("h1", "h7", 160 * KB), ("h2", "h8", 160 * KB), ("h13", "h19", 160 * KB),
                                      ("h14", "h20", 160 * KB)])]
             + [(f"disjoint {len(p)} x {s} KB", [(a, b, s * KB) for a, b in p])
                for p, s in ((DISJOINT[:2], 40), (DISJOINT, 40), (DISJOINT, 160))]
             + [("ring 4 x 40 KB", [(a, b, 40 * KB) for a, b in RING_A]),
                ("two rings 8 x 40 KB", [(a, b, 40 * KB) for a, b in RING_A + RING_B])])
LATENESS_QUANTILES = [(i + 0.5) / 20 for i in range(20)]
BURSTS_KB = np.arange(0, 121, 4)
START_COSTS_MS = np.arange(0, 2.01, 0.1)


def program(flows):
    """(hosts, agent config) of one job running ``flows`` as harness.sim.flows.released_together
    models them."""
    from harness.planners.flowplan import programs
    hosts, e = released_together(flows)
    cfg = {"kind": "program", "period_s": 0.3, "programs": {str(w): ops for w, ops in programs(e, len(hosts)).items()},
           "flows": [{"name": f.name, "src": f.src, "dst": f.dst, "bytes": f.bytes, "target_s": None, "schedule": None,
                      "priority": None} for f in e.flows]}
    return hosts, cfg


def measure(fab, flows, steps, tmp, telemetry=True):
    """The scenario's flow times per flow and the agents' lateness, with the fabric's telemetry
    sampling as in a run (harness.telemetry at its default periods: its load is part of what a run's
    flows see), unless ``telemetry`` is false."""
    from harness.replay import Replayer
    from harness.telemetry import Telemetry
    from workloads.profiles import builtins
    hosts, cfg = program(flows)
    rp = Replayer(fab, tmp)
    tm = Telemetry(fab, tmp / "telemetry").start() if telemetry else None
    t = time.clock_gettime(time.CLOCK_MONOTONIC)
    try:
        rp.start(Job("cal", "gpt2", len(hosts), steps), builtins()["gpt2"], hosts, 0.0, t + 1.5, t, 0, False, program=cfg)
        summaries = rp.wait(120)
    finally:
        if tm:
            tm.stop()
    f = rp.flows().query("step > 0")
    return ({name: (g.finish - g.release).tolist() for name, g in f.groupby("flow")},
            [v["timer_late_ms"] for v in summaries.values() if v.get("timer_late_ms")])


def fit(results, link, routes):
    """(burst bytes, latency s, start cost s) minimising the squared error of the model's flow
    times over every measured flow (each scenario's median per flow). The latency adds to every
    modelled time (no flow here waits for another's arrival), so per burst and start cost the best
    latency is the mean residual."""
    measured = np.array([np.median(results[name][f"f{i}"]) for name, flows in SCENARIOS for i in range(len(flows))])
    best = None
    for b in BURSTS_KB * KB:
        for c in START_COSTS_MS / 1000:
            model = np.array([t for _name, flows in SCENARIOS
                              for t in model_flow_times(flows, routes, link, b, 0.0, start_cost_s=c)])
            lat = max(0.0, float(np.mean(measured - model)))
            err = float(np.sum((measured - model - lat) ** 2))
            if best is None or err < best[0]:
                best = (err, b, lat, c)
    return best[1:]


def measure_all(steps, telemetry=True):
    """The benchmark's document: per sharing the fit and every scenario's flows, and the agents'
    lateness."""
    from harness.fidelity import pooled_quantiles
    from tests.emulation.conftest import running_fabric
    doc = {"command": "sudo .venv/bin/python bench/tcp_sharing.py" + ("" if telemetry else " --no-telemetry"),
           "steps": steps, "telemetry": telemetry, "date": time.strftime("%Y-%m-%d"), "sharing": {}}
    lateness = []
    for sharing in ("fifo", "priority"):
        link = LinkParams.from_spec({"rate_mbps": 50, "sharing": sharing})
        results = {}
        with running_fabric(fattree(4, 3, link)) as fab:
            routes = dict(fab.routes)
            for name, flows in SCENARIOS:
                with tempfile.TemporaryDirectory() as tmp:
                    results[name], late = measure(fab, flows, steps, Path(tmp), telemetry)
                lateness += late
                print(f"{sharing}: {name} measured", file=sys.stderr, flush=True)
        burst, lat, cost = fit(results, link, routes)
        doc["sharing"][sharing] = {"burst_bytes": int(burst), "flow_latency_s": round(lat, 6),
                                   "start_cost_s": round(float(cost), 6),
                                   "shaper_burst_bytes": link.burst_bytes, "scenarios": {}}
        for name, flows in SCENARIOS:
            fitted = model_flow_times(flows, routes, link, burst, lat, start_cost_s=cost)
            raw = model_flow_times(flows, routes, link, 0.0, 0.0, store_and_forward=True)
            doc["sharing"][sharing]["scenarios"][name] = [
                {"measured_ms": [round(float(x), 2) for x in np.percentile(np.array(results[name][f"f{i}"]) * 1000,
                                                                          [25, 50, 75])],
                 "fitted_ms": round(fitted[i] * 1000, 2), "uncalibrated_ms": round(raw[i] * 1000, 2)}
                for i in range(len(flows))]
    q = pooled_quantiles(lateness, LATENESS_QUANTILES)
    p50, p99 = pooled_quantiles(lateness, [0.5, 0.99])
    doc["op_lateness_ms"] = {"quantiles": q, "at": LATENESS_QUANTILES, "p50": p50, "p99": p99,
                             "sleeps": sum(x["n"] for x in lateness)}
    return doc


def rms_error(scenarios):
    """{"staggered pairs" | "the other scenarios": (RMS of fitted - measured median in ms, flows)}
    over a document's scenarios (a staggered one releases a flow later: SCENARIOS' fourth element)."""
    staggered = {name for name, flows in SCENARIOS if any(len(f) > 3 for f in flows)}
    err = {"staggered pairs": [], "the other scenarios": []}
    for name, rows in scenarios.items():
        for r in rows:
            err["staggered pairs" if name in staggered else "the other scenarios"].append(r["fitted_ms"] - r["measured_ms"][1])
    return {k: (float(np.sqrt(np.mean(np.square(v)))), len(v)) for k, v in err.items() if v}


def markdown(doc):
    lines = [f"# tcp sharing\n\nMeasured {doc.get('date', '')}, {doc['steps']} steps per scenario, on the 24-host "
             "fat-tree at 50 Mbit/s (9000-byte MTU), "
             + ("with the run's telemetry sampling the fabric" if doc.get("telemetry") else "without telemetry")
             + "; flow time = release to arrival, median [p25, p75] over the steps."]
    for sharing, d in doc["sharing"].items():
        lines += ["", f"**{sharing} queues**: fitted burst {d['burst_bytes'] / KB:.0f} KB (the shaper's: "
                  f"{d.get('shaper_burst_bytes', 0) / KB:.0f} KB per port), flow latency {d['flow_latency_s'] * 1000:.1f} ms, "
                  f"start cost {d.get('start_cost_s', 0) * 1000:.1f} ms per flow.",
                  "", "| scenario | flow | measured | model, fitted | model, uncalibrated |", "| --- | --- | --- | --- | --- |"]
        for name, rows in d["scenarios"].items():
            for i, r in enumerate(rows):
                p25, med, p75 = r["measured_ms"]
                lines.append(f"| {name} | f{i} | {med:.1f} [{p25:.1f}, {p75:.1f}] ms | {r['fitted_ms']:.1f} ms | "
                             f"{r['uncalibrated_ms']:.1f} ms |")
        lines += ["", "Fitted model's RMS error against the medians: " + "; ".join(
            f"{what} {rms:.1f} ms ({n} flows)" for what, (rms, n) in rms_error(d["scenarios"]).items()) + "."]
    late = doc["op_lateness_ms"]
    lines += ["", f"Agents' sleep lateness (every agent of every scenario, {late['sleeps']} sleeps): mean "
              f"{np.mean(late['quantiles']):.2f} ms, p50 {late['p50']} ms, p99 {late['p99']} ms; 20 quantiles (ms): "
              + ", ".join(f"{x:g}" for x in late["quantiles"]) + "."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--no-telemetry", action="store_true",
                    help="measure without the run's telemetry sampling the fabric (not what a run sees)")
    ap.add_argument("--out", default="results/calibration/tcp_sharing.json")
    ap.add_argument("--report-only", action="store_true", help="render --out's measurements again, measure nothing")
    ap.add_argument("--publish", metavar="FILE", help="write the table into FILE's block <!-- interleave bench "
                    "tcp-sharing --> (tcp-sharing-no-telemetry with --no-telemetry)")
    args = ap.parse_args()
    from harness.sets import emit_bench
    if args.report_only:
        doc = json.loads(Path(args.out).read_text())
    else:
        if os.geteuid() != 0:
            sys.exit("needs root: sudo .venv/bin/python bench/tcp_sharing.py")
        doc = measure_all(args.steps, not args.no_telemetry)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(doc, indent=1))
    emit_bench("tcp-sharing" + ("" if doc.get("telemetry", True) else "-no-telemetry"), markdown(doc), args.publish,
               f"{doc['command']} --steps {doc['steps']} --out {args.out}")


if __name__ == "__main__":
    main()
