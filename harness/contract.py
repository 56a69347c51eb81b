"""What a scheduler implements, built-in or plug-in: ``PlacementPolicy`` (which hosts a job gets when
it is placed; composes with CASSINI) or ``EventPolicy`` (decides at the simulator's events: may wait,
set timers, preempt). The planner and the simulator call them; this module imports neither.
"""
import sys
import traceback
from dataclasses import dataclass

from harness.errors import UsageError


class PluginError(UsageError):
    """A plug-in that cannot be used: one line naming the file (and line) and what is wrong; exit 2."""


class PlacementError(ValueError):
    """No placement exists (too few free hosts): a scheduling error of the spec, not of the plug-in."""


@dataclass(frozen=True)
class JobRequest:
    """A job to place: ``workers`` is the number of hosts it gets (the spec's, or the policy's own
    ``worker_counts``); ``profile`` has ``iteration_ms``, ``comm_fraction``, ``comm_phases``."""
    name: str
    workers: int
    model: str
    profile: object
    arrival_s: float


class Cluster:
    """The fabric as a placement policy sees it: ``topology`` (topologies.base.Topology), ``graph``
    (networkx: hosts and switches, one edge per link), ``running`` ({job: [hosts]}: jobs that keep
    their hosts, and those placed earlier in the same decision), ``racks`` ({edge switch: [hosts]})."""

    def __init__(self, topology, running):
        self.topology = topology
        self.running = dict(running)
        self.racks = {}
        for h in topology.hosts:
            self.racks.setdefault(topology.edge_of(h), []).append(h)

    @property
    def graph(self):
        return self.topology.graph()

    def rack_of(self, host):
        return self.topology.edge_of(host)


class PlacementPolicy:
    """Decides which hosts each job gets when it is placed (at its arrival, or when hosts free up).

    A plug-in implements ``place(job, free_hosts, cluster)``: a list of ``job.workers`` distinct
    names from ``free_hosts`` (in host order; ``cluster.running`` holds the jobs already placed). Jobs
    are offered in arrival order. With ``NAME+cassini`` CASSINI asks for up to ``cassini.candidates``
    placements: the first offers the free hosts in host order, the others with the racks in seeded
    random orders (hosts keep their order within a rack); distinct answers are scored and the best
    one is taken, with time-shifts. A policy whose answer does not depend on that order gives one
    candidate, and CASSINI then only shifts.

    Class attributes a policy may set: ``cassini`` (False: ``NAME+cassini`` is refused), ``alone``
    (the simulator runs each job as if alone on the fabric), ``keeps_spec_shifts`` (jobs keep the
    spec's ``time_shift_ms``), ``requires_pinned_hosts`` (every job must name its ``hosts``),
    ``reads`` (the spec's settings blocks it reads, e.g. ``("themis",)``: a spec holding a block
    that its scheduler does not read gets a warning, and docs/spec.md names each block's readers).
    ``self.spec`` is the loaded spec (``seed``, ``jobs``, ``topology``, ``profiles``).
    """
    cassini = True
    alone = False
    keeps_spec_shifts = False
    requires_pinned_hosts = False
    reads = ()

    @classmethod
    def from_spec(cls, spec):
        policy = cls()
        policy.spec = spec
        return policy

    def worker_counts(self, jobs, n_free):
        """{job: hosts it gets} for ``jobs`` (spec Job objects) with ``n_free`` hosts free."""
        return {j.name: j.workers for j in jobs}

    def place(self, job, free_hosts, cluster):
        raise NotImplementedError(f"{type(self).__name__}.place(job, free_hosts, cluster)")

    def propose(self, jobs, free, cluster, n, rng):
        """Up to ``n`` distinct placements {job: [hosts]} of ``jobs`` (JobRequest, in order) on the
        ``free`` hosts, the first one the policy's choice on hosts in order (see the class)."""
        out = []
        racks = list(cluster.racks)
        for attempt in range(20 * n):
            if len(out) >= n:
                break
            if attempt == 0:
                order = list(free)
            else:
                rank = {str(r): i for i, r in enumerate(rng.permutation(racks))}
                order = sorted(free, key=lambda h: rank[cluster.rack_of(h)])
            cand = self._place_all(jobs, order, cluster)
            if cand not in out:
                out.append(cand)
            elif attempt >= n and len(out) == 1:
                break       # the policy ignores the order: one candidate
        return out

    def _place_all(self, jobs, free, cluster):
        avail, running, cand = list(free), dict(cluster.running), {}
        for job in jobs:
            view = Cluster(cluster.topology, running)
            hosts = call_plugin(self, "place", job, list(avail), view)
            check_hosts(self, job, hosts, avail)
            cand[job.name] = sorted(hosts, key=cluster.topology.host_index)
            running[job.name] = cand[job.name]
            avail = [h for h in avail if h not in hosts]
        return cand


