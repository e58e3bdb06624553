"""CONTRIBUTING.md's house rules, judged by what the code did rather than by how it is written.

- No I/O below the snapshot step: a collector's `values`, analysis (storpath.analysis.*) and
  rendering (storpath.scrape.exposition, storpath.scrape.families) open no file, list no directory, start
  no process and use no socket. `io_violations` names every recorded event (recorder.Event)
  with one of them on its thread's stack. A frame is placed in a layer by its module, and a
  `values` frame is a collector's when its module or its object's class is a collector's, so
  a collector's `values` written anywhere else is one too. Other threads, and the same
  threads outside those frames (the snapshot's reading thread, background tasks), may read.

- No state of their own: between scrapes, storpath's modules (their data, their classes'
  data, cached functions, functions' default arguments) and the readers', collectors' and
  analysis' objects an exporter holds keep nothing new but what docs/performance.md's table
  "State kept on the scrape path" lists. `StateWatch` takes what they hold after each scrape
  (one level deep: a dict's keys and which objects are its values); `kept_state` names what
  changed from one to the next.
"""

from __future__ import annotations

import collections
import functools
import re
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from tests.conftest import ROOT

PERFORMANCE = f"{ROOT}/docs/performance.md"
STATE_HEADING = "## State kept on the scrape path"

# --- no I/O in values, analysis or rendering ------------------------------------------------

COLLECTORS, ANALYSIS, RENDERING = "storpath.collectors", "storpath.analysis", ("storpath.scrape.exposition",
                                                                               "storpath.scrape.families")


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layer_of(frame) -> Optional[str]:
    """Which layer that does no I/O a recorded frame runs in, if any."""
    if frame.function.rsplit(".", 1)[-1] == "values" and (
            _within(frame.module, COLLECTORS) or _within(frame.owner, COLLECTORS)):
        return "a collector's values"
    if _within(frame.module, ANALYSIS):
        return "analysis"
    if any(_within(frame.module, package) for package in RENDERING):
        return "rendering"
    return None


def io_violations(events: Iterable) -> List[str]:
    """Each event with a no-I/O layer on its stack: what it did, on which thread, the layer's
    frame and the calls from it down to the event."""
    found = set()
    for event in events:
        for depth, frame in enumerate(event.stack):
            layer = layer_of(frame)
            if layer is not None:
                calls = " -> ".join(str(f) for f in reversed(event.stack[:depth + 1]))
                found.add(f"{event} in {layer}: {calls}")
                break
    return sorted(found)


# --- no state between scrapes -----------------------------------------------------------------

def listed_state(path: str = PERFORMANCE) -> Tuple[str, ...]:
    """The code names in the "where" column of docs/performance.md's state table."""
    text = open(path, encoding="utf-8").read()
    start = text.index(STATE_HEADING)
    end = text.find("\n## ", start + 1)
    names = []
    for line in text[start:end].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 4 and cells[0] != "state" and not cells[0].startswith("---"):
            names += ["storpath." + n for n in re.findall(r"`([A-Za-z_][\w.]*)`", cells[1])]
    assert names, f"no state table under {STATE_HEADING!r} in {path}"
    return tuple(names)


def allowed(name: str, names: Sequence[str]) -> bool:
    return any(name == n or name.startswith(n + ".") for n in names)


SCALARS = (int, float, complex, str, bytes, bool, type(None), range)
HOLDER_PACKAGES = ("storpath.readers", "storpath.collectors", "storpath.analysis")


