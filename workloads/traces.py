"""Job traces: ``snapshot`` (all jobs at t=0), ``poisson`` (arrivals at a target load) and
``dynamic`` (a running set, then a new set arrives), as in CASSINI §5.1; ``csv``: arrivals replayed
from a file (``read_rows``, ``from_rows``; e.g. the Pollux artifact's Philly-sampled workloads in
workloads/trace_data/). Seeded: the same spec and seed always give the same jobs.

Models are drawn with equal probability from ``models`` (default: the 13 built-ins); iterations
uniformly from [200, 1000] (the paper's range) times ``iterations_scale``; workers uniformly from
``workers`` ([min, max], default [2, 4]) or from a distribution ``{workers: weight}`` (e.g. the
Philly-like {2: 40, 4: 30, 8: 20, 16: 7, 32: 3} of experiments/sim/).

Poisson load: the arrival rate makes the expected fraction of busy hosts equal ``load``:
rate = load x hosts / (E[workers] x E[job duration alone]). ``burst: N`` (default 1) makes arrivals
bursty at the same load: N jobs arrive at one instant, bursts as a Poisson process at rate / N.
"""
import numpy as np

KINDS = ("snapshot", "poisson", "dynamic", "csv")
# what a generated trace (snapshot, poisson, dynamic) takes when its spec leaves a key out
DEFAULTS = {"workers": [2, 4], "iterations": [200, 1000], "iterations_scale": 1.0, "burst": 1, "arrival_s": 30.0}
# a trace read from a file (kind: csv)
CSV_DEFAULTS = {"iterations": [200, 1000], "iterations_scale": 1.0, "time_scale": 1.0, "batch": "profile"}
CSV_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")

# The applications of the Pollux artifact's workloads (petuum/adaptdl, benchmark/models) that a
# built-in profile stands for: the same model, or the built-in of the same task family. The others
# (deepspeech2: speech, yolov3: detection) have no such profile: a spec maps them itself.
APPLICATIONS = {
    "imagenet": ("resnet50", "ResNet-50 on ImageNet in Pollux's benchmark: the same model"),
    "cifar10": ("resnet50", "ResNet-18 on CIFAR-10 in Pollux's benchmark: ResNet-50 is the built-in ResNet"),
    "bert": ("bert", "BERT fine-tuned on SQuAD in Pollux's benchmark: the same model"),
    "ncf": ("dlrm", "neural collaborative filtering (embedding tables) in Pollux's benchmark: DLRM is the "
                    "built-in recommender"),
}


class TraceError(ValueError):
    """A bad row of a trace file: ``where`` (row and column), ``value``, ``allowed``."""

    def __init__(self, where, value, allowed):
        super().__init__(f"{where}: {value!r} ({allowed})")
        self.where, self.value, self.allowed = where, value, allowed


def _workers(rng, workers):
    if isinstance(workers, dict):
        sizes = sorted(workers)
        p = np.array([workers[k] for k in sizes], dtype=float)
        return int(sizes[int(rng.choice(len(sizes), p=p / p.sum()))])
    return int(rng.integers(workers[0], workers[1] + 1))


def _mean_workers(workers):
    if isinstance(workers, dict):
        return sum(k * v for k, v in workers.items()) / sum(workers.values())
    return (workers[0] + workers[1]) / 2


def _draw(rng, n, models, profiles, workers, iterations, scale, prefix):
    jobs = []
    for i in range(n):
        model = models[int(rng.integers(len(models)))]
        w = _workers(rng, workers)
        it = max(1, int(round(rng.integers(iterations[0], iterations[1] + 1) * scale)))
        jobs.append({"name": f"{prefix}{i + 1}", "model": model, "workers": w, "iterations": it})
    return jobs


