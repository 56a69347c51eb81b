"""The replay agents' wire: clocks and sleeps, the persistent TCP connections between a job's
workers (``Peers``, one per ordered pair, carrying the job's DSCP), and exact sends and receives.
Used by agents.agent (profile replay) and agents.stage (program replay). Standard library only.

Connections are made before the job's first slot: ``connect_deadline`` leaves ``CONNECT_MARGIN_S``
before it, or, when the first slot is too close (a resumed segment, a late epoch),
``CONNECT_FALLBACK_S`` from now; a job whose peers are not connected by then fails with a message.
"""
import socket
import struct
import threading
import time

from agents import patterns

SLICE = 8 * 1024          # one jumbo frame of payload: emission follows the fluid rate closely
HEADER = struct.Struct("!I")
PAYLOAD = b"\0" * (1 << 20)
CONNECT_MARGIN_S = 0.7    # connections done this long before the first slot (then the step calibration)
CONNECT_FALLBACK_S = 10.0  # ... or within this long when the first slot is less than a second away
LATENESS = []             # seconds each timing sleep woke up after its target (the fidelity guard's timers)
PACING = []               # the same for the pacing sleeps between slices of a flow (reported, not judged)
PRIORITY_LEVELS = 4       # link.sharing priority: flow priorities 0 (most urgent) .. 3


def priority_tos(level, dscp=0):
    """The TOS byte of a flow at priority ``level`` (0 most urgent) of a job whose DSCP is ``dscp``:
    the DSCP's class selector (its top 3 bits) is PRIORITY_LEVELS - 1 - level, so unmarked traffic
    (class selector 0) is the least urgent; the DSCP's low 3 bits (the job's queue under
    link.sharing fair) are kept. The switches' priority queues read the class selector
    (harness.qdisc.htb_cmds)."""
    if not 0 <= level < PRIORITY_LEVELS:
        raise ValueError(f"priority {level}: 0 .. {PRIORITY_LEVELS - 1}")
    return (((PRIORITY_LEVELS - 1 - level) << 3) | (dscp & 7)) << 2


def precise_sleeps():
    """Timer slack 1 us (default 50 us): every sleep of the agent otherwise overshoots, and the
    overshoot accumulates into a drift against the plan grid."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(29, 1000, 0, 0, 0)   # PR_SET_TIMERSLACK, ns
    except (OSError, AttributeError):
        pass


def now():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def sleep_until(t, into=LATENESS):
    """Sleep until monotonic time ``t``; how late it woke goes into ``into`` (LATENESS: a sleep that
    times a compute phase, a shift or a slot; PACING: one between slices of a paced flow, whose
    lateness the following slices catch up, as a congested flow's)."""
    slept = False
    while True:
        d = t - now()
        if d <= 0:
            if slept:
                into.append(-d)
            return
        slept = True
        time.sleep(min(d, 0.05))


LATE_BIN_MS = 0.05        # the lateness histogram's bins (harness.fidelity pools them over agents) ...
LATE_BINS = 2000          # ... up to 100 ms; bin LATE_BINS holds everything later


def lateness_ms(samples=LATENESS):
    """{p50, p99, max, n, hist} of the sleeps' lateness in ms (None without sleeps); ``hist``:
    {bin: count}, bin i holding lateness in [i, i + 1) x LATE_BIN_MS, the last one beyond."""
    if not samples:
        return None
    xs = sorted(samples)
    pick = lambda q: round(xs[min(len(xs) - 1, int(q * len(xs)))] * 1000, 3)
    hist = {}
    for x in xs:
        b = min(LATE_BINS, int(x * 1000 / LATE_BIN_MS))
        hist[b] = hist.get(b, 0) + 1
    return {"p50": pick(0.5), "p99": pick(0.99), "max": round(xs[-1] * 1000, 3), "n": len(xs),
            "hist": {str(b): c for b, c in hist.items()}}


def connect_deadline(first_start):
    """When the connections must be up, given the first slot's start (monotonic seconds)."""
    return first_start - CONNECT_MARGIN_S if first_start - now() > 1 + CONNECT_MARGIN_S else now() + CONNECT_FALLBACK_S


class Stopped(Exception):
    pass


def recv_exact(sock, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], min(n - got, 1 << 20))
        if k == 0:
            raise Stopped("peer closed")
        got += k
    return bytes(buf)


