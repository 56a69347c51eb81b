"""A set's runs on Dask: ``interleave reproduce SET --workers N`` runs simulated runs in N local
worker processes; ``--cluster ADDRESS`` sends every run to a Dask scheduler (``interleave
scheduler``), whose workers (``interleave worker ADDRESS``) may be other machines.

One run is one task. An emulated run asks for the worker resource ``fabric=1`` (``FABRIC``): a
worker machine offers it once, so it builds one fabric at a time; simulated runs go anywhere. A task
rebuilds the spec from its validated mapping (seed = spec seed + repeat, exactly as a serial set:
the order runs finish in never reaches a seed), runs it into ``<run>.partial`` and renames it, as
``interleave run`` does. Local workers write straight into the set's directory; cluster workers
write under ``REMOTE_SCRATCH`` on their machine and send the finished directory back, where it lands
atomically (unpacked beside it, then renamed). Runs complete in the set's directory are not sent.

A worker that dies mid-run: its task is submitted again once (``RETRIES``), to whichever worker is
free; the dead attempt's ``<run>.partial`` is renamed ``<run>.interrupted-N`` on the machine it was
on, before the next attempt there starts. A run that fails twice, or raises, is reported and left
out; the other runs go on, and the set's table lists what is missing (harness.sets.missing).
"""
import hashlib
import io
import logging
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import yaml

from harness import spec as spec_mod
from harness.errors import EnvError, UsageError
from harness.progress import hms

FABRIC = "fabric"
RETRIES = 1
REMOTE_SCRATCH = Path("/var/tmp/interleave-runs")
STATUS_EVERY_S = 10.0
CONNECT_TIMEOUT_S = 10
WORKER_WAIT_S = 30
# A worker death fails its task at once (RETRIES is ours, counted per run), and a worker is sent
# only the task it runs (saturation 1.0): one that dies takes no queued run down with it. The
# periodic work a worker does beside a run (event-loop ticks, memory and system monitors, the
# statistical profiler) slowed simulated runs by about 10 % at Dask's defaults; at these intervals
# two idle workers and the scheduler take 1 % of a core instead of 9 % (measured over 10 s).
DASK_CONFIG = {"distributed.scheduler.allowed-failures": 0, "distributed.scheduler.worker-saturation": 1.0,
               "distributed.worker.profile.enabled": False,
               "distributed.admin.tick.interval": "1s", "distributed.admin.system-monitor.interval": "2s",
               "distributed.worker.memory.monitor-interval": "2s"}


def cores():
    return len(os.sched_getaffinity(0))


def tasks(st, out, run_dir, emulated=False, keep_stale=False, log=lambda m: None):
    """The set's runs not complete under ``out``, in the serial order: [{rel, label, raw, where,
    background, seed}]; each spec validated here, before anything is sent. A complete run whose spec
    or code changed is set aside and listed again (harness.sets.reuse) unless ``keep_stale``."""
    from harness.sets import reuse, run_spec
    todo = []
    for r in st["runs"]:
        for k in range(r["repeats"]):
            for s in r["schedulers"]:
                d = run_dir(out, r["name"], s, k)
                spec = run_spec(r, s, k)
                keep, note = reuse(d, spec, "emulated" if emulated else "simulated", keep_stale)
                if note:
                    log(note)
                if keep:
                    continue
                todo.append({"rel": str(d.relative_to(out)), "label": f"{r['name']} with {s}, repeat {k}",
                             "group": r["name"], "scheduler": s,
                             "raw": spec.raw, "where": str(r["spec_path"]), "background": r.get("background"),
                             "seed": r["seed"] + k})
    return todo


def set_aside(d):
    """An earlier attempt's ``<run>.partial`` renamed ``<run>.interrupted-N`` (lowest free N)."""
    partial = d.with_name(d.name + ".partial")
    if not partial.exists():
        return None
    n = 1
    while d.with_name(f"{d.name}.interrupted-{n}").exists():
        n += 1
    kept = d.with_name(f"{d.name}.interrupted-{n}")
    partial.rename(kept)
    return kept


