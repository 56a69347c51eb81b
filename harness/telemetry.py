"""Telemetry of a run: link utilisation and ECN marks on one clock, stored as ``links.csv``.

Sources (the ``source`` column of links.csv says which one a row comes from):
  openflow  the controller's port statistics (tx_bytes, utilisation) and its CE-counting entries:
            ``ecn_marked`` = CE packets that *arrived* over the link at the next switch (marked on
            this link or upstream). Directions into a host are not seen by a next switch: NaN.
  marker    the ECN marker's own per-port counters: ``ecn_marked`` = packets this link's egress
            queue marked; ``tx_bytes`` = bytes offered to the queue. Host NICs have no marker: no row.
Flow counters lag the datapath by up to one revalidation (see FLOW_STATS_SETTLE_S).
Directed link ``a>b`` is measured at a switch: its tx counter if ``a`` is a switch, else (host NIC)
the rx counter of ``b``'s port. OVS reports 10 Gbit/s for every port whatever the shaping, so
utilisation uses the rate of the topology's link model, over the switch's own counter time stamps
(port age in the stats reply), not the arrival times of replies. Times are seconds since the run start
(CLOCK_MONOTONIC, the clock of the agents). A sample that did not arrive is a gap, never a zero.
``counter_time``: when the counter was read, on the counter's own clock (openflow: the port's age
at the switch; marker: the sampler's read time): differences of it are exact intervals for tx_bytes.
"""
import json
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

COLUMNS = ["time", "link", "direction", "tx_bytes", "utilization", "ecn_marked", "source", "counter_time"]

# OVS refreshes OpenFlow *flow* counters from its datapath flows in the revalidator, every
# max-revalidator (500 ms by default); port counters are read live. A measured window must start
# and end with this much quiet time, or CE counts of packets sent just before the edge land on the
# wrong side of it (measured: 14 of 946 CE packets missing 0.4 s after the traffic stopped).
# A quiet period is not proof that the controller's samples caught up: netcheck also waits until its
# last sample of every switch equals the switch's own counters (wait_ce_caught_up).
FLOW_STATS_SETTLE_S = 1.2
PERIOD_MS = 100       # port statistics and marker counters, unless a spec's telemetry.period_ms says
# flow statistics enumerate every CE entry of a switch: polled at most this often (docs/fabric.md, Telemetry)
CE_PERIOD_MS = 1000


def mono():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


class Telemetry:
    """Start/stop sampling on a running Fabric; ``links(run_start)`` builds the table."""

    def __init__(self, fabric, workdir, period_ms=PERIOD_MS, dpids=None, marker=True, ce_period_ms=CE_PERIOD_MS):
        self.fab, self.dir, self.period = fabric, Path(workdir), period_ms / 1000.0
        self.dpids, self.marker, self.ce_period_ms = dpids, marker, max(ce_period_ms, period_ms)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.of_path, self.mk_path = self.dir / "openflow.jsonl", self.dir / "marker.jsonl"
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        self.of_path.write_text("")
        self.mk_path.write_text("")
        self.fab.client().call("telemetry_start", out=str(self.of_path), period_ms=self.period * 1000,
                               dpids=self.dpids, ce_period_ms=self.ce_period_ms)
        if self.marker:
            self._thread = threading.Thread(target=self._sample_marker, daemon=True)
            self._thread.start()
        return self

    def _sample_marker(self):
        with open(self.mk_path, "a", buffering=1) as f:
            nxt = mono()
            while not self._stop.is_set():
                try:
                    counters = self.fab.marker_counters()
                    f.write(json.dumps({"t": mono(), "ports": {d: [c.get("bytes", 0), c.get("marked", 0)]
                                                               for d, c in counters.items()}}) + "\n")
                except Exception:  # a failed read is a gap
                    pass
                nxt += self.period
                self._stop.wait(max(0.0, nxt - mono()))

    def sample_now(self):
        """One synchronous marker sample (used at the edges of a measurement)."""
        with open(self.mk_path, "a") as f:
            counters = self.fab.marker_counters()
            f.write(json.dumps({"t": mono(), "ports": {d: [c.get("bytes", 0), c.get("marked", 0)]
                                                       for d, c in counters.items()}}) + "\n")

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(5)
        try:
            self.fab.client().call("telemetry_stop")
        except Exception:
            pass

    # ---- tables ---------------------------------------------------------
    def links(self, run_start):
        return build_links(self.fab.topo, self.fab.routes, read_jsonl(self.of_path), read_jsonl(self.mk_path),
                           self.fab.port_dev, run_start)


