#!/usr/bin/env python3
"""How long the Makefile's targets take on a fresh clone of this checkout's HEAD, and whether they pass.

  sudo .venv/bin/python bench/target_times.py [--targets setup,unit,docs,demo,test,vm-test] [--publish FILE]

Clones HEAD into a temporary directory (removed after), then times ``bash scripts/setup.sh`` (target
``setup``: the virtual environment and the OVS daemons) and each ``make TARGET`` in turn, as a user
runs them (each later target's own setup step finds the environment made). Run it alone: the
emulation targets are sensitive to CPU load. Prints a Markdown table (wall time, exit status, the
target's closing line); --publish writes it into FILE's block <!-- interleave bench target-times -->.
Exit status: 0 when every target passed, else 1.
"""
import argparse
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.sets import emit_bench  # noqa: E402

TARGETS = ("setup", "unit", "docs", "demo", "test", "test-experiments", "vm-test")
DEFAULT = ("setup", "unit", "docs", "demo", "test", "vm-test")


def closing_line(out):
    """The last line that says how a tier ended (pytest's summary, or the command's last line)."""
    lines = [x.strip("= ").strip() for x in out.strip().splitlines() if x.strip()]
    tiers = [x for x in lines if " passed" in x or " failed" in x]
    return " / ".join(tiers[-2:]) if tiers else (lines[-1] if lines else "")


def cpu_model():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default=",".join(DEFAULT), help=f"comma-separated, in order (of {', '.join(TARGETS)})")
    ap.add_argument("--publish", metavar="FILE", help="replace the block <!-- interleave bench target-times --> in FILE")
    a = ap.parse_args()
    targets = [t for t in a.targets.split(",") if t]
    bad = [t for t in targets if t not in TARGETS]
    if bad:
        print(f"target_times: --targets: {', '.join(bad)} not among {', '.join(TARGETS)}", file=sys.stderr)
        return 2
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    rows, failed = [], 0
    with tempfile.TemporaryDirectory(prefix="target-times.") as tmp:
        clone = Path(tmp) / "interleave"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        for t in targets:
            cmd = ["bash", "scripts/setup.sh"] if t == "setup" else ["make", t]
            t0 = time.monotonic()
            p = subprocess.run(cmd, cwd=clone, capture_output=True, text=True)
            wall = time.monotonic() - t0
            failed += p.returncode != 0
            rows.append(f"| `{' '.join(cmd)}` | {wall // 60:.0f} min {wall % 60:.0f} s | {p.returncode} | "
                        f"{closing_line(p.stdout + p.stderr).replace('|', '/')} |")
            print(f"{' '.join(cmd)}: {wall:.1f} s, exit {p.returncode}", file=sys.stderr)
    md = "\n".join(["# target times", "",
                    f"A fresh clone of {rev}, each command in turn, nothing else running; {cpu_model()}, "
                    f"{subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores.", "",
                    "| command | wall time | exit status | how it ended |", "| --- | --- | --- | --- |", *rows]) + "\n"
    emit_bench("target-times", md, a.publish, ".venv/bin/python bench/target_times.py " + " ".join(sys.argv[1:]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
