"""``interleave report DIR [DIR ...]``: tables and plots comparing results directories.

The directories may be emulated runs (``interleave run``), simulated ones (``interleave simulate
--out``, a set's ``--simulate`` runs) or both; each run is labelled with its backend. The first
directory is the baseline: ratios are baseline / other (above 1 means the other is better), as the
CASSINI paper reports speed-ups. Writes ``report.md``, ``report.html`` and PNG plots to ``--out``
(default: the first directory when there is one, else ``./report``):
  iterations.png      mean iteration time per job and run (both backends)
  marks.png           ECN-marked packets per iteration, per job and run (simulated: estimated)
  iteration_cdf.png   iteration-time CDF per run (iteration_ms.csv: all jobs' steady iterations,
                      leader's start to next start; simulated: the model's times, dashed)
  link_<id>.png       utilisation of the most shared link per emulated run: the whole run, and
                      beside it a window of a few iterations from its middle, Up phases shaded
"""
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from harness import metrics  # noqa: E402
from harness.errors import UsageError  # noqa: E402


SUMMARY_KEYS = {"scheduler": str, "totals": dict, "fidelity": dict, "jobs": dict}
LINK_COLUMNS_USED = ["time", "direction", "utilization", "source"]       # of telemetry.COLUMNS


def load(d):
    """One results directory, checked before anything is drawn: every file there, readable, parsed,
    with the keys and columns the report uses; else a UsageError naming the file and what is wrong.
    A simulated run needs its summary.json only (``iters`` and ``links`` are None)."""
    from harness.replay import COLUMNS as ITER_COLUMNS
    d = Path(d)
    if not d.is_dir():
        raise UsageError(f"{d}: not a directory")
    if not (d / "summary.json").is_file():
        raise UsageError(f"{d}: not a complete results directory (no summary.json)")
    summary = _json(d / "summary.json", dict)
    simulated = bool(summary.get("simulated"))
    missing = [f for f in ("schedule.json", "iterations.csv", "links.csv") if not (d / f).is_file()]
    if missing and not simulated:
        raise UsageError(f"{d}: no {', '.join(missing)} (an emulated run's directory has them; "
                         "it was interrupted or its files were removed)")
    for key, kind in SUMMARY_KEYS.items():
        if not isinstance(summary.get(key), kind):
            raise UsageError(f"{d / 'summary.json'}: {key}: missing or not a {kind.__name__}")
    dist = _csv(d / metrics.DISTRIBUTION, metrics.DISTRIBUTION_COLUMNS) if (d / metrics.DISTRIBUTION).is_file() else None
    if simulated:
        return {"dir": d, "summary": summary, "schedule": None, "iters": None, "links": None, "backend": "simulated",
                "dist": dist}
    schedule = _json(d / "schedule.json", dict)
    if not isinstance(schedule.get("epochs"), list):
        raise UsageError(f"{d / 'schedule.json'}: epochs: missing or not a list")
    iters = _csv(d / "iterations.csv", ITER_COLUMNS)
    if dist is None:                # a run from before iteration_ms.csv: the same rows from its iterations
        dist = pd.DataFrame(metrics.distribution_rows(emulated_times(iters, schedule)),
                            columns=metrics.DISTRIBUTION_COLUMNS)
    return {"dir": d, "summary": summary, "schedule": schedule, "backend": "emulated", "dist": dist,
            "iters": iters, "links": _csv(d / "links.csv", LINK_COLUMNS_USED)}


def emulated_times(iters, schedule):
    """{job: (steady iteration ms, 1 each)} of an emulated run, as its summary counts them."""
    segments = {j["name"]: j.get("segments") for j in schedule.get("jobs", [])}
    out = {}
    for name, w0 in iters[iters.worker == 0].groupby("job"):
        ms = metrics.steady_iteration_ms(w0.sort_values("iteration"), segments.get(name))
        out[name] = (ms, np.ones(len(ms)))
    return out


def _json(path, kind):
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{path}: not readable JSON ({type(exc).__name__}: {str(exc)[:80]})")
    if not isinstance(doc, kind):
        raise UsageError(f"{path}: not a JSON {'object' if kind is dict else kind.__name__}")
    return doc


