"""Egress queues of emulated links: HTB shaping and the two ECN-marker backends.

Every function that changes the kernel is split in two: ``*_cmds`` returns the argv lists
(plain data, unit-tested without root) and the caller runs them where the interface lives.

Each interface gets: ``root htb`` -> class ``1:1`` at the link rate -> a child queue (``bfifo``
holding ``queue_bytes``, or ``red`` for the red marker); ``link.sharing`` fair or priority puts
several leaf classes, each with its bfifo, under ``1:1`` instead (``htb_cmds``). A link with a propagation delay
(``delay_ms``) gets ``netem`` as the root and the HTB tree under it: packets wait out the delay
first, then queue and leave at the link rate, so the queue that marks and drops is the real one
(netem under HTB would hold every packet in flight in the marked queue). Markers are chosen by name
(``MARKERS[name]``) and share one interface: ``queue_cmds`` (the interface's qdiscs and filters),
``configure`` (after the interfaces exist), ``counters`` (per-interface mark counts), ``pins`` and
``cleanup``.
"""
import json
import os
import subprocess
from pathlib import Path

from agents.wire import PRIORITY_LEVELS

BPF_OBJECT = Path(__file__).resolve().parent / "bpf" / "ecn_marker.o"
BPF_SOURCE = BPF_OBJECT.with_suffix(".c")
BPF_PIN_DIR = Path("/sys/fs/bpf/tc/globals")
BPF_MAPS = ("interleave_ecn_cfg", "interleave_ecn_q")


FAIR_CLASSES = 8     # link.sharing fair: a queue per DSCP value modulo 8 (jobs get DSCP 1, 2, ...)
PRIORITY_FLOOR = 0.01   # link.sharing priority: the rate each level is guaranteed, of the link's
NETEM_HANDLE = "9:"
MIN_PACKET_BYTES = 64   # netem's limit counts packets: room for a delay's worth of the smallest


def delay_cmds(dev, params):
    """``(cmds, where)``: netem as ``dev``'s root when the link has a delay, and the position of the
    HTB tree (``root``, or ``parent 9:1`` under netem). The delay line never drops: its limit holds
    the delay's worth of minimum-size packets at the link rate on top of netem's default 1000."""
    if params.delay_ms <= 0:
        return [], ["root"]
    limit = int(params.rate_bps / 8 * params.delay_ms / 1000 / MIN_PACKET_BYTES) + 1000
    return ([["tc", "qdisc", "replace", "dev", dev, "root", "handle", NETEM_HANDLE, "netem",
              "delay", f"{round(params.delay_ms * 1000)}us", "limit", str(limit)]],
            ["parent", NETEM_HANDLE[:-1] + ":1"])