def wait_ce_quiet(path, quiet_s=FLOW_STATS_SETTLE_S, timeout_s=8.0):
    """Wait until the controller's CE counters (records of kind ``ce`` in ``path``, written by a
    running Telemetry) have not changed for ``quiet_s``, at most ``timeout_s``: the revalidator
    pushes flow statistics up to 0.5 s late, later when the CPU is busy (a fixed 1.2 s wait once
    left 20 of 337 CE packets uncounted during a CI run). Returns the seconds waited."""
    t0 = time.monotonic()
    seen, since = None, t0
    while time.monotonic() - t0 < timeout_s:
        latest = {}
        for r in read_jsonl(path):
            if r["kind"] == "ce":
                latest[r["dpid"]] = r["ce"]
        key = json.dumps(latest, sort_keys=True)
        if key != seen:
            seen, since = key, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
        time.sleep(0.1)
    return time.monotonic() - t0


CATCH_UP_MIN_COMPARISONS = 3    # however long one read of the switches takes (17.3 s in the one-CPU guest)


def wait_ce_caught_up(fab, path, timeout_s=15.0, stats=None):
    """Wait until the controller's latest CE sample of every switch (in ``path``) equals what the
    switch itself reports (``Fabric.switch_ce_counters``). Measured (leafspine, 2026-12-01): after
    the counters had been quiet for 1.2-3 s, the controller's last samples of the busiest switches
    still lacked up to 67 of 283 CE packets that the switches' own entries had counted; a quiet
    period cannot tell a lagging sampler from a finished count, equality with the switch can.
    Returns the seconds it took, or None if not caught up within ``timeout_s`` and
    CATCH_UP_MIN_COMPARISONS comparisons: in the stock-kernel guest one read of the fat-tree's
    switches took 17.3 s, longer than the timeout, so a controller one sample behind at the first
    comparison got no second one. ``stats``, a dict,
    receives how many comparisons were made, the longest read of the switches' counters, and the
    switches that still differed at the last one (what a failure needs to be understood)."""
    t0 = time.monotonic()
    comparisons, read_max, differ = 0, 0.0, []
    try:
        while time.monotonic() < t0 + timeout_s or comparisons < CATCH_UP_MIN_COMPARISONS:
            t_read = time.monotonic()
            truth, latest = fab.switch_ce_counters(), {}
            read_max = max(read_max, time.monotonic() - t_read)
            for r in read_jsonl(path):
                if r["kind"] == "ce":
                    latest[r["dpid"]] = r["ce"]
            comparisons += 1
            differ = sorted(d for d, c in truth.items() if latest.get(d) != c)
            if not differ:
                return round(time.monotonic() - t0, 2)
            time.sleep(0.2)
        return None
    finally:
        if stats is not None:
            stats.update(comparisons=comparisons, switch_read_s_max=round(read_max, 2), switches_differing=differ)


def read_jsonl(path):
    out = []
    p = Path(path)
    if p.exists():
        for line in p.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a partial last line of an interrupted run
    return out


def port_map(topo):
    """(dpid, port) -> [(link id, direction, counter index)] with counter 1 = tx, 0 = rx."""
    m = {}
    for link in topo.links:
        for did, frm, to, port in link.directions():
            if frm in topo.switches:
                m.setdefault((topo.dpid(frm), port), []).append((link.id, did, 1, link.params.rate_bps))
            else:  # host NIC: measured as rx at the switch port it feeds
                m.setdefault((topo.dpid(to), topo.port(to, frm)), []).append((link.id, did, 0, link.params.rate_bps))
    return m