def _token(value: Any) -> Any:
    """A value that compares equal while `value` is the same: scalars by value, the rest by
    which object it is."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, SCALARS):
        return value
    if isinstance(value, (tuple, frozenset)) and all(isinstance(v, SCALARS) for v in value):
        return value
    return ("object", id(value))


def _held(value: Any) -> Any:
    """What a name or an attribute holds, one level deep."""
    if hasattr(value, "cache_info") and callable(value):
        return ("cache", value.cache_info().currsize)
    if isinstance(value, (dict, types.MappingProxyType)):
        return ("map", tuple((_token(k), _token(v)) for k, v in list(value.items())))
    if isinstance(value, (list, collections.deque)):
        return ("sequence", tuple(_token(v) for v in list(value)))
    if isinstance(value, (set, frozenset)):
        return ("set", frozenset(_token(v) for v in list(value)))
    return _token(value)


def _defaults(function) -> Any:
    return (tuple(_held(d) for d in function.__defaults__ or ()),
            tuple((k, _held(v)) for k, v in (function.__kwdefaults__ or {}).items()))


def _module_state(module: types.ModuleType) -> Dict[Tuple, Tuple[str, Any]]:
    """(place) -> (name, what it holds) for a module's names, its classes' attributes and its
    functions' and methods' default arguments."""
    out = {}
    home = module.__name__

    def function(name: str, value: Any) -> None:
        if hasattr(value, "cache_info"):
            out[("cache", home, name)] = (f"{home}.{name} (a cache)", _held(value))
        inner = getattr(value, "__func__", value)
        inner = getattr(inner, "__wrapped__", inner)
        if isinstance(inner, types.FunctionType) and inner.__module__ == home:
            out[("defaults", home, name)] = (f"{home}.{name} (default arguments)", _defaults(inner))

    for name, value in list(vars(module).items()):
        if name.startswith("__") or isinstance(value, types.ModuleType):
            continue
        if isinstance(value, type):
            if value.__module__ == home:
                for attribute, member in list(vars(value).items()):
                    if attribute.startswith("__"):
                        continue
                    qualified = f"{name}.{attribute}"
                    if callable(member) or isinstance(member, (staticmethod, classmethod)):
                        function(qualified, member)
                    elif not isinstance(member, (property, types.GetSetDescriptorType, types.MemberDescriptorType)):
                        out[("class", home, qualified)] = (f"{home}.{qualified}", _held(member))
            continue
        if callable(value):
            function(name, value)
            continue
        out[("module", home, name)] = (f"{home}.{name}", _held(value))
    return out


def _is_record(value: Any) -> bool:
    """What one read returns (a dataclass, a named tuple), not an object that reads."""
    return hasattr(type(value), "__dataclass_fields__") or isinstance(value, tuple)


def _children(value: Any) -> List[Any]:
    if isinstance(value, (list, tuple, set, frozenset, collections.deque)):
        return list(value)
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, types.MethodType):
        return [value.__self__, value.__func__]
    if isinstance(value, functools.partial):
        return [value.func, *value.args, *value.keywords.values()]
    if isinstance(value, types.FunctionType):
        cells = []
        for cell in value.__closure__ or ():
            try:
                cells.append(cell.cell_contents)
            except ValueError:  # not yet bound
                pass
        return cells
    if type(value).__module__.startswith("storpath.") and hasattr(value, "__dict__"):
        return list(vars(value).values())
    return []


def holders(roots: Sequence[Any], depth: int = 12) -> List[Any]:
    """The readers', collectors' and analysis' objects reachable from `roots` (through
    storpath's objects, containers, bound methods, partials and closures), records not counted."""
    seen, found, todo = set(), [], [(root, 0) for root in roots]
    while todo:
        value, level = todo.pop()
        if id(value) in seen or level > depth or isinstance(value, (type, types.ModuleType)):
            continue
        seen.add(id(value))
        if type(value).__module__.startswith(HOLDER_PACKAGES) and hasattr(value, "__dict__") \
                and not _is_record(value):
            found.append(value)
        todo.extend((child, level + 1) for child in _children(value))
    return found


@dataclass
class Taken:
    """What the watched modules and objects held at one moment."""
    places: Dict[Tuple, Tuple[str, Any]] = field(default_factory=dict)
    owners: set = field(default_factory=set)  # the modules and objects (by id) looked at
    pinned: List[Any] = field(default_factory=list)  # the objects, kept alive so that their ids stay theirs


class StateWatch:
    """Takes what storpath's modules, and the readers', collectors' and analysis' objects
    reachable from `roots` (a served exporter), hold."""

    def __init__(self, *roots: Any):
        self.roots = roots

    def take(self) -> Taken:
        taken = Taken()
        for name, module in list(sys.modules.items()):
            if _within(name, "storpath") and module is not None:
                taken.owners.add(name)
                taken.places.update(_module_state(module))
        for holder in holders(self.roots):
            cls = type(holder)
            taken.owners.add(id(holder))
            taken.pinned.append(holder)
            for attribute, value in list(vars(holder).items()):
                taken.places[("object", id(holder), attribute)] = (
                    f"{cls.__module__}.{cls.__qualname__}.{attribute}", _held(value))
        return taken


def kept_state(taken: Sequence[Taken], names: Optional[Sequence[str]] = None) -> List[str]:
    """What changed from one `Taken` to the next and is not in `names` (docs/performance.md's
    state table)."""
    names = listed_state() if names is None else names
    changed = set()
    for before, after in zip(taken, taken[1:]):
        for place in before.places.keys() | after.places.keys():
            owner = place[1]  # the module's name or the object's id
            if owner not in before.owners or owner not in after.owners:
                continue
            old, new = before.places.get(place), after.places.get(place)
            if old is None or new is None or old[1] != new[1]:
                name = (old or new)[0]
                if not allowed(name.split(" ")[0], names):
                    changed.add(name)
    return sorted(changed)
