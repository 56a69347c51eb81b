"""The ``interleave`` command line (console script of the package).

Exit statuses: 0 success; 1 a check failed; 2 bad input (argument or spec); 3 environment
problem (not root, OVS down, another run active), with the fix in the message; 70 an internal
error (one line, and the path of the saved traceback).
Progress goes to stderr; ``--json`` prints one JSON document on stdout.
"""
import argparse
import json
import os
import signal
import sys

from harness import __version__
from harness.errors import EXIT_ENV, EXIT_FAILED, EXIT_INTERNAL, EXIT_USAGE, BadValue, EnvError, InterleaveError, UsageError
from harness.limits import short
from harness.progress import Progress


class Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(EXIT_USAGE)


BUILDS_NETWORKS = {"run", "netcheck", "profile", "reproduce", "worker", "clean"}   # the others touch no network
LONG_S = 5.0        # schedule and simulate show their progress once they have taken this long


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def cmd_doctor(args):
    from harness import probe
    findings = probe.doctor()
    if args.json:
        print(json.dumps(findings, indent=2))
    else:
        print(probe.render(findings))
    return 0


def topology_from_args(args):
    import yaml

    from harness import limits
    from harness.linkmodel import LinkError, LinkParams
    from topologies import TopologyError, by_name
    try:
        link = LinkParams.from_spec({"rate_mbps": args.rate_mbps, "mtu": args.mtu, "delay_ms": args.delay_ms})
        params = {}
        for item in args.param:
            key, eq, value = item.partition("=")
            if not eq or not key:
                raise UsageError(f"--param {item!r}: KEY=VALUE")
            params[key.replace("-", "_")] = yaml.safe_load(value)
        if args.hosts_per_side is not None:
            params["hosts_per_side"] = args.hosts_per_side
        limits.check_ranges({"topology": params})
        return by_name(args.topology, link=link, **params)
    except (LinkError, TopologyError, limits.LimitError) as exc:
        raise UsageError(str(exc))


