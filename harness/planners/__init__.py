"""Planners: what a run will do, decided before it starts (pure Python, no root). ``schedule`` (the
plan of a spec: epochs over its trace, or the simulator's decisions for event-driven policies),
``flowplan`` (the flow scheduler's decision for pipeline and tensor jobs), ``tuner`` (netsens's
delay timers searched in the simulator) and ``replan`` (priorities re-planned from measured arrivals
while a run goes). They sit above the policies (harness.schedulers) and the simulator (harness.sim)
and build the typed plan (harness.plan)."""
