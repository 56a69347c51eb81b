#!/usr/bin/env python3
"""Profiler accuracy: `interleave profile` on a replayed two-phase toy profile, repeated, each
measured phase against the profile it replayed. Runs the fidelity guard flagged are counted and
left out of the statistics (the sets' exclusion rule). Prints a Markdown table (--publish: into
FILE's block <!-- interleave bench profile-accuracy -->); the profiler's emulation test takes its
tolerances from what this measures.

  sudo .venv/bin/python bench/profile_accuracy.py [--repeats 16] [--seconds 6] [--publish FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import spec as spec_mod  # noqa: E402
from harness.sets import emit_bench, mean_ci  # noqa: E402

SPEC = ROOT / "experiments" / "profile-toy.yaml"


def profile_once(tmp, i, seconds):
    out = Path(tmp) / f"measured-{i}.yaml"
    p = subprocess.run([str(ROOT / ".venv" / "bin" / "interleave"), "profile", str(SPEC), "--job", "a",
                        "--out", str(out), "--seconds", str(seconds), "--json"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"run {i}: interleave profile exited {p.returncode}: {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--publish", metavar="FILE", help="replace the block <!-- interleave bench profile-accuracy --> in FILE")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root: sudo .venv/bin/python bench/profile_accuracy.py")
    want = spec_mod.load(str(SPEC)).profiles["toy"]
    kept, flagged = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            doc = profile_once(tmp, i, args.seconds)
            ok = doc["fidelity"]["ok"]
            flagged += not ok
            got = doc["profile"]
            errs = [got["iteration_ms"] / doc["replay_iteration_ms"] - 1]
            for ph, ref in zip(got["phases"], want.phases):
                errs += [ph["duration_ms"] / ref.duration_ms - 1, ph["gbps"] / ref.gbps - 1]
            if len(got["phases"]) != len(want.phases):
                errs = None
            print(f"run {i + 1}/{args.repeats}: {'ok' if ok else 'flagged'}, "
                  + (" ".join(f"{e:+.3f}" for e in errs) if errs else f"{len(got['phases'])} phases"),
                  file=sys.stderr, flush=True)
            if ok:
                kept.append(errs)
    n_ok = len(kept)
    wrong_count = sum(e is None for e in kept)
    e = np.array([x for x in kept if x is not None])
    cols = ["iteration vs the agents' clocks"] + [f"phase {k + 1} {what} ({ref})" for k, p in enumerate(want.phases)
                                                  for what, ref in (("duration", f"{p.duration_ms:g} ms"),
                                                                    ("rate", f"{p.gbps:g} Gbit/s"))]
    lines = ["# profile accuracy", "",
             f"{args.repeats} runs of `interleave profile {SPEC.relative_to(ROOT)} --seconds {args.seconds:g}`; "
             f"{flagged} flagged by the fidelity guard and left out; {wrong_count} of the {n_ok} kept found another "
             "number of phases.", "",
             "| measured / replayed | mean error [95 % CI] | range | sd |", "| --- | --- | --- | --- |"]
    for c, name in enumerate(cols):
        if not len(e):
            break
        m, ci = mean_ci(e[:, c], floor=None)            # errors are signed
        ci_s = f"[{ci[0]:+.1%}, {ci[1]:+.1%}]" if ci else "n/a"
        lines.append(f"| {name} | {m:+.1%} {ci_s} | {e[:, c].min():+.1%} to {e[:, c].max():+.1%} | "
                     f"{e[:, c].std(ddof=1):.1%} |")
    emit_bench("profile-accuracy", "\n".join(lines) + "\n", args.publish,
               "sudo .venv/bin/python bench/profile_accuracy.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
