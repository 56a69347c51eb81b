#!/usr/bin/env python3
"""netcheck soak: N consecutive ``interleave netcheck`` runs per topology while the unit tests run
alongside in a loop (a user's machine is never idle), counting passes and naming every failed check.

Each netcheck is the CLI as a user runs it (``--json``); the load is ``pytest -q -m "not root"``
restarted whenever it ends, in its own process group, stopped at the end. Prints a Markdown table;
``--publish FILE`` writes it into FILE's block ``<!-- interleave bench netcheck-soak -->`` ...
``<!-- end interleave bench netcheck-soak -->``.

Run as root: sudo .venv/bin/python bench/netcheck_soak.py [--runs 20] [--no-load]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.sets import emit_bench  # noqa: E402

TOPOLOGIES = ("dumbbell", "fattree", "leafspine")
NETCHECK_TIMEOUT_S = 300


class UnitLoad:
    """The unit tests in a loop, until ``stop``."""

    def __init__(self):
        self.stopped, self.proc, self.rounds = threading.Event(), None, 0
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        env = dict(os.environ, PYTHONWARNINGS="ignore")
        while not self.stopped.is_set():
            self.proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-m", "not root", "-p",
                                          "no:cacheprovider"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, start_new_session=True)
            self.proc.wait()
            self.rounds += 1

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopped.set()
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        self.thread.join(60)


def netcheck(topology):
    t = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "harness.cli", "netcheck", "--topology", topology, "--json"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONWARNINGS="ignore"))
    try:
        out, err = p.communicate(timeout=NETCHECK_TIMEOUT_S)
    except BaseException:               # Ctrl-C or a hang: let netcheck tear its fabric down first
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=60)
        raise
    try:
        doc = json.loads(out)
    except ValueError:
        return {"ok": False, "failed": [f"exit {p.returncode}: {err.strip()[-200:]}"], "s": time.monotonic() - t}
    failed = [f"{c['name']}: {c['detail']}" for c in doc["checks"] if not c["ok"]]
    idle = next(c for c in doc["checks"] if c["name"] == "ecn_idle")
    return {"ok": p.returncode == 0 and not failed, "failed": failed, "s": time.monotonic() - t,
            "kept_up": idle.get("emulator_kept_up", True)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--topologies", default=",".join(TOPOLOGIES))
    ap.add_argument("--no-load", action="store_true", help="without the unit tests alongside")
    ap.add_argument("--publish", metavar="FILE")
    args = ap.parse_args()
    load = None if args.no_load else UnitLoad().start()
    rows = []
    try:
        for topo in args.topologies.split(","):
            res = []
            for i in range(args.runs):
                r = netcheck(topo)
                res.append(r)
                print(f"{topo} {i + 1}/{args.runs}: {'pass' if r['ok'] else 'FAIL ' + '; '.join(r['failed'])} "
                      f"({r['s']:.0f} s)", file=sys.stderr, flush=True)
            rows.append({"topology": topo, "runs": len(res), "passed": sum(r["ok"] for r in res),
                         "not_kept_up": sum(1 for r in res if not r.get("kept_up", True)),
                         "seconds": [round(r["s"], 1) for r in res], "failed": [f for r in res for f in r["failed"]]})
    finally:
        if load:
            load.stop()
    lines = [f"{'With' if load else 'Without'} the unit tests running alongside"
             + (f" ({load.rounds} complete rounds of `pytest -m \"not root\"` during the soak)." if load else "."),
             "", "| topology | netchecks passed | ecn_idle: emulator could not keep up | seconds per netcheck | failed checks |",
             "| --- | --- | --- | --- | --- |"]
    for r in rows:
        secs = f"{min(r['seconds']):.0f}-{max(r['seconds']):.0f}"
        lines.append(f"| {r['topology']} | {r['passed']} / {r['runs']} | {r['not_kept_up']} | {secs} | "
                     f"{'; '.join(r['failed'][:3]) or 'none'} |")
    emit_bench("netcheck-soak", "# netcheck soak\n\n" + "\n".join(lines) + "\n", args.publish,
               "sudo .venv/bin/python bench/netcheck_soak.py " + " ".join(sys.argv[1:]))
    return 0 if all(r["passed"] == r["runs"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
