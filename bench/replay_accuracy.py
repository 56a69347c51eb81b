#!/usr/bin/env python3
"""Replay accuracy: each built-in model alone on the 24-host fat-tree, measured iteration time
against its profile. One fabric, the models one after another; workers = the profile's worker
count, placed by themis (packed). Prints a Markdown table; --publish writes it into FILE's block
<!-- interleave bench replay-accuracy -->.

  sudo .venv/bin/python bench/replay_accuracy.py [--seconds 6] [--min-iterations 8] [--publish FILE]
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.fabric import Fabric  # noqa: E402
from harness.lifecycle import RunLock  # noqa: E402
from harness.replay import Replayer  # noqa: E402
from harness.schedulers.placement import Themis, candidates  # noqa: E402
from harness.sets import emit_bench  # noqa: E402
from harness.spec import Job  # noqa: E402
from topologies import fattree  # noqa: E402
from workloads.profiles import BUILTIN_NAMES, builtins  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--min-iterations", type=int, default=8)
    ap.add_argument("--models", default=",".join(BUILTIN_NAMES))
    ap.add_argument("--publish", metavar="FILE", help="replace the block <!-- interleave bench replay-accuracy --> in FILE")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root: sudo .venv/bin/python bench/replay_accuracy.py")
    topo = fattree()
    profiles = builtins()
    lines = ["# replay accuracy", "",
             f"Each model alone on the 24-host fat-tree, workers = the profile's count placed by themis, about "
             f"{args.seconds:g} s (at least {args.min_iterations} iterations) per model; worker 0's iterations after "
             "the first.", "",
             "| model | workers | profile iteration | measured mean (p50) | error | Up phases measured / profile |",
             "| --- | --- | --- | --- | --- | --- |"]
    with RunLock() as lock, tempfile.TemporaryDirectory() as tmp:
        with Fabric(topo, lock.ledger, lock.dir) as fab:
            for i, name in enumerate(args.models.split(",")):
                prof = profiles[name]
                n_it = max(args.min_iterations, int(args.seconds * 1000 / prof.iteration_ms)) + 1
                job = Job(name, name, prof.workers or 2, n_it)
                hosts = candidates(Themis(), [job], topo, profiles, topo.hosts, n=1)[0][name]
                rp = Replayer(fab, Path(tmp) / name)
                t = time.clock_gettime(time.CLOCK_MONOTONIC)
                rp.start(job, prof, hosts, 0.0, t + 1.5, t, i, True)
                rp.wait(n_it * prof.iteration_ms / 1000 * 3 + 30)
                df = rp.iterations()
                d = df[(df.worker == 0) & (df.iteration > 0)]
                it = (d.end - d.start) * 1000
                comm = (d.comm_end - d.comm_start) * 1000
                prof_comm = prof.phases[-1].end_ms - prof.phases[0].start_ms
                err = it.mean() / prof.iteration_ms - 1
                lines.append(f"| {name} | {len(hosts)} | {prof.iteration_ms:.0f} ms | {it.mean():.1f} ms "
                             f"({it.median():.1f}) | {err:+.1%} | {comm.mean():.1f} / {prof_comm:.0f} ms |")
                print(f"{name}: {it.mean():.1f} ms ({err:+.1%})", file=sys.stderr, flush=True)
    emit_bench("replay-accuracy", "\n".join(lines) + "\n", args.publish,
               "sudo .venv/bin/python bench/replay_accuracy.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
