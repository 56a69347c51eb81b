"""Profiles from measured link utilisation (CASSINI §5.1 profiles jobs from port counters).

``extract(times, mbps, scale)`` turns the utilisation series of one worker's NIC into a profile:
  * iterations: the autocorrelation of the on/off envelope (the series averaged over 5 samples, so
    the texture of the replay's 8 KB slices does not count) gives a guide period; each iteration
    is anchored at the Up onset that ends its longest quiet gap; the period is the mean spacing of
    anchors (anchors sit on the sample grid: the mean is unbiased, a median would not be);
  * phases: every iteration folded on its own anchor into ``bin_ms`` bins (a one-off late
    iteration shifts all later ones, which a fixed-period fold would smear); Up runs are bins above
    ``threshold`` x the folded maximum; a run's rate is its plateau (the mean of its interior, one
    smoothing width in from each edge), its width its bytes (the run and its blurred edges) / that
    rate: exact for a rectangular phase however the sampling blurs its edges, and the bytes of
    every phase are kept; it is placed on the run's area-weighted centre; the cycle is rotated so
    that the iteration starts where the longest Down gap starts (compute first, as in the built-in
    profiles); accuracy over repeats: results/profile/README.md, "Profiling";
  * rates are scaled back to the reference line rate: gbps = Mbit/s / 1000 / scale.
Nothing shorter than a sample period is resolved: the folded profile is smoothed over one sample
period before thresholding, and Up runs separated by less than two sample periods are merged
(phases that close together come out as one; bytes are kept). The rates include the frames'
headers (the port counts frames: 1514 B carry 1448 B of payload). Phases of only a few 8 KB slices
at the emulated rate (e.g. GPT-2's 10 ms peaks at 1/1000 scale: about two slices) are sent as
bursts by the replay itself and cannot be recovered in shape.
"""
import numpy as np


class ProfilingError(ValueError):
    pass


def _acf_period(y, dt, min_lag_s=0.01):
    y = y - y.mean()
    n = len(y)
    f = np.fft.rfft(y, 2 * n)
    acf = np.fft.irfft(f * np.conj(f))[:n]
    acf /= acf[0] if acf[0] > 0 else 1
    lo, hi = max(1, int(min_lag_s / dt)), n // 3
    if hi <= lo + 2:
        raise ProfilingError("series too short to find a period")
    seg = acf[lo:hi]
    # local maxima only, so the slope down from lag 0 is never taken for a period
    peaks = [i for i in range(1, len(seg) - 1) if seg[i] >= seg[i - 1] and seg[i] >= seg[i + 1]]
    if not peaks:
        raise ProfilingError("no repeating pattern in the series")
    best = max(seg[i] for i in peaks)
    if best < 0.2:
        raise ProfilingError("no repeating pattern in the series")
    first = next(i for i in peaks if seg[i] >= 0.8 * best)
    return (lo + first) * dt


def _runs(mask):
    """[(start, length)] of circular runs of True (a run may wrap around the end)."""
    n = len(mask)
    if mask.all():
        return [(0, n)]
    shift = int(np.flatnonzero(~mask)[0])
    m = np.roll(mask, -shift)
    out, i = [], 0
    while i < n:
        if m[i]:
            j = i
            while j < n and m[j]:
                j += 1
            out.append(((i + shift) % n, j - i))
            i = j
        else:
            i += 1
    return sorted(out)


def anchors(grid, env_up, guide):
    """One anchor per iteration: the Up onset that ends the iteration's longest quiet gap.

    Candidate onsets follow quiet runs at least 0.6 x the longest one; anchors are taken greedily at
    least 0.75 x ``guide`` (the autocorrelation's period) apart."""
    runs, i, n = [], 0, len(env_up)
    while i < n:
        if not env_up[i]:
            j = i
            while j < n and not env_up[j]:
                j += 1
            if 0 < i and j < n:
                runs.append((i, j - i))
            i = j
        else:
            i += 1
    # a quiet gap inside an iteration is shorter than the period: longer ones are before the job
    # started (after its connection set-up) or after it ended
    step = grid[1] - grid[0] if len(grid) > 1 else 1.0
    runs = [r for r in runs if r[1] * step < 0.9 * guide]
    if not runs:
        return np.array([])
    longest = max(r[1] for r in runs)
    cands = [grid[i + length] for i, length in runs if length >= 0.6 * longest]
    out = []
    for t in cands:
        if not out or t - out[-1] >= 0.75 * guide:
            out.append(t)
    return np.array(out)


def phase_bounds(centre_ms, width_ms, period_ms):
    """(start, duration) of a measured phase, rounded as written (0.01 ms), inside the iteration: a
    phase that ends where the circle was cut (the longest Down run's start) can have its blur past
    the cut (125.03 + 56.05 ms in a 180.16 ms iteration, seen once); it then ends at the period,
    its width (and so its bytes) kept."""
    width, period = round(float(width_ms), 2), round(float(period_ms), 2)
    return max(0.0, min(round(float(centre_ms - width / 2), 2), round(period - width, 2))), width


