#!/usr/bin/env python3
"""Priority queues at the switches (link.sharing priority) against FIFO queues: the scenario of
tests/emulation/test_priority.py (two 1 MB flows released together over the dumbbell's middle link,
one most urgent, one least), on a fresh fabric per repeat and sharing. Prints each flow's time
(min-max over steps 1-5 and repeats) and the ECN marks per priority level at the bottleneck.

  sudo .venv/bin/python bench/priority_queues.py [--repeats 3] [--publish FILE]
--publish writes the table into FILE's block <!-- interleave bench priority-queues -->.
"""
import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.linkmodel import LinkParams  # noqa: E402
from harness.sets import emit_bench  # noqa: E402
from tests.emulation.conftest import running_fabric  # noqa: E402
from tests.emulation.test_priority import marks_between, run  # noqa: E402
from topologies import dumbbell  # noqa: E402
from agents.wire import PRIORITY_LEVELS  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--publish", metavar="FILE", help="replace the block <!-- interleave bench priority-queues --> in FILE")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root: sudo .venv/bin/python bench/priority_queues.py")
    lines = ["# priority queues", "",
             f"Two 1 MB flows released together over the dumbbell's middle link, one most urgent, one least; "
             f"{args.repeats} fresh fabrics per sharing, 5 steps each (flow times: min-max over steps 1-5 and the "
             f"fabrics).", "",
             "| sharing | urgent flow | least urgent flow | ECN marks per level (0 .. 3) at the bottleneck, per fabric |",
             "| --- | --- | --- | --- |"]
    for sharing in ("priority", "fifo"):
        hi, lo, per = [], [], []
        for _ in range(args.repeats):
            with running_fabric(dumbbell(2, LinkParams.from_spec({"sharing": sharing}))) as fab, \
                    tempfile.TemporaryDirectory() as tmp:
                c0 = fab.marker_counters()
                dur = run(fab, Path(tmp))
                _marks, levels = marks_between(c0, fab.marker_counters())
            hi += (dur["hi"] * 1000).tolist()
            lo += (dur["lo"] * 1000).tolist()
            per.append([sum(v[k] for v in levels.values()) for k in range(PRIORITY_LEVELS)])
        lines.append(f"| {sharing} | {min(hi):.0f}-{max(hi):.0f} ms | {min(lo):.0f}-{max(lo):.0f} ms | "
                     f"{'; '.join(' / '.join(map(str, p)) for p in per)} |")
    emit_bench("priority-queues", "\n".join(lines) + "\n", args.publish,
               "sudo .venv/bin/python bench/priority_queues.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
