"""Experiment spec (YAML) loading and validation: the contract in the README / contracts.

``load(path)`` returns a Spec or raises SpecError (exit status 2) whose one line names the file,
the key (``jobs[1].workers``), the value and what is allowed. Nothing is built before a spec is
valid. Naming rules: keys as in the contract; jobs are named by the user or ``j1..jN`` (traces).
"""
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from harness import limits, registry
from harness.errors import UsageError, require_number
from harness.linkmodel import LinkError, LinkParams
from topologies import TopologyError, by_name
from workloads import traces
from workloads.profiles import PROFILE_SETS, ProfileError, at_batch, at_reference, at_workers, builtins, from_dict

TOP_KEYS = {"name", "topology", "link", "reference_gbps", "profile_set", "profiles", "jobs", "trace", "scheduler",
            "duration_s", "seed", "cassini", "telemetry", "flow_scheduler", "time_dilation", "netsens", "background",
            "themis", "pollux", "allreduce", "tiresias", "replan", "echelon_mechanism", "plugins"}
ALLREDUCE = ("fixed", "ring")           # a data-parallel phase's length on N workers: the profile's | 2(N-1)/N
THEMIS_RACKS = ("fewest", "penalty")     # harness.schedulers.placement: best fit | the paper's rack penalty
JOB_KEYS = {"name", "model", "workers", "iterations", "hosts", "arrival_s", "time_shift_ms", "pipeline", "tensor",
            "data_parallel",
            "batch_size"}
FLOW_SCHEDULERS = ("fair", "coflow", "echelon")
# what a spec takes when it leaves a key out (the scheduler's: registry.DEFAULT_SCHEDULER)
TOP_DEFAULTS = {"reference_gbps": 50, "profile_set": "builtin", "duration_s": 120, "seed": 1, "time_dilation": 1.0,
                "flow_scheduler": FLOW_SCHEDULERS[0], "allreduce": ALLREDUCE[0]}
JOB_DEFAULTS = {"workers": 2, "iterations": 100, "arrival_s": 0.0}
SCHEDULER_BLOCKS = ("cassini", "themis", "pollux", "netsens", "tiresias")   # settings read by some schedulers only
TRACE_KEYS = {"kind", "jobs", "load", "models", "workers", "iterations", "iterations_scale", "arriving", "arrival_s",
              "burst"}                  # trace kinds snapshot, poisson, dynamic (workloads.traces.generate)
CSV_TRACE_KEYS = {"kind", "file", "applications", "jobs", "time_scale", "iterations", "iterations_scale", "batch"}
TELEMETRY_KEYS = ("period_ms",)
BACKGROUND_KEYS = ("load",)
CASSINI_KEYS = {"discretization_deg": 5.0, "candidates": 10, "quantum_ms": 5.0, "max_perimeter_ms": 10000.0,
                "aggregate": "mean", "exact_max_jobs": 3, "loops": "reject", "align_min_score": 0.9,
                "common_period": 0.0, "unequal_periods": "unified", "unequal_score": "circle"}
UNEQUAL_PERIODS = ("unified", "free")
UNEQUAL_SCORES = ("circle", "sliding")


NAME_RULE = r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}"   # spec and job names: they become file names


def check_name(where, key, value):
    import re
    if not isinstance(value, str) or not re.fullmatch(NAME_RULE, value):
        raise SpecError(where, key, value, "a name of letters, digits and _ . + - (at most 64, "
                        "starting with a letter or digit)")
    return value