class EventPolicy:
    """Decides at the simulator's events (arrivals, finishes, its own timers): what netsens,
    consolidate and tiresias are. The planner takes an event policy's placements and start times
    from a simulation of the spec, and the emulator replays them.

    ``__init__(self, spec, routes)``; ``decide(t, waiting, running)`` -> ``Decision`` (harness.
    schedulers.policy: ``place`` {job: hosts}, ``preempt`` [jobs], ``wake_at`` seconds);
    ``shift(name)`` (ms, 0 without CASSINI) and ``forget(name)`` when a job ends. ``waiting`` holds
    objects with ``.job`` (the spec's Job) and ``.since``; ``running`` is {job: [hosts]}.
    """
    cassini = False
    alone = False
    keeps_spec_shifts = False
    requires_pinned_hosts = False
    reads = ()                  # the spec's settings blocks it reads (PlacementPolicy)
    tunes_timers = False        # the planner resolves ``timers: auto`` first (netsens)

    def __init__(self, spec, routes):
        self.spec, self.routes = spec, routes

    def decide(self, t, waiting, running):
        raise NotImplementedError(f"{type(self).__name__}.decide(t, waiting, running)")

    def shift(self, name):
        return 0.0

    def forget(self, name):
        pass

    def plan_params(self):
        """What the plan records under ``params`` for this policy (schedule.json)."""
        return {}


def origin_of(obj, line=True):
    """'file:line' of the code that defined ``obj``'s class ('file' alone with ``line=False``, which
    does not parse the source: every registration asks it)."""
    import inspect
    cls = obj if isinstance(obj, type) else type(obj)
    try:
        path = inspect.getsourcefile(cls) if line else sys.modules[cls.__module__].__file__
        return f"{path}:{inspect.getsourcelines(cls)[1]}" if line else str(path)
    except (OSError, TypeError, KeyError, AttributeError):
        return cls.__module__


def raised_at(exc, home):
    """'file:line' of the innermost frame of ``exc`` in the file ``home`` (a plug-in), else ``home``."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(home)]
    return f"{home}:{frames[-1].lineno}" if frames else str(home)


def call_plugin(policy, method, *args):
    """``policy.method(*args)``; an exception raised inside it becomes a PluginError naming the
    plug-in's file and line (its innermost frame in the file that defines the policy's class)."""
    try:
        return getattr(policy, method)(*args)
    except PlacementError:
        raise
    except Exception as exc:
        raise PluginError(f"{raised_at(exc, origin_of(policy, line=False))}: {type(policy).__name__}.{method} "
                          f"raised {type(exc).__name__}: {exc}") from exc


def method_origin(policy, method):
    """'file:line' of ``policy``'s ``method`` (where a wrong answer comes from), else of its class."""
    import inspect
    fn = getattr(type(policy), method, None)
    try:
        return f"{inspect.getsourcefile(fn)}:{inspect.getsourcelines(fn)[1]}"
    except (OSError, TypeError):
        return origin_of(policy)


def check_hosts(policy, job, hosts, free):
    """A placement policy's answer for ``job``: ``job.workers`` distinct hosts among ``free``."""
    where = method_origin(policy, "place")
    if not isinstance(hosts, (list, tuple)) or not all(isinstance(h, str) for h in hosts):
        raise PluginError(f"{where}: {type(policy).__name__}.place returned {hosts!r} for job {job.name}: "
                          "a list of host names")
    bad = [h for h in hosts if h not in free]
    if bad or len(set(hosts)) != len(hosts) or len(hosts) != job.workers:
        raise PluginError(f"{where}: {type(policy).__name__}.place gave job {job.name} {list(hosts)}; it needs "
                          f"{job.workers} distinct hosts among the {len(free)} free ones"
                          + (f" ({', '.join(bad[:3])} not free)" if bad else ""))
