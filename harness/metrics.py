"""The results schema, one owner: summary.json's keys, their order and their rounding, the same for
an emulated run (harness.runner), a simulated one (harness.sim.engine) and the flow model of program
jobs (harness.simulate). Each backend measures what it can and passes it here; a key it cannot
measure is present with ``None`` (e.g. ``shift_error_ms_p50`` in the simulator, ``ecn_marks`` in the
flow model). Also the formulas every backend shares: the distribution statistics and the
communication overhead.

Per job (``JOB``): iteration times (``iteration_ms_*``; for pipeline and tensor-parallel jobs the
consumer's step time, with ``iteration_ms_meaning`` saying so), communication time per iteration
(``comm_ms_*``: first phase start to last phase end, what CASSINI's Table 2 compares; ``_profile``:
alone), ``jct_s`` from arrival, ``queue_s``
from arrival to placement (emulated: to the launch of its agents; after a preemption, the time back in
the queue too), ``locality_wait_s`` the part of it the policy waited while a placement was free
(netsens waiting for a rack or a pod; simulator), ``restart_paid_s`` the checkpoint restores it
waited through, ``slowdown`` its mean iteration over its profile's (what its placement and sharing
cost it), ECN marks and their source, the job's timing (``time_shift_ms``, ``alignment``,
``padding_ms``: how much longer than its profile's iteration the period it keeps is, CASSINI's common
or unified-circle period,
how far its communication started from where its shift put it, re-alignments), preemptions and
segments. Program jobs add ``PROGRAM_JOB`` (``flows_paced`` / ``flows_prioritized``: how many
flows of the step the flow scheduler carried by pacing and by a priority; the others go unmarked, at
once). On priority ports (link.sharing priority) an emulated run adds ``ecn_marks_by_priority``
(``priority_marks``: the marker's marks at the switches per priority level); with ``replan``
(harness.planners.replan) it adds ``replan`` (``REPLAN``: the plans made in the run, what making
one cost in the runner's CPU time, the fewest tables any agent loaded). Totals (``TOTALS``) are over every job's steady
iterations, plus what preemptions cost (``restarts``, ``restart_gpu_s``: ``restart_cost``).
Units: ms for iteration times, s for times of the run.
"""
import numpy as np

AS_IS = None
WHOLE = "int"
# key: decimals (AS_IS: written as given; WHOLE: an integer)
JOB = {"model": AS_IS, "hosts": AS_IS, "iterations": WHOLE,
       "iteration_ms_mean": 2, "iteration_ms_p99": 2, "iteration_ms_profile": 2, "fastest_iteration_ms": 2,
       "comm_ms_mean": 2, "comm_ms_profile": 2,
       "jct_s": 3, "queue_s": 3, "locality_wait_s": 3, "restart_paid_s": 3, "slowdown": 4,
       "ecn_marks": WHOLE, "ecn_marks_source": AS_IS, "ecn_marks_per_iteration": 3,
       "time_shift_ms": 3, "alignment": AS_IS, "padding_ms": 2, "shift_error_ms_p50": 2,
       "realignments": WHOLE, "realignments_per_minute": 2,
       "preemptions": WHOLE, "segments": AS_IS}
PROGRAM_JOB = {"iteration_ms_meaning": AS_IS, "ect_ms_mean": 2, "coflow_ms": 2, "predicted_step_ms": 2,
               "predicted_ect_ms": 2, "flows": WHOLE, "flows_paced": WHOLE, "flows_prioritized": WHOLE,
               "pacing_error_ms_p50": 2, "pacing_error_rel_p50": 4}
TOTALS = {"iteration_ms_mean": 2, "iteration_ms_p99": 2, "comm_ms_mean": 2, "ecn_marks": WHOLE,
          "slowdown_mean": 4, "slowdown_p99": 4, "jct_s_mean": 3, "makespan_s": 3, "queue_s_mean": 3,
          "locality_wait_s_mean": 3, "restart_paid_s_mean": 3, "communication_overhead_s": 3, "preemptions": WHOLE, "restarts": WHOLE, "restart_gpu_s": 1,
          "ect_ms_mean": 2}
REPLAN = {"every_steps": WHOLE, "window_steps": WHOLE, "plans": WHOLE, "rule": AS_IS, "cpu_ms_mean": 3,
          "cpu_ms_max": 3, "wall_ms_mean": 3, "cpu_ms_total": 3, "agents_loaded_min": WHOLE}
STEP_MEANING = "step time of the consuming computation"   # worker 0: first op start to last op end


def _value(x, rule):
    if x is None or rule is AS_IS:
        return x
    if rule == WHOLE:
        return int(round(x))
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    return round(float(x), rule)


def _fill(table, values, where):
    unknown = set(values) - set(table)
    if unknown:
        raise KeyError(f"{where}: not in the results schema (harness.metrics): {sorted(unknown)}")
    return {k: _value(values.get(k), rule) for k, rule in table.items()}


def job(program=False, **values):
    """One job's entry; ``program`` adds the pipeline/tensor keys."""
    table = {**JOB, **PROGRAM_JOB} if program else JOB
    return _fill(table, values, "job")


def totals(**values):
    return _fill(TOTALS, values, "totals")


def replan(**values):
    return _fill(REPLAN, values, "replan")