def mapping(where, key, value, what="a mapping"):
    """``value`` if it is a mapping (None counts as empty); else a SpecError."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(where, key, value, what)
    return value


class SpecError(UsageError):
    def __init__(self, where, key, value, allowed):
        super().__init__(f"{where}: {key}: {limits.short(value)} is not allowed ({allowed})")
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
    pipeline: dict = None       # a program job (harness.planners.flowplan): its step waits for its inputs
    tensor: dict = None
    data_parallel: dict = None

    @property
    def kind(self):
        """pipeline | tensor | data_parallel (a program job's block), or None (a profile job)."""
        return next((k for k in ("pipeline", "tensor", "data_parallel") if getattr(self, k)), None)

    @property
    def is_program(self):
        return self.kind is not None


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
    themis: dict = field(default_factory=lambda: {"racks": "fewest"})
    pollux: dict = field(default_factory=dict)
    tiresias: dict = field(default_factory=dict)
    background: float = 0.0
    time_dilation: float = 1.0
    flow_scheduler: str = "fair"
    replan: dict = None                 # harness.planners.replan: echelon's priorities re-planned in the run
    echelon_mechanism: str = None       # harness.programblocks.MECHANISMS (None: its default)
    source: str = ""
    raw: dict = field(default_factory=dict)
    plugins: list = field(default_factory=list)     # plug-in files loaded for this spec (resolved paths)
    warnings: list = field(default_factory=list)    # settings its scheduler does not read (unread_blocks)

    @property
    def base(self):
        return self.scheduler.split("+")[0]

    @property
    def policy_class(self):
        """The registered class of the base scheduler (harness.registry)."""
        return registry.resolve(self.scheduler)[0].cls

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
    try:
        registry.resolve(s)
    except ValueError as exc:
        raise SpecError(where, "scheduler", s, str(exc))
    return s


def read_yaml(path):
    """The YAML document in ``path``, checked against the input limits (harness.limits). A missing,
    unreadable, oversized, non-UTF-8 or malformed file is a UsageError naming it (with the line and
    column of a YAML error)."""
    text = read_text(path, "a YAML file")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"{path}: not valid YAML ({at}{limits.short(what)[1:-1]})")
    except RecursionError:
        raise UsageError(f"{path}: nesting deeper than {limits.MAX_DEPTH} levels (input limits, README)")
    try:
        limits.check_document(doc)
    except limits.LimitError as exc:
        raise UsageError(f"{path}: {exc}")
    return doc


def read_text(path, what="a text file"):
    """The UTF-8 text of ``path`` within the input limits' size; a UsageError naming the file otherwise."""
    p = Path(path)
    try:
        st = p.stat()
        if p.is_dir():
            raise UsageError(f"{path}: is a directory, not {what}")
        if not p.is_file():
            raise UsageError(f"{path}: not a regular file")
        if st.st_size > limits.MAX_FILE_BYTES:
            raise UsageError(f"{path}: {st.st_size} bytes; at most {limits.MAX_FILE_BYTES} (input limits, README)")
        data = p.read_bytes()[:limits.MAX_FILE_BYTES + 1]
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start}: {data[exc.start:exc.start + 1]!r})")
    if "\0" in text:
        raise UsageError(f"{path}: not a text file (contains NUL bytes)")
    return text


def load(path, scheduler=None, seed=None, overrides=None, scheduler_from="--scheduler"):
    """Load and validate a spec file; ``scheduler`` and ``seed`` override the file's (and are validated too).
    ``scheduler`` may name a flow scheduler too: ``fixed:echelon`` sets ``flow_scheduler: echelon``.
    ``overrides``: top-level keys replacing the file's (an experiment set's ``set``), validated alike.
    ``scheduler_from``: where the override came from, in an error (a set file's key)."""
    where = str(path)
    raw = read_yaml(path)
    if overrides and isinstance(raw, dict):
        raw = {**raw, **overrides}
    if isinstance(raw, dict):
        _plugins(where, raw, Path(path).parent)     # before --scheduler may name what they register
    if scheduler is not None:
        base, _, flow = scheduler.partition(":")
        try:
            parse_scheduler("", base)
            if flow and flow not in FLOW_SCHEDULERS:
                raise SpecError("", "flow_scheduler", flow, " | ".join(FLOW_SCHEDULERS))
        except SpecError as exc:
            raise UsageError(f"{scheduler_from} {limits.short(scheduler)}{exc}")
    if scheduler is not None and isinstance(raw, dict):
        raw = {**raw, "scheduler": base, **({"flow_scheduler": flow} if flow else {})}
    if seed is not None and isinstance(raw, dict):
        raw = {**raw, "seed": seed}
    return from_mapping(raw, where, Path(path).parent)


