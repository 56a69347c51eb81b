"""Experiment spec (YAML) loading and validation: the contract in the README / contracts.

``load(path)`` returns a Spec or raises SpecError (exit status 2) whose one line names the file,
the key (``jobs[1].workers``), the value and what is allowed. Nothing is built before a spec is
valid. Naming rules: keys as in the contract; jobs are named by the user or ``j1..jN`` (traces).
"""
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from harness.errors import UsageError, require_number
from harness.linkmodel import LinkError, LinkParams
from topologies import BUILDERS, TopologyError, by_name
from workloads import traces
from workloads.profiles import ProfileError, builtins, from_dict

TOP_KEYS = {"name", "topology", "link", "reference_gbps", "profiles", "jobs", "trace", "scheduler",
            "duration_s", "seed", "cassini", "telemetry", "flow_scheduler", "time_dilation", "netsens", "background"}
JOB_KEYS = {"name", "model", "workers", "iterations", "hosts", "arrival_s", "time_shift_ms", "pipeline", "tensor"}
FLOW_SCHEDULERS = ("fair", "coflow", "echelon")
BASES = ("themis", "pollux", "random", "ideal", "fixed", "netsens", "consolidate")
CASSINI_KEYS = {"discretization_deg": 5.0, "candidates": 10, "quantum_ms": 5.0, "max_perimeter_ms": 10000.0,
                "aggregate": "mean", "exact_max_jobs": 3, "loops": "reject", "align_min_score": 0.9}


class SpecError(UsageError):
    def __init__(self, where, key, value, allowed):
        super().__init__(f"{where}: {key}: {value!r} is not allowed ({allowed})")
        self.where, self.key, self.value = where, key, value


@dataclass
class Job:
    name: str
    model: str
    workers: int
    iterations: int
    arrival_s: float = 0.0
    hosts: list = None
    time_shift_ms: float = None
    pipeline: dict = None       # a program job (harness.schedulers.flowplan): its step waits for its inputs
    tensor: dict = None

    @property
    def is_program(self):
        return bool(self.pipeline or self.tensor)


@dataclass
class Spec:
    name: str
    topology: object
    link: LinkParams
    reference_gbps: float
    profiles: dict
    jobs: list
    scheduler: str
    duration_s: float
    seed: int
    cassini: dict = field(default_factory=dict)
    netsens: dict = field(default_factory=dict)
    background: float = 0.0
    time_dilation: float = 1.0
    flow_scheduler: str = "fair"
    source: str = ""
    raw: dict = field(default_factory=dict)

    @property
    def base(self):
        return self.scheduler.split("+")[0]

    @property
    def uses_cassini(self):
        return self.scheduler.endswith("+cassini")

    @property
    def has_programs(self):
        return any(j.is_program for j in self.jobs)


def _int(where, key, v, minimum=1):
    return require_number(key, v, minimum, strict=False, whole=True,
                          error=lambda k, val, allowed: SpecError(where, k, val, allowed))


def _float(where, key, v, minimum=0.0, strict=False):
    return float(require_number(key, v, minimum, strict,
                                error=lambda k, val, allowed: SpecError(where, k, val, allowed)))


def parse_scheduler(where, s):
    if not isinstance(s, str):
        raise SpecError(where, "scheduler", s, "a name such as themis+cassini")
    parts = s.split("+")
    ok = (len(parts) == 1 and parts[0] in BASES) or (s == "fixed+cassini") or \
         (len(parts) == 2 and parts[0] in BASES[:3] and parts[1] == "cassini")
    if not ok:
        raise SpecError(where, "scheduler", s, "one of " + ", ".join(BASES) +
                        ", themis+cassini, pollux+cassini, random+cassini, fixed+cassini (pipeline/tensor jobs)")
    return s


def read_yaml(path):
    """The YAML document in ``path``; a missing or malformed file is a UsageError naming it."""
    try:
        return yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file")
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})")


