"""Constants of the simulator measured on the emulator, with the command that measured each.

MARKS_PER_GBIT: ECN-marked packets per Gbit (reference units) sent through a link whose offered
load exceeds its capacity. Measured with ``sudo make demo`` / the reproduction set's demo runs
(two VGG19 started together on the 24-host fat-tree, 50 Mbit/s links, 9000-byte MTU): themis runs
marked 2335, 1178 and 2726 packets over 200 iterations (10.4 per iteration); the fluid model sends
25.6 Gbit x ms / 1000 per iteration through overloaded links for that case, so 10.4 / 25.6 = 0.41.
The unit is the emulator's packets (the fabric runs at 1/1000 of the reference rate): simulated
marks are comparable with emulated ones, and only as an order of magnitude.
"""
MARKS_PER_GBIT = 0.41