def summary(scheduler, spec, duration_s, jobs, totals_, fidelity, **extra):
    """The whole summary.json document (``extra``: the backend's own sections, e.g. ``simulator``)."""
    head = {"scheduler": scheduler, "spec": spec, "duration_s": _value(duration_s, 3)}
    return {**head, **extra.pop("head", {}), "jobs": jobs, "totals": totals_, "fidelity": fidelity, **extra}


def job_rows(summary):
    """summary.json's jobs as flat rows (``jobs.csv``, both backends): one per job, its name first;
    a list of host names as one space-separated string, segments as JSON text."""
    import json
    rows = []
    for name, j in summary["jobs"].items():
        row = {"job": name}
        for k, v in j.items():
            if isinstance(v, list) and all(isinstance(x, str) for x in v):
                v = " ".join(v)
            elif isinstance(v, (list, dict)):
                v = json.dumps(v, sort_keys=True)
            row[k] = v
        rows.append(row)
    return rows


def priority_marks(counters, levels):
    """``ecn_marks_by_priority`` of a run: {level: marks} summed over the switch ports that have
    ``marked_level`` counters (``counters``: {dev: the marker's counters}), with what it counts."""
    by = [0] * levels
    for c in counters.values():
        for lvl, n in enumerate((c.get("marked_level") or [])[:levels]):
            by[lvl] += int(n)
    return {"levels": {str(k): n for k, n in enumerate(by)},
            "meaning": "packets the switches' ECN marker set to CE, per priority level of the DSCP's class "
                       "selector (0 most urgent; all traffic of the run); a level is marked on the backlog of "
                       "the levels at least as urgent"}


def mean(xs, weights=None):
    xs = np.asarray(xs, dtype=float)
    if not len(xs):
        return None
    return float(np.average(xs, weights=weights)) if weights is not None else float(np.mean(xs))


def percentile(xs, q, weights=None):
    """The q-th percentile; with ``weights``, the smallest value whose cumulative weight reaches
    q % of the total (None for no values)."""
    xs = np.asarray(xs, dtype=float)
    if not len(xs):
        return None
    if weights is None:
        return float(np.percentile(xs, q))
    order = np.argsort(xs)
    v, w = xs[order], np.asarray(weights)[order]
    c = np.cumsum(w)
    if c[-1] <= 0:
        return float(np.percentile(v, q))
    return float(v[min(len(v) - 1, np.searchsorted(c, q / 100 * c[-1]))])


DISTRIBUTION = "iteration_ms.csv"
DISTRIBUTION_COLUMNS = ["job", "iteration_ms", "iterations"]


def iteration_times_ms(w0):
    """Iteration times of a job from its leader's rows: start to next start (a re-alignment pause
    before an iteration is part of the iteration before it, as it would be in a training log); the
    last iteration ends at its end."""
    starts, ends = w0.start.to_numpy(), w0.end.to_numpy()
    if len(starts) == 0:
        return np.array([])
    return np.append(np.diff(starts), ends[-1] - starts[-1]) * 1000


def segment_pieces(w0, segments=()):
    """A job's leader rows (sorted by iteration) cut where each of its ``segments`` (schedule.json)
    ends: a preempted job starts over on its new hosts, so no iteration spans two."""
    bounds = np.cumsum([sg["iterations"] for sg in segments or []])[:-1]
    cuts = [0] + [int(np.searchsorted(w0.iteration.to_numpy(), b)) for b in bounds] + [len(w0)]
    return [w0.iloc[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]


def steady_iteration_ms(w0, segments=()):
    """A job's steady iteration times (ms), what its summary's ``iteration_ms_*`` are over: each
    segment's iteration times, the job's first iteration (warm-up) left out."""
    pieces = segment_pieces(w0, segments)
    it_ms = np.concatenate([iteration_times_ms(p) for p in pieces]) if pieces else np.array([])
    return it_ms[1:] if len(it_ms) > 1 else it_ms


def distribution_rows(times):
    """The rows of ``iteration_ms.csv`` (``DISTRIBUTION_COLUMNS``), both backends: each job's
    iteration times and how many iterations each stands for. ``times``: {job: (ms, iterations)},
    arrays; an emulated run's are its steady iterations, 1 each; the simulator's are its modelled
    iteration times, each weighted by the iterations the job ran at that time."""
    rows = []
    for job, (ms, n) in times.items():
        rows += [{"job": job, "iteration_ms": round(float(m), 3), "iterations": round(float(k), 6)}
                 for m, k in zip(ms, n)]
    return rows


def comm_ms(w0):
    """Communication time of each iteration (ms) from a job's leader rows (iterations.csv), the
    first iteration left out as warm-up."""
    w0 = w0.sort_values("iteration")
    x = ((w0.comm_end - w0.comm_start) * 1000).to_numpy(dtype=float)[1:]
    return x[np.isfinite(x)]


def restart_cost(segments, restart_s):
    """(restarts, GPU-seconds they hold without progress) of one job's ``segments``: every segment
    after the first restarts from the checkpoint on its hosts and holds them ``restart_s`` first
    (progress is kept: no work is lost)."""
    later = (segments or [])[1:]
    return len(later), sum(len(s["hosts"]) for s in later) * (restart_s or 0.0)


def communication_overhead_s(rows):
    """Time the jobs spent beyond their profile (or ideal step) time, in s: the sum over
    (mean iteration ms, profile iteration ms, iterations) of (mean - profile) x iterations."""
    return sum((m - p) * n for m, p, n in rows if m is not None) / 1000