def generate(trace, profiles, n_hosts, seed):
    """Jobs (dicts like the spec's ``jobs`` entries, with ``arrival_s``) for a validated trace mapping."""
    rng = np.random.default_rng(seed)
    models = list(trace.get("models") or profiles)
    workers = trace.get("workers", DEFAULTS["workers"])
    iterations = trace.get("iterations", DEFAULTS["iterations"])
    scale = trace.get("iterations_scale", DEFAULTS["iterations_scale"])
    kind = trace["kind"]
    if kind == "snapshot":
        jobs = _draw(rng, trace["jobs"], models, profiles, workers, iterations, scale, "j")
        for j in jobs:
            j["arrival_s"] = 0.0
        return jobs
    if kind == "poisson":
        jobs = _draw(rng, trace["jobs"], models, profiles, workers, iterations, scale, "j")
        mean_w = _mean_workers(workers)
        mean_it_s = np.mean([profiles[m].iteration_ms for m in models]) / 1000
        mean_dur = mean_it_s * (iterations[0] + iterations[1]) / 2 * scale
        rate = trace["load"] * n_hosts / (mean_w * mean_dur)
        burst = trace.get("burst", DEFAULTS["burst"])
        t = 0.0
        for i, j in enumerate(jobs):
            j["arrival_s"] = round(t, 3)
            if (i + 1) % burst == 0:        # bursts arrive at rate / burst: the same load
                t += float(rng.exponential(burst / rate))
        return jobs
    if kind == "dynamic":
        first = _draw(rng, trace["jobs"], models, profiles, workers, iterations, scale, "j")
        for j in first:
            j["arrival_s"] = 0.0
        arriving = trace.get("arriving") or []
        later = []
        for i, model in enumerate(arriving):
            w = _workers(rng, workers)
            it = max(1, int(round(rng.integers(iterations[0], iterations[1] + 1) * scale)))
            later.append({"name": f"n{i + 1}", "model": model, "workers": w, "iterations": it,
                          "arrival_s": float(trace.get("arrival_s", DEFAULTS["arrival_s"]))})
        return first + later
    raise ValueError(kind)


def read_rows(text, applications, n_hosts, name_rule, limit=None):
    """The rows of a CSV trace (``CSV_COLUMNS``, in time order), each checked (names against the
    spec's ``name_rule`` regex): a TraceError names the first bad one. ``limit``: only the first rows."""
    import csv
    import io
    import re
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise TraceError("header", ",".join(reader.fieldnames or []), "columns " + ",".join(CSV_COLUMNS))
    rows, names, last = [], set(), 0.0
    for i, r in enumerate(reader, start=2):
        if limit is not None and len(rows) >= limit:
            break
        at = f"line {i}"
        name = (r["name"] or "").strip()
        if not re.fullmatch(name_rule, name) or name in names:
            raise TraceError(f"{at}, name", r["name"], "a unique job name (letters, digits and _ . + -, at most 64, "
                             "starting with a letter or digit)")
        names.add(name)
        try:
            t = float(r["time"])
        except (TypeError, ValueError):
            t = float("nan")
        if not (t >= last and t < 1e9):
            raise TraceError(f"{at}, time", r["time"], f"seconds, >= the previous row's {last:g}")
        last = t
        app = (r["application"] or "").strip()
        if app not in applications:
            raise TraceError(f"{at}, application", app, "one mapped to a model: " + ", ".join(sorted(applications))
                             + " (trace.applications maps others)")
        ints = {}
        for col, top in (("num_replicas", n_hosts), ("batch_size", 10 ** 7)):
            v = (r[col] or "").strip()
            if not v.isdigit() or not 1 <= int(v) <= top:
                raise TraceError(f"{at}, {col}", r[col], f"a whole number 1..{top}"
                                 + (" (the topology's hosts)" if col == "num_replicas" else ""))
            ints[col] = int(v)
        rows.append({"name": name, "time": t, "application": app, **ints})
    if not rows:
        raise TraceError("rows", 0, "at least one job")
    return rows


def from_rows(rows, applications, profiles, iterations, iterations_scale, time_scale, batch, seed):
    """Jobs for validated rows: the row's name, arrival (time x ``time_scale``), the model its
    application maps to, its replicas as workers; iterations drawn (seeded) from ``iterations`` x
    ``iterations_scale`` (the file has no job length); with ``batch: file`` a data-parallel job runs
    at the file's batch_size / num_replicas per GPU."""
    rng = np.random.default_rng(seed)
    jobs = []
    for r in rows:
        model = applications[r["application"]]
        it = max(1, int(round(rng.integers(iterations[0], iterations[1] + 1) * iterations_scale)))
        job = {"name": r["name"], "model": model, "workers": r["num_replicas"], "iterations": it,
               "arrival_s": round(r["time"] * time_scale, 3)}
        prof = profiles[model]
        if batch == "file" and prof.parallelism == "data" and prof.batch_size:
            job["batch_size"] = max(1, round(r["batch_size"] / r["num_replicas"]))
        jobs.append(job)
    return jobs
