"""Interleave's Python API: load a spec, plan it, simulate or emulate it, read results as DataFrames,
and add schedulers of your own.

    import interleave
    spec = interleave.load_spec("experiments/demo.yaml")
    sim = interleave.simulate(spec, scheduler="themis+cassini")
    sim.jobs                      # one row per job (pandas)
    run = interleave.read_results("results/demo-themis+cassini")
    run.iterations                # one row per iteration of every job (emulated runs)

A scheduler of your own: subclass ``PlacementPolicy`` (``place(job, free_hosts, cluster)``) or
``EventPolicy`` (``decide(t, waiting, running)``) and decorate it with ``register_scheduler(name)``
in a file a spec names under ``plugins:`` (or a command's ``--plugin``); a topology: a builder
function decorated with ``register_topology(name)``. docs/plugins.md.
"""
from harness.contract import Cluster, EventPolicy, JobRequest, PlacementPolicy, PluginError
from harness.plan import Plan, PlannedJob
from harness.registry import load_plugin, register_scheduler, register_topology, scheduler_names, topology_names
from harness.schedulers.policy import Decision
from interleave.api import Result, load_spec, read_results, run, schedule, simulate

__all__ = ["Cluster", "Decision", "EventPolicy", "JobRequest", "PlacementPolicy", "Plan", "PlannedJob", "PluginError", "Result",
           "load_plugin", "load_spec", "read_results", "register_scheduler", "register_topology", "run", "schedule",
           "scheduler_names", "simulate", "topology_names"]
