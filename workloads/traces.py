"""Job traces: ``snapshot`` (all jobs at t=0), ``poisson`` (arrivals at a target load) and
``dynamic`` (a running set, then a new set arrives), as in CASSINI §5.1. Seeded: the same spec and
seed always give the same jobs.

Models are drawn with equal probability from ``models`` (default: the 13 built-ins); iterations
uniformly from [200, 1000] (the paper's range) times ``iterations_scale``; workers uniformly from
``workers`` ([min, max], default [2, 4]) or from a distribution ``{workers: weight}`` (e.g. the
Philly-like {2: 40, 4: 30, 8: 20, 16: 7, 32: 3} of experiments/sim/).

Poisson load: the arrival rate makes the expected fraction of busy hosts equal ``load``:
rate = load x hosts / (E[workers] x E[job duration alone]).
"""
import numpy as np

KINDS = ("snapshot", "poisson", "dynamic")


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
    workers = trace.get("workers", [2, 4])
    iterations = trace.get("iterations", [200, 1000])
    scale = trace.get("iterations_scale", 1.0)
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
        t = 0.0
        for j in jobs:
            j["arrival_s"] = round(t, 3)
            t += float(rng.exponential(1 / rate))
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
                          "arrival_s": float(trace.get("arrival_s", 30.0))})
        return first + later
    raise ValueError(kind)
