"""Packaging for Interleave: console script ``interleave``, extras ``[test]`` and ``[docs]`` (make docs).

Mininet is not on this list on purpose: PyPI's ``mininet`` (2.3.0.dev6) lacks ``mnexec``. The
distro package provides it, and the project's venv sees it through ``--system-site-packages``
(scripts/setup.sh builds that venv).
"""
from setuptools import find_packages, setup

setup(
    name="interleave",
    version="0.1.0",
    description="Packet-level emulation harness for network-aware scheduling of ML training clusters",
    packages=find_packages(include=["interleave", "interleave.*", "harness", "harness.*", "agents", "agents.*", "controllers", "controllers.*",
                                    "topologies", "topologies.*", "workloads", "workloads.*"]),
    package_data={"harness": ["bpf/*.c"]},
    python_requires=">=3.9",
    install_requires=[
        "os-ken>=4.2.2,<5",
        "networkx>=3.0,<4",
        "pyyaml>=6,<7",
        "numpy>=1.24,<3",
        "pandas>=2.0,<4",
        "scapy>=2.5,<3",
        "matplotlib>=3.7,<4",
        "scipy>=1.10,<2",
        "tqdm>=4.60,<5",
        "distributed>=2024.1,<2027",      # experiment sets on Dask workers (reproduce --workers / --cluster)
    ],
    extras_require={"test": ["pytest>=7,<10", "pytest-xdist>=3,<4", "hypothesis>=6.80,<7"],
                    "docs": ["mkdocs>=1.5,<2"]},
    entry_points={"console_scripts": ["interleave=harness.cli:main"]},
)
