"""Writes what ``interleave schedule --json`` and ``interleave simulate --json`` print for every spec
under experiments/ (and experiments/sim/), so that a refactor can show its decisions and simulated
numbers unchanged: run it before and after, then ``diff -r BEFORE AFTER``.

Usage: .venv/bin/python scripts/plan_outputs.py OUT_DIR [--skip-slow]
       .venv/bin/python scripts/plan_outputs.py --compare BEFORE AFTER
The simulator's wall-clock time (``simulator.wall_s``) is the only field removed: it is not an output.
For the 1,000-job spec only ``simulate`` is written (its ``schedule`` ran for over 22 CPU minutes
on this machine without finishing: it scores every running job's links at each of its 1,000 epochs);
``--skip-slow`` leaves that spec out altogether. ``--compare`` lists every value that changed or
disappeared (exit 1 if any) and, separately, the keys that were added (an extended schema).
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLOW = {"poisson1000-fattree1024"}


def cli(*args):
    p = subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=ROOT)
    if p.returncode:
        return {"exit": p.returncode, "stderr": p.stderr.strip().splitlines()[-1:]}
    doc = json.loads(p.stdout)
    doc.get("simulator", {}).pop("wall_s", None)
    return doc


def walk(before, after, path, changed, added):
    if isinstance(before, dict) and isinstance(after, dict):
        for k in before:
            if k not in after:
                changed.append(f"{path}.{k}: removed")
            else:
                walk(before[k], after[k], f"{path}.{k}", changed, added)
        added.extend(f"{path}.{k}" for k in after if k not in before)
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for i, (x, y) in enumerate(zip(before, after)):
            walk(x, y, f"{path}[{i}]", changed, added)
    elif before != after:
        changed.append(f"{path}: {str(before)[:80]} -> {str(after)[:80]}")


def compare(a, b):
    changed, added = [], []
    for f in sorted(Path(a).glob("*.json")):
        g = Path(b) / f.name
        if not g.exists():
            changed.append(f"{f.name}: missing")
            continue
        walk(json.loads(f.read_text()), json.loads(g.read_text()), f.name, changed, added)
    import re
    kinds = sorted({re.sub(r"\.jobs\.[^.]+\.", ".jobs.<job>.", re.sub(r"\[\d+\]", "[]", re.sub(r"^[^.]+\.", "", x)))
                    for x in added})
    print(f"{len(changed)} values changed or removed")
    for c in changed:
        print("  " + c)
    print(f"{len(added)} keys added, of {len(kinds)} kinds:")
    for k in kinds:
        print("  " + k)
    return 1 if changed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--skip-slow", action="store_true")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    a = ap.parse_args()
    if a.compare:
        sys.exit(compare(*a.compare))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for spec in sorted(ROOT.glob("experiments/*.yaml")) + sorted(ROOT.glob("experiments/sim/*.yaml")):
        if a.skip_slow and spec.stem in SLOW:
            continue
        rel = str(spec.relative_to(ROOT))
        for cmd in ("simulate",) if spec.stem in SLOW else ("schedule", "simulate"):
            (out / f"{spec.stem}.{cmd}.json").write_text(json.dumps(cli(cmd, rel, "--json"), indent=1,
                                                                    sort_keys=True) + "\n")
        print(rel, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