def load(path, scheduler=None, seed=None):
    """Load and validate a spec file; ``scheduler`` and ``seed`` override the file's (and are validated too).
    ``scheduler`` may name a flow scheduler too: ``fixed:echelon`` sets ``flow_scheduler: echelon``."""
    where = str(path)
    raw = read_yaml(path)
    if scheduler is not None and isinstance(raw, dict):
        base, _, flow = scheduler.partition(":")
        raw = {**raw, "scheduler": base, **({"flow_scheduler": flow} if flow else {})}
    if seed is not None and isinstance(raw, dict):
        raw = {**raw, "seed": seed}
    return from_mapping(raw, where)


def from_mapping(raw, where="spec"):
    if not isinstance(raw, dict):
        raise SpecError(where, "(top level)", type(raw).__name__, "a mapping")
    for k in raw:
        if k not in TOP_KEYS:
            raise SpecError(where, k, raw[k], "unknown key; allowed: " + ", ".join(sorted(TOP_KEYS)))
    name = raw.get("name", Path(where).stem)
    ref = _float(where, "reference_gbps", raw.get("reference_gbps", 50), strict=True)
    try:
        link = LinkParams.from_spec(raw.get("link"), reference_gbps=ref)
    except LinkError as exc:
        raise SpecError(where, exc.key, exc.value, exc.allowed)
    topo_raw = raw.get("topology", {"name": "fattree"})
    if isinstance(topo_raw, str):
        topo_raw = {"name": topo_raw}
    if not isinstance(topo_raw, dict) or "name" not in topo_raw:
        raise SpecError(where, "topology", topo_raw, "a mapping with a name: " + " | ".join(BUILDERS))
    params = {k: v for k, v in topo_raw.items() if k != "name"}
    try:
        topo = by_name(topo_raw["name"], link=link, **params)
    except TopologyError as exc:
        raise SpecError(where, exc.key, exc.value, exc.allowed)
    except TypeError:
        raise SpecError(where, "topology", topo_raw, f"parameters of {topo_raw['name']}: see the README")
    profiles = dict(builtins())
    custom = raw.get("profiles") or {}
    if not isinstance(custom, dict):
        raise SpecError(where, "profiles", custom, "a mapping of name -> profile")
    for pname, pdata in custom.items():
        try:
            profiles[pname] = from_dict(pname, pdata, f"{where}: profiles.{pname}")
        except ProfileError as exc:
            raise UsageError(str(exc))
    seed = _int(where, "seed", raw.get("seed", 1), minimum=0)
    dilation = _float(where, "time_dilation", raw.get("time_dilation", 1.0), minimum=1.0)
    scheduler = parse_scheduler(where, raw.get("scheduler", "themis"))
    duration = _float(where, "duration_s", raw.get("duration_s", 120), strict=True)
    cassini = dict(CASSINI_KEYS)
    for k, v in (raw.get("cassini") or {}).items():
        if k not in CASSINI_KEYS:
            raise SpecError(where, f"cassini.{k}", v, "unknown key; allowed: " + ", ".join(CASSINI_KEYS))
        cassini[k] = v
    deg = _float(where, "cassini.discretization_deg", cassini["discretization_deg"], strict=True)
    if 360 % deg and abs(360 / deg - round(360 / deg)) > 1e-9:
        raise SpecError(where, "cassini.discretization_deg", deg, "a divisor of 360")
    _int(where, "cassini.candidates", cassini["candidates"])
    _float(where, "cassini.quantum_ms", cassini["quantum_ms"], strict=True)
    _float(where, "cassini.max_perimeter_ms", cassini["max_perimeter_ms"], strict=True)
    if cassini["aggregate"] not in ("mean", "min"):
        raise SpecError(where, "cassini.aggregate", cassini["aggregate"], "mean | min")
    a = _float(where, "cassini.align_min_score", cassini["align_min_score"])
    if not 0 <= a <= 1:
        raise SpecError(where, "cassini.align_min_score", a, "a score in [0, 1]")
    if cassini["loops"] not in ("reject", "joint"):
        raise SpecError(where, "cassini.loops", cassini["loops"], "reject (the paper) | joint")

    fs = raw.get("flow_scheduler", "fair")
    if fs not in FLOW_SCHEDULERS:
        raise SpecError(where, "flow_scheduler", fs, " | ".join(FLOW_SCHEDULERS))
    from harness.schedulers.netsens import validate as validate_netsens
    netsens = validate_netsens(where, raw.get("netsens"), SpecError)
    bg = raw.get("background") or {}
    if not isinstance(bg, dict) or set(bg) - {"load"}:
        raise SpecError(where, "background", bg, "a mapping {load: fraction of every switch-to-switch link}")
    background = _float(where, "background.load", bg.get("load", 0.0))
    if background >= 1:
        raise SpecError(where, "background.load", background, "a fraction in [0, 1)")

    if ("jobs" in raw) == ("trace" in raw):
        raise SpecError(where, "jobs/trace", None, "exactly one of jobs (explicit) or trace (generated)")
    if "trace" in raw:
        jobs_raw = _trace_jobs(where, raw["trace"], profiles, len(topo.hosts), seed)
    else:
        jobs_raw = raw["jobs"]
        if not isinstance(jobs_raw, list) or not jobs_raw:
            raise SpecError(where, "jobs", jobs_raw, "a non-empty list of jobs")
    jobs = _jobs(where, jobs_raw, profiles, topo, scheduler)
    programs = [j for j in jobs if j.is_program]
    if programs:
        if len(programs) < len(jobs):
            other = next(j for j in jobs if not j.is_program)
            raise SpecError(where, f"jobs[{jobs.index(other)}]", other.name, "a pipeline or tensor block too: "
                            "program jobs and profile jobs cannot share a spec yet")
        if scheduler not in ("fixed", "fixed+cassini"):
            raise SpecError(where, "scheduler", scheduler, "fixed or fixed+cassini (pipeline and tensor jobs run on "
                            "their pinned hosts; +cassini searches their time-shifts)")
        if background:
            raise SpecError(where, "background.load", background, "0 with pipeline and tensor jobs (not modelled)")
    elif scheduler == "fixed+cassini":
        raise SpecError(where, "scheduler", scheduler, "fixed+cassini only with pipeline or tensor jobs; "
                        "for profile jobs: themis+cassini, pollux+cassini, random+cassini")
    elif fs != "fair":
        raise SpecError(where, "flow_scheduler", fs, "fair unless jobs have a pipeline or tensor block "
                        "(profile jobs' phases are shared by TCP)")
    return Spec(name=name, topology=topo, link=link, reference_gbps=ref, profiles=profiles, jobs=jobs,
                scheduler=scheduler, duration_s=duration, seed=seed, cassini=cassini, time_dilation=dilation,
                netsens=netsens, background=background, flow_scheduler=fs, source=where, raw=raw)