def from_mapping(raw, where="spec", base_dir="."):
    """The whole spec validated, section by section, before anything is built. ``base_dir``: where
    the spec's relative paths (``plugins``) start."""
    if not isinstance(raw, dict):
        raise SpecError(where, "(top level)", type(raw).__name__, "a mapping")
    try:
        limits.check_document(raw)
        limits.check_ranges(raw)
    except limits.LimitError as exc:
        raise SpecError(where, exc.key, exc.value, exc.allowed)
    for k in raw:
        if k not in TOP_KEYS:
            raise SpecError(where, k, raw[k], "unknown key; allowed: " + ", ".join(sorted(TOP_KEYS)))
    plugins = _plugins(where, raw, base_dir)      # they may register the topology or scheduler
    name = raw["name"] if "name" in raw else Path(where).stem
    check_name(where, "name", name)
    ref = _float(where, "reference_gbps", raw.get("reference_gbps", TOP_DEFAULTS["reference_gbps"]), strict=True)
    link, topo = _fabric(where, raw, ref)
    profiles, inlined = _profiles(where, raw, base_dir)
    # one reference for every consumer (simulator, planner, emulator): each profile's demands as shares
    # of the spec's line rate
    profiles = {n: at_reference(p, ref) for n, p in profiles.items()}
    seed = _int(where, "seed", raw.get("seed", TOP_DEFAULTS["seed"]), minimum=0)
    dilation = _float(where, "time_dilation", raw.get("time_dilation", TOP_DEFAULTS["time_dilation"]), minimum=1.0)
    scheduler = parse_scheduler(where, raw.get("scheduler", registry.DEFAULT_SCHEDULER))
    duration = _float(where, "duration_s", raw.get("duration_s", TOP_DEFAULTS["duration_s"]), strict=True)
    cassini = _cassini(where, raw)
    _telemetry(where, raw)
    fs = raw.get("flow_scheduler", TOP_DEFAULTS["flow_scheduler"])
    if not isinstance(fs, str) or fs not in FLOW_SCHEDULERS:
        raise SpecError(where, "flow_scheduler", fs, " | ".join(FLOW_SCHEDULERS))
    from harness.schedulers.netsens import validate as validate_netsens
    netsens = validate_netsens(where, raw.get("netsens"), SpecError)
    from harness.schedulers.tiresias import validate as validate_tiresias
    tiresias = validate_tiresias(where, raw.get("tiresias"), SpecError)
    background = _background(where, raw)
    themis = _themis(where, raw)
    pollux = _pollux(where, raw)
    if ("jobs" in raw) == ("trace" in raw):
        raise SpecError(where, "jobs/trace", None, "exactly one of jobs (explicit) or trace (generated)")
    if "trace" in raw:
        jobs_raw = _trace_jobs(where, raw["trace"], profiles, len(topo.hosts), seed)
    else:
        jobs_raw = raw["jobs"]
        if not isinstance(jobs_raw, list) or not jobs_raw:
            raise SpecError(where, "jobs", jobs_raw, "a non-empty list of jobs")
    allreduce = raw.get("allreduce", TOP_DEFAULTS["allreduce"])
    if allreduce not in ALLREDUCE:
        raise SpecError(where, "allreduce", allreduce, "fixed (every job's phases as its profile has them) | ring "
                        "(a data-parallel job's all-reduce lasts 2(N-1)/N of its model on N workers)")
    jobs = _jobs(where, jobs_raw, profiles, topo, scheduler, allreduce == "ring")
    _job_kinds(where, jobs, scheduler, fs, background)
    from harness.programblocks import validate_replan
    replan = validate_replan(where, raw, SpecError)
    from harness.programblocks import validate_mechanism
    mechanism = validate_mechanism(where, raw, link.sharing, SpecError)
    warnings = [f"{where}: {b}: no effect under scheduler {scheduler} (read by {', '.join(readers(b))})"
                for b in unread_blocks(raw, scheduler)]
    return Spec(name=name, topology=topo, link=link, reference_gbps=ref, profiles=profiles, jobs=jobs,
                scheduler=scheduler, duration_s=duration, seed=seed, cassini=cassini, time_dilation=dilation,
                netsens=netsens, themis=themis, pollux=pollux, tiresias=tiresias, background=background, flow_scheduler=fs, replan=replan,
                echelon_mechanism=mechanism, source=where,
                raw=self_contained(raw, plugins, inlined), plugins=plugins, warnings=warnings)


def readers(block):
    """The registered schedulers that read the spec's settings block ``block`` (``reads`` of their
    policy class; ``cassini``: every NAME+cassini)."""
    if block == "cassini":
        return ["NAME+cassini"]
    return [n for n in registry.scheduler_names() if block in registry.lookup(n).cls.reads]


