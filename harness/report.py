"""``interleave report DIR [DIR ...]``: tables and plots comparing results directories.

The first directory is the baseline: ratios are baseline / other (above 1 means the other is
better), as the CASSINI paper reports speed-ups. Writes ``report.md``, ``report.html`` and PNG plots
to ``--out`` (default: the first directory when there is one, else ``./report``):
  iteration_cdf.png   iteration-time CDF per run (all jobs, leader's start to next start, first
                      iteration excluded)
  link_<id>.png       utilisation of the most shared link over time per run, Up phases shaded
  marks.png           ECN-marked packets per iteration, per job and run
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
    with the keys and columns the report uses; else a UsageError naming the file and what is wrong."""
    from harness.replay import COLUMNS as ITER_COLUMNS
    d = Path(d)
    if not d.is_dir():
        raise UsageError(f"{d}: not a directory")
    missing = [f for f in ("summary.json", "schedule.json", "iterations.csv", "links.csv") if not (d / f).is_file()]
    if "summary.json" in missing:
        raise UsageError(f"{d}: not a complete results directory (no summary.json)")
    if missing:
        raise UsageError(f"{d}: no {', '.join(missing)} (report needs an emulated run's directory; "
                         "a `simulate --out` directory has only summary.json)")
    summary = _json(d / "summary.json", dict)
    for key, kind in SUMMARY_KEYS.items():
        if not isinstance(summary.get(key), kind):
            raise UsageError(f"{d / 'summary.json'}: {key}: missing or not a {kind.__name__}")
    schedule = _json(d / "schedule.json", dict)
    if not isinstance(schedule.get("epochs"), list):
        raise UsageError(f"{d / 'schedule.json'}: epochs: missing or not a list")
    return {"dir": d, "summary": summary, "schedule": schedule,
            "iters": _csv(d / "iterations.csv", ITER_COLUMNS), "links": _csv(d / "links.csv", LINK_COLUMNS_USED)}


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
    return f"{r['summary']['scheduler']} ({r['dir'].name})"


def ratio(a, b):
    return round(a / b, 2) if a is not None and b not in (None, 0) else None


def tables(runs):
    lines = ["| run | mean iteration | p99 iteration | ECN marks | fidelity |", "| --- | --- | --- | --- | --- |"]
    for r in runs:
        t, f = r["summary"]["totals"], r["summary"]["fidelity"]
        lines.append(f"| {label(r)} | {t['iteration_ms_mean']} ms | {t['iteration_ms_p99']} ms | {t['ecn_marks']} | "
                     f"{'ok' if f['ok'] else 'NOT OK: ' + '; '.join(f['notes'])} |")
    out = ["## Overall", "", *lines, ""]
    base = runs[0]["summary"]["totals"]
    if len(runs) > 1:
        out += ["## Speed-up over the baseline (baseline / run; > 1 is better)", "",
                "| run | mean | p99 | ECN marks |", "| --- | --- | --- | --- |"]
        for r in runs[1:]:
            t = r["summary"]["totals"]
            marks = ratio(base["ecn_marks"], t["ecn_marks"]) if t["ecn_marks"] else ("inf" if base["ecn_marks"] else "-")
            out.append(f"| {label(r)} | {ratio(base['iteration_ms_mean'], t['iteration_ms_mean'])}x | "
                       f"{ratio(base['iteration_ms_p99'], t['iteration_ms_p99'])}x | {marks}x |")
        out.append("")
    out += ["## Per job", "", "| run | job | model | iterations | mean | p99 | profile | communication (mean) | JCT | "
            "marks / iteration | shift planned | shift error p50 | re-alignments / min |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        for name, j in r["summary"]["jobs"].items():
            comm = comm_ms_mean(r["iters"], name)
            out.append(f"| {label(r)} | {name} | {j['model']} | {j['iterations']} | {j['iteration_ms_mean']} ms | "
                       f"{j['iteration_ms_p99']} ms | {j['iteration_ms_profile']:g} ms | "
                       f"{'-' if comm is None else f'{comm:.1f} ms'} | {j['jct_s']} s | "
                       f"{j['ecn_marks_per_iteration']} | {j['time_shift_ms']:g} ms | {j['shift_error_ms_p50']} ms | "
                       f"{j['realignments_per_minute']} |")
    return out


def comm_ms_mean(iters, job):
    """Mean communication time of a job's iterations (leader: first phase start to last phase end,
    first iteration excluded): CASSINI's Table 2 compares this, not iteration times."""
    w0 = iters[(iters.job == job) & (iters.worker == 0)]
    if len(w0) < 2 or w0.comm_start.isna().all():
        return None
    return metrics.mean(metrics.comm_ms(w0))


def plot_cdf(runs, out):
    fig, ax = plt.subplots(figsize=(6, 4))
    from harness.runner import iteration_times_ms
    for r in runs:
        it = r["iters"]
        v = np.sort(np.concatenate([iteration_times_ms(g.sort_values("iteration"))[1:]
                                    for _j, g in it[it.worker == 0].groupby("job")]))
        if len(v):
            ax.plot(v, np.arange(1, len(v) + 1) / len(v), label=label(r))
    ax.set_xlabel("iteration time (ms)")
    ax.set_ylabel("CDF")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "iteration_cdf.png", dpi=120)
    plt.close(fig)
    return "iteration_cdf.png"


