"""What a results directory was made from, and whether it may stand for a spec about to run.

Every run directory (emulated or simulated) holds ``provenance.json``: the digest of the spec as it
ran (the document after the set's or the command line's overrides, profile files inlined, each
plug-in file by its content's SHA-256, a set's background load), the scheduler, the backend and the
code version (the package's version and, in a git checkout, its commit, ``-dirty`` with
uncommitted changes to tracked files). ``stale`` compares a directory with the spec about to run:
``reproduce`` re-runs a stale run (``--keep-stale`` keeps it), ``simulate --out`` refuses a
directory of another backend or spec (``--force`` replaces it).

A directory made before this record existed is compared by its ``spec.yaml`` (and a simulated
run's ``background_load``); its code version is unknown and not held against it.
"""
import functools
import hashlib
import json
import os
import platform
import subprocess
from pathlib import Path

import yaml

from harness import __version__
from harness.errors import UsageError

FILE = "provenance.json"
BACKENDS = ("emulated", "simulated")
_ROOT = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=None)
def code_version():
    """``__version__``, plus ``+g<commit>`` (and ``-dirty``) when the package is a git checkout."""
    try:
        commit = subprocess.run(["git", "-C", str(_ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                text=True, timeout=10)
        if commit.returncode != 0:
            return __version__
        dirty = subprocess.run(["git", "-C", str(_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return __version__
    return f"{__version__}+g{commit.stdout.strip()}" + ("-dirty" if dirty else "")


def dist_versions(names):
    """{name: version} of interleave, Python, the kernel and the distributions ``names`` (None: not installed)."""
    from importlib import metadata
    out = {"interleave": __version__, "python": platform.python_version(), "kernel": os.uname().release}
    for dist in names:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def versions_light():
    """Versions of the Python side (no OVS probe): enough for simulated results."""
    return dist_versions(("numpy", "pandas", "networkx"))


def _normal(raw):
    """The spec document as JSON-comparable data (what YAML round-trips to)."""
    return json.loads(json.dumps(raw, sort_keys=True, default=str))


def spec_digest(spec):
    """SHA-256 of what ran: the spec document with each plug-in path replaced by its file's digest
    (a moved checkout is the same spec, an edited plug-in is not) and the background load."""
    from harness import registry
    raw = dict(spec.raw)
    if spec.plugins:
        files = registry.plugin_files()
        raw["plugins"] = [files.get(p, p) for p in spec.plugins]
    doc = {"spec": _normal(raw), "background": spec.background}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def record(spec, backend):
    assert backend in BACKENDS, backend
    return {"spec_sha256": spec_digest(spec), "spec_name": spec.name, "scheduler": spec.scheduler,
            "flow_scheduler": spec.flow_scheduler, "backend": backend, "background": spec.background,
            "code": code_version()}


def write(d, spec, backend):
    (Path(d) / FILE).write_text(json.dumps(record(spec, backend), indent=2) + "\n")


def read(d):
    """The directory's provenance record, or None (none written, or unreadable)."""
    try:
        doc = json.loads((Path(d) / FILE).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _legacy(d):
    """(backend, spec document, background) of a directory without provenance.json, from its files;
    None where it has no spec.yaml."""
    d = Path(d)
    try:
        raw = yaml.safe_load((d / "spec.yaml").read_text())
        summary = json.loads((d / "summary.json").read_text())
    except (OSError, ValueError, yaml.YAMLError):
        return None
    backend = "simulated" if isinstance(summary, dict) and "simulator" in summary else "emulated"
    background = summary.get("background_load") if isinstance(summary, dict) else None
    return backend, raw, background


def _changed(d, spec, told=()):
    """Which top-level keys of the directory's spec.yaml differ from ``spec``'s, as a phrase (keys in
    ``told`` left out: another reason names them); None when only those differ."""
    try:
        old = yaml.safe_load((Path(d) / "spec.yaml").read_text())
    except (OSError, yaml.YAMLError):
        old = None
    if not isinstance(old, dict):
        return "its spec.yaml cannot be read"
    old, new = _normal(old), _normal(spec.raw)
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    rest = [k for k in keys if k not in told]
    if rest:
        return "changed: " + ", ".join(rest)
    return None if keys or told else "a plug-in or profile file changed"


def stale(d, spec, backend, code=True):
    """Why directory ``d``'s results do not stand for ``spec`` run on ``backend`` (one phrase), or
    None when they do. ``code``: a different code version makes them stale too."""
    rec = read(d)
    if rec is None:
        old = _legacy(d)
        if old is None:
            return None                     # nothing recorded to compare (not made by interleave run)
        old_backend, raw, background = old
        if old_backend != backend:
            return f"it holds {old_backend} results"
        bg_now = spec.background if backend == "simulated" else None
        if _normal(raw) != _normal(spec.raw) or (backend == "simulated" and (background or 0) != (bg_now or 0)):
            return f"its spec.yaml differs from the spec now ({_changed(d, spec)})"
        return None
    if rec.get("backend") != backend:
        return f"it holds {rec.get('backend')} results"
    if rec.get("spec_sha256") != spec_digest(spec):
        why, told = [], set()
        if rec.get("scheduler") != spec.scheduler:
            why.append(f"it holds scheduler {rec.get('scheduler')}'s results, not {spec.scheduler}'s")
            told |= {"scheduler", "flow_scheduler"}
        if rec.get("background") != spec.background:
            why.append(f"it ran at background load {rec.get('background')}, not {spec.background}")
            told.add("background")
        rest = _changed(d, spec, told)
        if rest or not why:
            why.append(f"its spec differs from the spec now ({rest or 'a plug-in or profile file changed'})")
        return "; ".join(why)
    if code and rec.get("code") != code_version():
        return f"it was made by code {rec.get('code')}, this is {code_version()}"
    return None


def refuse_other(out, spec, backend, force, name="--out", hint="--force"):
    """Before writing ``spec``'s results into directory ``out``: a UsageError if it holds results of
    another backend or another spec (the code version aside), unless ``force``."""
    if out is None or force or not (Path(out) / "summary.json").exists():
        return
    why = stale(out, spec, backend, code=False)
    if why:
        raise UsageError(f"{name}: {out} holds other results ({why}); choose another directory, or {hint} to "
                         "replace them")