def unread_blocks(raw, scheduler):
    """The settings blocks (SCHEDULER_BLOCKS) in ``raw`` that ``scheduler`` does not read. Not an error:
    an experiment set runs one spec under several schedulers; the commands warn."""
    entry, with_cassini = registry.resolve(scheduler)
    return [b for b in SCHEDULER_BLOCKS if raw.get(b) and not (with_cassini if b == "cassini" else b in entry.cls.reads)]


def self_contained(raw, plugins, profiles):
    """The spec document as a results directory keeps it (spec.yaml) and a worker re-reads it from
    elsewhere: plug-in paths absolute, profile files inlined. Unchanged when it has neither."""
    out = dict(raw)
    if plugins:
        out["plugins"] = list(plugins)
    if raw.get("profiles") and profiles != raw["profiles"]:
        out["profiles"] = profiles
    return out


def _plugins(where, raw, base_dir):
    """``plugins: [PATH, ...]``: Python files (relative to the spec) run before the scheduler is read;
    they register schedulers (harness.registry). Returns their resolved paths."""
    paths = raw.get("plugins") or []
    if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
        raise SpecError(where, "plugins", paths, "a list of Python files (relative to the spec)")
    out = []
    for i, p in enumerate(paths):
        try:
            out.append(str(registry.load_plugin(p, relative_to=base_dir)))
        except registry.PluginError as exc:
            raise registry.PluginError(f"{where}: plugins[{i}]: {exc}") from None
    return out


def _themis(where, raw):
    """``themis: {racks, lease_s, restart_s, max_workers}``: how themis (and ideal) place a job on the
    free GPUs, and its lease auctions (harness.schedulers.reallocation; ``lease_s`` unset: none)."""
    from harness.schedulers.reallocation import THEMIS_DEFAULTS as DEFAULTS
    allowed = ["racks", *DEFAULTS]
    t = mapping(where, "themis", raw.get("themis"), "a mapping {" + ", ".join(allowed) + "}") or {}
    for k in t:
        if k not in allowed:
            raise SpecError(where, f"themis.{k}", t[k], "unknown key; allowed: " + ", ".join(allowed))
    racks = t.get("racks", "fewest")
    if racks not in THEMIS_RACKS:
        raise SpecError(where, "themis.racks", racks, "fewest (best fit into the fewest racks) | penalty (the "
                        "paper's rack-level slowdown penalty only)")
    out = {"racks": racks}
    if t.get("lease_s") is not None:
        out["lease_s"] = _float(where, "themis.lease_s", t["lease_s"], strict=True)
        out["restart_s"] = _float(where, "themis.restart_s", t.get("restart_s", DEFAULTS["restart_s"]))
        out["max_workers"] = _int(where, "themis.max_workers", t.get("max_workers", DEFAULTS["max_workers"]))
    else:
        for k in ("restart_s", "max_workers"):
            if k in t:
                raise SpecError(where, f"themis.{k}", t[k], "only with themis.lease_s (the auctions it configures)")
    return out


def _pollux(where, raw):
    """``pollux: {interval_s, restart_s}``: pollux's periodic reallocation for goodput
    (harness.schedulers.reallocation; ``interval_s`` unset: counts chosen once, at placement)."""
    from harness.schedulers.reallocation import POLLUX_DEFAULTS
    allowed = list(POLLUX_DEFAULTS)
    t = mapping(where, "pollux", raw.get("pollux"), "a mapping {" + ", ".join(allowed) + "}") or {}
    for k in t:
        if k not in allowed:
            raise SpecError(where, f"pollux.{k}", t[k], "unknown key; allowed: " + ", ".join(allowed))
    if t.get("interval_s") is None:
        if "restart_s" in t:
            raise SpecError(where, "pollux.restart_s", t["restart_s"], "only with pollux.interval_s")
        return {}
    return {"interval_s": _float(where, "pollux.interval_s", t["interval_s"], strict=True),
            "restart_s": _float(where, "pollux.restart_s", t.get("restart_s", POLLUX_DEFAULTS["restart_s"]))}


