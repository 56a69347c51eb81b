"""Schedulers: base placement policies and CASSINI's network-aware augmentation (pure Python, no root).

Modules: ``circles`` (geometric abstraction and per-link optimisation, CASSINI Table 1),
``affinity`` (Affinity graph, loops, Algorithm 1), ``traffic`` (which directed links a placed job
loads, and how much), ``placement`` (base policies and their candidates), ``cassini``
(Algorithm 2), ``policy`` (the contract the planners and the simulator call), ``netsens``,
``tiresias`` and ``reallocation`` (event-driven policies). The planners that use them are in
harness.planners.
Units: time in ms, demand in Gbit/s at the reference line rate, link ids ``a>b``.
"""
