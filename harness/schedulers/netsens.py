"""Network-sensitive GPU scheduling (after arXiv 2401.16492, whose body was not available: this is
the project's own reconstruction, documented in docs/schedulers.md) and its consolidation baseline.

Locality levels of a placement: 0 one rack (edge switch), 1 one pod (racks sharing aggregation
switches; leaf-spine: the whole fabric), 2 anywhere. One GPU per host.

Sensitivity of a job = its iteration time spread across pods, where every fabric link keeps only
``1 - b`` of its capacity (b: the spec's background, else ``expected_background``), over its
iteration time consolidated. ``sensitivity: emulated`` (default): the ratio measured in emulation for
each built-in model (workloads/sensitivity.yaml, workloads/derive_sensitivity.py), ``modelled``: computed
from the profile with the fluid model's rule for a job alone (``modelled_sensitivity``). Classes:
``high`` at or above thresholds[1], ``medium`` at or above thresholds[0], else ``low``; the
built-ins' classes are listed in workloads/sensitivity.yaml.

``netsens`` (delay scheduling, Zaharia et al. EuroSys'10, over locality levels): queue in arrival
order, later jobs may go when an earlier one waits. How long a job holds out for its best level (0
if it fits in a rack, else 1, else 2): ``timers: adaptive`` (default) while ``patience`` times the
time the tighter level saves it exceeds the expected wait for it (harness.schedulers.patience);
fixed timers per class, ``timers: {high: [rack_s, pod_s], medium: [...], low: [...]}``, accept
only the best feasible level until its timer expires, then the next one. Low-sensitivity jobs never wait: a
job that fits in a partly used rack takes the fullest such rack, leaving whole racks to sensitive
jobs; otherwise it is placed as consolidation places it. ``low_fill: pod`` also spreads it over
the most fragmented racks of a pod before it would take a whole rack: that keeps racks whole where
small insensitive jobs would otherwise leave a host free in every rack (experiments/netsens-small.
yaml), and breaks up the pods that jobs larger than a rack need (2 % longer makespan than
consolidation on a trace with 15 % of such jobs at background 0.25). (Spreading them over the most
fragmented racks anywhere made large link-sharing components at 256 hosts: 16 % longer mean JCT.)
``timers: auto`` lets harness.planners.tuner choose fixed timers in the simulator.
Preemption: a ``high`` job whose rack timer expired (adaptive: that waits for a rack, expected longer
than ``restart_s`` per job it would preempt) takes a rack whose free hosts plus the hosts of ``low``
jobs there are enough; those jobs go back to the queue (progress kept, ``restart_s`` paid
when they restart); a job is preempted at most ``max_preemptions`` times and only after running
``min_run_s``.

``consolidate`` (Tiresias-like "consolidate if possible"): arrival order, each job placed at once
at the best level free now, in the fewest racks; never waits, never preempts.
"""
import math

from harness.contract import EventPolicy
from harness.registry import register_scheduler
from harness.schedulers.patience import Patience
from harness.schedulers.policy import Decision
from workloads.profiles import builtins
from workloads.sensitivity import emulated_at

FIXED_TIMERS = {"high": [60.0, 60.0], "medium": [15.0, 15.0], "low": [0.0, 0.0]}
DEFAULTS = {"timers": "adaptive",
            "thresholds": [1.15, 1.25], "expected_background": 0.5, "preemption": True,
            "restart_s": 30.0, "min_run_s": 120.0, "max_preemptions": 2, "objective": "jct_mean",
            "tune_seed": None, "sensitivity": "emulated", "low_fill": "rack", "patience": 2.0}
SOURCES = ("emulated", "modelled")
TIMER_MODES = ("adaptive", "auto")
LOW_FILLS = ("rack", "pod")
CLASSES = ("high", "medium", "low")
OBJECTIVES = ("jct_mean", "makespan")