def run_task(task, run, scratch):
    """On a worker: run one task with ``run(spec, d)`` (harness.sets.simulated_run or
    ``emulated_run``) under ``scratch`` (the set's directory, local workers) or under
    ``REMOTE_SCRATCH`` (cluster workers: the finished directory comes back packed)."""
    from distributed import get_worker
    worker = get_worker()
    base = Path(scratch) if scratch else Path(task["remote_scratch"]) / task["client"]
    d = base / task["rel"]
    result = {"worker": worker.address, "host": socket.gethostname(), "wall_s": 0.0, "set_aside": None}
    if scratch and (d / "summary.json").exists():
        return result   # Dask runs a task again when the worker holding its result died before sending it
    d.parent.mkdir(parents=True, exist_ok=True)
    kept = set_aside(d)
    if not scratch and d.exists():
        shutil.rmtree(d)                      # a copy sent back by an earlier set
    spec = spec_mod.from_mapping(task["raw"], task["where"])
    if task["background"] is not None:
        spec.background = float(task["background"])
    t0 = time.monotonic()
    run(spec, d, quiet=True, log=lambda m: None)
    result.update(wall_s=round(time.monotonic() - t0, 3), set_aside=str(kept) if kept else None)
    if not scratch:
        result["tar"] = pack(d)
        shutil.rmtree(d)
    return result


def emulated_run(spec, d, quiet=True, log=None):
    """``run`` for emulated tasks: ``interleave run`` in a process of its own (the emulator takes
    signals on its main thread; the child is told to stop when the worker dies)."""
    d = Path(d)
    spec_file = d.with_name(d.name + ".spec.yaml")
    spec_file.write_text(yaml.safe_dump(spec.raw, sort_keys=False))
    try:
        p = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(spec_file), "--out", str(d), "--quiet"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           preexec_fn=_stop_with_parent)
    finally:
        spec_file.unlink(missing_ok=True)
    if p.returncode != 0:
        tail = " | ".join(p.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"interleave run exited {p.returncode} on {socket.gethostname()}: {tail}")


def _stop_with_parent():
    """In the child before exec: SIGTERM (the run tears its fabric down) when the worker dies."""
    import ctypes
    import signal
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


def pack(d):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(d, arcname=".")
    return buf.getvalue()


def land(d, blob):
    """A directory sent back by a cluster worker, unpacked beside ``d`` and renamed into place."""
    tmp = d.with_name(d.name + ".receiving")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        members = tar.getmembers()
        for m in members:              # what pack() writes: files and directories inside "."
            parts = Path(m.name).parts
            if not (m.isfile() or m.isdir()) or Path(m.name).is_absolute() or ".." in parts:
                raise RuntimeError(f"a worker sent {m.name!r} for {d}: not a file inside a results directory")
        tar.extractall(tmp, members=members)
    os.rename(tmp, d)


@contextmanager
def client(workers=None, cluster=None, emulated=False):
    """A Dask client: of ``cluster`` (a scheduler address), or of a LocalCluster of ``workers``
    single-threaded processes (a worker death counts against a task at once: RETRIES is ours)."""
    import dask
    from distributed import Client, LocalCluster
    _quiet_logs(logging.ERROR)
    if cluster:
        try:
            c = Client(cluster, timeout=CONNECT_TIMEOUT_S)
        except ValueError as exc:
            raise UsageError(f"--cluster {cluster}: not a scheduler address, e.g. tcp://10.0.0.1:8786 ({exc})")
        except (OSError, TimeoutError) as exc:
            raise EnvError(f"--cluster {cluster}: no Dask scheduler answers ({exc})",
                           "start one with `interleave scheduler` and workers with `interleave worker ADDRESS`")
        try:
            _require_workers(c, cluster, emulated)
            yield c
        finally:
            c.close()
        return
    scratch = tempfile.mkdtemp(prefix="interleave-dask-")      # Dask's own files; removed after
    try:
        with dask.config.set({**DASK_CONFIG, "temporary-directory": scratch}):
            lc = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                              # a task's failure is reported by execute (one line); Dask's own
                              # "Compute Failed" block with its traceback would repeat it
                              silence_logs=logging.CRITICAL, resources={FABRIC: 1} if emulated else None,
                              local_directory=scratch)
        c = Client(lc)
        try:
            yield c
        finally:
            c.close()
            lc.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _quiet_logs(level=logging.WARNING):
    """Dask's own log lines at ``level`` and above only (our lines say what happens)."""
    for name in ("distributed", "tornado"):
        logging.getLogger(name).setLevel(level)


