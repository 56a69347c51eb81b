"""The plan every backend consumes: ``Plan`` (the whole run) and ``PlannedJob`` (one job's hosts,
start and timing). The planners (harness.planners.schedule, harness.planners.flowplan) build it;
``Plan.write`` is the one writer of ``schedule.json`` and ``Plan.read`` reads one back whole
(``report`` and ``modelcheck`` read only the sections they use from a results directory);
``to_dict`` is what ``interleave schedule --json`` prints."""
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

ROUTES = "computed by harness.routing (deterministic least-loaded ECMP); installed by the controller"


@dataclass
class Segment:
    """One stretch of a preempted job: its start, hosts and the iterations it runs there."""
    start_s: float
    hosts: list
    iterations: int


@dataclass
class Reshift:
    """A new time-shift given to a running job at an epoch (CASSINI re-phasing its component)."""
    t_s: float
    time_shift_ms: float


@dataclass
class PlannedJob:
    """One job as planned. ``time_shift_ms``: its iterations start at T0 + shift + k x period;
    ``period_ms``: the beat it runs on when that differs from its profile's ``iteration_ms`` (CASSINI's
    common period); ``alignment`` and ``group``: how its agents hold the shift (harness.schedulers.policy);
    ``segments`` and ``restart_s``: a preempted job's stretches; ``queue_est_s``: the wait the
    simulator predicted (event-driven policies)."""
    name: str
    model: str
    hosts: list
    time_shift_ms: float
    iteration_ms: float
    iterations: int
    arrival_s: float
    placed_at_s: float
    finish_est_s: float
    alone: bool = False
    period_ms: float = None
    queue_est_s: float = None
    segments: list = None
    restart_s: float = None
    reshifts: list = None
    alignment: str = "free"
    group: list = None

    ORDER = ("name", "model", "hosts", "time_shift_ms", "iteration_ms", "period_ms", "iterations", "arrival_s",
             "placed_at_s", "finish_est_s", "alone", "queue_est_s", "segments", "restart_s", "reshifts",
             "alignment", "group")
    OMITTED_WHEN_NONE = ("period_ms", "queue_est_s", "segments", "restart_s", "reshifts")

    @property
    def beat_ms(self):
        """The period its iterations are planned on (``period_ms``, else the profile's iteration)."""
        return self.iteration_ms if self.period_ms is None else self.period_ms

    def stretches(self):
        """Its segments, or the one stretch of a job that is never preempted."""
        return self.segments or [Segment(self.placed_at_s, self.hosts, self.iterations)]

    def segment_dicts(self):
        """Its segments as schedule.json has them (None when it is never preempted)."""
        return None if self.segments is None else [dataclasses.asdict(x) for x in self.segments]

    def to_dict(self):
        d = dataclasses.asdict(self)
        return {k: d[k] for k in self.ORDER if not (k in self.OMITTED_WHEN_NONE and d[k] is None)}

    @classmethod
    def from_dict(cls, d):
        d = dict(d)
        if d.get("segments"):
            d["segments"] = [Segment(**s) for s in d["segments"]]
        if d.get("reshifts"):
            d["reshifts"] = [Reshift(**r) for r in d["reshifts"]]
        return cls(**{k: v for k, v in d.items() if k in cls.ORDER})


@dataclass
class Plan:
    """The run's plan: who runs where and when, what the policy saw at each epoch (``epochs``, each
    with its scored ``links``), the policy's parameters, and for program jobs the flow scheduler's
    decision (``flow_scheduler``)."""
    scheduler: str
    spec: str
    seed: int
    topology: dict
    reference_gbps: float
    jobs: list
    links: list = field(default_factory=list)
    affinity_graph: dict = field(default_factory=lambda: {"loop_free": None})
    candidates_considered: int = 1
    epochs: list = field(default_factory=list)
    params: dict = field(default_factory=dict)
    predicted: dict = None
    routes: str = ROUTES
    flow_scheduler: dict = None

    @classmethod
    def of(cls, spec, jobs, **kw):
        """A plan of ``spec`` (its scheduler, name, seed, topology and reference rate) with ``jobs``."""
        return cls(scheduler=spec.scheduler, spec=spec.name, seed=spec.seed, topology=spec.topology.summary(),
                   reference_gbps=spec.reference_gbps, jobs=jobs, **kw)

    @property
    def by_name(self):
        return {j.name: j for j in self.jobs}

    def is_program(self, name):
        """Whether ``name`` is a program job (its step grid is the flow scheduler's period)."""
        return self.flow_scheduler is not None and name in self.flow_scheduler["jobs"]

    def to_dict(self):
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "jobs":
                v = [j.to_dict() for j in v]
            elif v is None and f.name in ("predicted", "flow_scheduler"):
                continue
            out[f.name] = v
        return out

    def write(self, path):
        """schedule.json (its one writer)."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def from_dict(cls, d):
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{**{k: v for k, v in d.items() if k in names},
                      "jobs": [PlannedJob.from_dict(j) for j in d.get("jobs", [])]})

    @classmethod
    def read(cls, path):
        return cls.from_dict(json.loads(Path(path).read_text()))
