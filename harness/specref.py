"""The spec reference: every key a spec may hold, with its type and range, its default, what it
means and which schedulers read it. docs/spec.md is generated from it (``python -m harness.specref``).

The key sets and the defaults are not restated here: each section reads them from the module that
validates it (``spec.TOP_KEYS``, ``spec.CASSINI_KEYS``, ``programblocks.BLOCKS``, ``netsens.DEFAULTS``,
...), and tests/unit/test_specref.py fails when a validator accepts a key this table does not
describe, or the table describes one no validator accepts, or docs/spec.md is stale. What this
module owns is the prose: a key's meaning and who reads it.
"""
import inspect
import sys
from pathlib import Path

from harness import linkmodel, registry, spec
from harness import programblocks
from harness.schedulers import netsens, reallocation, tiresias
from harness.telemetry import PERIOD_MS
from workloads import profiles, traces

DOC = Path(__file__).resolve().parent.parent / "docs" / "spec.md"
ALL = "all"
READERS = object()         # the schedulers whose policy class declares it reads the block (spec.readers)
NONE = object()            # no default: required, or unset means "off" (the meaning says which)

# section -> (the key set its validator accepts, {key: default}) — read from the owners
SECTIONS = {
    "": (spec.TOP_KEYS, {**spec.TOP_DEFAULTS, "scheduler": registry.DEFAULT_SCHEDULER,
                         "echelon_mechanism": programblocks.MECHANISMS[0], "topology": "{name: fattree}"}),
    "link": (set(linkmodel.LINK_KEYS), {"rate_mbps": linkmodel.DEFAULT_RATE_MBPS, "mtu": linkmodel.DEFAULT_MTU,
                                        "sharing": linkmodel.SHARING[0], "delay_ms": 0.0,
                                        "ecn_k_bytes": "scaled", "queue_bytes": "scaled"}),
    "profiles.NAME": (set(profiles.PROFILE_KEYS) | {"file"},
                      {"parallelism": profiles.PARALLELISMS[0],
                       "reference_gbps": profiles.Profile.__dataclass_fields__["reference_gbps"].default}),
    "profiles.NAME.phases[i]": (set(profiles.PHASE_KEYS) | {"pattern"}, {"pattern": "by parallelism"}),
    "jobs[i]": (spec.JOB_KEYS, {**spec.JOB_DEFAULTS, "name": "j1, j2, ..."}),
    **{f"jobs[i].{b}": (set(keys), {k: v for k, v in keys.items() if v is not None})
       for b, keys in programblocks.BLOCKS.items()},
    "trace": (spec.TRACE_KEYS, {**traces.DEFAULTS, "models": "every profile"}),
    "trace (kind: csv)": (spec.CSV_TRACE_KEYS, dict(traces.CSV_DEFAULTS)),
    "cassini": (set(spec.CASSINI_KEYS), dict(spec.CASSINI_KEYS)),
    "telemetry": (set(spec.TELEMETRY_KEYS), {"period_ms": PERIOD_MS}),
    "background": (set(spec.BACKGROUND_KEYS), {"load": 0.0}),
    "themis": ({"racks", *reallocation.THEMIS_DEFAULTS},
               {"racks": spec.THEMIS_RACKS[0], **{k: v for k, v in reallocation.THEMIS_DEFAULTS.items() if v is not None}}),
    "pollux": (set(reallocation.POLLUX_DEFAULTS), {k: v for k, v in reallocation.POLLUX_DEFAULTS.items() if v is not None}),
    "netsens": (set(netsens.DEFAULTS), {k: v for k, v in netsens.DEFAULTS.items() if v is not None}),
    "tiresias": (set(tiresias.DEFAULTS), dict(tiresias.DEFAULTS)),
    "replan": (set(programblocks.REPLAN_KEYS), dict(programblocks.REPLAN_KEYS)),
}

