"""Interleave: packet-level emulation of ML-cluster fabrics for network-aware scheduling research."""
__version__ = "0.1.0"
