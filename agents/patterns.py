"""Communication patterns, declared once: which ordered worker pairs a phase's transfers use, in how
many steps, and how a phase's bytes and rate divide among them. The replay agent (agents.agent)
runs them, the scheduler (harness.schedulers.traffic) puts them on links. Standard library only.

Workers are indices 0..n-1 in placement order. A phase of ``rate`` for ``duration`` carries
``volume = rate x duration`` per worker:
  ring_allreduce, tensor_allreduce: 2(n-1) steps (reduce-scatter then all-gather, as NCCL's ring);
    in each, every worker sends volume / 2(n-1) to its ring successor at the phase rate;
  pipeline_p2p: worker i sends the volume to i+1 (the first only sends, the last only receives);
  alltoall: one step; every worker sends volume / (n-1) to each other worker at rate / (n-1).
"""

PATTERNS = ("ring_allreduce", "tensor_allreduce", "pipeline_p2p", "alltoall")


def pairs(pattern, n):
    """Ordered (src, dst) worker pairs that carry the pattern's transfers (every step uses all)."""
    if n < 2:
        return []
    if pattern in ("ring_allreduce", "tensor_allreduce"):
        return [(i, (i + 1) % n) for i in range(n)]
    if pattern == "pipeline_p2p":
        return [(i, i + 1) for i in range(n - 1)]
    if pattern == "alltoall":
        return [(a, b) for a in range(n) for b in range(n) if a != b]
    raise ValueError(f"unknown pattern {pattern!r}; known: {', '.join(PATTERNS)}")


def steps(pattern, n):
    """How many transfer steps one phase takes."""
    return 2 * (n - 1) if pattern in ("ring_allreduce", "tensor_allreduce") and n > 1 else 1


def transfer_rate(pattern, n, rate):
    """The rate each transfer (pair) runs at in a phase of ``rate`` per worker."""
    return rate / (n - 1) if pattern == "alltoall" and n > 1 else rate


def bytes_per_transfer(pattern, n, volume):
    """Bytes one pair carries in one step of a phase of ``volume`` bytes per worker."""
    if pattern in ("ring_allreduce", "tensor_allreduce"):
        return max(1, int(volume / steps(pattern, n)))
    if pattern == "alltoall":
        return max(1, int(volume / (n - 1)))
    return int(volume)


def of_worker(pattern, n, me):
    """(peers ``me`` sends to, peers ``me`` receives from) in the pattern, in ascending order."""
    ps = pairs(pattern, n)
    return sorted({d for s, d in ps if s == me}), sorted({s for s, d in ps if d == me})
