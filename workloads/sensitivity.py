"""The stored sensitivity table (workloads/sensitivity.yaml, written by workloads/derive_sensitivity.py):
what each built-in model's iteration time grows to when its workers are spread across pods, as
measured in emulation, for harness.schedulers.netsens to classify jobs by.
"""
from pathlib import Path

import numpy as np
import yaml

TABLE = Path(__file__).resolve().parent / "sensitivity.yaml"
_EMULATED = None


def key(background):
    """The table's key of a background load: ``background_0.5``."""
    return f"background_{float(background)}"


def load_of(k):
    """The background load a table key names (the inverse of ``key``)."""
    return float(k.split("_", 1)[1])


def emulated():
    """{model: ([backgrounds], [ratios])} of the models measured in emulation, backgrounds ascending."""
    global _EMULATED
    if _EMULATED is None:
        raw = yaml.safe_load(TABLE.read_text()) if TABLE.exists() else {}
        _EMULATED = {}
        for name, m in (raw.get("models") or {}).items():
            pts = sorted((load_of(k), v["ratio"]) for k, v in (m.get("emulated") or {}).items())
            if pts:
                _EMULATED[name] = ([b for b, _ in pts], [r for _, r in pts])
    return _EMULATED


def emulated_at(model, background):
    """The measured ratio of ``model`` at ``background`` (linear between measured loads, the nearest
    measured one outside them), or None when the model was not measured."""
    pts = emulated().get(model)
    return None if pts is None else float(np.interp(background, *pts))
