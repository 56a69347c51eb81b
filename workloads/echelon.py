"""EchelonFlow (HotNets'22; abstract only, this is the project's reconstruction): the flows of one
job step plus an arrangement function giving each flow's ideal finish offset.

Naming: a flow is ``Flow(name, src, dst, bytes, after)``; ``name`` is ``"<kind>:<stage>:<index>"``
(``act`` activations forward, ``grad`` gradients backward, ``ar`` all-reduce); ``after`` names the
compute op that releases it. Compute ops are ``"F:<stage>:<mb>"`` and ``"B:<stage>:<mb>"`` (forward
and backward of micro-batch mb on a pipeline stage), ``"L:<layer>"`` (a tensor-parallel layer), or
``"F"``, ``"B:<bucket>"``, ``"U"`` (a data-parallel rank's forward, backward chunks, optimizer step).
Offsets ``d`` are seconds from the EchelonFlow's reference (its first flow's ideal finish): with
d = 0 for every flow an EchelonFlow is a coflow.

Arrangements come from the computation that consumes the flows, timed with zero communication
(``timeline``): a flow's ideal finish is the ideal start of the op that consumes it.
  data parallel, bucketed all-reduce: bucket b leaves after backward chunk b and every bucket is
    needed by the optimizer step at the step's end -> d = 0 (coflow);
  GPipe: all forwards (micro-batches in order), then all backwards (reverse order); activations of
    micro-batch m reach stage s+1 spaced by its forward time, gradients likewise backwards;
  1F1B (PipeDream-flush): stage s runs min(S-s-1, M) warm-up forwards, then one forward / one
    backward alternately, then the remaining backwards;
  tensor parallel: layer l's all-reduce is consumed by layer l+1: offsets spaced by layer compute.
Metric: ``ect(F, d) = max_i(F_i - d_i)``, the earliest reference time consistent with every flow
meeting its slot; the job-level effect is the consumer's step time (``timeline`` with arrivals).
"""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Flow:
    name: str
    src: int          # stage / rank index (mapped to hosts by the placement)
    dst: int
    bytes: float
    after: str = None   # the compute op that releases it (None: at the step's start)
    feeds: str = None   # the compute op that consumes it (None: the step's end)


@dataclass
class EchelonFlow:
    job: str
    step: int
    flows: list
    d: list                                     # ideal finish offsets (s), one per flow
    ops: dict = field(default_factory=dict)     # compute op -> (resource, duration s, deps)
    order: dict = field(default_factory=dict)   # resource -> ops in execution order

    def __post_init__(self):
        if len(self.d) != len(self.flows):
            raise ValueError("one offset per flow")
        if min(self.d, default=0.0) < 0:
            raise ValueError("offsets are >= 0 (relative to the first flow's slot)")

    @property
    def is_coflow(self):
        return all(x == 0 for x in self.d)


def ect(finish, d):
    """EchelonFlow completion time: max_i(F_i - d_i)."""
    return max(f - x for f, x in zip(finish, d))


def coflow_completion(finish):
    return max(finish)


# ---- compute timelines ------------------------------------------------------------------------------

def timeline(ops, order, arrivals=None, flows=()):
    """Start and end time of every op: each resource runs its ops in ``order``; an op starts when its
    resource is free, its dependencies ended and the flows it consumes arrived (``arrivals``: flow
    name -> arrival time; absent = instantly). Returns ({op: start}, {op: end})."""
    arrivals = arrivals or {}
    by_name = {f.name: f for f in flows}
    needs = {}
    for f in flows:
        if f.feeds:
            needs.setdefault(f.feeds, []).append(f.name)
    start, end = {}, {}
    pos = {r: 0 for r in order}
    free = {r: 0.0 for r in order}
    remaining = sum(len(v) for v in order.values())
    while remaining:
        progressed = False
        for r, seq in order.items():
            while pos[r] < len(seq):
                op = seq[pos[r]]
                _res, dur, deps = ops[op]
                if any(dep not in end for dep in deps):
                    break
                t = max([free[r]] + [end[dep] for dep in deps] + [arrivals.get(fn, _release(by_name[fn], end))
                                                                  for fn in needs.get(op, [])])
                start[op], end[op] = t, t + dur
                free[r] = end[op]
                pos[r] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise ValueError("the op order deadlocks")
    return start, end


def _release(flow, end):
    """When ``flow`` leaves its producer: the end of the op it follows (the step's start without one)."""
    return end.get(flow.after, 0.0) if flow.after else 0.0


