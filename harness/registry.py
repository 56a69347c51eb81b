"""The schedulers and topologies a spec may name: the built-ins and plug-ins, registered the same way.

``register_scheduler(name)`` is a class decorator (``PlacementPolicy`` or ``EventPolicy`` subclasses,
harness.contract). Built-ins register in their own modules (``BUILTIN_MODULES``); plug-ins in a
Python file that a spec's ``plugins:`` or a command's ``--plugin`` names (``load_plugin``), or in an
installed package through the ``interleave.schedulers`` entry-point group. A spec's ``scheduler`` is
``NAME`` or ``NAME+cassini`` (``resolve``). Topologies: ``register_topology(name)`` on a builder
function ``f(link=None, **params) -> Topology`` whose keyword parameters (with defaults) are the
spec's ``topology`` keys; entry-point group ``interleave.topologies``.
"""
import hashlib
import importlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.contract import EventPolicy, PlacementPolicy, PluginError, origin_of, raised_at

BUILTIN_MODULES = ("harness.schedulers.placement", "harness.schedulers.netsens", "harness.schedulers.tiresias",
                   "topologies.fattree", "topologies.leafspine", "topologies.dumbbell")
ENTRY_POINT_GROUP = "interleave.schedulers"
TOPOLOGY_GROUP = "interleave.topologies"
PLUGINS_ENV = "INTERLEAVE_PLUGINS"     # plug-in files (os.pathsep) every process of a command loads
DEFAULT_SCHEDULER = "themis"
NAME_RULE = r"[a-z][a-z0-9_-]{0,31}"

_schedulers = {}        # name -> SchedulerEntry
_topologies = {}        # name -> TopologyEntry
_plugin_files = {}      # resolved path -> sha256 of the file as loaded
_state = {"builtins": False}     # and, per entry-point group, whether it was loaded


@dataclass(frozen=True)
class SchedulerEntry:
    name: str
    cls: type
    origin: str         # "built-in", a plug-in file, or "entry point PACKAGE"

    @property
    def kind(self):
        return "placement" if issubclass(self.cls, PlacementPolicy) else "event"

    @property
    def builtin(self):
        return self.origin == "built-in"


def _admit(kind, table, name, obj, where, same):
    """Check ``name`` for the ``kind`` ("scheduler", "topology") registry ``table``: a valid name, not
    taken by another object (``same(old)``: the same definition loaded again). Returns the origin
    to record ("built-in" or the plug-in's file)."""
    if not isinstance(name, str) or not re.fullmatch(NAME_RULE, name):
        raise PluginError(f"{where}: register_{kind}({name!r}): a name of lower-case letters, digits, _ and - "
                          "(at most 32, starting with a letter; '+' is CASSINI's)")
    builtin = obj.__module__ in BUILTIN_MODULES
    if not builtin:
        _load_builtins()
    old = table.get(name)
    if old is not None and not same(old):
        raise PluginError(f"{where}: {kind} {name!r} is already registered "
                          f"({'a built-in' if old.builtin else old.origin}); choose another name")
    return "built-in" if builtin else where.split(":")[0]


def register_scheduler(name):
    """Class decorator: make ``cls`` the scheduler ``name`` (a spec's ``scheduler: name``)."""
    def deco(cls):
        if not (isinstance(cls, type) and issubclass(cls, (PlacementPolicy, EventPolicy))):
            raise PluginError(f"{origin_of(cls)}: register_scheduler({name!r}) on {cls!r}: not a subclass of "
                              "interleave.PlacementPolicy or interleave.EventPolicy")
        where = origin_of(cls, line=False)
        origin = _admit("scheduler", _schedulers, name, cls, where,
                        lambda old: old.cls is cls or (old.cls.__qualname__ == cls.__qualname__
                                                       and origin_of(old.cls, line=False) == where))
        _schedulers[name] = SchedulerEntry(name, cls, origin)
        return cls
    return deco


@dataclass(frozen=True)
class TopologyEntry:
    name: str
    builder: object
    origin: str
    params: dict        # keyword -> default

    @property
    def builtin(self):
        return self.origin == "built-in"

    def describe(self):
        return ", ".join(f"{k} (default {v})" for k, v in self.params.items()) or "none"


