"""Proactive fabric controller: installs the harness's routes, answers ARP, counts CE packets.

Written as a Ryu-style app (one class, ``@set_ev_cls`` handlers, state per datapath id); it runs
under os-ken and, with the import names switched, under Ryu.

Input: the fabric file named by ``INTERLEAVE_FABRIC`` (JSON written by harness.fabric):
``{"topology": Topology.to_dict(), "routes": {"h1>h7": ["h1", "s1", ..., "h7"]}, "control": PATH}``.

Per switch, for every route through it (priorities):
  * 20: ``eth_type=IPv4, ip_ecn=3, eth_src, eth_dst`` -> next hop (counts CE packets arriving here);
  * 10: ``eth_src, eth_dst`` -> next hop;
  * 100: ARP -> controller (answered by proxy ARP, never flooded);
  * 0: table miss -> drop (no flooding on a looped fabric).
A switch that (re)connects gets all of its entries again, then a barrier; it counts as *synced*
when the barrier reply arrives.

Control socket (JSON lines on a Unix socket): ``{"op": "status"}``, ``{"op": "routes"}`` (what is
installed, rebuilt by walking the installed entries), ``{"op": "pin", "src", "dst", "path"}``,
``{"op": "telemetry_start", "out": FILE, "period_ms": P}`` and ``{"op": "telemetry_stop"}``.

Telemetry (one hub thread, like Ryu's simple_monitor_13): every period a port-stats request, and
every ``ce_period_ms`` (default 1 s) a flow-stats request for the CE entries (cookie 0xCE), to every
switch (flow stats enumerate all CE entries of a switch: polling them at 100 ms slowed forwarding); each reply becomes a JSON line
``{"t": CLOCK_MONOTONIC seconds at receipt, "dpid", "kind": "port"|"ce", ...}`` with per-port
``[rx_bytes, tx_bytes, rx_packets, tx_packets, tx_dropped, duration_s]`` or per-pair ``"srcmac>dstmac": CE
packets that arrived at this switch``. A lost reply is a missing line, never a zero. A switch gets no
new request of a kind while one is unanswered (``_may_ask``): samples are as fresh as the machine allows.
"""
import json
import logging
import os
import time

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.lib.packet import arp, ethernet, ether_types, packet
from os_ken.ofproto import ofproto_v1_3

from controllers.flows import COOKIE_CE, COOKIE_ROUTE, PRIO_ARP, PRIO_CE, PRIO_ROUTE

LOG = logging.getLogger("interleave.controller")
TM_REPLY_TIMEOUT_S = 5.0      # a statistics request unanswered this long is taken as lost


def route_entries(topology, routes):
    """{dpid: {(src_mac, dst_mac): out_port}} for the given routes."""
    dpid = {s["name"]: s["dpid"] for s in topology["switches"]}
    macs = {h["name"]: h["mac"] for h in topology["hosts"]}
    ports = {}
    for link in topology["links"]:
        ports[(link["a"], link["b"])] = link["a_port"]
        ports[(link["b"], link["a"])] = link["b_port"]
    table = {d: {} for d in dpid.values()}
    for key, path in routes.items():
        src, dst = key.split(">")
        for node, nxt in zip(path[1:-1], path[2:]):
            table[dpid[node]][(macs[src], macs[dst])] = ports[(node, nxt)]
    return table


def port_counters(body):
    """{port_no: [rx_bytes, tx_bytes, rx_packets, tx_packets, tx_dropped, duration_s]} of an
    OFPPortStatsReply body, without the reserved ports (LOCAL etc.). ``duration_s`` is the switch's
    own time stamp of the counters (port age): rates are computed over it, not over the arrival
    times of replies, which can bunch up."""
    return {st.port_no: [st.rx_bytes, st.tx_bytes, st.rx_packets, st.tx_packets, st.tx_dropped,
                         st.duration_sec + st.duration_nsec / 1e9]
            for st in body if st.port_no < 0xffffff00}