# (section, key): (type and range, meaning, read by)
KEYS = {
    ("", "name"): ("a name (letters, digits, _ . + -; at most 64)",
                   "The experiment's name; results directories are named after it. Default: the file's name.", ALL),
    ("", "topology"): ("a topology name, or a mapping {name, PARAMETERS}",
                       "The fabric: `fattree`, `leafspine`, `dumbbell` or a registered plug-in, with its parameters "
                       "(below) and `routing: spread | by_destination` (how equal-cost paths are chosen).", ALL),
    ("", "link"): ("a mapping", "Every link's rate, queue, ECN threshold, MTU, egress discipline and delay.", ALL),
    ("", "reference_gbps"): ("a number > 0", "The line rate of the cluster the experiment stands for (Gbit/s). "
                             "A profile's `gbps` are shares of it: a phase at 40 on a 50 Gbit/s reference takes "
                             "0.8 of `link.rate_mbps`; the ECN threshold and queue scale with rate / reference.", ALL),
    ("", "profile_set"): (" | ".join(profiles.PROFILE_SETS), "Which numbers the built-in model names stand for: "
                          + "; ".join(f"`{k}`: {v}" for k, v in profiles.PROFILE_SETS.items())
                          + ". Default `builtin`.", ALL),
    ("", "profiles"): ("a mapping NAME -> profile, or NAME -> {file: PATH}",
                       "Models of your own beside the built-ins (`interleave profile --out` writes a file).", ALL),
    ("", "jobs"): ("a non-empty list of jobs", "The jobs, each one entry. Exactly one of `jobs` or `trace`.", ALL),
    ("", "trace"): ("a mapping with `kind`", "Jobs drawn from a generator or read from a CSV file, instead of "
                    "`jobs` (`kind`: " + " | ".join(traces.KINDS) + ").", ALL),
    ("", "scheduler"): ("a registered scheduler, NAME or NAME+cassini",
                        "Who places the jobs and chooses their time-shifts: " + ", ".join(sorted(
                            n for n in registry.scheduler_names())) + ", and plug-ins. `--scheduler` overrides it.",
                        ALL),
    ("", "duration_s"): ("a number > 0", "A guard, not the run's length (jobs run their `iterations`): an emulated "
                         "run still going `duration_s` plus ten minutes (model time) after its start is stopped as "
                         "hung.", "emulator"),
    ("", "seed"): ("a whole number >= 0", "The seed of every random draw (traces, `random` placement, CASSINI's "
                   "candidates); a set's repeat r runs with seed + r.", ALL),
    ("", "cassini"): ("a mapping", "CASSINI's settings (below).", READERS),
    ("", "telemetry"): ("a mapping", "How often the controller polls the switches (below).", "emulator"),
    ("", "flow_scheduler"): (" | ".join(spec.FLOW_SCHEDULERS), "How the flows of pipeline, tensor and data-parallel "
                             "program jobs share links: TCP (`fair`), coflow order, or EchelonFlow's schedule. "
                             "`fair` unless jobs have a program block.", "{pinned} (program jobs)"),
    ("", "time_dilation"): ("a number >= 1", "The emulated fabric runs at rate / D and every time is stretched by D, "
                            "so a machine too slow for the links keeps up; results come back in model time.",
                            "emulator"),
    ("", "netsens"): ("a mapping", "The network-sensitive delay scheduler's settings (below).", READERS),
    ("", "background"): ("a mapping", "Load on the fabric that is not the jobs' (below).", ALL),
    ("", "themis"): ("a mapping", "Themis's placement rule and lease auctions (below).", READERS),
    ("", "pollux"): ("a mapping", "Pollux's periodic reallocation (below).", READERS),
    ("", "allreduce"): (" | ".join(spec.ALLREDUCE), "`fixed`: every job's phases as its profile has them; `ring`: a "
                        "data-parallel job's all-reduce lasts 2(N-1)/N of its model on its own N workers.", ALL),
    ("", "tiresias"): ("a mapping", "Tiresias's queues (below).", READERS),
    ("", "replan"): ("a mapping, or unset", "EchelonFlow's priorities re-planned during the run from measured "
                     "progress (below); unset: planned once.", "{pinned} with `flow_scheduler: echelon` (emulator)"),
    ("", "echelon_mechanism"): (" | ".join(programblocks.MECHANISMS), "How EchelonFlow's schedule reaches the flows: "
                                "priority queues (needs `link.sharing: priority`), pacing, or chosen per job.",
                                "{pinned} with `flow_scheduler: echelon`"),
    ("", "plugins"): ("a list of Python files (relative to the spec)",
                      "Files run before the spec is read further; they register schedulers and topologies "
                      "(docs/plugins.md).", ALL),

    ("link", "rate_mbps"): ("a number > 0", "Every link's rate in Mbit/s of model time (the fabric runs at rate / "
                            "time_dilation). A run warns when this machine was not measured faithful at it.", ALL),
    ("link", "ecn_k_bytes"): ("bytes, at least one MTU and below queue_bytes", "The ECN marking threshold K of every switch egress queue. "
                              "Default: DCQCN's 80 KB at the reference rate, scaled to the link (at least 10 MTUs).",
                              ALL),
    ("link", "queue_bytes"): ("bytes, at least two MTUs and above ecn_k_bytes", "Every egress queue's length. Default: 320 KB at the "
                              "reference rate scaled, at least 48 ms of the link and 3 K.", "emulator"),
    ("link", "mtu"): (f"{linkmodel.MTU_RANGE[0]}-{linkmodel.MTU_RANGE[1]} bytes", "Every interface's MTU.",
                      "emulator"),
    ("link", "sharing"): (" | ".join(linkmodel.SHARING), "The switch egress discipline: one FIFO shared by TCP, a "
                          "queue per job served round-robin, or a queue per flow priority.", ALL),
    ("link", "delay_ms"): ("ms >= 0", "One-way propagation delay of every link, each direction. The simulator "
                           "always models it; the emulator needs netem in the kernel (`interleave doctor` says "
                           "whether this machine has it; `run` refuses a delay it cannot emulate).", ALL),

    ("profiles.NAME", "model"): ("text", "The model's name as its source gives it (informative).", ALL),
    ("profiles.NAME", "parallelism"): (" | ".join(profiles.PARALLELISMS), "How the model is trained; it sets the "
                                       "phases' default pattern.", ALL),
    ("profiles.NAME", "iteration_ms"): ("ms > 0 (required)", "One iteration alone on the fabric: compute and "
                                        "communication.", ALL),
    ("profiles.NAME", "reference_gbps"): ("a number > 0", "The line rate the phases' `gbps` were measured at; the "
                                          "spec rescales them to its own `reference_gbps`.", ALL),
    ("profiles.NAME", "batch_size"): ("a whole number", "The per-GPU batch the profile was measured at (a job's "
                                      "`batch_size` rescales from it).", ALL),
    ("profiles.NAME", "workers"): ("a whole number", "The worker count it was measured on (`allreduce: ring` "
                                   "rescales from it).", ALL),
    ("profiles.NAME", "model_mb"): ("MB > 0", "The model's size, recorded with its source; informative: the phases "
                                    "carry the communication.", ALL),
    ("profiles.NAME", "phases"): ("a non-empty list (required)", "The communication (Up) phases of one iteration; the time "
                                  "outside them is compute (Down).", ALL),
    ("profiles.NAME", "provenance"): ("text", "Where every number comes from (required of built-in profiles).", ALL),
    ("profiles.NAME", "notes"): ("text", "Free text.", ALL),
    ("profiles.NAME", "file"): ("a path (relative to the spec)", "The profile read from a file instead; "
                                "`{file: PATH}` alone.", ALL),
    ("profiles.NAME.phases[i]", "start_ms"): ("ms >= 0", "When the phase starts in the iteration.", ALL),
    ("profiles.NAME.phases[i]", "duration_ms"): ("ms > 0", "How long it lasts alone on the fabric.", ALL),
    ("profiles.NAME.phases[i]", "gbps"): ("a number > 0, at most the profile's `reference_gbps`", "Each worker's sending rate during it, in Gbit/s of the "
                                          "profile's reference.", ALL),
    ("profiles.NAME.phases[i]", "pattern"): (" | ".join(profiles.PATTERNS), "Who sends to whom (agents/patterns.py). "
                                             "Default: ring_allreduce for data and hybrid, pipeline_p2p, "
                                             "tensor_allreduce.", ALL),

    ("jobs[i]", "name"): ("a name", "The job's name (unique).", ALL),
    ("jobs[i]", "model"): ("a built-in model or one under `profiles` (required)", "What the job trains.", ALL),
    ("jobs[i]", "workers"): ("a whole number, at most the hosts", "GPUs (hosts) it asks for.", ALL),
    ("jobs[i]", "iterations"): ("a whole number >= 1", "Iterations it runs; then it ends.", ALL),
    ("jobs[i]", "hosts"): ("a list of `workers` host names", "Pinned hosts: the job runs there under every "
                           "scheduler (required by `fixed`).", ALL),
    ("jobs[i]", "arrival_s"): ("s >= 0", "When the job arrives.", ALL),
    ("jobs[i]", "time_shift_ms"): ("ms in [0, iteration)", "The job's time-shift; refused under a scheduler that "
                                   "chooses its own.", "{keeps_shifts}"),
    ("jobs[i]", "pipeline"): ("a mapping", "A pipeline-parallel program job (below) instead of a profile's phases.",
                              "{pinned}"),
    ("jobs[i]", "tensor"): ("a mapping", "A tensor-parallel program job (below).", "{pinned}"),
    ("jobs[i]", "data_parallel"): ("a mapping", "A data-parallel program job with bucketed all-reduce (below).",
                                   "{pinned}"),
    ("jobs[i]", "batch_size"): ("a whole number >= 1", "Its per-GPU batch: a data-parallel profile is rescaled "
                                "(compute proportional to the batch).", ALL),
    ("jobs[i].pipeline", "schedule"): ("gpipe | 1f1b", "The pipeline schedule of micro-batches.", "{pinned}"),
    ("jobs[i].pipeline", "micro_batches"): ("a whole number >= 1", "Micro-batches per step.", "{pinned}"),
    ("jobs[i].pipeline", "forward_ms"): ("ms > 0", "A stage's forward pass of one micro-batch. Default: from the "
                                         "profile.", "{pinned}"),
    ("jobs[i].pipeline", "backward_ms"): ("ms > 0", "Its backward pass. Default: from the profile.", "{pinned}"),
    ("jobs[i].pipeline", "activation_mb"): ("MB > 0", "What a stage sends the next per micro-batch (forward). "
                                            "Default: from the profile.", "{pinned}"),
    ("jobs[i].pipeline", "gradient_mb"): ("MB > 0", "What a stage sends the previous one per micro-batch (backward). "
                                          "Default: from the profile.", "{pinned}"),
    ("jobs[i].tensor", "layers"): ("a whole number >= 1", "Layers per step, each ending in an all-reduce.", "{pinned}"),
    ("jobs[i].tensor", "layer_ms"): ("ms > 0", "One layer's compute. Default: from the profile.", "{pinned}"),
    ("jobs[i].tensor", "allreduce_mb"): ("MB > 0", "Each layer's all-reduce. Default: from the profile.", "{pinned}"),
    ("jobs[i].data_parallel", "buckets"): ("a whole number >= 1", "Gradient buckets, each all-reduced as the "
                                           "backward pass frees it.", "{pinned}"),
    ("jobs[i].data_parallel", "forward_ms"): ("ms > 0", "The forward pass. Default: from the profile.", "{pinned}"),
    ("jobs[i].data_parallel", "backward_ms"): ("ms > 0", "The backward pass. Default: from the profile.", "{pinned}"),
    ("jobs[i].data_parallel", "allreduce_mb"): ("MB > 0", "The whole all-reduce. Default: the model's size.", "{pinned}"),

    ("trace", "kind"): ("snapshot | poisson | dynamic", "`snapshot`: every job at t=0; `poisson`: arrivals at "
                        "`load`; `dynamic`: a snapshot, then the `arriving` models at `arrival_s`.", ALL),
    ("trace", "jobs"): ("a whole number >= 1 (required)", "Jobs drawn.", ALL),
    ("trace", "load"): ("0 < load <= 1.5 (poisson: required)", "Offered load: the mean share of hosts busy.", ALL),
    ("trace", "models"): ("a list of models", "The models drawn from.", ALL),
    ("trace", "workers"): ("[min, max], or {workers: weight}", "Each job's workers: uniform in the range, or drawn "
                           "from the weights.", ALL),
    ("trace", "iterations"): ("[min, max]", "Each job's iterations, uniform in the range.", ALL),
    ("trace", "iterations_scale"): ("a number > 0", "Every drawn iteration count multiplied by it.", ALL),
    ("trace", "arriving"): ("a list of models (dynamic)", "Jobs that arrive after the snapshot.", ALL),
    ("trace", "arrival_s"): ("s >= 0 (dynamic)", "When the `arriving` jobs arrive.", ALL),
    ("trace", "burst"): ("a whole number >= 1 (poisson)", "Jobs arrive in bursts of this many, at the same load.", ALL),
    ("trace (kind: csv)", "kind"): ("csv", "Jobs from a file.", ALL),
    ("trace (kind: csv)", "file"): ("a CSV file, relative to the spec (required)",
                                    "Rows `name,time,application,num_replicas,batch_size` (the Pollux traces' "
                                    "format).", ALL),
    ("trace (kind: csv)", "applications"): ("a mapping application -> model",
                                            "Which profile stands for each application, beside the built-in map.",
                                            ALL),
    ("trace (kind: csv)", "jobs"): ("a whole number >= 1", "Only the first this many rows.", ALL),
    ("trace (kind: csv)", "time_scale"): ("a number > 0", "Arrival times multiplied by it.", ALL),
    ("trace (kind: csv)", "iterations"): ("[min, max]", "Each job's iterations, drawn uniformly.", ALL),
    ("trace (kind: csv)", "iterations_scale"): ("a number > 0", "Drawn iteration counts multiplied by it.", ALL),
    ("trace (kind: csv)", "batch"): ("profile | file", "Each model's own batch, or the file's batch_size / "
                                     "num_replicas per GPU (data-parallel models).", ALL),

    ("cassini", "discretization_deg"): ("a divisor of 360", "Angle of one bin of the unified circle.", READERS),
    ("cassini", "candidates"): ("a whole number >= 1", "Placements asked of the base scheduler and scored "
                                "(Algorithm 2).", READERS),
    ("cassini", "quantum_ms"): ("ms > 0", "Iteration times of one period are rounded to it before the circle's "
                                "perimeter is taken (unequal ones too with unequal_periods: free, or when "
                                "their exact LCM exceeds max_perimeter_ms); with unified, the most a new job "
                                "pads its period.", READERS),
    ("cassini", "max_perimeter_ms"): ("ms > 0", "The longest perimeter; beyond it the quantum grows and the epoch "
                                      "says `approximate`.", READERS),
    ("cassini", "aggregate"): ("mean | min", "How a candidate's link scores combine: the mean, or the worst link.", READERS),
    ("cassini", "exact_max_jobs"): ("a whole number >= 1", "Links with up to this many jobs are optimised exactly; "
                                    "more, greedily.", READERS),
    ("cassini", "loops"): ("reject | joint", "A candidate whose Affinity graph has a loop: rejected (the paper), or "
                           "its looped jobs optimised together.", READERS),
    ("cassini", "align_min_score"): ("a score in [0, 1]", "Jobs whose shared links score at least this keep "
                                     "their shifts relative to each other (of any periods with unequal_periods: "
                                     "unified; of one period otherwise); the others run free.", READERS),
    ("cassini", "unequal_periods"): ("unified | free", "unified (the paper's unified circle): jobs of "
                                     "different periods sharing links keep their shifts together when their "
                                     "communication fits in the GCD of their periods, a new job padding its "
                                     "period by at most quantum_ms (whole ms) to get there (padding_ms per job); "
                                     "free: only jobs of one period keep shifts (docs/schedulers.md, unequal "
                                     "periods).", READERS),
    ("cassini", "unequal_score"): ("circle | sliding", "How a shared link is scored when some two of its jobs "
                                   "have periods no shift keeps apart (their communication does not fit in "
                                   "the GCD of their periods: they run free and slide through each other): "
                                   "circle, at the best shifts on the unified circle (on rounded periods when "
                                   "the exact LCM exceeds max_perimeter_ms); sliding, at the mean over every "
                                   "relative offset, what the exact circle of such periods gives and what "
                                   "sliding jobs meet (unequal_periods: unified only).", READERS),
    ("cassini", "common_period"): ("a fraction in [0, 1]", "Jobs on shared links whose iterations are within this "
                                   "fraction of the longest run on the longest period (0: never). A running job keeps its period, "
                                   "and a newcomer slower than the jobs it joins keeps its own, so a value has no "
                                   "effect on such jobs.", READERS),

    ("telemetry", "period_ms"): ("10-60000 ms", "How often the controller reads port counters and the ECN marker "
                                 "(model time).", "emulator"),
    ("background", "load"): ("a fraction in [0, 1)", "Share of every switch-to-switch link taken by constant "
                             "traffic that is not the jobs': those links keep 1 - load of their rate (the emulator "
                             "shapes them lower).", ALL),

    ("themis", "racks"): (" | ".join(spec.THEMIS_RACKS), "Best fit into the fewest racks, or the paper's rack "
                          "penalty only.", READERS),
    ("themis", "lease_s"): ("s > 0, or unset", "Every lease_s all GPUs are auctioned again by finish-time "
                            "fairness; unset: no auctions. Simulator only.", READERS),
    ("themis", "restart_s"): ("s >= 0 (with lease_s)", "What a job moved by an auction pays to restart. Simulator only.", READERS),
    ("themis", "max_workers"): ("a whole number >= 1 (with lease_s)", "The most GPUs an auction gives one job. Simulator only.", READERS),
    ("pollux", "interval_s"): ("s > 0, or unset", "Every interval_s worker counts are chosen again for goodput; "
                               "unset: once, at placement. Simulator only.", READERS),
    ("pollux", "restart_s"): ("s >= 0 (with interval_s)", "What a moved job pays to restart. Simulator only.", READERS),

    ("netsens", "timers"): ("adaptive | auto | {high|medium|low: [rack_s, pod_s]}", "How long a job waits for a "
                            "rack, then a pod, before it takes looser hosts. `adaptive`: while the time a tighter "
                            "level saves it exceeds the expected wait for that level (see schedulers.md); a "
                            "mapping: fixed seconds per sensitivity class (unnamed classes: high 60/60, medium "
                            "15/15, low 0/0); `auto`: fixed timers tuned in the simulator.", READERS),
    ("netsens", "thresholds"): ("[medium, high], 1 <= medium <= high", "Slowdown across pods at which a job is "
                                "medium, high sensitive.", READERS),
    ("netsens", "expected_background"): ("a fraction in [0, 1)", "The background load sensitivity is judged at when "
                                         "the spec has none.", READERS),
    ("netsens", "preemption"): ("true | false", "A high-sensitivity job may take a rack from low ones (adaptive: "
                                "when its expected wait for a rack exceeds the restarts it causes).", READERS),
    ("netsens", "restart_s"): ("s >= 0", "What a preempted job pays when it restarts.", READERS),
    ("netsens", "min_run_s"): ("s >= 0", "A job runs at least this long before it may be preempted.", READERS),
    ("netsens", "max_preemptions"): ("a whole number >= 0", "The most times one job is preempted.", READERS),
    ("netsens", "objective"): (" | ".join(netsens.OBJECTIVES), "What `timers: auto` minimises.", READERS),
    ("netsens", "tune_seed"): ("a whole number >= 0, or unset", "The seed of the trace `timers: auto` tunes on; "
                               "unset: the spec's own trace.", READERS),
    ("netsens", "patience"): ("a number > 0", "With `timers: adaptive`: seconds a job accepts to wait for a tighter "
                              "locality level per second that level is expected to save it; also the most it "
                              "waits in all, as a multiple of that saving.", READERS),
    ("netsens", "low_fill"): (" | ".join(netsens.LOW_FILLS), "Where a low-sensitivity job goes first: the fullest "
                              "partly used rack that fits it (`rack`), or also the most fragmented racks of a pod "
                              "(`pod`: keeps racks whole for sensitive jobs, breaks up pods larger jobs need); "
                              "else where consolidation would put it.", READERS),
    ("netsens", "sensitivity"): (" | ".join(netsens.SOURCES), "A job's sensitivity: measured in emulation for the "
                                 "built-ins, or computed from its profile.", READERS),
    ("tiresias", "queue_limits"): ("increasing GPU-seconds > 0", "Attained service at which a job drops to the next "
                                   "queue.", READERS),
    ("replan", "every_steps"): ("a whole number >= 1", "Re-plan after this many steps of the slowest job.",
                                "{pinned} with `flow_scheduler: echelon` (emulator)"),
    ("replan", "window_steps"): ("a whole number >= 1", "Steps of measured progress a plan is made from.",
                                 "{pinned} with `flow_scheduler: echelon` (emulator)"),
}