def _fabric(where, raw, ref):
    """(LinkParams, Topology) of ``link`` and ``topology``."""
    try:
        link = LinkParams.from_spec(mapping(where, "link", raw.get("link"),
                                            "a mapping {rate_mbps, ecn_k_bytes, queue_bytes, mtu, sharing, delay_ms}"),
                                    reference_gbps=ref)
    except LinkError as exc:
        raise SpecError(where, exc.key, exc.value, exc.allowed)
    topo_raw = raw.get("topology", {"name": "fattree"})
    if isinstance(topo_raw, str):
        topo_raw = {"name": topo_raw}
    if not isinstance(topo_raw, dict) or not isinstance(topo_raw.get("name"), str):
        raise SpecError(where, "topology", topo_raw, "a mapping with a name: " + " | ".join(registry.topology_names()))
    params = {k: v for k, v in topo_raw.items() if k != "name"}
    try:
        topo = by_name(topo_raw["name"], link=link, **params)
    except TopologyError as exc:
        raise SpecError(where, exc.key, exc.value, exc.allowed)
    except registry.PluginError as exc:
        raise UsageError(str(exc))
    return link, topo


def _profiles(where, raw, base_dir):
    """The built-in profiles of the spec's ``profile_set`` plus the spec's own: a mapping as a profile
    file has it, or ``{file: PATH}`` (relative to the spec; what ``interleave profile --out`` writes)."""
    pset = raw.get("profile_set", TOP_DEFAULTS["profile_set"])
    if not isinstance(pset, str) or pset not in PROFILE_SETS:
        raise SpecError(where, "profile_set", pset, " | ".join(PROFILE_SETS))
    profiles = dict(builtins(pset))
    custom = mapping(where, "profiles", raw.get("profiles"), "a mapping of name -> profile")
    inlined = {}
    for pname, pdata in custom.items():
        check_name(where, "profiles", pname)
        source, inline = where, True
        if isinstance(pdata, dict) and "file" in pdata:
            if set(pdata) != {"file"} or not isinstance(pdata["file"], str):
                raise SpecError(where, f"profiles.{pname}", pdata, "{file: PATH} alone, or the profile's own keys")
            path = Path(pdata["file"])
            path = path if path.is_absolute() else Path(base_dir) / path
            if not path.is_file():
                raise SpecError(where, f"profiles.{pname}.file", pdata["file"], f"a profile file (not found: {path})")
            pdata, source, inline = read_yaml(path), str(path), False
        try:
            profiles[pname] = from_dict(pname, pdata, source)
        except ProfileError as exc:
            if inline:                  # the key's path in the spec, as every other spec error
                raise SpecError(where, f"profiles.{pname}" + ("" if exc.key == pname else f".{exc.key}"),
                                exc.value, exc.allowed)
            raise UsageError(str(exc))
        inlined[pname] = pdata
    return profiles, inlined


def _cassini(where, raw):
    """CASSINI's settings with their defaults (CASSINI_KEYS)."""
    cassini = dict(CASSINI_KEYS)
    for k, v in mapping(where, "cassini", raw.get("cassini"), "a mapping of CASSINI settings").items():
        if k not in CASSINI_KEYS:
            raise SpecError(where, f"cassini.{k}", v, "unknown key; allowed: " + ", ".join(sorted(CASSINI_KEYS)))
        cassini[k] = v
    deg = _float(where, "cassini.discretization_deg", cassini["discretization_deg"], strict=True)
    if 360 % deg and abs(360 / deg - round(360 / deg)) > 1e-9:
        raise SpecError(where, "cassini.discretization_deg", deg, "a divisor of 360")
    _int(where, "cassini.candidates", cassini["candidates"])
    _int(where, "cassini.exact_max_jobs", cassini["exact_max_jobs"])
    _float(where, "cassini.quantum_ms", cassini["quantum_ms"], strict=True)
    _float(where, "cassini.max_perimeter_ms", cassini["max_perimeter_ms"], strict=True)
    if cassini["aggregate"] not in ("mean", "min"):
        raise SpecError(where, "cassini.aggregate", cassini["aggregate"], "mean | min")
    a = _float(where, "cassini.align_min_score", cassini["align_min_score"])
    if not 0 <= a <= 1:
        raise SpecError(where, "cassini.align_min_score", a, "a score in [0, 1]")
    c = _float(where, "cassini.common_period", cassini["common_period"])
    if not 0 <= c <= 1:
        raise SpecError(where, "cassini.common_period", c, "a fraction in [0, 1]: how much a job's iteration may "
                        "stretch to share the beat of the jobs on its links (0: never)")
    if cassini["loops"] not in ("reject", "joint"):
        raise SpecError(where, "cassini.loops", cassini["loops"], "reject (the paper) | joint")
    if cassini["unequal_periods"] not in UNEQUAL_PERIODS:
        raise SpecError(where, "cassini.unequal_periods", cassini["unequal_periods"], " | ".join(UNEQUAL_PERIODS))
    if cassini["unequal_score"] not in UNEQUAL_SCORES:
        raise SpecError(where, "cassini.unequal_score", cassini["unequal_score"], " | ".join(UNEQUAL_SCORES))
    return cassini