def htb_cmds(dev, params, child=None, classes="fifo"):
    """Shape ``dev`` to the link rate; ``child`` replaces the default bfifo child queue.

    ``classes: priority`` (link.sharing priority; switch ports and hosts): under the link-rate class
    one leaf per level of agents.wire.PRIORITY_LEVELS, each guaranteed PRIORITY_FLOOR of the rate
    and allowed all of it, with HTB ``prio`` = the level: the rate left after the floors goes to the
    most urgent backlogged level first, so the levels are served in strict priority above the
    floors. A u32 filter on the DSCP's class selector (agents.wire.priority_tos) picks the leaf;
    unmarked traffic and class selectors beyond the levels go to the least urgent one. Each leaf has
    its own bfifo of queue_bytes; the BPF marker marks each level on the backlog of the levels at
    least as urgent (its config's ``levels``, ``BpfMarker.config_value``).

    ``classes: fair`` (link.sharing fair, switch ports): under the link-rate class, FAIR_CLASSES leaf
    classes, each guaranteed an equal share and allowed the whole rate, one quantum (an MTU) per
    round, so backlogged jobs share the link equally (as the paper's DCQCN flows do) and an idle
    job's share goes to the others; a u32 filter on the DSCP's low 3 bits picks the class (DSCP 0
    traffic, e.g. iperf3, shares class 0 with the 8th job); each leaf has its own bfifo of
    queue_bytes (a job alone keeps the FIFO's room; the BPF marker marks on the port's total)."""
    out, where = delay_cmds(dev, params)
    if classes == "priority":
        floor = max(8000, int(params.rate_bps * PRIORITY_FLOOR))
        out += _root(dev, params, where, f"{0x30 + PRIORITY_LEVELS - 1:x}")
        for level in range(PRIORITY_LEVELS):
            cls = f"1:{0x30 + level:x}"
            out += _leaf(dev, params, cls, f"{0x40 + level:x}:", floor, ["prio", str(level)])
            cs = PRIORITY_LEVELS - 1 - level
            if cs:
                out.append(_dsfield_filter(dev, 0x800 + cs, cs << 5, 0xe0, cls))
        return out
    if classes != "fair":
        child = child or ["bfifo", "limit", str(params.queue_bytes)]
        return out + _root(dev, params, where, "1") + [
            ["tc", "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:", *child]]
    out += _root(dev, params, where, "10")
    for c in range(FAIR_CLASSES):
        cls = f"1:{0x10 + c:x}"
        out += _leaf(dev, params, cls, f"{0x20 + c:x}:", params.rate_bps // FAIR_CLASSES, [])
        out.append(_dsfield_filter(dev, 0x800 + c, c << 2, 0x1c, cls))
    return out


def _root(dev, params, where, default):
    """The root HTB (unclassified traffic to class 1:``default``) and its class 1:1 at the link rate."""
    rate, burst = f"{params.rate_bps}bit", str(params.burst_bytes)
    return [["tc", "qdisc", "replace", "dev", dev, *where, "handle", "1:", "htb", "default", default],
            ["tc", "class", "replace", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
             "rate", rate, "ceil", rate, "burst", burst, "cburst", burst]]


def _leaf(dev, params, cls, handle, guaranteed_bps, extra):
    """A leaf class under 1:1 guaranteed ``guaranteed_bps``, allowed the link rate, one MTU per round,
    with its own bfifo of queue_bytes."""
    rate, burst = f"{params.rate_bps}bit", str(params.burst_bytes)
    return [["tc", "class", "replace", "dev", dev, "parent", "1:1", "classid", cls, "htb", "rate", f"{guaranteed_bps}bit",
             "ceil", rate, "burst", burst, "cburst", burst, *extra, "quantum", str(params.mtu + 14)],
            ["tc", "qdisc", "replace", "dev", dev, "parent", cls, "handle", handle, "bfifo",
             "limit", str(params.queue_bytes)]]


def _dsfield_filter(dev, handle, value, mask, cls):
    """A u32 filter sending IPv4 packets whose TOS byte & ``mask`` == ``value`` to ``cls``."""
    return ["tc", "filter", "replace", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
            "handle", f"800::{handle:x}", "u32", "match", "ip", "dsfield", f"0x{value:02x}", f"0x{mask:x}",
            "flowid", cls]


class BpfMarker:
    """tc clsact-egress BPF program with a virtual queue per interface (harness/bpf/ecn_marker.c)."""
    name = "bpf"
    per_job_queues = True      # link.sharing fair / priority: htb_cmds' leaf classes under the program
    counts_ce_as_marked = False    # ``marked`` counts ECT packets it turned into CE only

    def __init__(self, obj=BPF_OBJECT, pin_dir=BPF_PIN_DIR):
        self.obj, self.pin_dir = Path(obj), Path(pin_dir)

    def queue_cmds(self, dev, params):
        return htb_cmds(dev, params, classes=params.sharing) + [
            ["tc", "qdisc", "replace", "dev", dev, "clsact"],
            ["tc", "filter", "replace", "dev", dev, "egress", "pref", "1", "handle", "1", "bpf", "da",
             "obj", str(self.obj), "sec", "classifier"],
        ]

    @staticmethod
    def config_value(params):
        """Map value bytes for ecn_cfg: rate_bps, k_bytes, limit_bytes, levels (priority levels on a
        link.sharing priority port, else 0) as little-endian u64."""
        levels = PRIORITY_LEVELS if params.sharing == "priority" else 0
        return b"".join(int(v).to_bytes(8, "little")
                        for v in (params.rate_bps, params.ecn_k_bytes, params.queue_bytes, levels))

    def config_batch(self, entries):
        """bpftool batch lines writing {ifindex: params} into the config map."""
        pin = self.pin_dir / "interleave_ecn_cfg"
        lines = []
        for ifindex, params in sorted(entries.items()):
            key = " ".join(f"{b:02x}" for b in int(ifindex).to_bytes(4, "little"))
            val = " ".join(f"{b:02x}" for b in self.config_value(params))
            lines.append(f"map update pinned {pin} key hex {key} value hex {val}")
        return lines

    def configure(self, entries):
        """Write the config of every marked interface ({ifindex: LinkParams}) in one bpftool call."""
        if not entries:
            return
        batch = "\n".join(self.config_batch(entries)) + "\n"
        subprocess.run(["bpftool", "batch", "file", "/dev/stdin"], input=batch, text=True,
                       check=True, capture_output=True)

    def counters(self, devs):
        """{dev: {marked, pkts, bytes, ect_pkts, overflow, ...}} for ``devs`` ({dev: ifindex})."""
        pin = self.pin_dir / "interleave_ecn_q"
        if not pin.exists():
            return {}
        out = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", str(pin)],
                             check=True, capture_output=True, text=True).stdout
        by_index = parse_bpftool_dump(out)
        return {dev: by_index[i] for dev, i in devs.items() if i in by_index}

    def pins(self):
        return [str(self.pin_dir / m) for m in BPF_MAPS]

    def cleanup(self):
        for p in self.pins():
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


