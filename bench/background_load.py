"""A second process that keeps one core busy part of the time, to measure the test tiers and the
emulator on a busy machine (a user's desktop, a CI neighbour):

    .venv/bin/python bench/background_load.py [--duty 0.5] [--period-ms 100] [--nice 10] [--seconds N]

Every period it computes (the simulator's own work: max-min rates of a random flow matrix) for
``duty`` of the period and sleeps the rest, at the given niceness, until ``--seconds`` have passed
or it is interrupted (SIGINT or SIGTERM end it cleanly). On exit it prints the share of the wall time
it spent computing.
"""
import argparse
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.sim.fluid import maxmin_matrix  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duty", type=float, default=0.5, help="share of each period spent computing (0-1)")
    ap.add_argument("--period-ms", type=float, default=100.0)
    ap.add_argument("--nice", type=int, default=10, help="niceness added to this process")
    ap.add_argument("--seconds", type=float, default=None, help="stop after this long (default: until killed)")
    a = ap.parse_args(argv)
    if not 0 < a.duty <= 1 or a.period_ms <= 0:
        ap.error("--duty must be in (0, 1] and --period-ms positive")
    os.nice(a.nice)
    stop = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.append(1))
    rng = np.random.default_rng(1)
    m = (rng.random((60, 40)) < 0.1).astype(float)
    cap = np.full(40, 1e9)
    busy_s, t0 = 0.0, time.monotonic()
    period, work = a.period_ms / 1000, a.duty * a.period_ms / 1000
    while not stop and (a.seconds is None or time.monotonic() - t0 < a.seconds):
        start = time.monotonic()
        while time.monotonic() - start < work:
            maxmin_matrix(m, np.full(60, np.inf), cap)
        busy_s += time.monotonic() - start
        time.sleep(max(0.0, period - (time.monotonic() - start)))
    wall = time.monotonic() - t0
    print(f"background_load: busy {busy_s / max(wall, 1e-9):.1%} of {wall:.0f} s (duty {a.duty:g}, nice {a.nice})")


if __name__ == "__main__":
    main()
