"""Link model: rate, queue limit, ECN threshold K and MTU of an emulated link, and the rule that
scales them from the reference fabric (CASSINI's testbed) to the emulated rate.

Reference fabric (reference notes §1.11): 50 Gbit/s links, WRED marking between 1000 and 2000
cells of 80 B, i.e. K_ref = 80 KB, Q_ref = 320 KB (the PFC skid threshold, 4000 cells).

Scaling rule, for an emulated rate r (Mbit/s) and MTU m:
  * bytes that are *traffic* scale by r / R_ref (the workloads do this: same iteration time,
    same communication-to-compute ratio);
  * K keeps its share of the reference bandwidth-delay product, K_ref * r / R_ref, but never falls
    below ``K_MIN_PACKETS`` packets of MTU: a TCP sender's window moves in whole packets, and with
    fewer than about 10 packets above the marking point cubic+ECN leaves the link idle (scaled
    strictly, K at 50 Mbit/s would be 80 bytes, less than one packet);
  * the queue limit holds ``QUEUE_MS`` of traffic at rate r and at least ``QUEUE_K_RATIO`` x K,
    so a burst above K is marked, not dropped (default 1000-packet queues starve flows: platform
    notes). 48 ms at 50 Mbit/s is 300 KB, the size measured to give fidelity 0.96 there.
  * MTU 9000 by default: the userspace OVS datapath forwards ~150k packets/s in all, so bytes per
    packet set the emulated capacity (platform notes).
  * times are not scaled (iterations keep the reference's durations), so a link's one-way
    propagation delay ``delay_ms`` is the reference fabric's; ``time_dilation`` stretches it like
    every other time. Default 0: the reference fabric's few microseconds are far below the
    emulator's own per-hop store-and-forward time (1.4 ms for a 9000-byte frame at 50 Mbit/s).
"""
from dataclasses import asdict, dataclass, replace

from harness.errors import BadValue, require_number

REFERENCE_GBPS = 50.0
WRED_MIN_CELLS = 1000
WRED_MAX_CELLS = 2000
CELL_BYTES = 80
K_REF_BYTES = WRED_MIN_CELLS * CELL_BYTES          # 80 KB at 50 Gbit/s
Q_REF_BYTES = 4000 * CELL_BYTES                    # 320 KB (PFC skid threshold)
K_MIN_PACKETS = 10
QUEUE_MS = 48.0
QUEUE_K_RATIO = 3
DEFAULT_RATE_MBPS = 50.0
DEFAULT_MTU = 9000
SHARING = ("fifo", "fair", "priority")   # link.sharing: the switch egress queue discipline (harness.qdisc.htb_cmds)
MTU_RANGE = (576, 9000)
LINK_KEYS = ("rate_mbps", "ecn_k_bytes", "queue_bytes", "mtu", "sharing", "delay_ms")   # a spec's link block


class LinkError(BadValue):
    """A link parameter is out of range."""


def _number(key, value, minimum=0.0, strict=True):
    return require_number(key, value, minimum, strict, error=LinkError)


@dataclass(frozen=True)
class LinkParams:
    rate_mbps: float
    queue_bytes: int
    ecn_k_bytes: int
    mtu: int
    sharing: str = "fifo"     # switch egress: one FIFO | a queue per job | a queue per priority (SHARING)
    delay_ms: float = 0.0     # one-way propagation delay, each direction (netem where the kernel has it)

    @classmethod
    def default(cls):
        return cls.scaled(DEFAULT_RATE_MBPS)

    @classmethod
    def scaled(cls, rate_mbps, mtu=DEFAULT_MTU, ecn_k_bytes=None, queue_bytes=None,
               reference_gbps=REFERENCE_GBPS):
        """Apply the scaling rule; explicit ``ecn_k_bytes``/``queue_bytes`` override it."""
        rate_mbps = _number("link.rate_mbps", rate_mbps)
        reference_gbps = _number("reference_gbps", reference_gbps)
        if isinstance(mtu, bool) or not isinstance(mtu, int) or not MTU_RANGE[0] <= mtu <= MTU_RANGE[1]:
            raise LinkError("link.mtu", mtu, f"a whole number of bytes from {MTU_RANGE[0]} to {MTU_RANGE[1]}")
        ratio = rate_mbps / (reference_gbps * 1000.0)
        if ecn_k_bytes is None:
            ecn_k_bytes = max(int(K_REF_BYTES * ratio), K_MIN_PACKETS * mtu)
        else:
            ecn_k_bytes = int(_number("link.ecn_k_bytes", ecn_k_bytes))
            if ecn_k_bytes < mtu:
                raise LinkError("link.ecn_k_bytes", ecn_k_bytes, f"at least one MTU ({mtu} bytes)")
        if queue_bytes is None:
            queue_bytes = max(int(Q_REF_BYTES * ratio), int(rate_mbps * 1e6 / 8 * QUEUE_MS / 1000),
                              QUEUE_K_RATIO * ecn_k_bytes)
        else:
            queue_bytes = int(_number("link.queue_bytes", queue_bytes))
        if queue_bytes < 2 * mtu:
            raise LinkError("link.queue_bytes", queue_bytes, f"at least two MTUs ({2 * mtu} bytes)")
        if ecn_k_bytes >= queue_bytes:
            raise LinkError("link.ecn_k_bytes", ecn_k_bytes,
                            f"below the queue limit link.queue_bytes={queue_bytes}")
        return cls(float(rate_mbps), queue_bytes, ecn_k_bytes, mtu)

    @classmethod
    def from_spec(cls, link, reference_gbps=REFERENCE_GBPS):
        """Build from the spec's ``link`` mapping (keys: rate_mbps, ecn_k_bytes, queue_bytes, mtu, sharing, delay_ms)."""
        link = dict(link or {})
        allowed = LINK_KEYS
        for key in link:
            if key not in allowed:
                raise LinkError(f"link.{key}", link[key], "unknown key; allowed: " + ", ".join(sorted(allowed)))
        sharing = link.get("sharing", "fifo")
        if sharing not in SHARING:
            raise LinkError("link.sharing", sharing, "fifo (one queue per switch port, TCP shares it) | fair (a "
                            "queue per job, selected by the DSCP its agents set, served round-robin) | priority "
                            "(a queue per flow priority, selected by the DSCP's class selector, most urgent first)")
        base = cls.scaled(link.get("rate_mbps", DEFAULT_RATE_MBPS), mtu=link.get("mtu", DEFAULT_MTU),
                          ecn_k_bytes=link.get("ecn_k_bytes"), queue_bytes=link.get("queue_bytes"),
                          reference_gbps=reference_gbps)
        delay = _number("link.delay_ms", link.get("delay_ms", 0.0), strict=False)
        return replace(base, sharing=sharing, delay_ms=float(delay))

    def dilated(self, dil):
        """The parameters on the wall clock of ``time_dilation`` (a agents.timing.Dilation): the rate
        divided (K and the queue follow the scaling rule at that rate), the delay multiplied."""
        if dil.factor == 1:
            return self
        return replace(LinkParams.scaled(dil.rate(self.rate_mbps), mtu=self.mtu), sharing=self.sharing,
                       delay_ms=dil.wall(self.delay_ms))

    @property
    def rate_bps(self):
        return int(self.rate_mbps * 1e6)

    @property
    def burst_bytes(self):
        """HTB burst/cburst: at least 3 MTU (platform notes), more at high rates (1 ms of traffic)."""
        return max(3 * (self.mtu + 14), int(self.rate_bps / 8 / 1000))

    def to_dict(self):
        return asdict(self)