def _require_workers(c, cluster, emulated):
    try:
        c.wait_for_workers(1, timeout=WORKER_WAIT_S)
    except TimeoutError:
        raise EnvError(f"--cluster {cluster}: no worker joined the scheduler in {WORKER_WAIT_S} s",
                       f"start one: sudo interleave worker {cluster}")
    if emulated and not any(w.get("resources", {}).get(FABRIC) for w in c.scheduler_info()["workers"].values()):
        raise EnvError(f"--cluster {cluster}: no worker offers {FABRIC}=1, which emulated runs need",
                       f"start one on an emulation machine: sudo interleave worker {cluster}")


def slots(c, emulated):
    """How many runs the cluster can run at once: its worker threads, or for emulated runs its
    workers offering FABRIC."""
    ws = c.scheduler_info()["workers"].values()
    if emulated:
        return sum(int(w.get("resources", {}).get(FABRIC, 0)) for w in ws)
    return sum(w.get("nthreads", 1) for w in ws)


class Queue:
    """The runs not yet sent, longest expected first: a run's expected time is the mean of the
    finished runs of its spec and scheduler, else of its scheduler, else unknown (sent first, in
    the set's order), so the long runs do not come last and leave the other workers idle."""

    def __init__(self, todo):
        self.todo = list(todo)
        self.walls = {}

    def expected(self, t):
        for key in ((t["group"], t["scheduler"]), t["scheduler"]):
            w = self.walls.get(key)
            if w:
                return sum(w) / len(w)
        return float("inf")

    def pop(self):
        i = max(range(len(self.todo)), key=lambda j: (self.expected(self.todo[j]), -j))
        return self.todo.pop(i)

    def record(self, t, wall_s):
        for key in ((t["group"], t["scheduler"]), t["scheduler"]):
            self.walls.setdefault(key, []).append(wall_s)

    def __len__(self):
        return len(self.todo)


def execute(st, out, run_dir, run, log, workers=None, cluster=None, emulated=False, remote_scratch=REMOTE_SCRATCH,
            keep_stale=False, quiet=False):
    """Run the set's incomplete runs on Dask; returns [(label, reason)] of the runs that did not
    complete (the table lists them too). ``quiet``: no line per finished run nor status lines."""
    say = (lambda m: None) if quiet else log
    from distributed import KilledWorker, wait
    from distributed.client import FIRST_COMPLETED
    out = Path(out).resolve()
    todo = tasks(st, out, run_dir, emulated, keep_stale, log)
    if not todo:
        log(f"set {st['name']}: every run done earlier, kept")
        return []
    mark = f"{socket.gethostname()}-{hashlib.sha1(f'{socket.gethostname()}:{out}'.encode()).hexdigest()[:10]}"
    scratch = None if cluster else str(out)
    resources = {FABRIC: 1} if emulated else None
    queue, failed, done, t0 = Queue(todo), [], 0, time.monotonic()
    running = {}                              # future -> (task, attempt)
    with client(workers, cluster, emulated) as c:
        log(f"set {st['name']}: {len(todo)} run(s) on {cluster or f'{workers} local worker processes'}")

        def submit(task, attempt):
            f = c.submit(run_task, {**task, "client": mark, "remote_scratch": str(remote_scratch)}, run, scratch, resources=resources, pure=False,
                         key=f"interleave-{task['rel'].replace('/', '-')}-{attempt}-{uuid.uuid4().hex[:8]}")
            running[f] = (task, attempt)

        last_status, last_print = None, 0.0
        try:
            while queue or running:
                while queue and len(running) < max(1, slots(c, emulated)):
                    submit(queue.pop(), 0)
                try:
                    finished, _ = wait(list(running), timeout=1.0, return_when=FIRST_COMPLETED)
                except TimeoutError:
                    finished = ()
                for f in finished:
                    task, attempt = running.pop(f)
                    d = out / task["rel"]
                    if f.status == "finished":
                        res = f.result()
                        if "tar" in res:
                            land(d, res["tar"])
                        done += 1
                        queue.record(task, res["wall_s"])
                        aside = f"; an earlier attempt's partial directory kept as {res['set_aside']}" \
                            if res["set_aside"] else ""
                        say(f"[{done}/{len(todo)}] {task['label']} (seed {task['seed']}) -> {d}: "
                            f"{res['wall_s']:.1f} s on {res['host']} {res['worker']}{aside}"
                            f"{time_left(time.monotonic() - t0, done, len(todo))}")
                        continue
                    exc = f.exception()
                    if isinstance(exc, UsageError):         # bad input (a plug-in's place raised): as serially
                        raise exc
                    if isinstance(exc, KilledWorker) and attempt < RETRIES:
                        log(f"{task['label']}: its worker died mid-run; submitted again ({attempt + 1} of {RETRIES})")
                        submit(task, attempt + 1)
                        continue
                    why = "its worker died again" if isinstance(exc, KilledWorker) else f"{type(exc).__name__}: {exc}"
                    failed.append((task["label"], why))
                    log(f"{task['label']}: did not complete ({why}); left out, listed in the table")
                status = _status(c, running, queue, done, len(todo))
                now = time.monotonic()
                if (queue or running) and (status != last_status or now - last_print >= STATUS_EVERY_S):
                    say(f"  {status}; {hms(now - t0)} elapsed{time_left(now - t0, done, len(todo))}")
                    last_status, last_print = status, now
        finally:
            if running:
                c.cancel(list(running))
    log(f"set {st['name']}: {done} run(s) in {hms(time.monotonic() - t0)}"
        + (f", {len(failed)} did not complete" if failed else ""))
    return failed


