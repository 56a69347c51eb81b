"""Profile data type, validation, built-in loading and rate scaling.

Naming rules: a profile's name is its file stem (``vgg16``); phase fields are ``start_ms``,
``duration_ms``, ``gbps`` (demand per worker-to-worker transfer at the reference rate) and
``pattern`` (one of PATTERNS). Provenance keys are field paths: ``iteration_ms``,
``phases[0].gbps``, ...; a built-in must carry one for every number.
"""
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import yaml

from harness.errors import BadValue, require_number

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"
# Built-in profile sets: ``builtin`` is PROFILE_DIR; another set is a directory under it whose files
# replace the built-in profiles of the same name (the rest are the built-in ones).
PROFILE_SETS = {"builtin": "the profiles in workloads/profiles/ (data-parallel phases at one flat 37 Gbit/s, "
                           "calibrated on CASSINI's Fig. 3)",
                "table2": "the data-parallel models re-derived against CASSINI's Table 2 (communication time "
                          "at its batch sizes: a paced lead, then the burst; workloads/profiles/table2/)"}
PARALLELISMS = ("data", "pipeline", "tensor", "hybrid")
PATTERNS = ("ring_allreduce", "pipeline_p2p", "tensor_allreduce", "alltoall")
NUMERIC_TOP = ("iteration_ms", "reference_gbps", "batch_size", "workers", "model_mb")
PHASE_KEYS = ("start_ms", "duration_ms", "gbps")
PROFILE_KEYS = ("model", "parallelism", "iteration_ms", "reference_gbps", "batch_size", "workers", "model_mb",
                "phases", "provenance", "notes")


class ProfileError(BadValue):
    """A profile is invalid: names the file (or spec), the key and the value."""

    def __init__(self, where, key, value, allowed):
        super().__init__(key, value, allowed, where)


@dataclass(frozen=True)
class Phase:
    start_ms: float
    duration_ms: float
    gbps: float
    pattern: str

    @property
    def end_ms(self):
        return self.start_ms + self.duration_ms


@dataclass(frozen=True)
class Profile:
    name: str
    parallelism: str
    iteration_ms: float
    phases: tuple
    reference_gbps: float = 50.0
    batch_size: int = None
    workers: int = None
    model_mb: float = None
    provenance: dict = field(default_factory=dict, compare=False)
    source: str = ""

    @property
    def up_ms(self):
        return sum(p.duration_ms for p in self.phases)

    @property
    def comm_span_ms(self):
        """Communication time of an iteration alone: first phase start to last phase end (what the
        agents log as comm_start .. comm_end; CASSINI's Table 2 compares it)."""
        if not self.phases:
            return 0.0
        return max(ph.end_ms for ph in self.phases) - min(ph.start_ms for ph in self.phases)

    @property
    def comm_fraction(self):
        return self.up_ms / self.iteration_ms

    def demand(self, t_ms):
        """Demand (Gbit/s at the reference rate) at times ``t_ms`` (array), periodic."""
        t = np.mod(np.asarray(t_ms, dtype=float), self.iteration_ms)
        out = np.zeros_like(t)
        for p in self.phases:
            out += np.where((t >= p.start_ms) & (t < p.end_ms), p.gbps, 0.0)
        return out

    def bytes_per_phase(self, rate_scale=1.0):
        """Bytes each worker-to-worker transfer carries in each phase, scaled by ``rate_scale``."""
        return [p.gbps * 1e9 / 8 * p.duration_ms / 1000 * rate_scale for p in self.phases]

    def scaled_mbps(self, emulated_mbps):
        """Phase demands in Mbit/s on a fabric of ``emulated_mbps`` links (same timing, bytes scaled)."""
        ratio = emulated_mbps / (self.reference_gbps * 1000.0)
        return [p.gbps * 1000.0 * ratio for p in self.phases]


def dilate(profile, factor):
    """The profile with every time multiplied by ``factor`` (>= 1) and demands divided by it:
    the same bytes per phase, spread over a longer time (time dilation for slow machines)."""
    if factor == 1:
        return profile
    phases = tuple(Phase(p.start_ms * factor, p.duration_ms * factor, p.gbps / factor, p.pattern)
                   for p in profile.phases)
    return Profile(profile.name, profile.parallelism, profile.iteration_ms * factor, phases,
                   profile.reference_gbps, profile.batch_size, profile.workers, profile.model_mb,
                   profile.provenance, profile.source)


BATCH_RULE = ("compute time proportional to the per-GPU batch size (first-order: a data-parallel "
              "iteration's forward and backward passes scale with the samples per GPU; the all-reduce "
              "carries the gradients, whose size does not depend on the batch) [I]")