def validate(where, raw, error):
    cfg = {k: (dict(v) if isinstance(v, dict) else v) for k, v in DEFAULTS.items()}
    if raw is None:
        return cfg
    if not isinstance(raw, dict):
        raise error(where, "netsens", raw, "a mapping")
    for k, v in raw.items():
        if k not in DEFAULTS:
            raise error(where, f"netsens.{k}", v, "unknown key; allowed: " + ", ".join(DEFAULTS))
        cfg[k] = v
    t = cfg["timers"]
    if t not in TIMER_MODES:
        if not isinstance(t, dict) or set(t) - set(CLASSES):
            raise error(where, "netsens.timers", t, "adaptive | auto | {high|medium|low: [rack_s, pod_s]}")
        merged = dict(FIXED_TIMERS)
        for c, v in t.items():
            if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) and
                                                               not isinstance(x, bool) and x >= 0 for x in v)):
                raise error(where, f"netsens.timers.{c}", v, "[rack_s, pod_s], two numbers >= 0")
            merged[c] = [float(x) for x in v]
        cfg["timers"] = merged
    th = cfg["thresholds"]
    if not (isinstance(th, list) and len(th) == 2 and all(isinstance(x, (int, float)) for x in th) and 1 <= th[0] <= th[1]):
        raise error(where, "netsens.thresholds", th, "[medium, high] with 1 <= medium <= high")
    for k in ("restart_s", "min_run_s"):
        if not isinstance(cfg[k], (int, float)) or isinstance(cfg[k], bool) or cfg[k] < 0:
            raise error(where, f"netsens.{k}", cfg[k], "a number of seconds >= 0")
    if not isinstance(cfg["max_preemptions"], int) or cfg["max_preemptions"] < 0:
        raise error(where, "netsens.max_preemptions", cfg["max_preemptions"], "a whole number >= 0")
    if not isinstance(cfg["preemption"], bool):
        raise error(where, "netsens.preemption", cfg["preemption"], "true | false")
    eb = cfg["expected_background"]
    if not isinstance(eb, (int, float)) or not 0 <= eb < 1:
        raise error(where, "netsens.expected_background", eb, "a fraction in [0, 1)")
    ts = cfg["tune_seed"]
    if ts is not None and (not isinstance(ts, int) or isinstance(ts, bool) or ts < 0):
        raise error(where, "netsens.tune_seed", ts, "a seed (whole number >= 0): the tuner's trace; unset: the spec's own")
    if cfg["sensitivity"] not in SOURCES:
        raise error(where, "netsens.sensitivity", cfg["sensitivity"], " | ".join(SOURCES))
    pa = cfg["patience"]
    if not isinstance(pa, (int, float)) or isinstance(pa, bool) or not pa > 0:
        raise error(where, "netsens.patience", pa, "a number > 0: seconds of waiting per second saved")
    if cfg["low_fill"] not in LOW_FILLS:
        raise error(where, "netsens.low_fill", cfg["low_fill"], " | ".join(LOW_FILLS))
    if cfg["objective"] not in OBJECTIVES:
        raise error(where, "netsens.objective", cfg["objective"], " | ".join(OBJECTIVES))
    return cfg


def modelled_sensitivity(profile, background):
    """Iteration time spread across pods with ``background`` of every fabric link taken, over the
    profile's (consolidated) time. A ring crosses each fabric link once per transfer."""
    cap = profile.reference_gbps * (1 - background)
    t = profile.iteration_ms - profile.up_ms
    t += sum(p.duration_ms * max(1.0, p.gbps / cap) for p in profile.phases)
    return max(1.0, t / profile.iteration_ms)


def sensitivity(profile, background, source="emulated"):
    """The job's sensitivity at ``background``. ``source: emulated``: a built-in model's measured ratio
    (workloads/sensitivity.yaml); a profile derived from one (another batch size or worker count) gets
    its modelled value times the model's measured / modelled; a profile of the spec's own, or a model
    not measured, its modelled value. ``source: modelled``: always the modelled value."""
    m = modelled_sensitivity(profile, background)
    if source == "modelled":
        return m
    base = builtins().get(profile.name)
    measured = emulated_at(profile.name, background) if base is not None and base.source == profile.source else None
    if measured is None:
        return m
    return max(1.0, measured * m / modelled_sensitivity(base, background))


def classify(s, thresholds):
    return "high" if s >= thresholds[1] else "medium" if s >= thresholds[0] else "low"