def _scheduler_kinds():
    """The registered schedulers that run program jobs (pinned hosts) and that keep the spec's shifts,
    by their policy classes' declarations, for the 'read by' column."""
    names = registry.scheduler_names()
    cls = {n: registry.lookup(n).cls for n in names}
    return {"pinned": ", ".join(n for n in names if cls[n].requires_pinned_hosts),
            "keeps_shifts": ", ".join(n for n in names if cls[n].keeps_spec_shifts)}


def topology_parameters():
    """{topology name: [(parameter, default)]} of every registered topology, from its builder."""
    out = {}
    for name in registry.topology_names():
        sig = inspect.signature(registry.topology(name).builder)
        out[name] = [(p.name, p.default) for p in sig.parameters.values()
                     if p.name != "link" and p.kind is p.POSITIONAL_OR_KEYWORD]
    return out


def _default(section, key):
    """A default as YAML would spell it, in code; a description (the owner's text with a space, or
    ``scaled``) as text."""
    d = SECTIONS[section][1].get(key, NONE)
    if d is NONE:
        return "-"
    if isinstance(d, str) and (" " in d or d == "scaled"):
        return "scaled to the link" if d == "scaled" else d
    return f"`{str(d).lower() if isinstance(d, bool) else d}`"


def _cell(text):
    """Markdown table cell: a ``|`` inside it escaped."""
    return str(text).replace("|", "\\|")