def drain(sock, n):
    buf = bytearray(min(n, 1 << 20))
    got = 0
    while got < n:
        k = sock.recv_into(buf, min(n - got, len(buf)))
        if k == 0:
            raise Stopped("peer closed")
        got += k


def send_paced(sock, n, rate_bytes, tail_s=0.0):
    """Send n bytes so that they arrive after n / rate_bytes seconds when the path is free.

    User-space token pacing (kernel pacing let the first window out unpaced after idle gaps):
    each slice is written when a fluid flow at ``rate_bytes`` would have delivered every byte up
    to and including it, minus ``tail_s``, the time a written slice needs to reach the receiver
    (calibrated on a full slice: the short remainder goes first, so that the last slice is a full
    one). Under congestion sendall blocks on the full socket buffer and the transfer takes longer."""
    t0 = now()
    sent = 0
    while sent < n:
        k = (n % SLICE or SLICE) if sent == 0 else SLICE
        sleep_until(t0 + (sent + k) / rate_bytes - tail_s, PACING)
        sock.sendall(PAYLOAD[:k])
        sent += k


def send_all(sock, n):
    """Send n bytes at once (TCP shares the links)."""
    sent = 0
    while sent < n:
        k = min(len(PAYLOAD), n - sent)
        sock.sendall(PAYLOAD[:k])
        sent += k


class Peers:
    """Persistent TCP connections to the other workers of the job (one per ordered pair)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.me = cfg["worker"]
        self.n = len(cfg["ips"])
        self.out = {}   # peer -> socket we send on
        self.inc = {}   # peer -> socket we receive on
        self.tos = cfg.get("dscp", 0) << 2

    def needed(self):
        if "pairs" in self.cfg:       # a program (agents.stage) names its ordered pairs
            return {tuple(p) for p in self.cfg["pairs"]}
        return {(s, d) for ph in self.cfg["phases"] for s, d in patterns.pairs(ph["pattern"], self.n)
                if self.me in (s, d)}

    def connect(self, deadline):
        want = self.needed()
        senders = {dst for src, dst in want if src == self.me}
        receivers = {src for src, dst in want if dst == self.me}
        port = self.cfg["port"]
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((self.cfg["ips"][self.me], port))
        srv.listen(max(4, len(receivers)))
        srv.settimeout(0.2)
        pending = set(senders)
        while (pending or len(self.inc) < len(receivers)) and now() < deadline:
            for dst in list(pending):
                s = socket.socket()
                s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, self.tos)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.settimeout(0.5)
                try:
                    s.connect((self.cfg["ips"][dst], port))
                    s.sendall(HEADER.pack(self.me))
                    s.settimeout(None)
                    self.out[dst] = s
                    pending.discard(dst)
                except OSError:
                    s.close()
            try:
                c, _ = srv.accept()
                c.settimeout(None)
                c.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, self.tos)
                src = HEADER.unpack(recv_exact(c, HEADER.size))[0]
                self.inc[src] = c
            except socket.timeout:
                pass
        srv.close()
        if pending or len(self.inc) < len(receivers):
            raise RuntimeError(f"worker {self.me}: peers not connected by the start time "
                               f"(missing out {sorted(pending)}, in {sorted(receivers - set(self.inc))})")

    def close(self):
        for s in list(self.out.values()) + list(self.inc.values()):
            s.close()


def exchange(peers, sends, recvs, rate_bytes, tail_s=0.0):
    """Send {peer: bytes} and receive {peer: bytes} concurrently; return when all are done."""
    errors = []

    def do(fn, *a):
        try:
            fn(*a)
        except Exception as exc:  # surfaced below
            errors.append(exc)
    threads = [threading.Thread(target=do, args=(send_paced, peers.out[p], n, rate_bytes, tail_s))
               for p, n in sends.items()]
    threads += [threading.Thread(target=do, args=(drain, peers.inc[p], n)) for p, n in list(recvs.items())[1:]]
    for t in threads:
        t.start()
    if recvs:
        p, n = next(iter(recvs.items()))
        do(drain, peers.inc[p], n)
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
