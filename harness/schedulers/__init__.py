"""Schedulers: base placement policies and CASSINI's network-aware augmentation (pure Python, no root).

Modules: ``circles`` (geometric abstraction and per-link optimisation, CASSINI Table 1),
``affinity`` (Affinity graph, loops, Algorithm 1), ``traffic`` (which directed links a placed job
loads, and how much), ``placement`` (base policies and their candidates), ``cassini``
(Algorithm 2), ``plan`` (epochs over a trace; the JSON of ``interleave schedule``).
Units: time in ms, demand in Gbit/s at the reference line rate, link ids ``a>b``.
"""