def at_batch(profile, batch_size):
    """A data-parallel profile at another per-GPU batch size (BATCH_RULE): every compute gap (before,
    between and after the communication phases) scaled by batch_size / profile.batch_size; the
    phases keep their durations and rates."""
    f = batch_size / profile.batch_size
    phases, prev_end, t = [], 0.0, 0.0
    for ph in sorted(profile.phases, key=lambda x: x.start_ms):
        t += (ph.start_ms - prev_end) * f
        phases.append(Phase(round(t, 3), ph.duration_ms, ph.gbps, ph.pattern))
        t += ph.duration_ms
        prev_end = ph.end_ms
    iteration = t + (profile.iteration_ms - prev_end) * f
    prov = {**profile.provenance, "batch_size": f"{batch_size}: the spec's; {profile.name}'s profile is at "
            f"{profile.batch_size}", "iteration_ms": f"{round(iteration, 3)} ms: {BATCH_RULE}"}
    return replace(profile, iteration_ms=round(iteration, 3), phases=tuple(phases), batch_size=batch_size,
                   provenance=prov)


WORKERS_RULE = ("ring all-reduce: each worker sends 2(N-1)/N x the model per iteration, so the phase at "
                "the same rate lasts 2(N-1)/N over 2(W-1)/W of the profile's W workers [NSDI §5.1: "
                "RingAllreduce; the arithmetic is the ring algorithm's]")


def ring_share(n):
    return 2 * (n - 1) / n


def at_workers(profile, n):
    """A data-parallel profile on ``n`` workers (WORKERS_RULE): each ring all-reduce phase's duration
    scaled by ring_share(n) / ring_share(profile.workers), later phases moved by what it added; one
    worker has nothing to reduce (its phases shrink to nothing)."""
    f = ring_share(n) / ring_share(profile.workers)
    phases, moved = [], 0.0
    for ph in sorted(profile.phases, key=lambda x: x.start_ms):
        d = ph.duration_ms * f if ph.pattern == "ring_allreduce" else ph.duration_ms
        phases.append(Phase(round(ph.start_ms + moved, 3), round(d, 3), ph.gbps, ph.pattern))
        moved += d - ph.duration_ms
    prov = {**profile.provenance, "workers": f"{n}: the job's; {profile.name}'s profile is for {profile.workers}",
            "iteration_ms": f"{round(profile.iteration_ms + moved, 3)} ms: {WORKERS_RULE}"}
    return replace(profile, iteration_ms=round(profile.iteration_ms + moved, 3), phases=tuple(phases), workers=n,
                   provenance=prov)


def at_reference(profile, reference_gbps):
    """The profile with its demands expressed at another reference line rate, each phase keeping its
    share of the line (gbps x reference_gbps / profile.reference_gbps): what the emulator does when it
    scales bytes to the fabric (``scaled_mbps``), so that the simulator, which runs demands on links
    of the spec's ``reference_gbps``, agrees with it. The same profile when the rates are equal."""
    if reference_gbps == profile.reference_gbps:
        return profile
    f = reference_gbps / profile.reference_gbps
    phases = tuple(Phase(p.start_ms, p.duration_ms, p.gbps * f, p.pattern) for p in profile.phases)
    prov = {**profile.provenance, "reference_gbps": f"{reference_gbps:g}: the spec's; the profile's demands were "
            f"given at {profile.reference_gbps:g} Gbit/s and keep their share of the line"}
    return replace(profile, phases=phases, reference_gbps=reference_gbps, provenance=prov)


def stretched(profile, period_ms):
    """The profile run on a longer beat: the same phases, its iteration padded to ``period_ms``
    (CASSINI's common period: the faster job of a group waits for the group's slot)."""
    if period_ms <= profile.iteration_ms:
        return profile
    return replace(profile, iteration_ms=float(period_ms))


def _num(where, key, value, allow_zero=False):
    return float(require_number(key, value, 0.0, strict=not allow_zero,
                                error=lambda k, v, allowed: ProfileError(where, k, v, allowed)))


