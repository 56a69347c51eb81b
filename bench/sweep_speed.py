#!/usr/bin/env python3
"""Sweep speed: a simulated set run serially (``--workers 1``) and on local Dask workers
(``--workers N``), each from an empty directory, as a user runs it (the CLI, wall time of the whole
command: cluster start, every run, the table). Checks that every table.md and table.json is
byte-identical to the first serial one.

    .venv/bin/python bench/sweep_speed.py [--set experiments/sets/netsens-sim.yaml] [--workers 2]
        [--repeats 3] [--publish docs/experiments.md]

Prints a Markdown table (mean wall and CPU time with their 95 % intervals over the repeats, the
speed-up as the mean of the per-repeat ratios); ``--publish FILE`` writes it into FILE's block
``<!-- interleave bench sweep-speed-SET -->`` ... ``<!-- end interleave bench sweep-speed-SET -->``
(SET: the set file's stem).
Serial and parallel repeats alternate, so a slow spell of the machine hits both. Run it alone.

Each repeat also measures the machine's own ceiling for N processes: a fixed pure-Python loop (no
I/O, no imports) run N times in one process, then once in each of N processes at the same time; the
ratio of the two wall times is the most any set can gain from N workers here at that moment (2-core
cloud machines give less than 2: the cores slow down when both are busy).
"""
import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.sets import emit_bench, fmt, mean_ci  # noqa: E402


def one(set_file, workers, out):
    """(wall s, CPU s of the command and its processes, table.md, table.json, phases): ``phases`` are
    read off the command's progress lines as they arrive: ``start`` s until the first run is under
    way (imports, the set's validation, the Dask cluster's start), ``runs`` s until the line "N
    run(s) in" (with the cluster's close), ``after`` s to the end (the table, the exit), and with Dask
    ``busy``: the runs' own wall times summed over (workers x ``runs``)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "harness.cli", "reproduce", set_file, "--simulate", "--quiet",
                          "--workers", str(workers), "--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONWARNINGS="ignore", PYTHONUNBUFFERED="1"))
    lines = [(time.monotonic() - t, line) for line in p.stderr]
    if p.wait() != 0:
        tail = "".join(line for _t, line in lines[-3:]).strip()
        sys.exit(f"sweep_speed: reproduce --workers {workers} exited {p.returncode}: {tail[-300:]}")
    wall = time.monotonic() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    start = next(at for at, line in lines if line.startswith("[1/") or "local worker processes" in line)
    end = next(at for at, line in lines if re.search(r"run\(s\) in ", line))
    phases = {"start": start, "runs": end - start, "after": wall - end}
    if workers > 1:
        run_s = [float(m.group(1)) for _at, line in lines if (m := re.search(r": ([0-9.]+) s on ", line))]
        phases["busy"] = 100 * sum(run_s) / (workers * (end - start))
    return wall, cpu, (out / "table.md").read_bytes(), (out / "table.json").read_bytes(), phases


BURN = 40_000_000          # loop steps of one ceiling probe: about 1.6 s of one core


def burn(n=BURN):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def ceiling(workers):
    """Wall time of ``workers`` probes one after another over their wall time in ``workers``
    processes at once (started beforehand, so process start-up is not counted)."""
    import multiprocessing
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pool.map(burn, [BURN // 10] * workers, chunksize=1)    # the processes are up and warm
        t = time.monotonic()
        for _ in range(workers):
            burn()
        serial = time.monotonic() - t
        t = time.monotonic()
        pool.map(burn, [BURN] * workers, chunksize=1)
        parallel = time.monotonic() - t
    return serial / parallel


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="experiments/sets/netsens-sim.yaml")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--publish", metavar="FILE")
    args = ap.parse_args()
    walls, cpus = {1: [], args.workers: []}, {1: [], args.workers: []}
    phases = {1: [], args.workers: []}
    ceilings = []
    reference, identical = None, True
    tmp = Path(tempfile.mkdtemp(prefix="interleave-sweep-speed-"))
    try:
        for r in range(args.repeats):
            for w in (1, args.workers):
                out = tmp / f"w{w}-r{r}"
                s, cpu, md, js, ph = one(args.set, w, out)
                phases[w].append(ph)
                shutil.rmtree(out)
                walls[w].append(s)
                cpus[w].append(cpu)
                reference = reference or (md, js)
                identical = identical and (md, js) == reference
                print(f"repeat {r}, --workers {w}: {s:.1f} s", file=sys.stderr, flush=True)
            ceilings.append(ceiling(args.workers))
            print(f"repeat {r}, the machine's ceiling for {args.workers} processes: {ceilings[-1]:.2f}x",
                  file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = {w: dict(zip(("m", "m_ci"), mean_ci(v))) for w, v in walls.items()}
    cpu = {w: dict(zip(("m", "m_ci"), mean_ci(v))) for w, v in cpus.items()}
    ratios = [a / b for a, b in zip(walls[1], walls[args.workers])]
    speedup = dict(zip(("m", "m_ci"), mean_ci(ratios)))
    ceiling_m = dict(zip(("m", "m_ci"), mean_ci(ceilings)))
    share = dict(zip(("m", "m_ci"), mean_ci([100 * a / c for a, c in zip(ratios, ceilings)])))
    md = "\n".join([
        f"# sweep-speed-{Path(args.set).stem}: `interleave reproduce {args.set} --simulate`, {os.cpu_count()} cores", "",
        "| workers | repeats | wall time | CPU time (all processes) | speed-up over serial | tables identical to serial |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| 1 (serial) | {args.repeats} | {fmt(rows[1], 'm', ' s', 1)} | {fmt(cpu[1], 'm', ' s', 1)} | 1.00x | - |",
        f"| {args.workers} (local Dask processes) | {args.repeats} | {fmt(rows[args.workers], 'm', ' s', 1)} | "
        f"{fmt(cpu[args.workers], 'm', ' s', 1)} | {fmt(speedup, 'm', 'x', 2)} | "
        f"{'yes' if identical else 'NO'} (table.md and table.json, byte for byte) |",
        f"| the machine's ceiling: a pure-Python loop, {args.workers} processes at once vs one after another | "
        f"{args.repeats} | - | - | {fmt(ceiling_m, 'm', 'x', 2)} | - |", "",
        "Means [95 % intervals] over the repeats; the speed-up is the mean of the per-repeat ratios (serial and "
        "parallel repeats alternate, and each repeat measures the ceiling after them). The set reached "
        f"{fmt(share, 'm', ' %', 0)} of the ceiling measured in the same repeat.", "",
        "Where the time goes, read off each command's progress lines (means [95 % intervals]):", "",
        "| workers | until the first run is under way | the runs | after the runs (table, exit) | workers busy during the runs |",
        "| --- | --- | --- | --- | --- |"] + [
        f"| {w} | " + " | ".join(fmt(dict(zip(("m", "m_ci"), mean_ci([p[k] for p in phases[w]]))), "m", " s", 2)
                                for k in ("start", "runs", "after")) + " | "
        + (fmt(dict(zip(("m", "m_ci"), mean_ci([p["busy"] for p in phases[w]]))), "m", " %", 0) if w > 1 else "-")
        + " |" for w in (1, args.workers)] + [""])
    command = "python bench/sweep_speed.py " + " ".join(sys.argv[1:])
    emit_bench(f"sweep-speed-{Path(args.set).stem}", md, args.publish, command)
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