def parse_bpftool_dump(text):
    """Parse ``bpftool -j map dump`` of the queue map (BTF-formatted values) into plain dicts."""
    result = {}
    for entry in json.loads(text or "[]"):
        formatted = entry.get("formatted", entry)
        key, value = formatted["key"], formatted["value"]
        if isinstance(key, list):  # raw byte form: ["0x05", "0x00", ...]
            key = int.from_bytes(bytes(int(b, 16) for b in key), "little")
        result[int(key)] = {k: v for k, v in value.items() if k != "lock"}
    return result


def parse_red_stats(text):
    """{dev: the RED child queue's counters} from ``tc -s -j qdisc show`` output (all devices)."""
    out = {}
    for q in json.loads(text or "[]"):
        if q.get("kind") == "red":
            opts = q.get("options", {})
            out[q.get("dev")] = {"marked": q.get("marked", opts.get("marked", 0)), "pkts": q.get("packets", 0),
                                 "bytes": q.get("bytes", 0), "overflow": q.get("drops", 0)}
    return out


class RedMarker:
    """tc RED as the child queue, step marking at K (where the kernel has sch_red)."""
    name = "red"
    per_job_queues = False     # link.sharing fair / priority are not built with it
    # ``marked`` also counts a packet that arrived with CE already (the kernel's INET_ECN_set_ce
    # succeeds on CE; measured by tests/stock's test_red_counts_a_packet_that_arrives_with_ce_as_a_mark)
    counts_ce_as_marked = True

    def queue_cmds(self, dev, params):
        k, limit, mtu = params.ecn_k_bytes, params.queue_bytes, params.mtu
        red = ["red", "limit", str(limit), "min", str(k), "max", str(k + mtu), "avpkt", str(mtu),
               "burst", str(max(2, k // mtu + 1)), "bandwidth", f"{params.rate_bps}bit",
               "probability", "1.0", "ecn"]
        return htb_cmds(dev, params, child=red)

    def configure(self, entries):
        pass

    def counters(self, devs):
        """{dev: {marked, pkts, bytes, overflow}} for ``devs`` ({dev: ifindex}), from one ``tc -s qdisc``
        call for all devices (one call per device would fork about 800 times a second during a run's
        telemetry on a 24-host fabric)."""
        out = subprocess.run(["tc", "-s", "-j", "qdisc", "show"], check=True, capture_output=True, text=True).stdout
        stats = parse_red_stats(out)
        return {dev: stats[dev] for dev in devs if dev in stats}

    def pins(self):
        return []

    def cleanup(self):
        pass


MARKERS = {"bpf": BpfMarker, "red": RedMarker}
