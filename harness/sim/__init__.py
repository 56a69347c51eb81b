"""The flow-level cluster simulator: fluid.py models link-sharing jobs, engine.py runs a trace
through the schedulers' policies, flows.py schedules EchelonFlow steps, calibration.py holds the
constants measured on the emulator. ``interleave simulate``'s entry point is harness.simulate."""
from harness.sim.engine import Simulator  # noqa: F401
