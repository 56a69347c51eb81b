"""Input limits: what a 2-core machine can honour, in one place (the README's "Input limits" table).

``check_document(doc, where)`` runs on every YAML document the tool reads, before any validation
that builds something: it walks the whole tree once and refuses non-finite numbers, numbers beyond
``MAX_MAGNITUDE``, over-long strings, too deep nesting and too many nodes (a YAML alias bomb counts
every expansion). ``check_ranges(spec_raw, where)`` then applies the per-key bounds of ``RANGES`` to
a spec. ``short(value)`` is how a value appears in an error line: never longer than ``SHOW_CHARS``.
"""
import math
import re
import reprlib

MAX_FILE_BYTES = 1 << 20          # a spec, set or profile file
MAX_DEPTH = 12                    # nesting of mappings and lists
MAX_NODES = 200_000               # scalars + containers, aliases counted at every use
MAX_STRING = 1000                 # characters in one string
MAX_MAGNITUDE = 1e9               # any number, unless RANGES says otherwise
SHOW_CHARS = 80                   # a value in an error line

# key path (list indices as [], any mapping key as *) -> (minimum, maximum), both inclusive
RANGES = {
    "seed": (0, 2**32 - 1),
    "duration_s": (0, 7 * 86400),
    "time_dilation": (1, 1000),
    "reference_gbps": (0, 10_000),
    "link.rate_mbps": (0, 100_000),
    "link.mtu": (576, 9000),
    "link.queue_bytes": (0, 1 << 30),
    "link.ecn_k_bytes": (0, 1 << 30),
    "link.delay_ms": (0, 1000),
    "topology.k": (2, 32),
    "topology.hosts_per_edge": (1, 64),
    "topology.hosts_per_side": (1, 512),
    "topology.hosts_per_tor": (1, 64),
    "jobs[].workers": (1, 4096),
    "jobs[].iterations": (1, 10_000_000),
    "jobs[].batch_size": (1, 1_000_000),
    "jobs[].arrival_s": (0, 30 * 86400),
    "jobs[].pipeline.micro_batches": (1, 1024),
    "jobs[].pipeline.layers": (1, 1024),
    "jobs[].tensor.layers": (1, 1024),
    "jobs[].tensor.allreduce_mb": (0, 100_000),
    "jobs[].pipeline.activation_mb": (0, 100_000),
    "jobs[].pipeline.gradient_mb": (0, 100_000),
    "jobs[].data_parallel.buckets": (1, 1024),
    "jobs[].data_parallel.allreduce_mb": (0, 100_000),
    "trace.jobs": (1, 100_000),
    "trace.arrival_s": (0, 30 * 86400),
    "trace.iterations_scale": (0, 1000),
    "trace.workers[]": (1, 4096),
    "trace.workers.*": (0, 1_000_000),
    "trace.iterations[]": (1, 10_000_000),
    "cassini.discretization_deg": (0.5, 360),
    "cassini.candidates": (1, 1000),
    "cassini.exact_max_jobs": (1, 8),
    "cassini.quantum_ms": (0.01, 10_000),
    "cassini.max_perimeter_ms": (1, 1_000_000),
    "netsens.max_preemptions": (0, 1000),
    "replan.every_steps": (1, 100_000),
    "replan.window_steps": (1, 100_000),
}

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = SHOW_CHARS
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 4
_repr.maxlevel = 2


def short(value):
    """``repr(value)``, shortened to about SHOW_CHARS characters (safe on huge or recursive values)."""
    text = _repr.repr(value)
    return text if len(text) <= SHOW_CHARS + 10 else text[:SHOW_CHARS] + "..."


class LimitError(ValueError):
    def __init__(self, key, value, allowed):
        super().__init__(f"{key}: {short(value)} is not allowed ({allowed})")
        self.key, self.value, self.allowed = key, value, allowed


def _join(path, key):
    return f"{path}.{key}" if path else str(key)


def walk(doc):
    """(value, path, depth) of every node, each container before its contents, in document order.
    A consumer that raises at a node stops the walk before that node's contents are expanded."""
    stack = [(doc, "", 0)]
    while stack:
        x, path, depth = stack.pop()
        yield x, path, depth
        if isinstance(x, dict):
            stack.extend(reversed([(v, _join(path, k), depth + 1) for k, v in x.items()]))
        elif isinstance(x, list):
            stack.extend(reversed([(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(x)]))


def check_document(doc):
    """Walk the document once; raise LimitError naming the first key that breaks a limit."""
    for nodes, (x, path, depth) in enumerate(walk(doc), 1):
        if nodes > MAX_NODES:
            raise LimitError(path or "(document)", "...", f"at most {MAX_NODES} values in one file "
                             "(YAML aliases count at every use)")
        if depth > MAX_DEPTH:
            raise LimitError(path, x, f"nesting at most {MAX_DEPTH} levels deep")
        if isinstance(x, dict):
            for k in x:
                if not isinstance(k, (str, int, float, bool)) or k is None:
                    raise LimitError(path or "(top level)", k, "mapping keys that are names")
        elif isinstance(x, float) and not math.isfinite(x):
            raise LimitError(path, x, "a finite number")
        elif isinstance(x, (int, float)) and not isinstance(x, bool) and abs(x) > MAX_MAGNITUDE \
                and _pattern(path) not in RANGES:
            raise LimitError(path, x, f"a number of magnitude at most {MAX_MAGNITUDE:g}")
        elif isinstance(x, str) and len(x) > MAX_STRING:
            raise LimitError(path, x, f"a string of at most {MAX_STRING} characters")
        elif isinstance(x, bytes):
            raise LimitError(path, x, "text, not binary data")


def _pattern(path):
    """``jobs[3].workers`` -> ``jobs[].workers``; ``trace.workers.16`` also matches ``trace.workers.*``."""
    p = re.sub(r"\[\d+\]", "[]", path)
    if p not in RANGES and "." in p:
        star = p.rsplit(".", 1)[0] + ".*"
        if star in RANGES:
            return star
    return p


def check_ranges(doc):
    """Apply RANGES to every number of a spec document (types are the spec validator's business)."""
    for x, path, _depth in walk(doc):
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            bounds = RANGES.get(_pattern(path))
            if bounds and not bounds[0] <= x <= bounds[1]:
                raise LimitError(path, x, f"in [{bounds[0]:g}, {bounds[1]:g}] (input limits, README)")