def ce_index(topo, routes):
    """{dpid: [("srcmac>dstmac", direction into that switch)]}: where each pair's CE-counting entry
    at a switch counts arrivals, from the routes."""
    index = {}
    for (src, dst), path in routes.items():
        key = f"{topo.mac(src)}>{topo.mac(dst)}"
        for prev, node in zip(path, path[1:]):
            if node in topo.switches:
                index.setdefault(topo.dpid(node), []).append((key, f"{prev}>{node}"))
    return index


def ce_arrivals(topo, routes, ce_by_switch, index=None):
    """{direction: CE packets that arrived over it} from one CE sample per switch {dpid: {pair: n}};
    ``index``: ``ce_index(topo, routes)``, when the caller has it already."""
    index = ce_index(topo, routes) if index is None else index
    out = {}
    for dpid, counts in ce_by_switch.items():
        for key, did in index.get(dpid, ()):
            n = counts.get(key)
            if n is not None:
                out[did] = out.get(did, 0) + n
    return out


def build_links(topo, routes, of_records, mk_records, port_dev, run_start):
    rows = []
    pmap = port_map(topo)
    last = {}
    # CE entries: each switch's sample applied at its record's time
    index = ce_index(topo, routes)
    switch_in = {dpid: sorted({did for _key, did in pairs}) for dpid, pairs in index.items()}
    link_of = {d: l.id for l in topo.links for d, *_ in l.directions()}
    for rec in sorted(of_records, key=lambda r: r["t"]):
        t = rec["t"] - run_start
        if rec["kind"] == "port":
            for port, vals in rec["ports"].items():
                for link_id, did, idx, rate in pmap.get((rec["dpid"], int(port)), []):
                    b = vals[idx]
                    # the switch's own counter time (port age) when the reply has it: replies can
                    # arrive bunched, their receipt times are not when the counters were read
                    ts = vals[5] if len(vals) > 5 else t
                    prev = last.get(did)
                    util = np.nan if prev is None or ts <= prev[0] else (b - prev[1]) * 8 / (ts - prev[0]) / rate
                    last[did] = (ts, b)
                    rows.append((t, link_id, did, b, util, np.nan, "openflow", ts))
        elif rec["kind"] == "ce":
            arrived = ce_arrivals(topo, routes, {rec["dpid"]: rec["ce"]}, index)
            for did in switch_in.get(rec["dpid"], ()):
                rows.append((t, link_of[did], did, np.nan, np.nan, arrived.get(did, 0), "openflow", np.nan))
    dev_dir = {}
    for link in topo.links:
        for did, frm, _to, port in link.directions():
            if frm in topo.switches:
                dev_dir[port_dev(frm, port)] = (link.id, did, link.params.rate_bps)
    lastm = {}
    for rec in sorted(mk_records, key=lambda r: r["t"]):
        t = rec["t"] - run_start
        for dev, (b, marked) in rec["ports"].items():
            if dev not in dev_dir:
                continue
            link_id, did, rate = dev_dir[dev]
            prev = lastm.get(did)
            util = np.nan if prev is None or t <= prev[0] else (b - prev[1]) * 8 / (t - prev[0]) / rate
            lastm[did] = (t, b)
            rows.append((t, link_id, did, b, util, marked, "marker", t))
    df = pd.DataFrame(rows, columns=COLUMNS)
    return df.sort_values(["time", "source", "direction"], kind="stable").reset_index(drop=True)


def ce_by_pair(of_records, topo, routes):
    """Latest CE count per (src, dst) at the last switch of its route (marks on every link but the last)."""
    latest = {}
    for rec in of_records:
        if rec["kind"] == "ce":
            latest[rec["dpid"]] = rec["ce"]
    out = {}
    for (src, dst), path in routes.items():
        last_switch = path[-2]
        out[(src, dst)] = latest.get(topo.dpid(last_switch), {}).get(f"{topo.mac(src)}>{topo.mac(dst)}", 0)
    return out
