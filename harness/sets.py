"""``interleave reproduce SET --out DIR``: run a set of experiments and write one report.

A set file (YAML) names specs, the schedulers to compare on each, how many repeats, and the
floors that ``make nightly`` holds the headline ratios to::

    name: reproduction
    repeats: 2                      # runs per spec and scheduler; repeat r uses seed = spec seed + r
    runs:
      - {spec: ../snapshot1.yaml, schedulers: [themis, themis+cassini]}   # relative to the set file
    floors:                         # ratio = base / other on a metric of the totals; > 1: other is better
      - {spec: demo, base: themis, other: themis+cassini, metric: iteration_ms_mean, min: 1.05}

Layout of DIR: ``<spec name>/<scheduler>-r<r>/`` (results directories; a complete one is reused, so
an interrupted set resumes where it stopped, while its spec and the code are those it ran with:
harness.provenance; a stale one is set aside as ``<run>.stale-N`` and run again unless
``--keep-stale``), ``<spec name>/report/`` (``interleave report`` of the
spec's runs, emulated or simulated), ``table.md`` / ``table.json`` and the same as flat CSVs
(``table.csv``, ``ratios.csv``, ``jobs.csv``: ``write_csvs``): per spec and scheduler the mean over repeats, and
the ratios of each ``X+cassini`` over its base ``X`` and of every other scheduler over the first
one listed, and where a scheduler preempted, its mean preemptions, restarts and GPU-time held
restarting (``COUNTS``: means, never ratios). Ratios are of means over repeats. A scheduler ``S:F`` runs scheduler S with
``flow_scheduler: F`` (``fixed:echelon``; pipeline and tensor jobs), so flow schedulers compare
too. A run entry may set ``background`` (load of every fabric link, simulator only), ``label``
(its directory and row name; default the spec's name) and ``set`` (top-level spec keys replacing
the file's, e.g. ``{themis: {racks: fewest}}`` for an ablation; give such a run its own label).
``--simulate`` runs the set in harness.sim instead of the emulator (no root); ``--workers N`` and
``--cluster ADDRESS`` run it on Dask workers (harness.sweep) with the same table, byte for byte.
A run with no ``summary.json`` (interrupted, or failed on a worker twice) is in no mean: the table
lists it under "Missing runs" with what its attempts left beside it.
Exit status 1 when ``--floors`` is given and a ratio falls below its floor, or a run on Dask did
not complete.

**Exclusion rule** (the only one): a run whose ``summary.json`` says ``fidelity.ok: false`` (the
emulator could not keep up: see harness.runner's fidelity guard) is left out of every mean, ratio
and interval; the table counts such runs per row ("kept / excluded"). Simulated runs are never
excluded. **Intervals**: each mean comes with its 95 % confidence interval over the kept repeats
(Student's t); a ratio is the mean of the per-repeat ratios (repeat r of one scheduler over repeat r
of the other, both kept) with its 95 % interval, or the ratio of means when no repeat pairs up.
``--publish FILE`` replaces the block between ``<!-- interleave reproduce NAME -->`` and
``<!-- end interleave reproduce NAME -->`` in FILE with the set's table and the command that made it.
"""
import json
import re
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import yaml

from harness import limits, provenance, spec as spec_mod
from harness.progress import SetProgress, hms
from harness.errors import UsageError

METRICS = ("iteration_ms_mean", "iteration_ms_p99", "comm_ms_mean", "slowdown_mean", "slowdown_p99", "ecn_marks",
           "jct_s_mean", "makespan_s", "communication_overhead_s", "ect_ms_mean")
COUNTS = ("preemptions", "restarts", "restart_gpu_s", "queue_s_mean", "locality_wait_s_mean",
          "restart_paid_s_mean")     # averaged per scheduler, never a ratio


SET_KEYS = ("name", "repeats", "runs", "floors")
RUN_KEYS = ("spec", "schedulers", "label", "repeats", "background", "set")
FLOOR_KEYS = ("spec", "base", "other", "metric", "min")


