"""Starting, watching and stopping replay agents (agents.agent) on a running Fabric.

Naming: agent files live in ``<workdir>/agents/``: ``<job>.json`` (the job's config) and
``<job>.w<i>.csv`` (iteration rows of worker i), ``<job>.w<i>.csv.flows`` (flows received by
worker i of a program job). Each job gets a DSCP (1, 2, ... in job order, up to
63) so the controller can attribute its packets, and a TCP port (BASE_PORT + job index).
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from harness.errors import InterleaveError
from agents.timing import ALIGNMENTS

BASE_PORT = 17000
COLUMNS = ["job", "worker", "iteration", "slot", "start", "comm_start", "comm_end", "end", "realigned"]
FLOW_COLUMNS = ["job", "step", "flow", "src", "dst", "bytes", "reference", "release", "start", "finish", "target",
                "priority"]
REPO = Path(__file__).resolve().parent.parent


class AgentCrash(InterleaveError):
    pass


def job_config(job, profile, hosts, ips, shift_ms, scale, t0, run_start, index, alignment, *, first_slot=0,
               iteration_base=0, group=None, beat_dir=None, group_perimeter_ms=None, program=None, replan_path=None,
               inject_delay_ms=None):
    """The agent's config (the one builder: the runner, the profiler and the benchmarks start agents
    through ``Replayer.start``). ``alignment``: grid | group | free (agents.timing), or a bool as a
    shorthand (True: grid, False: free); ``first_slot``: the grid slot of its first iteration;
    ``iteration_base``: the number of its first iteration (a resumed segment's); ``group`` and
    ``beat_dir``: the members it aligns with ([{job, shift_ms}]) and where they publish their beats;
    ``group_perimeter_ms``: where the members' relative pattern repeats (agents.timing.perimeter;
    default its own iteration, a group of one period);
    ``program``: a program job's part (harness.planners.flowplan.agent_config); ``replan_path``: the
    file re-planned priorities arrive in; ``inject_delay_ms``: {worker: {iteration: ms}} of compute
    delay injected (tests)."""
    if isinstance(alignment, bool):
        alignment = "grid" if alignment else "free"
    if alignment not in ALIGNMENTS:
        raise ValueError(f"alignment {alignment!r}: one of {', '.join(ALIGNMENTS)}")
    cfg = {"job": job.name, "model": job.model, "iterations": job.iterations, "hosts": hosts, "ips": ips,
           "iteration_ms": profile.iteration_ms, "time_shift_ms": shift_ms,
           "phases": [{"start_ms": p.start_ms, "duration_ms": p.duration_ms, "gbps": p.gbps, "pattern": p.pattern}
                      for p in profile.phases],
           "scale": scale, "t0": t0, "run_start": run_start, "port": BASE_PORT + index,
           "dscp": (index % 63) + 1, "alignment": alignment, "first_slot": first_slot, "iteration_base": iteration_base}
    if group is not None:
        cfg.update(group=group, beat_dir=beat_dir)
        if group_perimeter_ms is not None:
            cfg["group_perimeter_ms"] = group_perimeter_ms
    cfg.update(program or {})
    optional = {"replan_path": replan_path, "inject_delay_ms": inject_delay_ms}
    cfg.update({k: v for k, v in optional.items() if v is not None})
    return cfg


def byte_scale(topo, hosts, reference_gbps, dilation=1.0):
    """Emulated bytes per reference byte: the rate of the job's first host link over the reference
    rate (timing is kept, bytes scale). ``topo`` is the fabric as built, on the wall clock of
    ``time_dilation`` (rates divided by it); the scale is taken on the model clock, so that a dilated
    phase (time x D, demand / D: workloads.profiles.dilate) carries the bytes of the undilated one."""
    wall_mbps = topo.link_between(hosts[0], topo.edge_of(hosts[0])).params.rate_mbps
    return wall_mbps * dilation / (reference_gbps * 1000)


class Replayer:
    """Agents of several jobs on one fabric. ``start`` them, then ``wait`` or ``stop``."""

    def __init__(self, fabric, workdir, log=lambda m: None, dilation=1.0):
        """``dilation``: the run's time_dilation (the fabric's rates are divided by it, the profiles
        given to ``start`` are dilated by it)."""
        self.fab, self.dir, self.log, self.dilation = fabric, Path(workdir) / "agents", log, dilation
        self.dir.mkdir(parents=True, exist_ok=True)
        self.procs = {}  # (job, worker) -> Popen
        self.configs = {}

    def start(self, job, profile, hosts, shift_ms, t0, run_start, index, alignment, *, tag=None, **parts):
        """``tag`` names the agents' files and processes (default the job's name; a resumed
        segment of a preempted job uses ``<job>.s<k>``); ``parts``: job_config's keyword arguments
        (a ``group``'s beats go to this replayer's directory)."""
        tag = tag or job.name
        topo = self.fab.topo
        scale = byte_scale(topo, hosts, profile.reference_gbps, self.dilation)
        if parts.get("group") is not None:
            parts["beat_dir"] = str(self.dir)
        cfg = job_config(job, profile, hosts, [topo.ip(h) for h in hosts], shift_ms, scale, t0, run_start, index,
                         alignment, **parts)
        path = self.dir / f"{tag}.json"
        path.write_text(json.dumps(cfg, indent=1))
        self.configs[tag] = cfg
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
        for w, h in enumerate(hosts):
            out = self.dir / f"{tag}.w{w}.csv"
            out.write_text("")
            node = self.fab.net.get(h)
            self.procs[(tag, w)] = node.popen(
                [sys.executable, "-m", "agents.agent", "--config", str(path), "--worker", str(w), "--out", str(out)],
                env=env, cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def running(self):
        return [k for k, p in self.procs.items() if p.poll() is None]

    def check(self):
        """Raise AgentCrash naming an agent that exited with an error: one killed by a signal first
        (the cause; its peers then fail on the lost connection), and how many others failed."""
        failed = [(k, p) for k, p in self.procs.items() if p.poll() not in (None, 0)]
        if not failed:
            return
        failed.sort(key=lambda kp: kp[1].returncode >= 0)
        (job, w), p = failed[0]
        err = p.stderr.read().decode(errors="replace").strip().splitlines()
        more = f" ({len(failed) - 1} other agent(s) failed too)" if len(failed) > 1 else ""
        raise AgentCrash(f"agent of job {job} worker {w} crashed (exit {p.returncode}): "
                         f"{err[-1] if err else 'no message'}{more}")

    def wait(self, timeout, progress=None):
        deadline = time.monotonic() + timeout
        while self.running():
            self.check()
            if time.monotonic() > deadline:
                raise InterleaveError(f"agents still running after {timeout:.0f} s: {sorted(self.running())[:4]}")
            if progress:
                progress()
            time.sleep(0.2)
        self.check()
        return self.summaries()

    def summaries(self):
        out = {}
        for (job, w), p in self.procs.items():
            if p.poll() is not None and p.stdout:
                lines = p.stdout.read().decode().strip().splitlines()
                if lines:
                    out[(job, w)] = json.loads(lines[-1])
        return out

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(3)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def iterations_done(self):
        """Iterations finished so far by the jobs' leaders (rows of worker 0)."""
        n = 0
        for f in self.dir.glob("*.w0.csv"):
            with open(f, "rb") as fh:
                n += sum(1 for _ in fh)
        return n

    def flows(self):
        """Rows of the flows received by program jobs' workers (agents.stage)."""
        frames = [pd.read_csv(f, names=FLOW_COLUMNS) for f in sorted(self.dir.glob("*.csv.flows")) if f.stat().st_size]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=FLOW_COLUMNS)

    def iterations(self):
        frames = [pd.read_csv(f, names=COLUMNS) for f in sorted(self.dir.glob("*.csv")) if f.stat().st_size]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