class Layout:
    """Racks and pods of a topology: rack = edge switch; pod = racks with the same upper neighbours."""

    def __init__(self, topo):
        g = topo.graph()
        self.rack_of = {h: topo.edge_of(h) for h in topo.hosts}
        self.racks = {}
        for h in topo.hosts:
            self.racks.setdefault(self.rack_of[h], []).append(h)
        up = {r: frozenset(n for n in g.neighbors(r) if n in topo.switches) for r in self.racks}
        pods = {}
        for r in self.racks:
            pods.setdefault(up[r], []).append(r)
        self.pod_of = {r: i for i, rs in enumerate(pods.values()) for r in rs}
        self.rack_size = max(len(v) for v in self.racks.values())
        self.pod_size = max(sum(len(self.racks[r]) for r in rs) for rs in pods.values())

    def level(self, hosts):
        racks = {self.rack_of[h] for h in hosts}
        return 0 if len(racks) == 1 else 1 if len({self.pod_of[r] for r in racks}) == 1 else 2

    def min_level(self, n):
        return 0 if n <= self.rack_size else 1 if n <= self.pod_size else 2

    def by_rack(self, free):
        out = {}
        for h in free:
            out.setdefault(self.rack_of[h], []).append(h)
        return out

    def consolidated(self, n, free):
        """n hosts from ``free`` at the best locality level that has them, or None."""
        for lvl in range(self.min_level(n), 3):
            hosts = self.pick(n, free, lvl)
            if hosts:
                return hosts
        return None

    def pick(self, n, free, level, fragments_first=False, avoid_whole=False):
        """n hosts from ``free`` within ``level``, or None. Consolidated choices take the tightest
        rack/pod that fits and its fullest racks first; ``fragments_first`` takes the racks with the
        fewest free hosts first; ``avoid_whole`` leaves entirely free racks alone."""
        fr = self.by_rack(free)
        if avoid_whole:
            fr = {r: hs for r, hs in fr.items() if len(hs) < len(self.racks[r])}
        if level == 0:
            fit = [r for r, hs in fr.items() if len(hs) >= n]
            if not fit:
                return None
            r = min(fit, key=lambda r: (len(fr[r]), r))
            return sorted(fr[r], key=_num)[:n]
        groups = {}
        if level == 1:
            for r in fr:
                groups.setdefault(self.pod_of[r], []).append(r)
        else:
            groups = {0: list(fr)}
        fit = [g for g, rs in groups.items() if sum(len(fr[r]) for r in rs) >= n]
        if not fit:
            return None
        g = min(fit, key=lambda g: (sum(len(fr[r]) for r in groups[g]), g))
        order = sorted(groups[g], key=lambda r: (len(fr[r]) if fragments_first else -len(fr[r]), r))
        out = []
        for r in order:
            out += sorted(fr[r], key=_num)[:n - len(out)]
            if len(out) == n:
                return sorted(out, key=_num)
        return None


def _num(h):
    return int(h[1:])


@register_scheduler("consolidate")
class ConsolidatePolicy(EventPolicy):
    """Every job as soon as it fits, on the fewest racks and pods (``Layout.consolidated``)."""

    def __init__(self, spec, routes=None):
        self.spec, self.layout = spec, Layout(spec.topology)

    def decide(self, t, waiting, running):
        used = {h for hs in running.values() for h in hs}
        free = [h for h in self.spec.topology.hosts if h not in used]
        place = {}
        for w in waiting:
            j = w.job
            hosts = j.hosts if j.hosts and not (set(j.hosts) & used) else None
            if hosts is None and not j.hosts:
                hosts = self.layout.consolidated(j.workers, free)
            if hosts:
                place[j.name] = hosts
                free = [h for h in free if h not in hosts]
                used |= set(hosts)
        return Decision(place=place, epoch={"t_s": round(t, 3), "placed": sorted(place)} if place else None)

    def job_accounting(self, name):
        """It never waits while a placement is free."""
        return {"locality_wait_s": 0.0}


