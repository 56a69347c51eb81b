"""Auto-tuner of netsens's delay timers: a grid search in the simulator on the workload at hand.

Candidates: the rack timer of ``high`` jobs in GRID_HIGH and of ``medium`` jobs in GRID_MEDIUM
(seconds; the pod timer equals the rack timer, low jobs never wait). Every candidate runs the whole
spec in harness.sim; the one with the lowest objective (``netsens.objective``: mean JCT or
makespan) wins, ties to the shorter timers. The result lists every candidate's objective, so a
user sees how flat the optimum is.

By default the candidates run on the spec's own trace (an oracle: the timers best for the very
jobs they are judged on). ``netsens.tune_seed`` tunes on a held-out trace instead: the spec's trace
drawn again with that seed (the same distribution, other jobs; a CSV trace keeps its arrivals and
draws other iterations), its background kept.
"""
GRID_HIGH = (0.0, 15.0, 60.0, 180.0, 600.0)
GRID_MEDIUM = (0.0, 15.0, 60.0)


def tune(spec, grid_high=GRID_HIGH, grid_medium=GRID_MEDIUM):
    from harness.schedulers.netsens import NetsensPolicy
    from harness.sim.engine import Simulator
    objective = spec.netsens["objective"]
    key = "jct_s_mean" if objective == "jct_mean" else "makespan_s"
    seed = spec.netsens.get("tune_seed")
    if seed is not None:
        from harness.spec import from_mapping
        background = spec.background
        spec = from_mapping({**spec.raw, "seed": seed}, spec.source)
        spec.background = background
    tried = []
    for hi in grid_high:
        for med in grid_medium:
            if med > hi:
                continue
            timers = {"high": [hi, hi], "medium": [med, med], "low": [0.0, 0.0]}
            sim = Simulator(spec, policy=NetsensPolicy(spec, timers=timers))
            tried.append({"timers": timers, objective: sim.run()["totals"][key]})
    best = min(tried, key=lambda r: (r[objective], r["timers"]["high"][0], r["timers"]["medium"][0]))
    return {"objective": objective, "chosen": best["timers"], "tried": tried,
            "trace_seed": spec.seed, "held_out": seed is not None}