def register_topology(name):
    """Decorator of a builder function ``f(link=None, **params) -> Topology``: the topology ``name``."""
    def deco(fn):
        import inspect
        where = _fn_origin(fn)
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            sig = None
        if sig is None or "link" not in sig.parameters:
            raise PluginError(f"{where}: register_topology({name!r}) on {fn!r}: a function f(link=None, **params) "
                              "returning a topologies.base.Topology")
        params = {k: p.default for k, p in sig.parameters.items()
                  if k != "link" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        origin = _admit("topology", _topologies, name, fn, where,
                        lambda old: old.builder is fn or _fn_origin(old.builder) == where)
        _topologies[name] = TopologyEntry(name, fn, origin, params)
        return fn
    return deco


def _fn_origin(fn):
    code = getattr(fn, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code else getattr(fn, "__module__", "?")


def topology(name):
    """The TopologyEntry of ``name``, or None."""
    _load_builtins()
    if name not in _topologies:
        _load_entry_points(TOPOLOGY_GROUP, _topologies, register_topology, callable)
    return _topologies.get(name)


def topology_names():
    _load_builtins()
    return sorted(_topologies)


def _load_builtins():
    if not _state["builtins"]:
        _state["builtins"] = True
        for mod in BUILTIN_MODULES:
            importlib.import_module(mod)
        for path in filter(None, os.environ.get(PLUGINS_ENV, "").split(os.pathsep)):
            load_plugin(path)


def use_plugins(paths):
    """Load the plug-in files ``paths`` (relative to the working directory) here and in every process
    this one starts (``PLUGINS_ENV``: a set's local workers)."""
    loaded = [str(load_plugin(p)) for p in paths]
    old = [p for p in os.environ.get(PLUGINS_ENV, "").split(os.pathsep) if p]
    os.environ[PLUGINS_ENV] = os.pathsep.join(dict.fromkeys(old + loaded))


def _load_entry_points(group, table, register, usable):
    """Load the installed packages' entry points of ``group`` once: each object ``usable(obj)`` and
    not yet in ``table`` is registered under its entry point's name (a module registers its own)."""
    if _state.get(group):
        return
    _state[group] = True
    from importlib.metadata import entry_points
    for ep in entry_points(group=group):
        try:
            obj = ep.load()
        except Exception as exc:
            raise PluginError(f"entry point {ep.name} = {ep.value} ({group}): {type(exc).__name__}: {exc}")
        if usable(obj) and ep.name not in table:
            register(ep.name)(obj)


def load_plugin(path, relative_to=None):
    """Run the plug-in file ``path`` (relative to the directory ``relative_to``), which registers
    what it defines. A file is loaded once per process. Raises PluginError naming the file."""
    _load_builtins()
    p = Path(path)
    if not p.is_absolute() and relative_to is not None:
        p = Path(relative_to) / p
    p = p.resolve()
    if p in _plugin_files:
        return p
    if not p.is_file():
        raise PluginError(f"{path}: no such plug-in file" + (f" (looked in {relative_to})" if relative_to else ""))
    data = p.read_bytes()
    mod_name = "interleave_plugin_" + hashlib.sha256(str(p).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(mod_name, p)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except PluginError:
        raise
    except Exception as exc:
        sys.modules.pop(mod_name, None)
        raise PluginError(f"{raised_at(exc, p)}: loading the plug-in raised {type(exc).__name__}: {exc}") from exc
    _plugin_files[p] = hashlib.sha256(data).hexdigest()
    return p


def plugin_files():
    """{path: sha256} of the plug-in files loaded in this process (a run records them)."""
    return {str(p): h for p, h in _plugin_files.items()}


def scheduler_names():
    _load_builtins()
    _load_entry_points(ENTRY_POINT_GROUP, _schedulers, register_scheduler, _is_class)
    return sorted(_schedulers)


def lookup(name):
    """The SchedulerEntry of ``name`` (no ``+cassini``), or None."""
    _load_builtins()
    if name not in _schedulers:
        _load_entry_points(ENTRY_POINT_GROUP, _schedulers, register_scheduler, _is_class)
    return _schedulers.get(name)


def _is_class(obj):
    return isinstance(obj, type)


def resolve(scheduler):
    """(entry, uses_cassini) of a spec's ``scheduler`` string; ValueError(what is allowed) if none."""
    if not isinstance(scheduler, str):
        raise ValueError(allowed())
    base, plus, extra = scheduler.partition("+")
    entry = lookup(base)
    if entry is None or (plus and extra != "cassini"):
        raise ValueError(allowed())
    if plus and not entry.cls.cassini:
        raise ValueError(f"{base} does not compose with CASSINI; " + allowed())
    return entry, bool(plus)


def allowed():
    names = scheduler_names()
    with_cassini = [n for n in names if _schedulers[n].cls.cassini]
    return ("one of " + ", ".join(names) + "; with CASSINI's shifts: " + ", ".join(n + "+cassini" for n in with_cassini)
            + "; a plug-in's scheduler needs its file under the spec's plugins: or --plugin")
