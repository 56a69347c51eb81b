"""Workloads: ML communication profiles (data files with provenance) and their loading rules.

A *profile* describes one training iteration of one model at the reference line rate: its period
(``iteration_ms``) and its communication *phases* (start, duration, demand in Gbit/s, and the
pattern that realises the demand between the job's workers). Everything else is compute, i.e. no
network demand. Built-in profiles live in ``workloads/profiles/<name>.yaml``; each number in them
has a provenance entry saying where it came from (a paper's figure or table, or a formula and the
modelling choice behind it).
"""