def cmd_netcheck(args):
    from harness import probe
    from harness.fabric import Fabric
    from harness.lifecycle import RunLock
    from harness.netcheck import run_checks
    topo = topology_from_args(args)
    findings = probe.doctor()
    if not findings["root"]:
        raise EnvError("netcheck builds a network and needs root", "run it with sudo")
    backends = probe.resolve(findings, args.datapath, args.ecn_marker, delay=args.delay_ms > 0,
                             instances=args.vswitchd_instances)
    probe.require_ready(findings)
    with RunLock(log=log) as lock:
        log(f"netcheck: {topo.name}, {len(topo.hosts)} hosts, {len(topo.switches)} switches; "
            f"datapath {backends['datapath']}, ECN marker {backends['ecn_marker']}, "
            f"{backends['congestion_control']}+ECN")
        with Fabric(topo, lock.ledger, lock.dir, datapath=backends["datapath"], marker=backends["ecn_marker"],
                    cc=backends["congestion_control"], instances=backends["vswitchd_instances"], log=log) as fab:
            checks = run_checks(fab, log)
    result = {"topology": topo.summary(), "link": topo.links[0].params.to_dict(), "backends": backends,
              "host_settings": fab.settings, "checks": checks, "ok": all(c["ok"] for c in checks),
              "timings": {k: round(v, 2) for k, v in fab.timings.items()}, "version": __version__}
    log(f"netcheck {'PASSED' if result['ok'] else 'FAILED'} "
        f"(build {fab.timings['build_s']:.1f} s, teardown {fab.timings['teardown_s']:.1f} s)")
    if args.json:
        print(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1


def warn_unread(spec):
    """One line per settings block the spec holds that its scheduler does not read."""
    for w in spec.warnings:
        log(f"warning: {w}")


def check_out(path, kind):
    """Refuse an output path before any work: ``kind`` "file" (its directory must exist, it must not
    be a directory) or "dir" (it must not be a file; its parent must exist)."""
    from pathlib import Path
    if path is None:
        return
    p = Path(path)
    if kind == "file" and p.is_dir():
        raise UsageError(f"--out: {path} is a directory; give a file name")
    if kind == "dir" and p.exists() and not p.is_dir():
        raise UsageError(f"--out: {path} is a file; give a directory")
    if not p.parent.is_dir():
        raise UsageError(f"--out: {p.parent} does not exist")


def cmd_schedule(args):
    from harness import spec as spec_mod
    from harness.planners.schedule import ScheduleError, schedule
    check_out(args.out, "file")
    spec = spec_mod.load(args.spec, scheduler=args.scheduler)
    warn_unread(spec)
    bar = Progress(len(spec.jobs), "jobs", desc=f"schedule {spec.name}", delay_s=LONG_S)
    try:
        out = schedule(spec, progress=bar.update)
    except ScheduleError as exc:
        raise UsageError(f"{args.spec}: {exc}")
    finally:
        bar.close()
    if args.out:
        out.write(args.out)
    if args.json:
        print(json.dumps(out.to_dict(), indent=2))
    else:
        print(render_schedule(out))
    return 0


def render_schedule(out):
    """The plan (a harness.plan.Plan) as ``interleave schedule`` prints it."""
    lines = [f"scheduler {out.scheduler} on {out.topology['name']} "
             f"({out.topology['hosts']} hosts), {len(out.jobs)} jobs, {len(out.epochs)} epoch(s)"]
    lines.append(f"{'job':10s} {'model':14s} {'placed':>8s} {'align':>6s} {'shift ms':>9s} {'period ms':>10s}  hosts")
    for j in out.jobs:
        # a job that runs free starts its first iteration at its shift and nothing holds it there
        # afterwards: the shift in parentheses (none at 0)
        if j.alignment == "free":
            shift = f"({j.time_shift_ms:.1f})" if j.time_shift_ms else "-"
        else:
            shift = f"{j.time_shift_ms:.1f}"
        pad = j.beat_ms - j.iteration_ms      # CASSINI's common or unified-circle period
        period = f"{j.beat_ms:.1f}" + (f" (+{pad:.1f})" if pad > 1e-9 else "")
        lines.append(f"{j.name:10s} {j.model:14s} {j.placed_at_s:8.1f} {j.alignment:>6s} {shift:>9s} "
                     f"{period:>10s}  {' '.join(j.hosts)}")
    for e in out.epochs:
        shared = e["links"]
        worst = min((l["score"] for l in shared), default=1.0)
        ag = e.get("affinity_graph") or {"loop_free": None}
        extra = []
        if "candidates_considered" in e:
            extra.append(f"candidates {e['candidates_considered']}"
                         + (f", chose #{e['chosen_candidate']}" if "chosen_candidate" in e else ""))
        if ag["loop_free"] is not None:
            extra.append(f"affinity graph {'loop-free' if ag['loop_free'] else 'looped'}")
        if e.get("preempted"):
            extra.append("preempted " + ", ".join(e["preempted"]))
        if "levels" in e:
            levels = sorted(set(e["levels"].values()))
            extra.append("locality levels " + ",".join(str(x) for x in levels))
        if "fallback" in e:
            extra.append(e["fallback"])
        lines.append(f"epoch t={e['t_s']:.1f}s: placed {', '.join(e['placed'])}; {len(shared)} shared links, "
                     f"mean score {e['score']:.3f}, worst {worst:.3f}" + "".join("; " + x for x in extra))
    fp = out.flow_scheduler
    if fp:
        lines.append(f"flow scheduler {fp['policy']}: steps every {fp['period_s'] * 1000:.0f} ms (the grid; iter ms above)")
        mech = fp.get("mechanism")
        if mech and len(mech["predicted_step_ms"]) > 1:
            lines.append(f"  mechanism {mech['chosen']} ({mech['rule']}; model's mean step: " + ", ".join(
                f"{m} {v:.1f} ms" for m, v in mech["predicted_step_ms"].items()) + ")")
        elif mech:
            lines.append(f"  mechanism {mech['chosen']}")
        for name, d in fp["jobs"].items():
            lines.append(f"  {name}: {d['kind']}, {len(d['flows'])} flows per step; predicted step "
                         f"{d['predicted']['step_s'] * 1000:.1f} ms (fair sharing {d['predicted_fair']['step_s'] * 1000:.1f}, "
                         f"no communication {d['ideal_step_s'] * 1000:.1f}), ECT {d['predicted']['ect_s'] * 1000:.1f} ms")
        if fp.get("model_note"):
            lines.append(f"  note: {fp['model_note']}")
        if fp.get("replan"):
            lines.append(f"  priorities re-planned from measured arrivals every {fp['replan']['every_steps']} steps "
                         f"(window {fp['replan']['window_steps']})")
    return "\n".join(lines)


def cmd_profile(args):
    import tempfile

    import yaml

    from harness import spec as spec_mod
    from harness.profiler import ProfilingError, measure
    spec = spec_mod.load(args.spec)
    if os.geteuid() != 0:
        raise EnvError("profile runs the job on the emulated fabric and needs root", "run it with sudo")
    with tempfile.TemporaryDirectory(prefix="interleave-profile-") as tmp:
        try:
            prof, info = measure(spec, args.job, tmp, period_ms=args.period_ms, seconds=args.seconds, log=log)
        except ProfilingError as exc:
            raise InterleaveError(f"profiling {args.job}: {exc}")
    from pathlib import Path
    Path(args.out).write_text(f"# Measured profile of job {args.job} ({spec.source}); provenance below.\n" +
                              yaml.safe_dump(prof, sort_keys=False, width=120, allow_unicode=True))
    log(f"wrote {args.out}: iteration {prof['iteration_ms']} ms from the counters "
        f"(the agents' own clocks: {info['replay_iteration_ms']} ms; profile replayed: "
        f"{info['profile_iteration_ms']:g} ms), {len(prof['phases'])} phase(s), {info['iterations_seen']} iterations seen")
    if not info["fidelity"]["ok"]:
        log("warning: the fidelity guard flagged this measurement (" + "; ".join(info["fidelity"]["notes"]) +
            "): the profile shows what an emulator that did not keep up carried; its provenance says so")
    if args.json:
        print(json.dumps({"profile": prof, **info}, indent=2))
    return 0


def cmd_run(args):
    from pathlib import Path

    from harness import provenance
    from harness import spec as spec_mod
    from harness.runner import run
    from harness.planners.schedule import ScheduleError
    check_out(args.out, "dir")
    spec = spec_mod.load(args.spec, scheduler=args.scheduler)
    warn_unread(spec)
    refuse_alone(spec, "scheduler", spec.scheduler, "interleave simulate", args.spec)
    label = spec.scheduler + (f"-{spec.flow_scheduler}" if spec.has_programs else "")
    out = Path(args.out) if args.out else Path("results") / f"{spec.name}-{label.replace('+', '-')}"
    if out.exists() and not args.force:
        what = provenance.stale(out, spec, "emulated", code=False) if (out / "summary.json").exists() else None
        held = f" ({what})" if what else ""
        raise UsageError(f"--out: {out} exists{held}; choose another directory, or --force to replace it")
    if os.geteuid() != 0:
        raise EnvError("run builds a network and needs root", "run it with sudo")
    log(f"run {spec.name}: {label}, {len(spec.jobs)} jobs on {spec.topology.name} "
        f"({len(spec.topology.hosts)} hosts, {spec.link.rate_mbps:g} Mbit/s) -> {out}")
    try:
        summary = run(spec, out, quiet=args.quiet, datapath=args.datapath, ecn_marker=args.ecn_marker, log=log,
                      replace=args.force, instances=args.vswitchd_instances)
    except ScheduleError as exc:
        raise UsageError(f"{args.spec}: {exc}")
    t = summary["totals"]
    ect = f", mean ECT {t['ect_ms_mean']} ms" if t.get("ect_ms_mean") is not None else ""
    log(f"done: mean iteration {t['iteration_ms_mean']} ms, p99 {t['iteration_ms_p99']} ms{ect}, "
        f"{t['ecn_marks']} ECN marks; fidelity {'ok' if summary['fidelity']['ok'] else 'NOT OK: ' + '; '.join(summary['fidelity']['notes'])}")
    if args.json:
        print(json.dumps(summary, indent=2))
    return 0


def cmd_report(args):
    from harness.report import report
    out, md = report(args.dirs, args.out)
    print(md)
    log(f"report written to {out}/report.md, report.html and plots")
    return 0


def refuse_alone(spec, key, value, instead, where):
    """A scheduler that runs every job alone (``ideal``) has no emulated run: one line, exit 2."""
    if spec.policy_class.alone:
        raise BadValue(key, value, f"not in the emulator: {spec.base} runs every job alone, which only the "
                       f"simulator can do on a shared fabric; use {instead}", where=where)


def cmd_reproduce(args):
    from pathlib import Path

    from harness import sets
    from harness.runner import run
    from harness import sweep
    st = sets.load_set(args.set)
    workers, on_dask = sweep.check_options(args.workers, args.cluster, args.simulate)
    if os.geteuid() != 0 and not args.report_only and not args.simulate and not args.cluster:
        raise EnvError("reproduce runs experiments and needs root", "run it with sudo (or --simulate, or --cluster)")
    out = args.out or f"results/{st['name']}"
    if args.against and not args.simulate:
        raise UsageError("--against: compares a simulated set with an emulated one; give --simulate too")
    if args.against and not Path(args.against).is_dir():
        raise UsageError(f"--against: {args.against} is not a directory (the emulated set's --out)")
    if args.publish:
        sets.check_publish(st, args.publish, kind="validation" if args.against else "reproduce")   # before any run
    if not args.simulate and not args.report_only:
        for i, r in enumerate(st["runs"]):
            for s in r["schedulers"]:
                refuse_alone(sets.run_spec(r, s, 0), f"runs[{i}].schedulers", s, "--simulate", args.set)
    failed = []
    if not args.report_only and on_dask:
        failed = sweep.execute(st, out, sets.run_dir, sets.simulated_run if args.simulate else sweep.emulated_run, log,
                               workers=workers, cluster=args.cluster, emulated=not args.simulate,
                               keep_stale=args.keep_stale, quiet=args.quiet)
    elif not args.report_only:
        sets.execute(st, out, sets.simulated_run if args.simulate else run, log, quiet=args.quiet,
                     keep_stale=args.keep_stale)
    md, floors = sets.write(st, out, check=args.floors)
    print(sets.headline(md, out))
    command = "interleave reproduce " + " ".join(a for a in sys.argv[1:] if a != "reproduce")
    if args.against:
        vmd, rows = sets.validation(st, args.against, out)
        Path(out, "validation.md").write_text(vmd)
        Path(out, "validation.json").write_text(json.dumps(rows, indent=2))
        print(vmd)
    if args.publish:                     # with --against, the validation table only
        sets.publish(st, vmd if args.against else md, args.publish, command,
                     kind="validation" if args.against else "reproduce", dates=sets.run_dates(out, args.against))
        log(f"published into {args.publish}")
    log(f"set {st['name']}: table in {out}/table.md, a report per spec under {out}/<spec>/report")
    if failed:
        log(f"{len(failed)} run(s) did not complete: " + "; ".join(f"{lab} ({why})" for lab, why in failed))
        return EXIT_FAILED
    if floors and not all(ok for _f, _g, ok in floors):
        log("below a floor: " + "; ".join(f"{f['spec']} {f['metric']} {g} < {f['min']}" for f, g, ok in floors if not ok))
        return 1
    return 0


def cmd_scheduler(args):
    from harness import sweep
    if not 0 < args.port < 65536:
        raise UsageError(f"--port: {args.port} is not a port number (1-65535)")
    try:
        sweep.serve_scheduler(args.host, args.port, log)
    except KeyboardInterrupt:
        log("scheduler: stopped")
    return 0


def cmd_worker(args):
    from harness import probe, sweep
    n = args.nworkers if args.nworkers is not None else sweep.cores()
    if n < 1:
        raise UsageError(f"--nworkers: {n} is not a whole number >= 1")
    fabric = not args.no_fabric
    if fabric and os.geteuid() != 0:
        raise EnvError("a worker that takes emulated runs needs root", "run it with sudo (or --no-fabric)")
    if fabric:
        probe.require_ready(probe.doctor())
    try:
        sweep.serve_worker(args.address, n, fabric, log)
    except KeyboardInterrupt:
        log("worker: stopped")
    return 0


def cmd_simulate(args):
    from harness import spec as spec_mod
    from harness import provenance
    from harness.planners.schedule import ScheduleError
    from harness.simulate import simulate_run
    check_out(args.out, "dir")
    spec = spec_mod.load(args.spec, scheduler=args.scheduler)
    warn_unread(spec)
    if args.background is not None:
        if not 0 <= args.background < 1:
            raise UsageError(f"--background: {args.background} is not a fraction in [0, 1)")
        spec.background = args.background
    provenance.refuse_other(args.out, spec, "simulated", args.force)
    log(f"simulate {spec.name}: {spec.scheduler}, {len(spec.jobs)} jobs on {spec.topology.name} "
        f"({len(spec.topology.hosts)} hosts), background load {spec.background:g}")
    bar = Progress(len(spec.jobs), "jobs finished", desc=f"simulate {spec.name}", delay_s=LONG_S)
    try:
        summary = simulate_run(spec, args.out, replace=args.force, progress=bar.update)
    except ScheduleError as exc:
        raise UsageError(f"{args.spec}: {exc}")
    finally:
        bar.close()
    t = summary["totals"]
    marks = "" if t["ecn_marks"] is None else f", ~{t['ecn_marks']} ECN marks (estimated)"
    ect = "" if t.get("ect_ms_mean") is None else f", mean ECT {t['ect_ms_mean']} ms"
    log(f"done in {summary['simulator']['wall_s']} s: mean iteration {t['iteration_ms_mean']} ms, p99 "
        f"{t['iteration_ms_p99']} ms, mean JCT {t['jct_s_mean']} s, makespan {t['makespan_s']} s{ect}{marks}")
    if args.out:
        log(f"written: {args.out}/summary.json")
    else:
        summary["versions"] = provenance.versions_light()
    if args.json:
        print(json.dumps(summary, indent=2))
    return 0


def cmd_clean(args):
    from harness.lifecycle import RunLock
    if os.geteuid() != 0:
        raise EnvError("clean removes network state and needs root", "run it with sudo")
    lock = RunLock(log=log)
    lock.acquire()  # refuses while a run is active; cleans a dead run's ledger
    lock.release()
    log("clean: nothing of interleave's is left")
    return 0


def build_parser():
    ap = Parser(prog="interleave", description="Packet-level emulation of ML-cluster fabrics.")
    ap.add_argument("--version", action="version", version=f"interleave {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True

    p = sub.add_parser("doctor", help="probe the machine and name the backends a run would use")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("netcheck", help="build the network, check reachability, shaping, ECN; tear down")
    p.add_argument("--topology", default="fattree", help="a registered topology: fattree (default), leafspine, "
                   "dumbbell, or one a --plugin registers")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a parameter of the topology (e.g. k=4); repeatable; a wrong key lists them")
    p.add_argument("--hosts-per-side", type=int, help="dumbbell: hosts on each side (default 2)")
    p.add_argument("--rate-mbps", type=float, default=50.0, help="link rate (default 50)")
    p.add_argument("--mtu", type=int, default=9000, help="MTU of every link (default 9000)")
    p.add_argument("--delay-ms", type=float, default=0.0,
                   help="one-way propagation delay of every link (default 0; needs sch_netem)")
    p.add_argument("--datapath", choices=["kernel", "user"], help="override the doctor's choice")
    p.add_argument("--ecn-marker", choices=["red", "bpf"], help="override the doctor's choice")
    p.add_argument("--vswitchd-instances", type=int, metavar="N", help="ovs-vswitchd processes sharing the "
                   "switches (userspace datapath; override the doctor's choice)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_plugin_arg(p)
    p.set_defaults(func=cmd_netcheck)

    p = sub.add_parser("schedule", help="placement, time-shifts and per-link scores, without emulating")
    p.add_argument("spec", help="experiment spec (YAML)")
    p.add_argument("--json", action="store_true", help="print the schedule as JSON")
    p.add_argument("--out", help="also write the schedule JSON to this file")
    p.add_argument("--scheduler", help="override the spec's scheduler (e.g. themis, themis+cassini)")
    add_plugin_arg(p)
    p.set_defaults(func=cmd_schedule)

    p = sub.add_parser("profile", help="run one job alone and write its measured profile")
    p.add_argument("spec", help="experiment spec (YAML)")
    p.add_argument("--job", required=True, help="name of the job in the spec")
    p.add_argument("--out", required=True, help="profile YAML to write")
    p.add_argument("--period-ms", type=float, default=5.0, help="counter sampling period (default 5)")
    p.add_argument("--seconds", type=float, default=8.0, help="how long to run the job (default 8)")
    p.add_argument("--json", action="store_true", help="print the profile as JSON too")
    add_plugin_arg(p)
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("run", help="the whole experiment; writes a results directory")
    p.add_argument("spec", help="experiment spec (YAML)")
    p.add_argument("--out", help="results directory (default results/<spec name>-<scheduler>)")
    p.add_argument("--scheduler", help="override the spec's scheduler (e.g. themis, themis+cassini; "
                   "fixed:echelon also sets flow_scheduler)")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.add_argument("--datapath", choices=["kernel", "user"], help="override the doctor's choice")
    p.add_argument("--ecn-marker", choices=["red", "bpf"], help="override the doctor's choice")
    p.add_argument("--vswitchd-instances", type=int, metavar="N", help="ovs-vswitchd processes sharing the "
                   "switches (userspace datapath; override the doctor's choice)")
    p.add_argument("--json", action="store_true", help="print summary.json")
    p.add_argument("--force", action="store_true", help="replace the results already in the --out directory "
                   "(by default a directory that exists is refused)")
    add_plugin_arg(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("report", help="compare results directories: tables and plots")
    p.add_argument("dirs", nargs="+", help="results directories (the first is the baseline)")
    p.add_argument("--out", help="where to write report.md/.html and plots")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("simulate", help="the same experiment in the flow-level simulator (no root)")
    p.add_argument("spec", help="experiment spec (YAML)")
    p.add_argument("--scheduler", help="override the spec's scheduler (e.g. netsens, consolidate, themis+cassini)")
    p.add_argument("--background", type=float, help="override background.load (fraction of every fabric link)")
    p.add_argument("--out", help="also write the results directory (summary.json, jobs.csv, iteration_ms.csv, "
                   "spec.yaml, provenance.json); its parent must exist")
    p.add_argument("--force", action="store_true", help="with --out: replace a directory holding other results "
                   "(the emulator's, or another spec's, scheduler's or background load's); the same spec's "
                   "simulated results are rewritten without it")
    p.add_argument("--json", action="store_true", help="print summary.json")
    add_plugin_arg(p)
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("reproduce", help="run a set of experiments (experiments/sets/*.yaml) and write one table")
    p.add_argument("set", help="set file (YAML)")
    p.add_argument("--out", help="directory of the set (default results/<set name>); complete runs in it are kept")
    p.add_argument("--floors", action="store_true", help="exit 1 when a ratio falls below the set's floors")
    p.add_argument("--report-only", action="store_true", help="do not run: only rebuild the reports and table")
    p.add_argument("--keep-stale", action="store_true", help="keep a complete run whose spec or code changed "
                   "since it ran (by default it is set aside as <run>.stale-N and run again)")
    p.add_argument("--publish", metavar="FILE", help="write the table into FILE's block "
                   "<!-- interleave reproduce NAME --> ... <!-- end interleave reproduce NAME -->")
    p.add_argument("--simulate", action="store_true", help="run the set in the flow-level simulator (no root)")
    p.add_argument("--against", metavar="DIR", help="with --simulate: compare with the emulated set in DIR "
                   "(validation.md; published into the block <!-- interleave validation NAME --> with --publish)")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.add_argument("--workers", type=int, help="with --simulate: runs in N local processes (default: the "
                   "machine's cores); emulated runs take 1")
    p.add_argument("--cluster", metavar="ADDRESS", help="send the runs to the Dask scheduler at ADDRESS "
                   "(interleave scheduler); emulated runs go to workers offering fabric=1")
    add_plugin_arg(p)
    p.set_defaults(func=cmd_reproduce)

    p = sub.add_parser("scheduler", help="a Dask scheduler for sets run on several machines (reproduce --cluster)")
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default all)")
    p.add_argument("--port", type=int, default=8786, help="port (default 8786)")
    p.set_defaults(func=cmd_scheduler)

    p = sub.add_parser("worker", help="this machine as a worker of an interleave scheduler")
    p.add_argument("address", help="the scheduler, e.g. tcp://10.0.0.1:8786")
    p.add_argument("--nworkers", type=int, help="worker processes (default: the machine's cores)")
    p.add_argument("--no-fabric", action="store_true", help="take simulated runs only (default: as root, "
                   "the first process also takes emulated runs, one at a time)")
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("clean", help="remove leftovers of earlier runs of this tool only")
    p.set_defaults(func=cmd_clean)
    return ap


def add_plugin_arg(p):
    p.add_argument("--plugin", action="append", metavar="PATH", default=[],
                   help="a Python file registering schedulers or topologies (docs/plugins.md); repeatable")


def main(argv=None):
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):
        parser.print_help()             # the commands, each with what it does
        return 0
    args = parser.parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)
    try:
        if getattr(args, "plugin", None):
            from harness import registry
            registry.use_plugins(args.plugin)
        return args.func(args)
    except UsageError as exc:
        log(f"interleave {args.command}: {exc}")
        return EXIT_USAGE
    except EnvError as exc:
        log(f"interleave {args.command}: {exc}")
        return EXIT_ENV
    except InterleaveError as exc:
        log(f"interleave {args.command}: {exc}")
        return exc.exit_status
    except KeyboardInterrupt:
        builds = args.command in BUILDS_NETWORKS and not getattr(args, "simulate", False)
        torn = "; the network was torn down" if builds else ""
        log(f"interleave {args.command}: interrupted{torn}")
        return 130
    except BrokenPipeError:  # output piped into e.g. head
        sys.stderr.close()
        return 0
    except BadValue as exc:
        log(f"interleave {args.command}: {exc}")
        return EXIT_USAGE
    except Exception as exc:
        path = save_traceback()
        log(f"interleave {args.command}: internal error ({type(exc).__name__}: {short(str(exc))[1:-1]}); "
            f"traceback saved in {path} -- please report it")
        return EXIT_INTERNAL


def save_traceback():
    """Write the current exception's traceback to a file of its own; return its path."""
    import tempfile
    import traceback
    fd, path = tempfile.mkstemp(prefix="interleave-traceback-", suffix=".txt")
    with os.fdopen(fd, "w") as f:
        f.write(f"interleave {__version__}, argv {sys.argv}\n")
        traceback.print_exc(file=f)
    return path


if __name__ == "__main__":
    sys.exit(main())