def extract(times, mbps, scale, threshold=0.2, bin_ms=1.0):
    times, mbps = np.asarray(times, float), np.asarray(mbps, float)
    if len(times) < 20:
        raise ProfilingError("too few samples to profile")
    if np.percentile(mbps, 95) <= 0:
        raise ProfilingError("the job sent nothing while it was measured")
    dt = float(np.median(np.diff(times)))
    grid = np.arange(times[0], times[-1], dt)
    # the period is looked for in the on/off envelope (5-sample average), not in the texture of
    # the 8 KB slices the replay sends
    k = 5
    env = np.convolve(np.interp(grid, times, mbps), np.ones(k) / k, "same")
    guide = _acf_period(env, dt, min_lag_s=2 * k * dt)
    # the 95th percentile, not the maximum: one short counter interval can read as a spike
    a = anchors(grid, env > threshold * np.percentile(env, 95), guide)
    spans = np.diff(a)
    good = (spans > 0.75 * guide) & (spans < 1.25 * guide)
    if good.sum() < 3:
        raise ProfilingError(f"only {int(good.sum())} whole iterations seen; run the job longer")
    period = float(np.mean(spans[good]))        # anchors sit on the sample grid: the mean is unbiased
    # fold each iteration on its own anchor: a one-off late iteration shifts the ones after it,
    # which a fixed-period fold would smear
    nb = max(16, int(round(period * 1000 / bin_ms)))
    sums, counts = np.zeros(nb), np.zeros(nb)
    for (a0, a1), ok in zip(zip(a[:-1], a[1:]), good):
        if not ok:
            continue
        sel = (times >= a0 - dt) & (times < a0 - dt + min(a1 - a0, period))
        b = np.minimum(((times[sel] - (a0 - dt)) / period * nb).astype(int), nb - 1)
        sums += np.bincount(b, weights=mbps[sel], minlength=nb)
        counts += np.bincount(b, minlength=nb)
    folded = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    idx = np.flatnonzero(~np.isnan(folded))
    folded = np.interp(np.arange(nb), idx, folded[idx], period=nb)
    bw = period * 1000 / nb
    # nothing shorter than a sample period is resolved: smooth over one, and close gaps of < 2
    w = max(1, int(round(dt * 1000 / bw)))
    smooth = np.convolve(np.concatenate([folded[-w:], folded, folded[:w]]), np.ones(w) / w, "same")[w:-w]
    up = smooth > threshold * np.percentile(smooth, 98)
    for s, n in _runs(~up):
        if n * bw < 2 * dt * 1000:
            up[np.arange(s, s + n) % nb] = True
    if up.all() or not up.any():
        raise ProfilingError("no Down phase: the series never goes quiet")
    down_runs = _runs(~up)
    start_bin = max(down_runs, key=lambda r: r[1])[0]
    folded, smooth, up = np.roll(folded, -start_bin), np.roll(smooth, -start_bin), np.roll(up, -start_bin)
    phases = []
    for s, n in _runs(up):
        # area over the run and its blurred edges (w bins each side, which sit in Down time)
        lo, hi = max(0, s - w), min(nb, s + n + w)
        seg = folded[lo:hi]
        interior = folded[s + w:s + n - w]
        level = float(interior.mean()) if len(interior) >= 2 else float(smooth[s:s + n].max())
        area = float(seg.sum()) * bw
        width, height = area / level, level        # bytes of the phase are kept exactly
        centre = (float(np.sum(seg * (np.arange(hi - lo) + 0.5))) / float(seg.sum()) + lo) * bw
        start, width = phase_bounds(centre, width, period * 1000)
        phases.append({"start_ms": start, "duration_ms": width,
                       "gbps": round(float(height) / 1000.0 / scale, 3)})
    iterations = int(good.sum())
    return {"iteration_ms": round(float(period) * 1000, 2), "phases": phases, "iterations_seen": iterations}


def nic_series(records, dpid, port):
    """(times, Mbit/s) of a host NIC from the switch port's rx counter, on the switch's own counter
    time stamps (port age) shifted onto the receipt clock, resampled onto a uniform grid of the
    median sampling interval by interpolating the byte counter: every grid step holds the bytes
    that crossed it, so a time stamp that is off (seen under load) moves bytes by its error but
    never adds any, as averaging per-interval rates did."""
    pts = []
    for r in records:
        if r["kind"] == "port" and r["dpid"] == dpid:
            v = r["ports"].get(str(port), r["ports"].get(port))
            if v is not None:
                pts.append((v[5] if len(v) > 5 else r["t"], v[0]))
    # in time order, one reading per time stamp; a counter never goes back
    t, first = np.unique(np.array([p[0] for p in pts], dtype=float), return_index=True)
    if len(t) < 2:
        return np.array([]), np.array([])
    b = np.maximum.accumulate(np.array([p[1] for p in pts], dtype=float)[first])
    dt = float(np.median(np.diff(t)))
    edges = np.arange(t[0], t[-1] + dt / 2, dt)
    cum = np.interp(edges, t, b)
    return (edges[1:] + edges[:-1]) / 2, np.diff(cum) * 8 / dt / 1e6


