"""The spec's blocks for program jobs and their flow scheduling: a job's ``pipeline``, ``tensor`` or
``data_parallel`` block, ``echelon_mechanism`` and ``replan``; their keys, defaults and checks. The
spec validates with them and the spec reference lists them; the planners (harness.planners.flowplan,
harness.planners.replan) read the blocks they give."""
from harness.errors import require_number

REPLAN_KEYS = {"every_steps": 2, "window_steps": 4}
PIPELINE_KEYS = {"schedule": "gpipe", "micro_batches": 8, "forward_ms": None, "backward_ms": None,
                 "activation_mb": None, "gradient_mb": None}
TENSOR_KEYS = {"layers": 8, "layer_ms": None, "allreduce_mb": None}
DATA_PARALLEL_KEYS = {"buckets": 4, "forward_ms": None, "backward_ms": None, "allreduce_mb": None}
BLOCKS = {"pipeline": PIPELINE_KEYS, "tensor": TENSOR_KEYS, "data_parallel": DATA_PARALLEL_KEYS}
MECHANISMS = ("priority", "pacing", "auto")     # how echelon's schedule reaches the flows on priority ports; first: default


def validate_block(where, key, block, workers, error):
    """The job's ``pipeline``, ``tensor`` or ``data_parallel`` block, with defaults; raises ``error``
    naming the key."""
    kind = key.rsplit(".", 1)[-1]
    allowed = BLOCKS[kind]
    if not isinstance(block, dict):
        raise error(where, key, block, "a mapping: " + ", ".join(allowed))
    for k in block:
        if k not in allowed:
            raise error(where, f"{key}.{k}", block[k], "unknown key; allowed: " + ", ".join(allowed))
    out = {k: block.get(k, v) for k, v in allowed.items()}

    def bad(k, v, what):                       # require_number's error signature
        return error(where, k, v, what)
    for k, v in out.items():
        if k == "schedule":
            if v not in ("gpipe", "1f1b"):
                raise error(where, f"{key}.schedule", v, "gpipe | 1f1b")
        elif k in ("micro_batches", "layers", "buckets"):
            require_number(f"{key}.{k}", v, 1, strict=False, whole=True, error=bad)
        elif k == "gradient_mb" and v is None:
            out[k] = out["activation_mb"]
        else:
            require_number(f"{key}.{k}", v, 0, error=bad)
    if kind in ("tensor", "data_parallel") and workers < 2:
        raise error(where, key.rsplit(".", 1)[0] + ".workers", workers, f">= 2 ranks for {kind.replace('_', ' ')}")
    if kind == "pipeline" and workers < 2:
        raise error(where, key.rsplit(".", 1)[0] + ".workers", workers, ">= 2 stages (one per worker)")
    return out


def validate_mechanism(where, raw, sharing, error):
    """The spec's ``echelon_mechanism`` (default MECHANISMS[0]) on ports of ``sharing`` (the parsed
    link's); raises ``error`` naming the key: ``priority`` given on ports without priorities,
    ``pacing`` with ``replan`` (which re-plans priorities)."""
    m = raw.get("echelon_mechanism", MECHANISMS[0])
    if not isinstance(m, str) or m not in MECHANISMS:
        raise error(where, "echelon_mechanism", m, " | ".join(MECHANISMS))
    if "echelon_mechanism" in raw and m == "priority" and sharing != "priority":
        raise error(where, "echelon_mechanism", m, "priority only with link.sharing priority (auto or pacing here)")
    if m == "pacing" and raw.get("replan") is not None:
        raise error(where, "echelon_mechanism", m, "priority or auto with replan (it re-plans the flows' priorities)")
    return m


def validate_replan(where, raw, error):
    """The spec's ``replan`` block with defaults, or None; ``error(where, key, value, allowed)``."""
    block = raw.get("replan")
    if block is None:
        return None
    if not isinstance(block, dict):
        raise error(where, "replan", block, "a mapping: " + ", ".join(REPLAN_KEYS))
    for k in block:
        if k not in REPLAN_KEYS:
            raise error(where, f"replan.{k}", block[k], "unknown key; allowed: " + ", ".join(REPLAN_KEYS))
    out = {**REPLAN_KEYS, **block}
    for k, v in out.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise error(where, f"replan.{k}", v, "a whole number of steps >= 1")
    link = raw.get("link")
    sharing = link.get("sharing") if isinstance(link, dict) else None
    if raw.get("flow_scheduler") != "echelon" or sharing != "priority":
        raise error(where, "replan", block, "only with flow_scheduler echelon on link.sharing priority "
                    "(it re-plans the flows' priorities)")
    return out
