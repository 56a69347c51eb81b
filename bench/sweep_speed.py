#!/usr/bin/env python3
"""Sweep speed: a simulated set run serially (``--workers 1``) and on local Dask workers
(``--workers N``), each from an empty directory, as a user runs it (the CLI, wall time of the whole
command: cluster start, every run, the table). Checks that every table.md and table.json is
byte-identical to the first serial one.

    .venv/bin/python bench/sweep_speed.py [--set experiments/sets/netsens-sim.yaml] [--workers 2]
        [--repeats 3] [--publish README.md]

Prints a Markdown table (mean wall and CPU time with their 95 % intervals over the repeats, the
speed-up as the mean of the per-repeat ratios); ``--publish FILE`` writes it into FILE's block
``<!-- interleave bench sweep-speed-SET -->`` ... ``<!-- end interleave bench sweep-speed-SET -->``
(SET: the set file's stem).
Serial and parallel repeats alternate, so a slow spell of the machine hits both. Run it alone.
"""
import argparse
import os
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
    """(wall s, CPU s of the command and its processes, table.md, table.json)"""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "harness.cli", "reproduce", set_file, "--simulate", "--quiet",
                        "--workers", str(workers), "--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    if p.returncode != 0:
        sys.exit(f"sweep_speed: reproduce --workers {workers} exited {p.returncode}: {p.stderr.strip()[-300:]}")
    wall = time.monotonic() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    return wall, cpu, (out / "table.md").read_bytes(), (out / "table.json").read_bytes()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="experiments/sets/netsens-sim.yaml")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--publish", metavar="FILE")
    args = ap.parse_args()
    walls, cpus = {1: [], args.workers: []}, {1: [], args.workers: []}
    reference, identical = None, True
    tmp = Path(tempfile.mkdtemp(prefix="interleave-sweep-speed-"))
    try:
        for r in range(args.repeats):
            for w in (1, args.workers):
                out = tmp / f"w{w}-r{r}"
                s, cpu, md, js = one(args.set, w, out)
                shutil.rmtree(out)
                walls[w].append(s)
                cpus[w].append(cpu)
                reference = reference or (md, js)
                identical = identical and (md, js) == reference
                print(f"repeat {r}, --workers {w}: {s:.1f} s", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = {w: dict(zip(("m", "m_ci"), mean_ci(v))) for w, v in walls.items()}
    cpu = {w: dict(zip(("m", "m_ci"), mean_ci(v))) for w, v in cpus.items()}
    speedup = dict(zip(("m", "m_ci"), mean_ci([a / b for a, b in zip(walls[1], walls[args.workers])])))
    md = "\n".join([
        f"# sweep-speed-{Path(args.set).stem}: `interleave reproduce {args.set} --simulate`, {os.cpu_count()} cores", "",
        "| workers | repeats | wall time | CPU time (all processes) | speed-up over serial | tables identical to serial |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| 1 (serial) | {args.repeats} | {fmt(rows[1], 'm', ' s', 1)} | {fmt(cpu[1], 'm', ' s', 1)} | 1.00x | - |",
        f"| {args.workers} (local Dask processes) | {args.repeats} | {fmt(rows[args.workers], 'm', ' s', 1)} | "
        f"{fmt(cpu[args.workers], 'm', ' s', 1)} | {fmt(speedup, 'm', 'x', 2)} | "
        f"{'yes' if identical else 'NO'} (table.md and table.json, byte for byte) |", "",
        "Means [95 % intervals] over the repeats; the speed-up is the mean of the per-repeat ratios (serial and "
        "parallel repeats alternate).", ""])
    command = "python bench/sweep_speed.py " + " ".join(sys.argv[1:])
    emit_bench(f"sweep-speed-{Path(args.set).stem}", md, args.publish, command)
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
