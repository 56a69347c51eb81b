"""The import graph of harness/ has no cycle: function-local imports count, and importing a module
counts as importing its parent packages (their __init__ runs first). The policy contract sits below
the simulator and the planner."""
import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[2]


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolve(name):
    """The module (or package) a dotted import name refers to, if it is one of ours."""
    while name:
        p = ROOT.joinpath(*name.split("."))
        if p.with_suffix(".py").exists() or (p / "__init__.py").exists():
            return name
        name = name.rpartition(".")[0]
    return None


def ancestors(mod):
    parts = mod.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def import_graph(package="harness"):
    """Module -> modules it imports (anywhere in its file), plus the packages whose __init__ that
    import runs first (those not already being initialised as the importer's own ancestors)."""
    g = nx.DiGraph()
    for f in (ROOT / package).rglob("*.py"):
        mod = module_name(f)
        g.add_node(mod)
        for node in ast.walk(ast.parse(f.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for n in names:
                target = resolve(n)
                if not target or not target.startswith(package):
                    continue
                for t in ({target} | ancestors(target)) - ancestors(mod) - {mod}:
                    if t.startswith(package):
                        g.add_edge(mod, t)
    return g


def test_no_import_cycle_in_harness():
    cycles = list(nx.simple_cycles(import_graph()))
    assert not cycles, sorted(cycles, key=len)[:5]


def test_policies_sit_below_the_simulator_and_the_planner():
    g = import_graph()
    below = nx.descendants(g, "harness.schedulers.policy")
    assert not below & {"harness.sim.engine", "harness.planners.schedule", "harness.simulate", "harness.sim"}
    assert "harness.schedulers.policy" in nx.descendants(g, "harness.sim.engine")


def test_the_policies_import_no_planner_simulator_or_spec_and_the_planners_sit_above_them():
    g = import_graph()
    policies = [m for m in g if m.startswith("harness.schedulers")]
    reached = set().union(*(nx.descendants(g, m) for m in policies))
    assert not {m for m in reached if m.startswith(("harness.planners", "harness.sim"))}
    assert "harness.spec" not in reached
    planners = [m for m in g if m.startswith("harness.planners.")]
    assert planners and not {m for p in planners for m in nx.descendants(g, p)} & {"harness.runner", "harness.cli",
                                                                                    "harness.sets", "harness.simulate"}


SOURCES = [f for d in ("harness", "agents", "workloads") for f in (ROOT / d).rglob("*.py")]
# (what, owner module, patterns that would re-implement it elsewhere)
OWNED = [
    ("the wrap into one period", "agents/timing.py",
     [r"%\s*\(?[\w.]+\)?\s*-\s*[\w.]+\s*/\s*2", r"-\s*[\w.]+\s+if\s+\w+\s*>\s*[\w.]+\s*/\s*2"]),
    ("the re-alignment threshold", "agents/timing.py", [r"0\.05\s*\*\s*[\w.]*it", r"realign_frac"]),
    ("the grid slot rule", "agents/timing.py", [r"round\(\s*\(\s*\w+\s*-\s*t0\s*\)\s*/"]),
    ("the summary writer", "harness/metrics.py",
     [r'"iteration_ms_mean":\s*round\(', r'"communication_overhead_s":\s*round\(', r'"jct_s":\s*round\(']),
]


def test_each_timing_and_schema_fact_has_one_owner():
    import re
    found = []
    for what, owner, pats in OWNED:
        for f in SOURCES:
            rel = str(f.relative_to(ROOT))
            if rel == owner:
                continue
            text = f.read_text()
            found += [(what, rel, p) for p in pats if re.search(p, text)]
    assert not found, found


def test_alignment_is_decided_in_one_place():
    defs = [str(f.relative_to(ROOT)) for f in SOURCES if "def alignment(" in f.read_text()]
    assert defs == ["harness/schedulers/policy.py"]


def test_the_agents_runtime_imports_only_the_standard_library_and_itself():
    """What runs on the emulated hosts (agents/) stands apart from the harness and the profile data."""
    import sys
    found = []
    for f in (ROOT / "agents").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
            found += [(f.name, n) for n in names
                      if n.split(".")[0] not in sys.stdlib_module_names and n.split(".")[0] != "agents"]
    assert not found, found