def _trace_jobs(where, trace, profiles, n_hosts, seed):
    if not isinstance(trace, dict) or trace.get("kind") not in traces.KINDS:
        raise SpecError(where, "trace.kind", (trace or {}).get("kind") if isinstance(trace, dict) else trace,
                        " | ".join(traces.KINDS))
    allowed = {"kind", "jobs", "load", "models", "workers", "iterations", "iterations_scale", "arriving", "arrival_s"}
    for k in trace:
        if k not in allowed:
            raise SpecError(where, f"trace.{k}", trace[k], "unknown key; allowed: " + ", ".join(sorted(allowed)))
    _int(where, "trace.jobs", trace.get("jobs"), minimum=1)
    if trace["kind"] == "poisson":
        load = _float(where, "trace.load", trace.get("load"), strict=True)
        if load > 1.5:
            raise SpecError(where, "trace.load", load, "a fraction of busy hosts, 0 < load <= 1.5")
    for m in (trace.get("models") or []) + (trace.get("arriving") or []):
        if m not in profiles:
            raise SpecError(where, "trace.models", m, "a known model: " + ", ".join(sorted(profiles)))
    wd = trace.get("workers")
    if isinstance(wd, dict):      # a distribution {workers: weight}
        if not wd or not all(isinstance(k, int) and k >= 1 and isinstance(v, (int, float)) and v > 0
                             for k, v in wd.items()):
            raise SpecError(where, "trace.workers", wd, "[min, max], or {workers: weight} with workers >= 1, weight > 0")
        if max(wd) > n_hosts:
            raise SpecError(where, "trace.workers", wd, f"at most the {n_hosts} hosts of the topology")
        return traces.generate(trace, profiles, n_hosts, seed)
    for k in ("workers", "iterations"):
        if k in trace:
            v = trace[k]
            if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and x >= 1 for x in v) and v[0] <= v[1]):
                raise SpecError(where, f"trace.{k}", v, "[min, max] whole numbers, 1 <= min <= max")
    if "iterations_scale" in trace:
        _float(where, "trace.iterations_scale", trace["iterations_scale"], strict=True)
    if trace.get("workers", [2, 4])[1] > n_hosts:
        raise SpecError(where, "trace.workers", trace["workers"], f"at most the {n_hosts} hosts of the topology")
    return traces.generate(trace, profiles, n_hosts, seed)