def _whole(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def load_set(path):
    """The set file ``path``, every key and every spec (under each scheduler) validated before
    anything runs: a UsageError naming the file, the key and the value otherwise."""
    path = Path(path)
    raw = spec_mod.read_yaml(path)

    def bad(key, value, allowed):
        return UsageError(f"{path}: key {key}: value {limits.short(value)} {allowed}")
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: a mapping with runs: [{{spec, schedulers}}] is required")
    for k in raw:
        if k not in SET_KEYS:
            raise bad(k, raw[k], "is not a set key; allowed: " + ", ".join(SET_KEYS))
    if not isinstance(raw.get("runs"), list) or not raw["runs"]:
        raise UsageError(f"{path}: key runs: a non-empty list of {{spec, schedulers}} is required")
    name = raw.get("name", path.stem)
    if not isinstance(name, str) or not name:
        raise bad("name", name, "is not a name")
    repeats = raw.get("repeats", 1)
    if not _whole(repeats):
        raise bad("repeats", repeats, "is not an integer >= 1")
    runs = []
    for i, r in enumerate(raw["runs"]):
        if not isinstance(r, dict):
            raise bad(f"runs[{i}]", r, "is not a mapping {spec, schedulers, ...}")
        for k in r:
            if k not in RUN_KEYS:
                raise bad(f"runs[{i}].{k}", r[k], "is not a run key; allowed: " + ", ".join(RUN_KEYS))
        if "spec" not in r or not r.get("schedulers"):
            raise bad(f"runs[{i}]", r, "needs spec and schedulers")
        if not isinstance(r["spec"], str) or not r["spec"]:
            raise bad(f"runs[{i}].spec", r["spec"], "is not a spec file's path")
        scheds = r["schedulers"]
        if not isinstance(scheds, list) or not all(isinstance(x, str) and x for x in scheds) \
                or len(set(scheds)) != len(scheds):
            raise bad(f"runs[{i}].schedulers", scheds, "is not a list of distinct scheduler names")
        if "repeats" in r and not _whole(r["repeats"]):
            raise bad(f"runs[{i}].repeats", r["repeats"], "is not an integer >= 1")
        if "label" in r and (not isinstance(r["label"], str) or not r["label"] or "/" in r["label"]):
            raise bad(f"runs[{i}].label", r["label"], "is not a name (it names a directory)")
        sp = Path(r["spec"])
        if not sp.is_absolute():
            sp = path.parent / sp
        if not sp.is_file():
            raise bad(f"runs[{i}].spec", r["spec"], f"is not a file (paths are relative to the set file: {sp})")
        over = r.get("set")
        if over is not None and not isinstance(over, dict):
            raise bad(f"runs[{i}].set", over, "is not a mapping of spec keys")
        bg = r.get("background")
        if bg is not None and not (isinstance(bg, (int, float)) and not isinstance(bg, bool) and 0 <= bg < 1):
            raise bad(f"runs[{i}].background", bg, "is not a fraction in [0, 1)")
        specs = []
        for j, s in enumerate(scheds):          # every spec validated before anything runs
            specs.append(spec_mod.load(sp, scheduler=s, overrides=over,
                                       scheduler_from=f"{path}: key runs[{i}].schedulers[{j}]: value"))
        runs.append({"spec_path": sp, "name": r.get("label", specs[0].name), "schedulers": list(scheds),
                     "seed": specs[0].seed, "repeats": int(r.get("repeats", repeats)), "background": bg,
                     "set": over})
    names = [r["name"] for r in runs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UsageError(f"{path}: key runs: {dup[0]!r} names two runs (their directories would collide); "
                         "give one a label")
    floors = raw.get("floors") or []
    if not isinstance(floors, list):
        raise bad("floors", floors, "is not a list of {spec, base, other, metric, min}")
    by_name = {r["name"]: r for r in runs}
    for i, f in enumerate(floors):
        if not isinstance(f, dict) or any(k not in f for k in FLOOR_KEYS):
            raise bad(f"floors[{i}]", f, "needs " + ", ".join(FLOOR_KEYS))
        for k in f:
            if k not in FLOOR_KEYS:
                raise bad(f"floors[{i}].{k}", f[k], "is not a floor key; allowed: " + ", ".join(FLOOR_KEYS))
        if f["spec"] not in by_name:
            raise bad(f"floors[{i}].spec", f["spec"], "is not a run of this set; one of " + ", ".join(by_name))
        for k in ("base", "other"):
            if f[k] not in by_name[f["spec"]]["schedulers"]:
                raise bad(f"floors[{i}].{k}", f[k], f"is not a scheduler of run {f['spec']}; one of "
                          + ", ".join(by_name[f["spec"]]["schedulers"]))
        if f["metric"] not in METRICS:
            raise bad(f"floors[{i}].metric", f["metric"], "is not a metric; one of " + ", ".join(METRICS))
        if not isinstance(f["min"], (int, float)) or isinstance(f["min"], bool):
            raise bad(f"floors[{i}].min", f["min"], "is not a number")
    return {"name": name, "runs": runs, "floors": floors}


def run_dir(out, name, scheduler, r):
    return Path(out) / name / f"{scheduler.replace('+', '-').replace(':', '-')}-r{r}"


def run_spec(r, scheduler, k):
    """The spec of run entry ``r`` under ``scheduler``, repeat ``k`` (seed + k, the entry's ``set``
    overrides and background load)."""
    spec = spec_mod.load(r["spec_path"], scheduler=scheduler, seed=r["seed"] + k, overrides=r.get("set"))
    if r.get("background") is not None:
        spec.background = float(r["background"])
    return spec


def reuse(d, spec, backend, keep_stale):
    """(keep, note) for run directory ``d`` about to hold ``spec``: keep a complete directory that
    stands for the spec (harness.provenance), or any complete one with ``keep_stale``; otherwise a
    stale one is set aside as ``<d>.stale-N`` (lowest free N) to run again. ``note``: what to tell
    the user about a stale directory, else None."""
    if not (d / "summary.json").exists():
        return False, None
    why = provenance.stale(d, spec, backend)
    if why is None:
        return True, None
    if keep_stale:
        return True, f"{d}: kept with --keep-stale although {why}"
    n = 1
    while d.with_name(f"{d.name}.stale-{n}").exists():
        n += 1
    d.rename(d.with_name(f"{d.name}.stale-{n}"))
    return False, f"{d}: {why}: set aside as {d.name}.stale-{n}, running it again"


def execute(st, out, run, log, quiet=False, keep_stale=False):
    """Run every (spec, scheduler, repeat) not already complete under ``out`` (a complete run whose
    spec or code changed is run again unless ``keep_stale``); ``run`` is harness.runner.run or
    ``simulated_run`` (passed in so that the set logic is testable without root). One line per run
    with the set's remaining time; with ``quiet``, only what is not routine (a stale run)."""
    backend = "simulated" if run is simulated_run else "emulated"
    say = (lambda m: None) if quiet else log
    todo = [(r, s, k) for r in st["runs"] for k in range(r["repeats"]) for s in r["schedulers"]]
    where = SetProgress(len(todo))
    for n, (r, s, k) in enumerate(todo, 1):
        d = run_dir(out, r["name"], s, k)
        spec = run_spec(r, s, k)
        keep, note = reuse(d, spec, backend, keep_stale)
        if note:
            log(f"[{n}/{len(todo)}] {note}")
        if keep:
            if not note:
                say(f"[{n}/{len(todo)}] {d}: done earlier, kept")
            continue
        say(f"[{n}/{len(todo)}] {r['name']} with {s}, repeat {k} (seed {r['seed'] + k}) -> {d} ({where.label(n)})")
        d.parent.mkdir(parents=True, exist_ok=True)
        where.begin()
        run(spec, d, quiet=quiet, log=log)
        where.end()
    if where.ran:
        log(f"set {st['name']}: {where.ran} run(s) in {hms(where.spent)}")


def missing(st, out):
    """[{spec, scheduler, repeat, dir, partial}] of the set's runs with no ``summary.json`` under
    ``out``; ``partial``: the names of what an unfinished attempt left beside it."""
    gone = []
    for r in st["runs"]:
        for k in range(r["repeats"]):
            for s in r["schedulers"]:
                d = run_dir(out, r["name"], s, k)
                if not (d / "summary.json").exists():
                    left = sorted(p.name for p in d.parent.glob(d.name + ".*")) if d.parent.is_dir() else []
                    gone.append({"spec": r["name"], "scheduler": s, "repeat": k,
                                 "dir": str(d.relative_to(out)), "partial": left})
    return gone


def kept(summary):
    """The exclusion rule (module docstring): a run is kept unless its fidelity guard failed."""
    return bool(summary.get("fidelity", {}).get("ok", True))


def kept_summaries(out, name, scheduler, repeats):
    """({repeat: summary} of the complete runs the exclusion rule keeps, how many it excluded)."""
    got, excluded = {}, 0
    for k in range(repeats):
        f = run_dir(out, name, scheduler, k) / "summary.json"
        if f.exists():
            x = json.loads(f.read_text())
            if kept(x):
                got[k] = x
            else:
                excluded += 1
    return got, excluded


def summaries(out, name, scheduler, repeats):
    """{repeat: summary} of the kept complete runs of one spec row and scheduler under ``out``."""
    return kept_summaries(out, name, scheduler, repeats)[0]


def aggregate(st, out):
    """{spec: {"schedulers": {s: {metric: mean over kept repeats, metric + "_ci": [lo, hi], "runs": n,
    "excluded": n}}, "ratios": {"X vs X+cassini": {metric: ratio, metric + "_ci": [lo, hi]}}}} from
    the complete runs under ``out``."""
    table = {}
    for r in st["runs"]:
        entry = {"schedulers": {}, "ratios": {}}
        by_repeat = {}
        for s in r["schedulers"]:
            got, excluded = kept_summaries(out, r["name"], s, r["repeats"])
            reps, sums = list(got), list(got.values())
            if not sums and not excluded:
                continue
            row = {"runs": len(sums), "excluded": excluded}
            for m in METRICS + COUNTS:
                vals = [x["totals"].get(m) for x in sums]
                row[m], row[m + "_ci"] = mean_ci(vals)
            row["jobs"] = per_job(out, r["name"], s, reps, sums)
            tuned = [x["params"]["tuning"] for x in sums if (x.get("params") or {}).get("tuning")]
            if tuned:
                row["tuning"] = tuning_choices(tuned)
            row["per_run"] = {m: [x["totals"].get(m) for x in sums] for m in METRICS + COUNTS}
            by_repeat[s] = dict(zip(reps, sums))
            entry["schedulers"][s] = row
        for s in r["schedulers"]:
            b = s[:-len("+cassini")] if s.endswith("+cassini") else r["schedulers"][0]
            if b != s and b in entry["schedulers"] and s in entry["schedulers"]:
                entry["ratios"][f"{b} vs {s}"] = ratio_row(by_repeat[b], by_repeat[s],
                                                           entry["schedulers"][b], entry["schedulers"][s])
        table[r["name"]] = entry
    return table


def tuning_choices(tunings):
    """{"objective", "held_out", "grid": candidates per run, "chosen": [[timers, runs that chose them]]}
    of the runs' auto-tuner records (harness.planners.tuner)."""
    chosen = []
    for t in tunings:
        for c in chosen:
            if c[0] == t["chosen"]:
                c[1] += 1
                break
        else:
            chosen.append([t["chosen"], 1])
    return {"objective": tunings[0]["objective"], "held_out": all(t.get("held_out") for t in tunings),
            "grid": len(tunings[0]["tried"]), "chosen": chosen}


def mean_ci(vals, floor=0.0):
    """(mean, [lo, hi]) of the numbers in ``vals`` with Student's t 95 % interval, cut at ``floor``
    below (0: every quantity in the sets' tables, times, counts, ratios, is non-negative, and cutting
    an interval to where the mean can lie keeps its coverage; None for signed quantities such as
    errors). The interval is None with fewer than two values; it is [mean, mean] when every value
    is equal (a deterministic run: ``fmt`` says so)."""
    from scipy.special import stdtrit      # Student's t quantile; scipy.stats takes longer to import
    vals = np.array([v for v in vals if v is not None and np.isfinite(v)], dtype=float)
    if not len(vals):
        return None, None
    m = float(vals.mean())
    if len(vals) < 2:
        return round(m, 4), None
    half = float(stdtrit(len(vals) - 1, 0.975) * vals.std(ddof=1) / np.sqrt(len(vals)))
    lo = m - half if floor is None else max(m - half, floor)
    return round(m, 4), [round(lo, 4), round(m + half, 4)]


def ratio_row(base_runs, other_runs, base_row, other_row):
    """{metric: mean of per-repeat ratios base/other, metric + "_ci": its interval}; the ratio of
    means (no interval) when no repeat is kept on both sides. A pair whose second value is 0 and
    first is not (a CASSINI run without a single ECN mark) has no finite ratio: it is left out of
    the mean and counted in ``metric + "_unbounded"``, which the table prints; when every pair (or,
    with none, the means) is so, the ratio is None: above any floor (``check_floors``)."""
    paired = sorted(set(base_runs) & set(other_runs))
    row = {}
    for m in METRICS:
        pairs = [(base_runs[k]["totals"].get(m), other_runs[k]["totals"].get(m)) for k in paired]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        unbounded = sum(1 for a, b in pairs if b == 0 and a > 0)
        rs = [ratio(a, b, digits=None) for a, b in pairs if not (b == 0 and a > 0)]
        if unbounded:
            row[m + "_unbounded"] = unbounded
        if rs:
            row[m], row[m + "_ci"] = mean_ci(rs)
        elif unbounded:
            row[m], row[m + "_ci"] = None, None
        else:
            a, b = base_row.get(m), other_row.get(m)
            if a is not None and b == 0 and a > 0:
                row[m], row[m + "_ci"], row[m + "_unbounded"] = None, None, 1
            else:
                row[m], row[m + "_ci"] = ratio(a, b), None
    row["pairs"] = len(paired)
    return row


def per_job(out, name, scheduler, reps, sums):
    """{job: {model, iteration_ms, comm_ms, ect_ms (program jobs; else None)}}: means over the kept
    repeats ``reps``, each metric + "_ci" its 95 % interval (comm from iterations.csv; a simulated
    run has none: its summary's comm_ms_mean)."""
    import pandas as pd
    from harness.report import comm_ms_mean
    acc = {}
    for k, summ in zip(reps, sums):
        d = run_dir(out, name, scheduler, k)
        it = pd.read_csv(d / "iterations.csv") if (d / "iterations.csv").exists() else None
        for job, j in summ["jobs"].items():
            a = acc.setdefault(job, {"model": j["model"], "iteration_ms": [], "comm_ms": [], "ect_ms": []})
            a["iteration_ms"].append(j["iteration_ms_mean"])
            a["ect_ms"].append(j.get("ect_ms_mean"))
            a["comm_ms"].append(comm_ms_mean(it, job) if it is not None else j.get("comm_ms_mean"))
    rows = {}
    for job, a in acc.items():
        row = {"model": a["model"]}
        for m in ("iteration_ms", "comm_ms", "ect_ms"):
            row[m], row[m + "_ci"] = mean_ci(a[m])
        rows[job] = row
    return rows


def ratio(a, b, digits=3):
    """a / b; None when either is missing or b is 0 and a is not (unbounded: the callers count it);
    1.0 for 0 / 0."""
    if a is None or b is None or (b == 0 and a != 0):
        return None
    if b == 0:
        return 1.0
    return a / b if digits is None else round(a / b, digits)


def check_floors(st, table):
    """[(floor, measured ratio or "unbounded", ok)]: an unbounded ratio (the other side's value is 0
    in every pair, the base's is not) is above any floor."""
    out = []
    for f in st["floors"]:
        key = f"{f['base']} vs {f['other']}"
        row = table.get(f["spec"], {}).get("ratios", {}).get(key, {})
        got = row.get(f["metric"])
        if got is None and row.get(f["metric"] + "_unbounded"):
            out.append((f, "unbounded", True))
        else:
            out.append((f, got, got is not None and got >= f["min"]))
    return out


def fmt(row, m, unit="", digits=None):
    """``mean [lo, hi] unit`` (the 95 % interval when there is one; "every repeat equal" for a
    zero-width one); for a ratio, the pairs left out as unbounded; ``-`` when there is nothing."""
    v, n_unb = row.get(m), row.get(m + "_unbounded")
    if v is None and n_unb:
        return f"unbounded (the second is 0 in {n_unb} pair(s))" if row.get("pairs") else "unbounded (the second's mean is 0)"
    if v is None:
        return "-"

    def num(x):
        return f"{x:.{digits}f}" if digits is not None else f"{x:g}"
    ci = row.get(m + "_ci")
    more = f" (+{n_unb} pair(s) with 0 in the second: unbounded, left out)" if n_unb else ""
    if ci and ci[0] == ci[1]:           # zero width: every value was the same
        return num(v) + unit + " (every repeat equal)" + more
    return num(v) + (f" [{num(ci[0])}, {num(ci[1])}]" if ci else "") + unit + more


def markdown(st, table, floors=None, absent=None):
    lines = [f"# {st['name']}: mean [95 % interval] over kept repeats", "",
             "Runs the fidelity guard flagged are excluded and counted (harness/sets.py, exclusion rule).", "",
             "| spec | scheduler | runs kept / excluded | mean iteration | p99 iteration | mean communication | "
             "slowdown mean | ECN marks | mean JCT | makespan | comm. overhead |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, e in table.items():
        for s, row in e["schedulers"].items():
            lines.append(f"| {name} | {s} | {row['runs']} / {row['excluded']} | {fmt(row, 'iteration_ms_mean', ' ms', 1)} | "
                         f"{fmt(row, 'iteration_ms_p99', ' ms', 1)} | {fmt(row, 'comm_ms_mean', ' ms', 1)} | "
                         f"{fmt(row, 'slowdown_mean', '', 3)} | "
                         f"{fmt(row, 'ecn_marks', '', 0)} | {fmt(row, 'jct_s_mean', ' s', 2)} | "
                         f"{fmt(row, 'makespan_s', ' s', 2)} | {fmt(row, 'communication_overhead_s', ' s', 2)} |")
    lines += ["", "## Ratios (first / second, per repeat pair; > 1: the second is better)", "",
              "| spec | comparison | pairs | mean | p99 | communication | slowdown mean | ECN marks | mean JCT | makespan | "
              "comm. overhead |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, e in table.items():
        for key, rt in e["ratios"].items():
            lines.append(f"| {name} | {key} | {rt['pairs']} | {fmt(rt, 'iteration_ms_mean', 'x', 2)} | "
                         f"{fmt(rt, 'iteration_ms_p99', 'x', 2)} | {fmt(rt, 'comm_ms_mean', 'x', 2)} | "
                         f"{fmt(rt, 'slowdown_mean', 'x', 2)} | "
                         f"{fmt(rt, 'ecn_marks', 'x', 1)} | {fmt(rt, 'jct_s_mean', 'x', 2)} | "
                         f"{fmt(rt, 'makespan_s', 'x', 2)} | {fmt(rt, 'communication_overhead_s', 'x', 2)} |")
    pre = [(name, s, row) for name, e in table.items() for s, row in e["schedulers"].items() if row.get("preemptions")]
    if pre:
        lines += ["", "## Preemptions (mean over kept repeats; restarts hold their hosts `restart_s` each)", "",
                  "| spec | scheduler | preemptions | restarts | GPU-time held restarting |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {name} | {s} | {fmt(row, 'preemptions', '', 1)} | {fmt(row, 'restarts', '', 1)} | "
                  f"{fmt(row, 'restart_gpu_s', ' GPU-s', 0)} |" for name, s, row in pre]
    waits = [(name, s, row) for name, e in table.items() for s, row in e["schedulers"].items()
             if row.get("locality_wait_s_mean") is not None]
    if waits:
        lines += ["", "## Where a job's time went (means over jobs, then over kept repeats)", "",
                  "Queued: arrival to placement; of it, waiting for locality: while a placement was free. "
                  "Restarts: checkpoint restores waited through. Slowdown: mean iteration over the profile's.", "",
                  "| spec | scheduler | queued | waiting for locality | restarts | slowdown mean |",
                  "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {name} | {s} | {fmt(row, 'queue_s_mean', ' s', 1)} | {fmt(row, 'locality_wait_s_mean', ' s', 1)} | "
                  f"{fmt(row, 'restart_paid_s_mean', ' s', 1)} | {fmt(row, 'slowdown_mean', '', 3)} |"
                  for name, s, row in waits]
    tuned = [(name, s, row["tuning"]) for name, e in table.items() for s, row in e["schedulers"].items()
             if row.get("tuning")]
    if tuned:
        lines += ["", "## Auto-tuned timers (netsens `timers: auto`; rack/pod seconds per class, runs that chose them)", "",
                  "| spec | scheduler | objective | tuned on | candidates | chosen |", "| --- | --- | --- | --- | --- | --- |"]
        for name, s, t in tuned:
            ch = "; ".join(", ".join(f"{c} {v[0]:g}/{v[1]:g}" for c, v in timers.items() if c != "low") + f" ({n})"
                           for timers, n in t["chosen"])
            lines.append(f"| {name} | {s} | {t['objective']} | {'a held-out trace' if t['held_out'] else 'its own trace'} | "
                         f"{t['grid']} | {ch} |")
    lines += ["", "## Per job (mean over repeats; communication = first phase start to last phase end)", "",
              "| spec | scheduler | job | model | iteration | communication |", "| --- | --- | --- | --- | --- | --- |"]
    for name, e in table.items():
        for s, row in e["schedulers"].items():
            for job, j in row.get("jobs", {}).items():
                lines.append(f"| {name} | {s} | {job} | {j['model']} | {fmt(j, 'iteration_ms', ' ms', 1)} | "
                             f"{fmt(j, 'comm_ms', ' ms', 1)} |")
    ect = [(name, s, job, j) for name, e in table.items() for s, row in e["schedulers"].items()
           for job, j in row.get("jobs", {}).items() if j.get("ect_ms") is not None]
    if ect:
        lines += ["", "## EchelonFlow completion time (pipeline and tensor jobs; mean over repeats of each job's "
                  "mean over its steps)", "", "| spec | scheduler | job | mean step | ECT |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {name} | {s} | {job} | {fmt(j, 'iteration_ms', ' ms', 1)} | {fmt(j, 'ect_ms', ' ms', 1)} |"
                  for name, s, job, j in ect]
    if absent:
        lines += ["", f"## Missing runs ({len(absent)}: no summary.json, in no mean)", "",
                  "| spec | scheduler | repeat | left beside it |", "| --- | --- | --- | --- |"]
        lines += [f"| {g['spec']} | {g['scheduler']} | {g['repeat']} | {', '.join(g['partial']) or '-'} |" for g in absent]
    if floors:
        lines += ["", "## Floors", "", "| spec | comparison | metric | floor | measured | |", "| --- | --- | --- | --- | --- | --- |"]
        for f, got, ok in floors:
            lines.append(f"| {f['spec']} | {f['base']} vs {f['other']} | {f['metric']} | {f['min']} | {got} | "
                         f"{'ok' if ok else 'BELOW'} |")
    return "\n".join(lines) + "\n"


PER_JOB_SECTIONS = ("## Per job", "## EchelonFlow completion time")


def headline(md, out):
    """``md`` (the set's table.md) without its per-job sections, which can run to thousands of rows:
    what ``reproduce`` prints; the whole is in ``out``/table.md and jobs.csv."""
    keep, dropped = [], False
    for section in md.split("\n## "):
        head = section if section.startswith("# ") else "## " + section
        if head.startswith(PER_JOB_SECTIONS):
            dropped = True
        else:
            keep.append(head)
    text = "\n".join(keep).rstrip("\n") + "\n"
    return text + (f"\nPer-job tables: {Path(out) / 'table.md'} and {Path(out) / 'jobs.csv'}\n" if dropped else "")


def _flat(row, metrics, **head):
    """One CSV row: ``head``, then each metric with its interval as ``<metric>_lo`` / ``_hi``."""
    out = dict(head)
    for m in metrics:
        ci = row.get(m + "_ci") or [None, None]
        out[m], out[m + "_lo"], out[m + "_hi"] = row.get(m), ci[0], ci[1]
        if m + "_unbounded" in row:
            out[m + "_unbounded"] = row[m + "_unbounded"]
    return out


def write_csvs(table, out):
    """The set's tables as flat CSVs beside table.json, one ``pandas.read_csv`` each: ``table.csv``
    (spec, scheduler, runs kept / excluded, each metric's mean and interval), ``ratios.csv`` (spec,
    base, other, pairs, each ratio and interval, pairs left out as unbounded) and ``jobs.csv``
    (spec, scheduler, job, model, the per-job means and intervals)."""
    import pandas as pd
    rows, ratios, jobs = [], [], []
    for name, e in table.items():
        for s, row in e["schedulers"].items():
            rows.append(_flat(row, METRICS + COUNTS, spec=name, scheduler=s, runs=row["runs"], excluded=row["excluded"]))
            for job, j in row.get("jobs", {}).items():
                jobs.append(_flat(j, ("iteration_ms", "comm_ms", "ect_ms"), spec=name, scheduler=s, job=job, model=j["model"]))
        for comp, rt in e["ratios"].items():
            base, other = comp.split(" vs ")
            ratios.append(_flat(rt, METRICS, spec=name, base=base, other=other, pairs=rt["pairs"]))
    empty = {"table.csv": _flat({}, METRICS + COUNTS, spec=None, scheduler=None, runs=None, excluded=None),
             "ratios.csv": _flat({}, METRICS, spec=None, base=None, other=None, pairs=None),
             "jobs.csv": _flat({}, ("iteration_ms", "comm_ms", "ect_ms"), spec=None, scheduler=None, job=None, model=None)}
    for rows_, name in ((rows, "table.csv"), (ratios, "ratios.csv"), (jobs, "jobs.csv")):
        frame = pd.DataFrame(rows_) if rows_ else pd.DataFrame(columns=list(empty[name]))   # a header at least
        frame.to_csv(Path(out) / name, index=False)


def simulated_run(spec, d, quiet=False, log=None):
    """``execute``'s ``run`` for ``--simulate``: the spec in harness.sim, its directory in ``d``."""
    from harness.simulate import simulate_run
    return simulate_run(spec, d)


def markers(st, kind="reproduce"):
    return f"<!-- interleave {kind} {st['name']} -->", f"<!-- end interleave {kind} {st['name']} -->"


def check_publish(st, target, kind="reproduce"):
    start, end = markers(st, kind)
    try:
        text = Path(target).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--publish: {target}: cannot read ({exc})")
    if start not in text or end not in text:
        raise UsageError(f"--publish: {target} has no block {start} ... {end}")


def run_dates(*dirs):
    """(first, last) UTC day of the runs under ``dirs`` (each run's summary.json, written when it
    completed), or None when there is none."""
    days = sorted({datetime.fromtimestamp(f.stat().st_mtime, timezone.utc).date().isoformat()
                   for d in dirs if d for f in Path(d).glob("**/summary.json")})
    return (days[0], days[-1]) if days else None


def made_line(command, dates=None):
    """The line a published block opens with: its command and when its runs were made
    (``dates``: (first, last) UTC day; None: now, for a block measured as it is published)."""
    first, last = dates or (datetime.now(timezone.utc).date().isoformat(),) * 2
    when = first if first == last else f"{first} to {last}"
    return f"Generated by `{command}` (runs made {when}, UTC)."


PUBLISH_MAX_JOB_ROWS = 30     # a longer per-job table goes to a page of its own beside the target


def _split_per_job(body, target, name, made):
    """``body`` with a per-job section longer than PUBLISH_MAX_JOB_ROWS rows replaced by a link to
    ``NAME-jobs.md`` beside ``target``, which is written with ``made`` (the block's Generated line)
    and the table; a short one stays inline."""
    head, sep, rest = body.partition("\n## Per job")
    companion = Path(target).parent / f"{name}-jobs.md"
    if not sep:
        return body
    section, nxt, tail = rest.partition("\n## ")
    rows = sum(1 for line in section.splitlines() if line.startswith("| ")) - 2     # header, separator
    if rows <= PUBLISH_MAX_JOB_ROWS:
        return body
    title, _, table = section.partition("\n")
    companion.write_text(f"# {name}: per job{title}\n\n{made}\n{table.rstrip()}\n")
    line = f"\n## Per job{title}\n\n{rows} rows: [{companion.name}]({companion.name}).\n"
    return head + line + (nxt + tail if nxt else "")


def _nest(body, text, start):
    """``body``'s headings moved under the last heading of ``text`` before ``start`` (a block under
    a ``## Section`` gets ``### Ratios``); under the page's title they stay ``##``."""
    before = re.sub(r"<!-- interleave (\S+ \S+) -->.*?<!-- end interleave \1 -->", "", text.split(start, 1)[0],
                    flags=re.S)                                          # other blocks' own headings
    above = [line for line in before.splitlines() if line.startswith("#")]
    level = len(above[-1]) - len(above[-1].lstrip("#")) if above else 1
    if level < 2:
        return body
    extra = "#" * (level - 1)
    return "\n".join(extra + line if line.startswith("## ") else line for line in body.split("\n"))


def publish(st, md, target, command, kind="reproduce", dates=None):
    """Replace the set's marked block in ``target`` (a Markdown file) with ``md``, ``command`` and
    ``dates`` (made_line); a per-job table longer than PUBLISH_MAX_JOB_ROWS goes to
    ``<set>-jobs.md`` beside ``target``, linked from the block."""
    check_publish(st, target, kind)
    target = Path(target)
    start, end = markers(st, kind)
    text = target.read_text()
    made = made_line(command, dates)
    body = md.split("\n", 1)[1].strip()                           # without the set's own title
    body = _nest(_split_per_job(body, target, st["name"], made), text, start)
    block = f"{start}\n{made}\n\n{body}\n{end}"
    head, rest = text.split(start, 1)
    target.write_text(head + block + rest.split(end, 1)[1])


VALIDATION_TOLERANCE = 0.10     # the simulator's mean iteration within 10 % of the emulated one


def validation(st, emulated, simulated):
    """The simulator against the emulator on one set: per spec and scheduler, the emulated mean
    iteration time (kept runs, 95 % interval) beside the simulated one and their difference; how
    many rows are within VALIDATION_TOLERANCE. Returns (markdown, rows)."""
    emu, sim = aggregate(st, emulated), aggregate(st, simulated)
    rows = []
    for name, e in emu.items():
        for s, row in e["schedulers"].items():
            srow = sim.get(name, {}).get("schedulers", {}).get(s)
            em, sm = row.get("iteration_ms_mean"), srow and srow.get("iteration_ms_mean")
            dev = None if em is None or sm is None else sm / em - 1
            rows.append({"spec": name, "scheduler": s, "emulated": em, "emulated_ci": row.get("iteration_ms_mean_ci"),
                         "runs": row["runs"], "excluded": row["excluded"], "simulated": sm,
                         "deviation": None if dev is None else round(dev, 4),
                         "within": None if dev is None else abs(dev) <= VALIDATION_TOLERANCE})
    judged = [r for r in rows if r["within"] is not None]
    n_in = sum(1 for r in judged if r["within"])
    lines = [f"# {st['name']}: the simulator against the emulator (mean iteration time)", "",
             f"**{n_in} of {len(judged)}** spec/scheduler rows have the simulated mean within "
             f"{VALIDATION_TOLERANCE:.0%} of the emulated one (emulated: mean [95 % interval] over the runs the "
             "fidelity guard kept; excluded runs counted).", "",
             "| spec | scheduler | emulated runs kept / excluded | emulated | simulated | simulated - emulated | within |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [deviation_line(r) for r in rows]
    return "\n".join(lines) + "\n", rows


def deviation_line(r):
    """A table line of a model against emulation: spec, scheduler, runs kept / excluded, emulated mean
    [interval], the model's (``simulated``), their difference and whether it is within tolerance."""
    dev = "-" if r["deviation"] is None else f"{r['deviation']:+.1%}"
    ok = "-" if r["within"] is None else ("yes" if r["within"] else "no")
    return (f"| {r['spec']} | {r['scheduler']} | {r['runs']} / {r['excluded']} | "
            f"{fmt({'m': r['emulated'], 'm_ci': r['emulated_ci']}, 'm', ' ms', 1)} | "
            f"{fmt({'m': r['simulated']}, 'm', ' ms', 1)} | {dev} | {ok} |")


def block_command(module, doc, kind, results, render, argv=None):
    """The command line of a module that reads a set's results and prints (``--publish``: writes
    into FILE's block ``<!-- interleave KIND <set> -->``) a Markdown table: ``render(st, out)``
    returns it or raises UsageError (one line, exit status 2)."""
    import argparse
    import sys
    ap = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.split("\n\n")[0])
    ap.add_argument("set", help="the set file (YAML)")
    ap.add_argument("--out", required=True, metavar="DIR", help=f"the set's {results} results")
    ap.add_argument("--publish", metavar="FILE", help=f"replace the block <!-- interleave {kind} <set name> --> ... in FILE")
    a = ap.parse_args(argv)
    try:
        st = load_set(a.set)
        if a.publish:
            check_publish(st, a.publish, kind=kind)
        md = render(st, a.out)
    except UsageError as exc:
        print(f"{module.rsplit('.', 1)[-1]}: {exc}", file=sys.stderr)
        return 2
    print(md)
    if a.publish:
        command = f"python -m {module} " + " ".join(argv if argv is not None else sys.argv[1:])
        publish(st, md, a.publish, command, kind=kind, dates=run_dates(a.out))
        print(f"published in {a.publish}")
    return 0


def emit_bench(name, md, target, command):
    """A benchmark's Markdown table: printed, and written into ``target``'s block
    ``<!-- interleave bench NAME -->`` with ``command`` when ``target`` is given."""
    print(md)
    if target:
        publish({"name": name}, md, target, command, kind="bench")


def write(st, out, check=False, plots=True):
    """Reports per spec, table.md/.json; returns (markdown, floors results)."""
    from harness.report import report
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for r in st["runs"]:
        dirs = [run_dir(out, r["name"], s, k) for k in range(r["repeats"]) for s in r["schedulers"]]
        dirs = [d for d in dirs if (d / "summary.json").exists()]
        if dirs and plots:
            report(dirs, out / r["name"] / "report")
    table = aggregate(st, out)
    floors = check_floors(st, table) if check else None
    absent = missing(st, out)
    md = markdown(st, table, floors, absent)
    (out / "table.md").write_text(md)
    write_csvs(table, out)
    (out / "table.json").write_text(json.dumps({"set": st["name"], "table": table, "missing": absent,
                                                "floors": [{**f, "measured": g, "ok": ok} for f, g, ok in floors or []]},
                                               indent=2, default=str))
    return md, floors
