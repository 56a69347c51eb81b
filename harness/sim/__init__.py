"""The flow-level cluster simulator (``interleave simulate``): fluid.py models link-sharing jobs,
engine.py runs a trace through the schedulers, calibration.py holds the constants measured on the
emulator."""
from harness.sim.engine import Simulator, simulate_spec  # noqa: F401
