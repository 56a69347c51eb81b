"""What link rate the emulator carries faithfully on a machine, as bench/fabric_fidelity.py measured
it, and the warning a run gets when its links are faster.

A measurement is the benchmark's rows (24 long TCP flows, a permutation across the fat-tree, 3
repeats per link rate): ``fidelity`` is a run's aggregate goodput over the max-min ideal. A rate is
*faithful* when every repeat there reached ``FAITHFUL``. The benchmark records its rows for the
machine it ran on in ``MACHINE_RECORD`` (per datapath and vswitchd instances, ``key``, with the machine's CPU, core count and kernel),
and with ``--reference`` in ``REFERENCE_DIR`` (the repository's reference host, whose figures
docs/machines.md publishes). A run reads this machine's record, else the reference host's.
"""
import json
import os
import platform
from pathlib import Path

FAITHFUL = 0.80     # of the max-min ideal under the benchmark's load: every host at line rate across pods,
                    # far above a few jobs' Up phases (whose runs the fidelity guard judges)
MACHINE_RECORD = Path(os.environ.get("INTERLEAVE_CAPACITY_RECORD", "/var/lib/interleave/fabric_fidelity.json"))
REFERENCE_DIR = Path(__file__).resolve().parent.parent / "results" / "fabric-fidelity"
BENCH = "sudo .venv/bin/python bench/fabric_fidelity.py"


def machine():
    """The machine a measurement belongs to: CPU model, core count, kernel release."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "kernel": platform.release()}


def key(datapath, instances=1):
    """The name a measurement is kept under: the datapath, and the number of ovs-vswitchd instances
    when more than one shares the switches (``user-x2``)."""
    return datapath if instances <= 1 else f"{datapath}-x{instances}"


def by_rate(rows):
    """{link rate Mbit/s: the lowest fidelity of its repeats}."""
    out = {}
    for r in rows:
        rate, f = float(r["rate_mbps"]), float(r["fidelity"])
        out[rate] = min(f, out.get(rate, f))
    return out


def record(rows, datapath, path=None, measured_utc=None):
    """Keep ``rows`` as this machine's measurement for ``datapath`` (other datapaths' entries stay)."""
    path = Path(path or MACHINE_RECORD)
    doc = load(path) or {}
    doc[datapath] = {"machine": machine(), "measured_utc": measured_utc, "rows": rows}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))


def load(path):
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def measurement(datapath, path=None, reference_dir=None):
    """(rows, where they come from) for ``datapath``: this machine's record when it was made on this
    machine, else the reference host's, else (None, None)."""
    mine = (load(path or MACHINE_RECORD) or {}).get(datapath)
    if mine and mine.get("machine") == machine() and mine.get("rows"):
        return mine["rows"], f"measured on this machine ({mine.get('measured_utc') or 'date not recorded'})"
    ref = load(Path(reference_dir or REFERENCE_DIR) / f"{datapath}.json")
    if ref and ref.get("rows"):
        m = ref.get("machine", {})
        return ref["rows"], (f"measured on the reference host ({m.get('cores')}-core {m.get('cpu')}), not this "
                             f"machine: {BENCH} measures it")
    return None, None


def warning(wall_rate_mbps, rows, source):
    """One line when links at ``wall_rate_mbps`` (the rate the fabric is built with: link.rate_mbps /
    time_dilation) are faster than the measurement ``rows`` found faithful, else None."""
    if not rows:
        return None
    fid = by_rate(rows)
    faithful = [r for r, f in fid.items() if f >= FAITHFUL]
    top = max(faithful, default=None)
    if top is not None and wall_rate_mbps <= top:
        return None
    above = sorted(r for r in fid if r >= wall_rate_mbps)
    if above:
        seen = f"fidelity {fid[above[0]]:.2f} at {above[0]:g} Mbit/s"
    else:
        seen = f"not measured above {max(fid):g} Mbit/s (fidelity {fid[max(fid)]:.2f} there)"
    limit = f"faithful (>= {FAITHFUL}) up to {top:g} Mbit/s" if top is not None else f"faithful (>= {FAITHFUL}) at no rate"
    return (f"links at {wall_rate_mbps:g} Mbit/s are faster than this emulator carries faithfully: {limit}, "
            f"{seen}, {source}; expect the fidelity guard to flag the run, or raise time_dilation "
            f"(the fabric runs at link.rate_mbps / time_dilation)")