def _csv(path, columns):
    try:
        df = pd.read_csv(path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:   # pandas' parse and empty-data errors are ValueErrors
        raise UsageError(f"{path}: not a readable CSV ({type(exc).__name__}: {str(exc)[:80]})")
    lacking = [c for c in columns if c not in df.columns]
    if lacking:
        raise UsageError(f"{path}: lacks the column(s) {', '.join(lacking)}")
    return df


def label(r):
    return f"{r['summary']['scheduler']} ({r['dir'].name}, {r['backend']})"


def ratio(a, b):
    return round(a / b, 2) if a is not None and b not in (None, 0) else None


def tables(runs):
    lines = ["| run | mean iteration (all jobs) | p99 iteration | ECN marks | fidelity |",
             "| --- | --- | --- | --- | --- |"]
    for r in runs:
        t, f = r["summary"]["totals"], r["summary"]["fidelity"]
        if r["backend"] == "simulated":      # no emulator to keep up; the simulator estimates marks
            marks, verdict = f"{t['ecn_marks']} (estimated)", "- (simulated)"
        else:
            marks, verdict = t["ecn_marks"], "ok" if f["ok"] else "NOT OK: " + "; ".join(f["notes"])
        lines.append(f"| {label(r)} | {t['iteration_ms_mean']} ms | {t['iteration_ms_p99']} ms | {marks} | {verdict} |")
    out = ["## Overall", "", *lines, ""]
    base = runs[0]["summary"]["totals"]
    if len(runs) > 1:
        out += ["## Speed-up over the baseline (baseline / run; > 1 is better)", "",
                "| run | mean | p99 | ECN marks |", "| --- | --- | --- | --- |"]
        for r in runs[1:]:
            t = r["summary"]["totals"]
            if t["ecn_marks"]:
                marks = f"{ratio(base['ecn_marks'], t['ecn_marks'])}x"
            else:
                marks = f"unbounded ({base['ecn_marks']} against 0)" if base["ecn_marks"] else "- (0 against 0)"
            out.append(f"| {label(r)} | {ratio(base['iteration_ms_mean'], t['iteration_ms_mean'])}x | "
                       f"{ratio(base['iteration_ms_p99'], t['iteration_ms_p99'])}x | {marks} |")
        out.append("")
    out += ["## Per job", "", "| run | job | model | iterations | mean | p99 | profile | communication (mean) | JCT | "
            "marks / iteration | shift planned | shift error p50 | re-alignments / min |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        for name, j in r["summary"]["jobs"].items():
            comm = comm_ms_mean(r["iters"], name) if r["iters"] is not None else j.get("comm_ms_mean")
            out.append(f"| {label(r)} | {name} | {j['model']} | {j['iterations']} | {j['iteration_ms_mean']} ms | "
                       f"{j['iteration_ms_p99']} ms | {j['iteration_ms_profile']:g} ms | "
                       f"{'-' if comm is None else f'{comm:.1f} ms'} | {j['jct_s']} s | "
                       f"{j['ecn_marks_per_iteration']} | {_shift(j)} | "
                       f"{_ms(j.get('shift_error_ms_p50'))} | {'-' if j.get('realignments_per_minute') is None else j['realignments_per_minute']} |")
    return out


def _shift(j):
    """A job's planned shift; none for a job that runs free (nothing keeps it: concepts, alignment)."""
    return "- (free)" if j.get("alignment") == "free" else _ms(j.get("time_shift_ms"))


def _ms(v):
    return "-" if v is None else f"{v:g} ms"


def comm_ms_mean(iters, job):
    """Mean communication time of a job's iterations (leader: first phase start to last phase end,
    first iteration excluded): CASSINI's Table 2 compares this, not iteration times."""
    w0 = iters[(iters.job == job) & (iters.worker == 0)]
    if len(w0) < 2 or w0.comm_start.isna().all():
        return None
    return metrics.mean(metrics.comm_ms(w0))


def plot_cdf(runs, out):
    """Iteration-time CDF of every run with an ``iteration_ms.csv`` (all jobs; the simulator's
    modelled times weighted by the iterations run at each); None when none has one."""
    have = [r for r in runs if r.get("dist") is not None and len(r["dist"])]
    if not have:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for r in have:
        d = r["dist"].sort_values("iteration_ms")
        w = d.iterations.to_numpy(dtype=float)
        if w.sum() > 0:
            ax.step(d.iteration_ms.to_numpy(), np.cumsum(w) / w.sum(), where="post", label=label(r),
                    linestyle="--" if r["backend"] == "simulated" else "-")
    ax.set_xlabel("iteration time (ms)")
    ax.set_ylabel("CDF (share of iterations)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "iteration_cdf.png", dpi=120)
    plt.close(fig)
    return "iteration_cdf.png"


def _per_job_bars(runs, key, ylabel, name, out, alone=False):
    """One bar per job and run of ``summary.json``'s per-job ``key``; with ``alone``, each job's
    iteration alone (its profile) marked. Returns the file name."""
    fig, ax = plt.subplots(figsize=(7, 4))
    jobs = list(dict.fromkeys(j for r in runs for j in r["summary"]["jobs"]))
    w = 0.8 / len(runs)
    for k, r in enumerate(runs):
        vals = [r["summary"]["jobs"].get(j, {}).get(key) or 0 for j in jobs]
        ax.bar(np.arange(len(jobs)) + k * w, vals, w, label=label(r))
    if alone:
        prof = [next((r["summary"]["jobs"][j].get("iteration_ms_profile") for r in runs if j in r["summary"]["jobs"]),
                     None) for j in jobs]
        xs = [i for i, a in enumerate(prof) if a]
        ax.hlines([prof[i] for i in xs], [i - w / 2 for i in xs], [i - w / 2 + 0.8 for i in xs], color="k", lw=1.5,
                  zorder=3, label="alone (profile)")
    ax.set_xticks(np.arange(len(jobs)) + 0.4 - w / 2, jobs, rotation=30 if len(jobs) > 6 else 0, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12 if len(jobs) <= 6 else -0.25), ncol=2)
    fig.tight_layout()
    fig.savefig(out / name, dpi=120)
    plt.close(fig)
    return name


def plot_iterations(runs, out):
    """Mean iteration time per job and run, each job's iteration alone (its profile) marked."""
    return _per_job_bars(runs, "iteration_ms_mean", "mean iteration (ms)", "iterations.png", out, alone=True)


def busiest_shared_link(runs):
    counts = {}
    for r in runs:
        for e in (r["schedule"] or {}).get("epochs", []):
            for l in e["links"]:
                counts[l["id"]] = max(counts.get(l["id"], 0), len(l["jobs"]))
    return max(sorted(counts), key=lambda k: counts[k]) if counts else None


ZOOM_ITERATIONS = 4     # the zoomed window of a link plot: this many of its shortest job's iterations


def plot_link(runs, link, out):
    """Per emulated run, the link's utilisation over the whole run (left) and over a window of
    ``ZOOM_ITERATIONS`` iterations from the run's middle (right), each job's Up phases shaded."""
    runs = [r for r in runs if r["links"] is not None]
    fig, axes = plt.subplots(len(runs), 2, figsize=(12, 2.2 * len(runs)), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 2]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for (whole, zoom), r in zip(axes, runs):
        d = r["links"]
        d = d[(d.direction == link) & (d.source == "openflow")].dropna(subset=["utilization"])
        jobs = [l["jobs"] for e in r["schedule"]["epochs"] for l in e["links"] if l["id"] == link]
        names = sorted(set(sum(jobs, [])))
        it = r["iters"]
        periods = [r["summary"]["jobs"][n]["iteration_ms_mean"] for n in names
                   if r["summary"]["jobs"].get(n, {}).get("iteration_ms_mean")]
        lo, hi = (d.time.min(), d.time.max()) if len(d) else (0.0, 0.0)
        if periods and len(d):
            span = ZOOM_ITERATIONS * min(periods) / 1000
            lo, hi = (lo + hi - span) / 2, (lo + hi + span) / 2
        for ax in (whole, zoom):
            ax.plot(d.time, d.utilization, lw=0.8, color="k")
            ax.set_ylim(0, 1.15)
        # Up phases in the window only: over the whole run they are a wall of stripes
        for k, name in enumerate(names):
            w0 = it[(it.job == name) & (it.worker == 0) & (it.comm_end >= lo) & (it.comm_start <= hi)]
            for i, row in enumerate(w0.itertuples()):
                zoom.axvspan(row.comm_start, row.comm_end, color=colors[k % len(colors)], alpha=0.25, lw=0,
                             label=name if i == 0 else None)
        whole.axvspan(lo, hi, color="0.5", alpha=0.15, lw=0)
        whole.set_ylabel("utilisation")
        whole.set_title(f"{link}: {label(r)} (shaded: the window on the right)", fontsize=9)
        if hi > lo:
            zoom.set_xlim(lo, hi)
        zoom.set_title(f"{ZOOM_ITERATIONS} iterations from the middle, Up phases shaded", fontsize=9)
        if zoom.get_legend_handles_labels()[0]:     # a link no job's phases were drawn on has no legend
            zoom.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("time since run start (s)")
    axes[-1, 1].set_xlabel("time since run start (s)")
    fig.tight_layout()
    name = f"link_{link.replace('>', '_to_')}.png"
    fig.savefig(out / name, dpi=120)
    plt.close(fig)
    return name


def plot_marks(runs, out):
    return _per_job_bars(runs, "ecn_marks_per_iteration", "ECN-marked packets per iteration", "marks.png", out)


def report(dirs, out=None):
    runs = [load(d) for d in dirs]
    out = Path(out) if out else (runs[0]["dir"] if len(runs) == 1 else Path("report"))
    out.mkdir(parents=True, exist_ok=True)
    md = [f"# Interleave report: {', '.join(label(r) for r in runs)}", ""] + tables(runs)
    images = [plot_iterations(runs, out), plot_marks(runs, out), plot_cdf(runs, out)]
    link = busiest_shared_link(runs)
    if link:
        images.append(plot_link(runs, link, out))
    images = [i for i in images if i]
    md += ["", "## Plots", ""] + [f"![{i}]({i})" for i in images]
    (out / "report.md").write_text("\n".join(md) + "\n")
    html = ["<html><head><meta charset='utf-8'><title>Interleave report</title></head><body>"]
    for line in md:
        if line.startswith("# "):
            html.append(f"<h1>{line[2:]}</h1>")
        elif line.startswith("## "):
            html.append(f"<h2>{line[3:]}</h2>")
        elif line.startswith("| ---"):
            continue
        elif line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            html.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        elif line.startswith("!["):
            src = line.split("(")[1].rstrip(")")
            html.append(f"<p><img src='{src}'></p>")
    page = "\n".join(html).replace("</h2>\n<tr>", "</h2>\n<table border=1 cellpadding=3><tr>")
    page = page.replace("</tr>\n<h2>", "</tr></table>\n<h2>").replace("</tr>\n<p>", "</tr></table>\n<p>")
    (out / "report.html").write_text(page + "</body></html>\n")
    return out, "\n".join(md)