def _telemetry(where, raw):
    telemetry = mapping(where, "telemetry", raw.get("telemetry"), "a mapping {period_ms}")
    for k, v in telemetry.items():
        if k not in TELEMETRY_KEYS:
            raise SpecError(where, f"telemetry.{k}", v, "unknown key; allowed: " + ", ".join(TELEMETRY_KEYS))
        if not 10 <= _float(where, "telemetry.period_ms", v, strict=True) <= 60_000:
            raise SpecError(where, "telemetry.period_ms", v, "in [10, 60000] ms")


def _background(where, raw):
    bg = raw.get("background") or {}
    if not isinstance(bg, dict):
        raise SpecError(where, "background", bg, "a mapping {load: fraction of every switch-to-switch link}")
    for k in bg:
        if k not in BACKGROUND_KEYS:
            raise SpecError(where, f"background.{k}", bg[k], "unknown key; allowed: " + ", ".join(BACKGROUND_KEYS))
    background = _float(where, "background.load", bg.get("load", 0.0))
    if background >= 1:
        raise SpecError(where, "background.load", background, "a fraction in [0, 1)")
    return background


def _pinned_schedulers():
    """Schedulers that run every job on its pinned hosts (program jobs need one), for messages:
    listing every scheduler reads the installed packages' entry points."""
    return " or ".join(n for n in registry.scheduler_names() if registry.lookup(n).cls.requires_pinned_hosts)


def _job_kinds(where, jobs, scheduler, fs, background):
    """Program jobs (pipeline/tensor/data_parallel) and profile jobs: what each kind allows."""
    entry, with_cassini = registry.resolve(scheduler)
    pinned = entry.cls.requires_pinned_hosts
    programs = [j for j in jobs if j.is_program]
    if programs:
        if len(programs) < len(jobs) and (not pinned or with_cassini):
            raise SpecError(where, "scheduler", scheduler,
                            f"{_pinned_schedulers()} with program jobs and profile jobs together (every job on its "
                            "pinned hosts at its time_shift_ms; +cassini searches program jobs' shifts only)")
        if not pinned:
            raise SpecError(where, "scheduler", scheduler,
                            f"{_pinned_schedulers()}, with or without +cassini (program jobs run on their pinned "
                            "hosts; +cassini searches their time-shifts)")
        if background:
            raise SpecError(where, "background.load", background, "0 with program jobs (not modelled)")
    elif pinned and with_cassini:
        others = [n + "+cassini" for n in registry.scheduler_names()
                  if registry.lookup(n).cls.cassini and not registry.lookup(n).cls.requires_pinned_hosts]
        raise SpecError(where, "scheduler", scheduler, f"{scheduler} only with program jobs; "
                        "for profile jobs: " + ", ".join(others))
    elif fs != "fair":
        raise SpecError(where, "flow_scheduler", fs, "fair unless jobs have a pipeline, tensor or data_parallel block "
                        "(profile jobs' phases are shared by TCP)")


def _trace_jobs(where, trace, profiles, n_hosts, seed):
    if not isinstance(trace, dict) or trace.get("kind") not in traces.KINDS:
        raise SpecError(where, "trace.kind", (trace or {}).get("kind") if isinstance(trace, dict) else trace,
                        " | ".join(traces.KINDS))
    if trace["kind"] == "csv":
        return _csv_trace(where, trace, profiles, n_hosts, seed)
    allowed = TRACE_KEYS
    for k in trace:
        if k not in allowed:
            raise SpecError(where, f"trace.{k}", trace[k], "unknown key; allowed: " + ", ".join(sorted(allowed)))
    _int(where, "trace.jobs", trace.get("jobs"), minimum=1)
    if trace["kind"] == "poisson":
        load = _float(where, "trace.load", trace.get("load"), strict=True)
        if load > 1.5:
            raise SpecError(where, "trace.load", load, "a fraction of busy hosts, 0 < load <= 1.5")
    if "burst" in trace:
        if trace["kind"] != "poisson":
            raise SpecError(where, "trace.burst", trace["burst"], "only for kind: poisson")
        _int(where, "trace.burst", trace["burst"], minimum=1)
    for k in ("models", "arriving"):
        if k in trace and not (isinstance(trace[k], list) and all(isinstance(m, str) for m in trace[k])):
            raise SpecError(where, f"trace.{k}", trace[k], "a list of model names, e.g. [vgg19, resnet50]")
    if "arrival_s" in trace:
        _float(where, "trace.arrival_s", trace["arrival_s"])
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
            _min_max(where, f"trace.{k}", trace[k])
    if "iterations_scale" in trace:
        _float(where, "trace.iterations_scale", trace["iterations_scale"], strict=True)
    if trace.get("workers", traces.DEFAULTS["workers"])[1] > n_hosts:
        raise SpecError(where, "trace.workers", trace["workers"], f"at most the {n_hosts} hosts of the topology")
    return traces.generate(trace, profiles, n_hosts, seed)