def measure(spec, job_name, workdir, period_ms=5.0, seconds=8.0, log=lambda m: None):
    """Run one job of ``spec`` alone on its fabric; return (profile dict, details)."""
    from datetime import datetime, timezone

    from harness import fidelity, probe
    from harness.errors import UsageError
    from harness.netcheck import cpu_sampler, datapath_counters
    from harness.runner import CPU_SAMPLE_S, guard
    from harness.fabric import Fabric
    from harness.lifecycle import RunLock
    from harness.replay import Replayer
    from harness.schedulers.placement import Themis, candidates
    from harness.spec import Job
    from harness.telemetry import Telemetry, mono, read_jsonl
    from agents.timing import Dilation

    job = next((j for j in spec.jobs if j.name == job_name), None)
    if job is None:
        raise UsageError(f"{spec.source}: --job {job_name!r} is not a job of the spec "
                         f"({', '.join(j.name for j in spec.jobs)})")
    prof = spec.profiles[job.model]
    topo = spec.topology
    hosts = job.hosts or candidates(Themis(), [job], topo, spec.profiles, topo.hosts, n=1)[0][job.name]
    n_it = max(20, int(seconds * 1000 / prof.iteration_ms))
    run_job = Job(job.name, job.model, len(hosts), n_it)
    findings = probe.doctor()
    backends = probe.resolve(findings, delay=spec.link.delay_ms > 0)
    probe.require_ready(findings)
    edge = topo.edge_of(hosts[0])
    with RunLock(log=log) as lock:
        with Fabric(topo, lock.ledger, lock.dir, datapath=backends["datapath"], marker=backends["ecn_marker"],
                    cc=backends["congestion_control"], instances=backends["vswitchd_instances"], log=log) as fab:
            tm = Telemetry(fab, workdir, period_ms=period_ms, dpids=[topo.dpid(edge)], marker=False).start()
            rp = Replayer(fab, workdir, log)
            idle_of, datapath0 = cpu_sampler(CPU_SAMPLE_S), datapath_counters(fab)
            t = mono()
            rp.start(run_job, prof, hosts, 0.0, t + 1.5, t, 0, False)
            log(f"profiling {job.name} ({job.model}) on {', '.join(hosts)}: {n_it} iterations")
            try:
                agents = rp.wait(n_it * prof.iteration_ms / 1000 * 3 + 30)
            finally:
                rp.stop()
                tm.stop()
            m = {"idle": idle_of(), "agents": agents,
                 "datapath": fidelity.datapath_delta(datapath0, datapath_counters(fab))}
            judged = guard(m, tm.links(t), prof.iteration_ms, Dilation(1), topo)
            rows = rp.iterations()
    w0 = rows[rows.worker == 0].sort_values("iteration")
    replay_ms = float(np.diff(w0.start.to_numpy()).mean() * 1000) if len(w0) > 2 else float("nan")
    times, mbps = nic_series(read_jsonl(tm.of_path), topo.dpid(edge), topo.port(edge, hosts[0]))
    scale = topo.links[0].params.rate_mbps / (prof.reference_gbps * 1000)
    got = extract(times, mbps, scale)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    how = (f"measured by `interleave profile {spec.source} --job {job.name}` on {when}: {topo.name}, "
           f"{topo.links[0].params.rate_mbps:g} Mbit/s links, NIC of {hosts[0]} sampled every {period_ms:g} ms, "
           f"{got['iterations_seen']} iterations, fidelity guard "
           + ("ok" if judged["ok"] else "FLAGGED (" + "; ".join(judged["notes"]) + ")"))
    out = {"model": f"{job.model}-measured", "parallelism": prof.parallelism, "iteration_ms": got["iteration_ms"],
           "reference_gbps": prof.reference_gbps, "workers": len(hosts),
           "phases": [{**ph, "pattern": prof.phases[min(i, len(prof.phases) - 1)].pattern}
                      for i, ph in enumerate(got["phases"])],
           "provenance": {"iteration_ms": how + "; period by autocorrelation + epoch folding",
                          "reference_gbps": f"of the replayed profile {job.model}",
                          "workers": "hosts the job ran on",
                          **{f"phases[{i}].{k}": how + ("; rate scaled to the reference line rate" if k == "gbps"
                                                        else "; width = area / plateau height")
                             for i in range(len(got["phases"])) for k in ("start_ms", "duration_ms", "gbps")}},
           "notes": "communication pattern copied from the replayed profile (a NIC counter cannot show it)"}
    return out, {"hosts": hosts, "samples": len(times), "iterations_seen": got["iterations_seen"],
                 "replay_iteration_ms": round(replay_ms, 2), "profile_iteration_ms": prof.iteration_ms,
                 "fidelity": judged}