def _pipeline_ops(stages, micro_batches, fwd_s, bwd_s, schedule):
    S, M = stages, micro_batches
    ops = {}
    for s in range(S):
        for m in range(M):
            fdeps = [f"F:{s - 1}:{m}"] if s else []
            bdeps = [f"B:{s + 1}:{m}"] if s < S - 1 else [f"F:{s}:{m}"]
            ops[f"F:{s}:{m}"] = (s, fwd_s, fdeps)
            ops[f"B:{s}:{m}"] = (s, bwd_s, bdeps)
    order = {}
    for s in range(S):
        if schedule == "gpipe":
            seq = [f"F:{s}:{m}" for m in range(M)] + [f"B:{s}:{m}" for m in reversed(range(M))]
        elif schedule == "1f1b":
            warm = min(S - s - 1, M)
            seq = [f"F:{s}:{m}" for m in range(warm)]
            f_next, b_next = warm, 0
            while b_next < M:
                if f_next < M:
                    seq.append(f"F:{s}:{f_next}")
                    f_next += 1
                seq.append(f"B:{s}:{b_next}")
                b_next += 1
        else:
            raise ValueError(schedule)
        order[s] = seq
    return ops, order


def pipeline(job, stages, micro_batches, fwd_ms, bwd_ms, act_bytes, grad_bytes=None, schedule="gpipe", step=0):
    """The EchelonFlow of one pipeline step (GPipe or 1F1B): activation flows s -> s+1 for every
    micro-batch and gradient flows s+1 -> s, each offset to the ideal start of its consumer."""
    grad_bytes = act_bytes if grad_bytes is None else grad_bytes
    ops, order = _pipeline_ops(stages, micro_batches, fwd_ms / 1000, bwd_ms / 1000, schedule)
    flows = []
    for s in range(stages - 1):
        for m in range(micro_batches):
            flows.append(Flow(f"act:{s}:{m}", s, s + 1, act_bytes, after=f"F:{s}:{m}", feeds=f"F:{s + 1}:{m}"))
            flows.append(Flow(f"grad:{s + 1}:{m}", s + 1, s, grad_bytes, after=f"B:{s + 1}:{m}", feeds=f"B:{s}:{m}"))
    start, _end = timeline(ops, order)
    ideal = [start[f.feeds] for f in flows]
    ref = min(ideal)
    return EchelonFlow(job, step, flows, [round(x - ref, 9) for x in ideal], ops, order)


def tensor_parallel(job, layers, layer_ms, allreduce_bytes, ranks=2, step=0):
    """Per-layer all-reduces of a tensor-parallel forward: layer l's result feeds layer l+1; each
    all-reduce is a ring of ``ranks`` flows (one per rank), offsets spaced by the layer compute."""
    ops = {f"L:{l}": (0, layer_ms / 1000, [f"L:{l - 1}"] if l else []) for l in range(layers)}
    order = {0: [f"L:{l}" for l in range(layers)]}
    flows = []
    for l in range(layers - 1):
        for r in range(ranks):
            flows.append(Flow(f"ar:{l}:{r}", r, (r + 1) % ranks, allreduce_bytes / ranks, after=f"L:{l}",
                              feeds=f"L:{l + 1}"))
    # the next layer cannot start before the previous all-reduce: its ideal start (no communication)
    start, _ = timeline(ops, order)
    ideal = [start[f.feeds] for f in flows]
    ref = min(ideal)
    return EchelonFlow(job, step, flows, [round(x - ref, 9) for x in ideal], ops, order)


def data_parallel(job, buckets, bucket_bytes, ranks=2, step=0, forward_ms=0.0, backward_ms=0.0):
    """Bucketed all-reduce (as DDP): every rank runs a forward ("F"), then its backward in
    ``buckets`` equal chunks ("B:<b>", the last layers first); bucket b's ring (one flow per rank)
    leaves when chunk b ends, and the optimizer step ("U", no compute) needs every bucket: a
    coflow (d = 0) whatever the compute times."""
    chunk = backward_ms / 1000 / buckets
    ops = {"F": (0, forward_ms / 1000, [])}
    for b in range(buckets):
        ops[f"B:{b}"] = (0, chunk, [f"B:{b - 1}" if b else "F"])
    ops["U"] = (0, 0.0, [f"B:{buckets - 1}"])
    order = {0: ["F"] + [f"B:{b}" for b in range(buckets)] + ["U"]}
    flows = [Flow(f"ar:{b}:{r}", r, (r + 1) % ranks, bucket_bytes / ranks, after=f"B:{b}", feeds="U")
             for b in range(buckets) for r in range(ranks)]
    return EchelonFlow(job, step, flows, [0.0] * len(flows), ops, order)


def step_time(e, arrivals):
    """The consumer's step time when the flows arrive at ``arrivals`` (flow name -> time, s)."""
    if not e.ops:
        return max(arrivals.values(), default=0.0)
    _start, end = timeline(e.ops, e.order, arrivals, e.flows)
    return max(end.values())