def _min_max(where, key, v):
    """``v`` if it is [min, max] whole numbers with 1 <= min <= max; else a SpecError."""
    if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) and x >= 1
                                                        for x in v) and v[0] <= v[1]):
        raise SpecError(where, key, v, "[min, max] whole numbers, 1 <= min <= max")
    return v


def _csv_trace(where, trace, profiles, n_hosts, seed):
    """``trace: {kind: csv, file, ...}``: arrivals, applications, replicas and batch sizes from a file
    (workloads.traces.from_rows; the file relative to the spec's directory), every row validated."""
    allowed = CSV_TRACE_KEYS
    for k in trace:
        if k not in allowed:
            raise SpecError(where, f"trace.{k}", trace[k], "unknown key; allowed: " + ", ".join(sorted(allowed)))
    f = trace.get("file")
    if not isinstance(f, str) or not f:
        raise SpecError(where, "trace.file", f, "a CSV file (name,time,application,num_replicas,batch_size), "
                        "relative to the spec's directory")
    path = Path(f) if Path(f).is_absolute() else Path(where).parent / f
    apps = {**{a: m for a, (m, _why) in traces.APPLICATIONS.items()},
            **(mapping(where, "trace.applications", trace.get("applications"), "a mapping {application: model}"))}
    for a, m in apps.items():
        if not isinstance(a, str) or not isinstance(m, str) or m not in profiles:
            raise SpecError(where, f"trace.applications.{a}", m, "a known model: " + ", ".join(sorted(profiles)))
    if "jobs" in trace:
        _int(where, "trace.jobs", trace["jobs"], minimum=1)
    scale = _float(where, "trace.time_scale", trace.get("time_scale", traces.CSV_DEFAULTS["time_scale"]), strict=True)
    it = _min_max(where, "trace.iterations", trace.get("iterations", traces.CSV_DEFAULTS["iterations"]))
    it_scale = _float(where, "trace.iterations_scale", trace.get("iterations_scale", traces.CSV_DEFAULTS["iterations_scale"]), strict=True)
    batch = trace.get("batch", traces.CSV_DEFAULTS["batch"])
    if batch not in ("profile", "file"):
        raise SpecError(where, "trace.batch", batch, "profile (each model's own batch size) | file (the file's "
                        "batch_size / num_replicas per GPU, data-parallel models)")
    try:
        text = read_text(path, "a CSV file")
    except UsageError as exc:
        raise SpecError(where, "trace.file", f, str(exc))
    try:
        rows = traces.read_rows(text, apps, n_hosts, NAME_RULE, trace.get("jobs"))
    except traces.TraceError as exc:
        raise SpecError(where, f"trace.file {f}: {exc.where}", exc.value, exc.allowed)
    return traces.from_rows(rows, apps, profiles, it, it_scale, scale, batch, seed)


def _at_batch(where, key, profiles, model, batch):
    """A job's own per-GPU batch size: the model's profile at that batch (workloads.profiles.at_batch),
    added to ``profiles`` as ``<model>@<batch>``; returns the name the job then uses."""
    batch = _int(where, f"{key}.batch_size", batch)
    prof = profiles[model]
    if batch == prof.batch_size:
        return model
    if prof.parallelism != "data" or not prof.batch_size:
        raise SpecError(where, f"{key}.batch_size", batch, f"only for data-parallel profiles with a batch size "
                        f"({model} is {prof.parallelism})")
    name = f"{model}@{batch}"
    profiles.setdefault(name, at_batch(prof, batch))
    return name


