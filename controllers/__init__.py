"""OpenFlow controller apps of Interleave (os-ken, the maintained fork of Ryu).

``fabric_app`` is one Ryu-style app: proactive, loop-free routing from a fabric file written by
the harness, proxy ARP, CE-counting entries, and a JSON-lines control socket. ``launch`` starts
it as its own process (os-ken has no CLI since 4.0).
"""