def busiest_shared_link(runs):
    counts = {}
    for r in runs:
        for e in r["schedule"]["epochs"]:
            for l in e["links"]:
                counts[l["id"]] = max(counts.get(l["id"], 0), len(l["jobs"]))
    return max(sorted(counts), key=lambda k: counts[k]) if counts else None


def plot_link(runs, link, out):
    fig, axes = plt.subplots(len(runs), 1, figsize=(8, 2.2 * len(runs)), sharex=True, squeeze=False)
    for ax, r in zip(axes[:, 0], runs):
        d = r["links"]
        d = d[(d.direction == link) & (d.source == "openflow")].dropna(subset=["utilization"])
        ax.plot(d.time, d.utilization, lw=0.8, color="k")
        jobs = [l["jobs"] for e in r["schedule"]["epochs"] for l in e["links"] if l["id"] == link]
        names = sorted(set(sum(jobs, [])))
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        it = r["iters"]
        for k, name in enumerate(names):
            w0 = it[(it.job == name) & (it.worker == 0)]
            for _, row in w0.iterrows():
                ax.axvspan(row.comm_start, row.comm_end, color=colors[k % len(colors)], alpha=0.25, lw=0,
                           label=name if _ == w0.index[0] else None)
        ax.set_ylabel("utilisation")
        ax.set_ylim(0, 1.15)
        ax.set_title(f"{link}: {label(r)}", fontsize=9)
        if ax.get_legend_handles_labels()[0]:     # a link no job's phases were drawn on has no legend
            ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("time since run start (s)")
    fig.tight_layout()
    name = f"link_{link.replace('>', '_to_')}.png"
    fig.savefig(out / name, dpi=120)
    plt.close(fig)
    return name


def plot_marks(runs, out):
    fig, ax = plt.subplots(figsize=(7, 3.5))
    jobs = sorted({j for r in runs for j in r["summary"]["jobs"]})
    w = 0.8 / len(runs)
    for k, r in enumerate(runs):
        vals = [r["summary"]["jobs"].get(j, {}).get("ecn_marks_per_iteration", 0) for j in jobs]
        ax.bar(np.arange(len(jobs)) + k * w, vals, w, label=label(r))
    ax.set_xticks(np.arange(len(jobs)) + 0.4 - w / 2, jobs)
    ax.set_ylabel("ECN-marked packets per iteration")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "marks.png", dpi=120)
    plt.close(fig)
    return "marks.png"


def report(dirs, out=None):
    runs = [load(d) for d in dirs]
    out = Path(out) if out else (runs[0]["dir"] if len(runs) == 1 else Path("report"))
    out.mkdir(parents=True, exist_ok=True)
    md = [f"# Interleave report: {', '.join(label(r) for r in runs)}", ""] + tables(runs)
    images = [plot_cdf(runs, out), plot_marks(runs, out)]
    link = busiest_shared_link(runs)
    if link:
        images.append(plot_link(runs, link, out))
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