def _on_workers(profiles, model, workers):
    """``allreduce: ring``: the job's profile on its own worker count (workloads.profiles.at_workers),
    added as ``<model>x<workers>``; the name the job then uses."""
    prof = profiles[model]
    if prof.parallelism != "data" or not prof.workers or workers == prof.workers:
        return model
    name = f"{model}x{workers}"
    profiles.setdefault(name, at_workers(prof, workers))
    return name


def _jobs(where, jobs_raw, profiles, topo, scheduler, ring_workers=False):
    jobs, names, pinned_by = [], set(), {}
    hosts = set(topo.hosts)
    for i, j in enumerate(jobs_raw):
        key = f"jobs[{i}]"
        if not isinstance(j, dict):
            raise SpecError(where, key, j, "a mapping")
        for k in j:
            if k not in JOB_KEYS:
                raise SpecError(where, f"{key}.{k}", j[k], "unknown key; allowed: " + ", ".join(sorted(JOB_KEYS)))
        name = check_name(where, f"{key}.name", j.get("name", f"j{i + 1}"))
        if name in names:
            raise SpecError(where, f"{key}.name", name, "a name not used by another job")
        names.add(name)
        model = j.get("model")
        if not isinstance(model, str) or model not in profiles:
            raise SpecError(where, f"{key}.model", model, "a built-in model (" + ", ".join(sorted(builtins())) +
                            ") or one defined under profiles")
        if j.get("batch_size") is not None:
            model = _at_batch(where, key, profiles, model, j["batch_size"])
        workers = _int(where, f"{key}.workers", j.get("workers", JOB_DEFAULTS["workers"]))
        if workers > len(hosts):
            raise SpecError(where, f"{key}.workers", workers, f"at most the {len(hosts)} hosts of the topology")
        if ring_workers:
            model = _on_workers(profiles, model, workers)
        iterations = _int(where, f"{key}.iterations", j.get("iterations", JOB_DEFAULTS["iterations"]))
        arrival = _float(where, f"{key}.arrival_s", j.get("arrival_s", JOB_DEFAULTS["arrival_s"]))
        pinned = j.get("hosts")
        if pinned is not None:
            if not isinstance(pinned, list) or len(pinned) != workers:
                raise SpecError(where, f"{key}.hosts", pinned, f"a list of exactly {workers} host names (one per worker)")
            for h in pinned:
                if not isinstance(h, str) or h not in hosts:
                    raise SpecError(where, f"{key}.hosts", h, f"a host of the topology (h1..h{len(hosts)})")
                if h in pinned_by or pinned.count(h) > 1:
                    raise SpecError(where, f"{key}.hosts", h, f"a host not already pinned to job {pinned_by.get(h, name)}")
                pinned_by[h] = name
        blocks = {}
        for b in ("pipeline", "tensor", "data_parallel"):
            if b in j:
                from harness.programblocks import validate_block
                blocks[b] = validate_block(where, f"{key}.{b}", j[b], workers, SpecError)
        if len(blocks) > 1:
            second = list(blocks)[1]
            raise SpecError(where, f"{key}.{second}", j[second], "one of pipeline, tensor or data_parallel per job")
        shift = j.get("time_shift_ms")
        if shift is not None:
            shift = _float(where, f"{key}.time_shift_ms", shift)
            if not registry.resolve(scheduler)[0].cls.keeps_spec_shifts:
                keeps = [n for n in registry.scheduler_names() if registry.lookup(n).cls.keeps_spec_shifts]
                raise SpecError(where, f"{key}.time_shift_ms", shift,
                                f"no effect under scheduler {scheduler}: only {', '.join(keeps)} keeps the spec's "
                                "shifts; the others choose their own")
            it = profiles[model].iteration_ms
            if shift >= it and not blocks:
                raise SpecError(where, f"{key}.time_shift_ms", shift, f"in [0, {it:g}) ms, the iteration of {model}")
        if registry.resolve(scheduler)[0].cls.requires_pinned_hosts and pinned is None:
            raise SpecError(where, f"{key}.hosts", None, f"required with scheduler {scheduler.split('+')[0]} "
                            "(pinned hosts, no decisions)")
        jobs.append(Job(name, model, workers, iterations, arrival, list(pinned) if pinned else None, shift,
                        blocks.get("pipeline"), blocks.get("tensor"), blocks.get("data_parallel")))
    return jobs