def from_dict(name, d, where, require_provenance=False):
    """Validate a profile mapping (from a built-in file or a spec's ``profiles``) and build it."""
    if not isinstance(d, dict):
        raise ProfileError(where, name, d, "a mapping")
    known = PROFILE_KEYS
    for k in d:
        if k not in known:
            raise ProfileError(where, k, d[k], "unknown key; allowed: " + ", ".join(sorted(known)))
    par = d.get("parallelism", "data")
    if par not in PARALLELISMS:
        raise ProfileError(where, "parallelism", par, " | ".join(PARALLELISMS))
    if "iteration_ms" not in d:
        raise ProfileError(where, "iteration_ms", None, "required")
    it = _num(where, "iteration_ms", d["iteration_ms"])
    phases_in = d.get("phases")
    if not isinstance(phases_in, list) or not phases_in:
        raise ProfileError(where, "phases", phases_in, "a non-empty list: a profile needs an Up phase")
    default_pattern = {"data": "ring_allreduce", "pipeline": "pipeline_p2p", "tensor": "tensor_allreduce",
                       "hybrid": "ring_allreduce"}[par]
    ref = _num(where, "reference_gbps", d.get("reference_gbps", 50.0))
    phases = []
    for i, ph in enumerate(phases_in):
        key = f"phases[{i}]"
        if not isinstance(ph, dict):
            raise ProfileError(where, key, ph, "a mapping with start_ms, duration_ms, gbps")
        for k in ph:
            if k not in PHASE_KEYS + ("pattern",):
                raise ProfileError(where, f"{key}.{k}", ph[k], "unknown key; allowed: start_ms, duration_ms, gbps, pattern")
        for k in PHASE_KEYS:
            if k not in ph:
                raise ProfileError(where, f"{key}.{k}", None, "required")
        start = _num(where, f"{key}.start_ms", ph["start_ms"], allow_zero=True)
        dur = _num(where, f"{key}.duration_ms", ph["duration_ms"])
        gbps = _num(where, f"{key}.gbps", ph["gbps"])
        if gbps > ref + 1e-9:
            raise ProfileError(where, f"{key}.gbps", gbps, f"at most the profile's reference line rate {ref:g}")
        pattern = ph.get("pattern", default_pattern)
        if pattern not in PATTERNS:
            raise ProfileError(where, f"{key}.pattern", pattern, " | ".join(PATTERNS))
        if start + dur > it + 1e-9:
            raise ProfileError(where, f"{key}", f"{start:g}+{dur:g} ms",
                               f"a phase that ends within the iteration ({it:g} ms)")
        phases.append(Phase(start, dur, gbps, pattern))
    phases.sort(key=lambda p: p.start_ms)
    for a, b in zip(phases, phases[1:]):
        if b.start_ms < a.end_ms - 1e-9:
            raise ProfileError(where, "phases", f"{a.start_ms:g}-{a.end_ms:g} and {b.start_ms:g}-{b.end_ms:g} ms",
                               "phases that do not overlap")
    prov = d.get("provenance") or {}
    if require_provenance:
        needed = [k for k in NUMERIC_TOP if k in d] + [f"phases[{i}].{k}" for i in range(len(phases_in))
                                                       for k in PHASE_KEYS]
        missing = [k for k in needed if not str(prov.get(k, "")).strip()]
        if missing:
            raise ProfileError(where, f"provenance.{missing[0]}", None,
                               "every number of a built-in profile needs its source")
    ints = {}
    for k in ("batch_size", "workers"):
        if d.get(k) is not None:
            ints[k] = int(_num(where, k, d[k]))
    return Profile(name=d.get("model", name), parallelism=par, iteration_ms=it, phases=tuple(phases),
                   reference_gbps=ref, model_mb=d.get("model_mb"), provenance=dict(prov), source=where, **ints)


def load_file(path, require_provenance=True):
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ProfileError(str(path), "yaml", str(exc).splitlines()[0], "valid YAML")
    return from_dict(path.stem, data, str(path), require_provenance=require_provenance)


_BUILTINS = {}


def set_dir(profile_set):
    return PROFILE_DIR if profile_set == "builtin" else PROFILE_DIR / profile_set


def builtins(profile_set="builtin"):
    """{name: Profile} of every file in workloads/profiles/, with the files of ``profile_set``
    (PROFILE_SETS) in place of the built-in ones of the same name (loaded and validated once); every
    number of a built-in (``BUILTIN_NAMES``) needs its provenance, a file added there does not."""
    if profile_set not in PROFILE_SETS:
        raise KeyError(profile_set)
    if profile_set not in _BUILTINS:
        out = {} if profile_set == "builtin" else dict(builtins())
        for p in sorted(set_dir(profile_set).glob("*.yaml")):
            out[p.stem] = load_file(p, require_provenance=p.stem in BUILTIN_NAMES)
        _BUILTINS[profile_set] = out
    return _BUILTINS[profile_set]


BUILTIN_NAMES = ("vgg11", "vgg16", "vgg19", "wideresnet101", "resnet50", "bert", "roberta", "camembert",
                 "xlm", "gpt1", "gpt2", "gpt3", "dlrm")