def ce_counters(body):
    """{"srcmac>dstmac": packets} of the CE-counting entries in an OFPFlowStatsReply body."""
    return {f"{st.match['eth_src']}>{st.match['eth_dst']}": st.packet_count
            for st in body if st.cookie == COOKIE_CE}


class FabricController(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        with open(os.environ["INTERLEAVE_FABRIC"]) as f:
            fabric = json.load(f)
        self.topology = fabric["topology"]
        self.routes = dict(fabric["routes"])
        self.table = route_entries(self.topology, self.routes)
        self.ip_to_mac = {h["ip"]: h["mac"] for h in self.topology["hosts"]}
        self.datapaths = {}
        self.synced = set()
        self.installed = {}  # dpid -> {(src_mac, dst_mac): port} as last sent and acknowledged
        self.pending = {}    # dpid -> table sent, awaiting barrier
        self.server = hub.StreamServer((fabric["control"], None), self._serve)
        self.server_thread = hub.spawn(self.server.serve_forever)

    # ---- OpenFlow -----------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def switch_features(self, ev):
        dp = ev.msg.datapath
        if dp.id is None:           # os-ken's own handler of this event sets it, and may run after this one
            dp.id = ev.msg.datapath_id
        self.datapaths[dp.id] = dp
        self.synced.discard(dp.id)
        self._install_all(dp)

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def state_change(self, ev):
        dp = ev.datapath
        if dp.id is not None and self.datapaths.get(dp.id) is dp:
            del self.datapaths[dp.id]
            self.synced.discard(dp.id)
            LOG.info("switch %s disconnected", dp.id)

    # A switch's replies can arrive before os-ken moves it to MAIN (it waits for its own port
    # description request), and os-ken drops an event that no handler takes in the current state.
    @set_ev_cls(ofp_event.EventOFPBarrierReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def barrier_reply(self, ev):
        dpid = ev.msg.datapath.id
        if dpid in self.pending:
            self.installed[dpid] = self.pending.pop(dpid)
            self.synced.add(dpid)

    @set_ev_cls(ofp_event.EventOFPPacketIn, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        pkt = packet.Packet(msg.data)
        req = pkt.get_protocol(arp.arp)
        if req is None or req.opcode != arp.ARP_REQUEST:
            return
        mac = self.ip_to_mac.get(req.dst_ip)
        if mac is None:
            return
        reply = packet.Packet()
        reply.add_protocol(ethernet.ethernet(ethertype=ether_types.ETH_TYPE_ARP, dst=req.src_mac, src=mac))
        reply.add_protocol(arp.arp(opcode=arp.ARP_REPLY, src_mac=mac, src_ip=req.dst_ip,
                                   dst_mac=req.src_mac, dst_ip=req.src_ip))
        reply.serialize()
        ofp, parser = dp.ofproto, dp.ofproto_parser
        in_port = msg.match["in_port"]
        dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=ofp.OFPP_CONTROLLER,
                                        actions=[parser.OFPActionOutput(in_port)], data=reply.data))

    # ---- flow programming ----------------------------------------------
    def _flow(self, dp, priority, match, actions, cookie=0):
        ofp, parser = dp.ofproto, dp.ofproto_parser
        inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)] if actions else []
        dp.send_msg(parser.OFPFlowMod(datapath=dp, cookie=cookie, priority=priority, match=match, instructions=inst))

    def _pair_flows(self, dp, src_mac, dst_mac, port):
        parser = dp.ofproto_parser
        out = [parser.OFPActionOutput(port)]
        self._flow(dp, PRIO_ROUTE, parser.OFPMatch(eth_src=src_mac, eth_dst=dst_mac), out, COOKIE_ROUTE)
        self._flow(dp, PRIO_CE, parser.OFPMatch(eth_type=0x0800, ip_ecn=3, eth_src=src_mac, eth_dst=dst_mac), out,
                   COOKIE_CE)

    def _barrier(self, dp, table):
        self.pending[dp.id] = dict(table)
        dp.send_msg(dp.ofproto_parser.OFPBarrierRequest(dp))

    def _install_all(self, dp):
        ofp, parser = dp.ofproto, dp.ofproto_parser
        dp.send_msg(parser.OFPFlowMod(datapath=dp, command=ofp.OFPFC_DELETE, table_id=ofp.OFPTT_ALL,
                                      out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY, match=parser.OFPMatch()))
        self._flow(dp, 0, parser.OFPMatch(), [])
        self._flow(dp, PRIO_ARP, parser.OFPMatch(eth_type=ether_types.ETH_TYPE_ARP),
                   [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)])
        table = self.table.get(dp.id, {})
        for (src_mac, dst_mac), port in table.items():
            self._pair_flows(dp, src_mac, dst_mac, port)
        self._barrier(dp, table)
        LOG.info("switch %s: %d route entries sent", dp.id, len(table))

    def pin(self, src, dst, path):
        """Replace the route src->dst by ``path`` on every switch."""
        key = f"{src}>{dst}"
        self.routes[key] = path
        new = route_entries(self.topology, {key: path})
        macs = {h["name"]: h["mac"] for h in self.topology["hosts"]}
        pair = (macs[src], macs[dst])
        for dpid, entries in self.table.items():
            entries.pop(pair, None)
            if pair in new.get(dpid, {}):
                entries[pair] = new[dpid][pair]
        for dpid, dp in self.datapaths.items():
            ofp, parser = dp.ofproto, dp.ofproto_parser
            dp.send_msg(parser.OFPFlowMod(datapath=dp, command=ofp.OFPFC_DELETE, table_id=0,
                                          out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY,
                                          match=parser.OFPMatch(eth_src=pair[0], eth_dst=pair[1])))
            if pair in self.table[dpid]:
                self._pair_flows(dp, pair[0], pair[1], self.table[dpid][pair])
            self.synced.discard(dpid)
            self._barrier(dp, self.table[dpid])

    def installed_routes(self):
        """Routes rebuilt by walking the acknowledged entries hop by hop from each source."""
        by_mac = {h["mac"]: h["name"] for h in self.topology["hosts"]}
        name = {s["dpid"]: s["name"] for s in self.topology["switches"]}
        peer = {}
        for link in self.topology["links"]:
            peer[(link["a"], link["a_port"])] = link["b"]
            peer[(link["b"], link["b_port"])] = link["a"]
        edge = {link["a"]: link["b"] for link in self.topology["links"] if link["a"] in set(by_mac.values())}
        dpid_of = {v: k for k, v in name.items()}
        out = {}
        for src_mac, src in by_mac.items():
            for dst_mac, dst in by_mac.items():
                if src == dst:
                    continue
                path, node = [src], edge[src]
                while node not in by_mac.values() and len(path) <= len(name) + 1:
                    path.append(node)
                    port = self.installed.get(dpid_of[node], {}).get((src_mac, dst_mac))
                    if port is None:
                        node = None
                        break
                    node = peer[(node, port)]
                if node == dst:
                    out[f"{src}>{dst}"] = path + [dst]
        return out

    # ---- telemetry --------------------------------------------------------
    def telemetry_start(self, out, period_ms, dpids=None, ce_period_ms=1000):
        self.telemetry_stop()
        self.tm_dpids = set(dpids) if dpids else None
        self.tm_ce_every = max(1, int(round(ce_period_ms / period_ms)))
        self.tm_file = open(out, "a", buffering=1 << 16)
        self.tm_period = period_ms / 1000.0
        self.tm_parts = {}
        self.tm_waiting = {}
        self.tm_thread = hub.spawn(self._poll)

    def telemetry_stop(self):
        if getattr(self, "tm_thread", None) is not None:
            hub.kill(self.tm_thread)
            self.tm_thread = None
        if getattr(self, "tm_file", None) is not None:
            self.tm_file.close()
            self.tm_file = None

    def _poll(self):
        next_t = time.monotonic()
        rounds = 0
        while True:
            ce_round = rounds % self.tm_ce_every == 0
            rounds += 1
            for dp in list(self.datapaths.values()):
                if self.tm_dpids is not None and dp.id not in self.tm_dpids:
                    continue
                ofp, parser = dp.ofproto, dp.ofproto_parser
                if self._may_ask(dp.id, "port"):
                    dp.send_msg(parser.OFPPortStatsRequest(dp, 0, ofp.OFPP_ANY))
                # flow stats enumerate every CE entry of the switch: costly, polled less
                if ce_round and self._may_ask(dp.id, "ce"):
                    dp.send_msg(parser.OFPFlowStatsRequest(dp, 0, 0, ofp.OFPP_ANY, ofp.OFPG_ANY,
                                                           COOKIE_CE, 0xffffffffffffffff, parser.OFPMatch()))
            if self.tm_file:
                self.tm_file.flush()
            next_t += self.tm_period
            hub.sleep(max(0.0, next_t - time.monotonic()))

    def _may_ask(self, dpid, kind):
        """At most one request of a kind outstanding per switch (one lost for TM_REPLY_TIMEOUT_S is
        given up): a switch or controller slower than the period (20 switches in a user-mode-Linux
        guest) would otherwise queue requests without bound and every sample would come later."""
        now = time.monotonic()
        sent = self.tm_waiting.get((dpid, kind))
        if sent is not None and now - sent < TM_REPLY_TIMEOUT_S:
            return False
        self.tm_waiting[(dpid, kind)] = now
        return True

    def _record(self, rec):
        if getattr(self, "tm_file", None) is not None:
            self.tm_file.write(json.dumps(rec, separators=(",", ":")) + "\n")

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    def port_stats_reply(self, ev):
        self._record({"t": time.monotonic(), "dpid": ev.msg.datapath.id, "kind": "port",
                      "ports": port_counters(ev.msg.body)})
        if not (ev.msg.flags & ev.msg.datapath.ofproto.OFPMPF_REPLY_MORE):
            self.tm_waiting.pop((ev.msg.datapath.id, "port"), None)

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def flow_stats_reply(self, ev):
        msg = ev.msg
        dpid = msg.datapath.id
        self.tm_parts.setdefault(dpid, {}).update(ce_counters(msg.body))
        if not (msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE):
            self._record({"t": time.monotonic(), "dpid": dpid, "kind": "ce", "ce": self.tm_parts.pop(dpid)})
            self.tm_waiting.pop((dpid, "ce"), None)

    # ---- control socket -------------------------------------------------
    def _serve(self, sock, addr):
        f = sock.makefile("rw")
        try:
            for line in f:
                try:
                    req = json.loads(line)
                    op = req.get("op")
                    if op == "status":
                        resp = {"ok": True, "connected": sorted(self.datapaths), "synced": sorted(self.synced),
                                "switches": len(self.topology["switches"])}
                    elif op == "routes":
                        resp = {"ok": True, "routes": self.installed_routes()}
                    elif op == "telemetry_start":
                        self.telemetry_start(req["out"], float(req.get("period_ms", 100)), req.get("dpids"),
                                             float(req.get("ce_period_ms", 1000)))
                        resp = {"ok": True}
                    elif op == "telemetry_stop":
                        self.telemetry_stop()
                        resp = {"ok": True}
                    elif op == "pin":
                        self.pin(req["src"], req["dst"], req["path"])
                        resp = {"ok": True}
                    else:
                        resp = {"ok": False, "error": f"unknown op {op!r}"}
                except Exception as exc:  # report to the client, keep serving
                    resp = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                f.write(json.dumps(resp) + "\n")
                f.flush()
        finally:
            sock.close()

    def close(self):
        self.telemetry_stop()
        self.server_thread.kill()