def render():
    """docs/spec.md."""
    out = ["# Spec reference", "",
           "<!-- generated by `python -m harness.specref` from harness/specref.py and the validators it reads; "
           "do not edit -->", "",
           "A spec is one YAML file. Every key below is checked before anything is built: an unknown key, a wrong "
           "type or a value out of range is one line naming the file, the key and what is allowed (exit status 2). "
           "*Read by* names the schedulers or the backend that use a key (`all`: every scheduler, both backends; "
           "`emulator`: `interleave run` only). Units: ms and s of model time, Mbit/s for the emulated links, "
           "Gbit/s of the reference cluster for profiles. Examples: `experiments/*.yaml`; a walkthrough: "
           "[walkthrough.md](walkthrough.md); the words: [concepts.md](concepts.md).", ""]
    for section in SECTIONS:
        keys = sorted(k for s, k in KEYS if s == section)
        title = "Top level" if not section else f"`{section}`"
        out += [f"## {title}", "", "| key | type and range | default | meaning | read by |",
                "| --- | --- | --- | --- | --- |"]
        order = [k for k in _order(section) if k in keys] + [k for k in keys if k not in _order(section)]
        for k in order:
            typ, meaning, who = KEYS[(section, k)]
            if who is READERS:
                who = ", ".join(spec.readers(k if not section else section.split(".")[0]))
            who = who.format(**_scheduler_kinds())
            out.append("| " + " | ".join(_cell(c) for c in (f"`{k}`", typ, _default(section, k), meaning, who)) + " |")
        out.append("")
        if section == "":
            out += ["### `topology` parameters", "", "| topology | parameters (default) |", "| --- | --- |"]
            for name, params in topology_parameters().items():
                ps = ", ".join(f"`{p}` (`{d}`)" for p, d in params) or "none"
                out.append(f"| `{name}` | {ps}; `routing` (`spread`) |")
            out.append("")
    return "\n".join(out)


def _order(section):
    """The keys in the order the validator lists them where it has one (a dict or tuple), else sorted."""
    keys = SECTIONS[section][0]
    return list(keys) if not isinstance(keys, (set, frozenset)) else sorted(keys)


def main(argv=None):
    from harness.generated import write_or_check
    return write_or_check(DOC, render() + "\n", "harness.specref", argv)


if __name__ == "__main__":
    sys.exit(main())