@register_scheduler("netsens")
class NetsensPolicy(EventPolicy):
    """The network-sensitive delay scheduler: a job waits for a consolidated placement as long as its
    sensitivity class's timers allow, then takes a looser one; may preempt (see the module)."""
    tunes_timers = True
    reads = ("netsens",)

    def __init__(self, spec, routes=None, timers=None):
        self.spec, self.layout = spec, Layout(spec.topology)
        self.cfg = spec.netsens
        self.timers = timers or self.cfg["timers"]
        if self.timers == "auto":
            raise ValueError("netsens timers: auto is resolved by the planner before a policy is built "
                             "(harness.planners.schedule.resolve_timers)")
        bg = spec.background or self.cfg["expected_background"]
        self.sens = {j.name: sensitivity(spec.profiles[j.model], bg, self.cfg["sensitivity"]) for j in spec.jobs}
        self.cls = {n: classify(s, self.cfg["thresholds"]) for n, s in self.sens.items()}
        self.started, self.preempted = {}, {}
        self.jobs = {j.name: j for j in spec.jobs}
        self.patience = Patience(self.layout, lambda n, lvl: 1.0 if lvl == 0 else self.sens[n],
                                 lambda n, its: its * spec.profiles[self.jobs[n].model].iteration_ms / 1000,
                                 float(self.cfg["patience"]))
        self.declined = {}           # job -> when it first declined a placement it could have had
        self.locality_wait = {}      # job -> seconds waited while a placement was free (per job, summary)
        self._mark = {}              # job -> the last event at which it declined one
        self._remaining = None

    @property
    def adaptive(self):
        return self.timers == "adaptive"

    def _allowed(self, c, wait, lvl_min):
        lvl, budget = lvl_min, wait
        timers = self.timers[c]
        while lvl < 2 and budget >= timers[lvl]:
            budget -= timers[lvl]
            lvl += 1
        return lvl

    def _expiry(self, c, since, lvl_min):
        timers, t = self.timers[c], since
        for lvl in range(lvl_min, 2):
            t += timers[lvl]
            yield t

    def _fragments(self, n, free, lvl_min):
        """A low job's hosts in partly used racks, or None: the fullest such rack that fits it
        (``low_fill: rack``), or also the most fragmented racks of the fullest pod that fits it
        (``low_fill: pod``)."""
        top = 1 if self.cfg["low_fill"] == "rack" else 2
        for lvl in range(lvl_min, top):
            hosts = self.layout.pick(n, free, lvl, fragments_first=True, avoid_whole=True)
            if hosts:
                return hosts
        return None

    def _timed(self, t, w, c, lvl_min, free, running):
        """Fixed timers: (hosts or None, preemption budget, wake_at or None). The budget: None, no
        preemption; else the seconds of waiting a preemption must save per restart it causes
        (fixed timers: any)."""
        n = w.job.workers
        allowed = self._allowed(c, t - w.since, lvl_min)
        hosts = self._fragments(n, free, lvl_min) if c == "low" else None
        for lvl in range(lvl_min, allowed + 1):
            hosts = hosts or self.layout.pick(n, free, lvl)
        if hosts:
            return hosts, None, None
        budget = math.inf if c == "high" and lvl_min == 0 and allowed >= 1 and self.cfg["preemption"] else None
        return None, budget, next((e for e in self._expiry(c, w.since, lvl_min) if e > t + 1e-9), None)

    def _adaptive(self, t, w, c, lvl_min, free, running):
        """Adaptive waiting (harness.schedulers.patience): as ``_timed``; the budget of a high job
        waiting for a rack is its expected wait for one."""
        j, n = w.job, w.job.workers
        if c == "low":
            hosts = self._fragments(n, free, lvl_min)
            if hosts:
                return hosts, None, None
        now_level, hosts = None, None
        for lvl in range(lvl_min, 3):
            hosts = self.layout.pick(n, free, lvl)
            if hosts:
                now_level = lvl
                break
        if c == "low" or now_level == lvl_min:
            return hosts, None, None
        iterations = getattr(w, "remaining", j.iterations)
        target = self.patience.target(t, j.name, iterations, n, now_level, lvl_min, free, running)
        if target is None:
            return hosts, None, None
        level, patience, wait = target
        since = self.declined.setdefault(j.name, t) if now_level is not None else t
        if now_level is not None and t - since >= patience - 1e-9:
            return hosts, None, None            # its patience is spent
        budget = wait if c == "high" and level == 0 and self.cfg["preemption"] else None
        return None, budget, (since + patience if now_level is not None else None)

    def decide(self, t, waiting, running):
        if self._remaining is not None:
            self.patience.observe(t, self._remaining)
            self._remaining = None
        used = {h for hs in running.values() for h in hs}
        free = [h for h in self.spec.topology.hosts if h not in used]
        place, preempt, wake = {}, [], None
        running = dict(running)
        for w in waiting:
            j = w.job
            if j.name in self._mark:
                self.locality_wait[j.name] = self.locality_wait.get(j.name, 0.0) + t - self._mark.pop(j.name)
            c = self.cls[j.name]
            if j.hosts:
                if not (set(j.hosts) & used):
                    hosts = j.hosts
                else:
                    continue
            else:
                lvl_min = self.layout.min_level(j.workers)
                rule = self._adaptive if self.adaptive else self._timed
                hosts, budget, w_at = rule(t, w, c, lvl_min, free, running)
                if hosts is None and budget is not None:
                    hosts, victims = self._preempt(t, j.workers, free, running)
                    if hosts and budget > self.cfg["restart_s"] * len(victims):
                        preempt += victims
                        for v in victims:
                            vh = running.pop(v)
                            self.patience.forget(v)
                            used -= set(vh)
                            free += vh
                    else:
                        hosts = None
                if hosts is None:
                    if w_at is not None and w_at > t + 1e-9:
                        wake = w_at if wake is None else min(wake, w_at)
                    if self.layout.consolidated(j.workers, free):
                        self._mark[j.name] = t
                    continue
            place[j.name] = list(hosts)
            self.started[j.name] = t
            self.declined.pop(j.name, None)
            level = self.layout.level(hosts)
            self.patience.placed(j.name, t, getattr(w, "remaining", j.iterations), level,
                                 self.cfg["restart_s"] if getattr(w, "preemptions", 0) else 0.0)
            free = [h for h in free if h not in hosts]
            used |= set(hosts)
            running[j.name] = list(hosts)
        for v in preempt:
            self.preempted[v] = self.preempted.get(v, 0) + 1
        epoch = None
        if place or preempt:
            epoch = {"t_s": round(t, 3), "placed": sorted(place), "preempted": sorted(preempt),
                     "levels": {n: self.layout.level(h) for n, h in place.items()}}
        return Decision(place=place, preempt=preempt, wake_at=wake, epoch=epoch)

    def forget(self, name):
        self.patience.forget(name)

    def observe(self, remaining):
        """The simulator's iterations left per running job, before each decision (patience learns
        each level's slowdown from them)."""
        self._remaining = remaining

    def job_accounting(self, name):
        """What the simulator adds to the job's summary: seconds it waited while a placement was free."""
        return {"locality_wait_s": self.locality_wait.get(name, 0.0)}

    def _preempt(self, t, n, free, running):
        """A rack where free hosts + hosts of preemptible low jobs >= n: (hosts, victims) or (None, [])."""
        fr = self.layout.by_rack(free)
        best = None
        for rack, rack_hosts in self.layout.racks.items():
            have = list(fr.get(rack, []))
            cands = []
            for v, hs in running.items():
                if self.cls.get(v) != "low" or self.preempted.get(v, 0) >= self.cfg["max_preemptions"]:
                    continue
                if t - self.started.get(v, t) < self.cfg["min_run_s"]:
                    continue
                inside = [h for h in hs if self.layout.rack_of[h] == rack]
                if inside:
                    cands.append((len(inside), v, inside))
            victims, got = [], list(have)
            for _k, v, inside in sorted(cands, key=lambda x: (-x[0], x[1])):
                if len(got) >= n:
                    break
                victims.append(v)
                got += inside
            if len(got) >= n and victims:
                cost = sum(len(running[v]) for v in victims)
                if best is None or cost < best[0]:
                    best = (cost, sorted(got, key=_num)[:n], victims)
        return (best[1], best[2]) if best else (None, [])

    def plan_params(self):
        return {"netsens": {**self.spec.netsens, "timers": self.timers},
                "sensitivity": {n: round(v, 4) for n, v in self.sens.items()}, "class": dict(self.cls)}