def _jobs(where, jobs_raw, profiles, topo, scheduler):
    jobs, names, pinned_by = [], set(), {}
    hosts = set(topo.hosts)
    for i, j in enumerate(jobs_raw):
        key = f"jobs[{i}]"
        if not isinstance(j, dict):
            raise SpecError(where, key, j, "a mapping")
        for k in j:
            if k not in JOB_KEYS:
                raise SpecError(where, f"{key}.{k}", j[k], "unknown key; allowed: " + ", ".join(sorted(JOB_KEYS)))
        name = j.get("name", f"j{i + 1}")
        if name in names:
            raise SpecError(where, f"{key}.name", name, "a name not used by another job")
        names.add(name)
        model = j.get("model")
        if model not in profiles:
            raise SpecError(where, f"{key}.model", model, "a built-in model (" + ", ".join(sorted(builtins())) +
                            ") or one defined under profiles")
        workers = _int(where, f"{key}.workers", j.get("workers", 2))
        if workers > len(hosts):
            raise SpecError(where, f"{key}.workers", workers, f"at most the {len(hosts)} hosts of the topology")
        iterations = _int(where, f"{key}.iterations", j.get("iterations", 100))
        arrival = _float(where, f"{key}.arrival_s", j.get("arrival_s", 0.0))
        pinned = j.get("hosts")
        if pinned is not None:
            if not isinstance(pinned, list) or len(pinned) != workers:
                raise SpecError(where, f"{key}.hosts", pinned, f"a list of exactly {workers} host names (one per worker)")
            for h in pinned:
                if h not in hosts:
                    raise SpecError(where, f"{key}.hosts", h, f"a host of the topology (h1..h{len(hosts)})")
                if h in pinned_by or pinned.count(h) > 1:
                    raise SpecError(where, f"{key}.hosts", h, f"a host not already pinned to job {pinned_by.get(h, name)}")
                pinned_by[h] = name
        blocks = {}
        for b in ("pipeline", "tensor"):
            if b in j:
                from harness.schedulers.flowplan import validate as validate_block
                blocks[b] = validate_block(where, f"{key}.{b}", j[b], workers, SpecError)
        if len(blocks) > 1:
            raise SpecError(where, f"{key}.tensor", j["tensor"], "one of pipeline or tensor per job")
        shift = j.get("time_shift_ms")
        if shift is not None:
            shift = _float(where, f"{key}.time_shift_ms", shift)
            it = profiles[model].iteration_ms
            if shift >= it and not blocks:
                raise SpecError(where, f"{key}.time_shift_ms", shift, f"in [0, {it:g}) ms, the iteration of {model}")
        if scheduler in ("fixed", "fixed+cassini") and pinned is None:
            raise SpecError(where, f"{key}.hosts", None, "required with scheduler fixed (pinned hosts, no decisions)")
        jobs.append(Job(name, model, workers, iterations, arrival, list(pinned) if pinned else None, shift,
                        blocks.get("pipeline"), blocks.get("tensor")))
    return jobs