def time_left(elapsed_s, done, total):
    """", about T left" at the set's pace so far (runs finished per second, over every worker), or ""
    before the first run finishes."""
    if not done or done >= total:
        return ""
    return f", about {hms(elapsed_s / done * (total - done))} left"


def _status(c, running, queue, done, total):
    """"5/16 done, 2 running, 9 queued; <worker>: <run> | ..." (where each sent run is, as the
    scheduler sees it)."""
    try:
        where = {k: w for w, ks in c.processing().items() for k in ks}
    except Exception:          # the scheduler is busy or gone: the next round tells
        where = {}
    per = {}
    for f, (task, _a) in running.items():
        per.setdefault(where.get(f.key, "(being sent)").split("://")[-1], []).append(task["label"])
    text = " | ".join(f"{w}: {', '.join(v)}" for w, v in sorted(per.items()))
    return f"{done}/{total} done, {len(running)} running, {len(queue)} queued" + (f"; {text}" if text else "")


def check_options(workers, cluster, simulate):
    """``--workers`` / ``--cluster`` against the kind of set: (workers to use, whether Dask is used)."""
    if workers is not None and workers < 1:
        raise UsageError(f"--workers: {workers} is not a whole number >= 1")
    if cluster and workers is not None:
        raise UsageError("--workers and --cluster: give one (a cluster's workers are its own)")
    if cluster:
        return None, True
    if not simulate and workers not in (None, 1):
        raise UsageError(f"--workers {workers}: emulated runs build one fabric per machine at a time; "
                         "run them on several machines with --cluster ADDRESS")
    n = workers if workers is not None else (cores() if simulate else 1)
    return n, n > 1


def serve_scheduler(host, port, log):
    """``interleave scheduler``: a Dask scheduler on which a worker death fails a task at once
    (the submitting ``reproduce`` retries it RETRIES time(s))."""
    import asyncio

    import dask
    from distributed import Scheduler

    _quiet_logs()

    async def main():
        with dask.config.set(DASK_CONFIG):
            async with Scheduler(host=host, port=port, dashboard_address=None) as s:
                log(f"scheduler: listening at {s.address}; workers join with `sudo interleave worker {s.address}`")
                await s.finished()
    asyncio.run(main())


def serve_worker(address, nworkers, fabric, log):
    """``interleave worker ADDRESS``: ``nworkers`` single-threaded worker processes; the first offers
    ``fabric=1`` when ``fabric`` (emulated runs), the others take simulated runs only."""
    import asyncio

    import dask
    from distributed import Nanny

    _quiet_logs()

    scratch = tempfile.mkdtemp(prefix="interleave-dask-")      # Dask's own files; removed at exit
    dask.config.set({"temporary-directory": scratch})

    async def main():
        nannies = [Nanny(address, nthreads=1, resources={FABRIC: 1} if fabric and i == 0 else None,
                         local_directory=scratch, name=f"{socket.gethostname()}-{i}",
                         silence_logs=logging.WARNING)
                   for i in range(nworkers)]
        await asyncio.gather(*nannies)
        log(f"worker: {nworkers} process(es) joined {address}" + (f", the first offers {FABRIC}=1" if fabric else ""))
        await asyncio.gather(*(n.finished() for n in nannies))
    try:
        asyncio.run(main())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
