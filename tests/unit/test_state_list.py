"""docs/performance.md's "State kept on the scrape path" is the whole list: every piece of
state the code keeps is named in its table (or, below, is no state: one call's, one
scrape's or one connection's object), and every name in the table is in the code.

State, as found in the code (`found`):
- a module-level name a function changes (an item set, a mutating method called on it, or
  `global` rebinding it): a cache, a registry, a "seen" set;
- a function or method wrapped in functools' caches (`lru_cache`, `cache`);
- an attribute of a class that one of its methods changes, other than while the object is
  made (`__init__`): what an object keeps from one call to the next;
- where a thread is started (`threading.Thread(...)`): the class (or module) that starts it.
"""

from __future__ import annotations

import ast
import os
import re
from typing import Dict, List

from tests.conftest import ROOT

PACKAGE = os.path.join(ROOT, "exporter", "storpath")
PERFORMANCE = os.path.join(ROOT, "docs", "performance.md")
HEADING = "## State kept on the scrape path"

MUTATORS = {"append", "add", "update", "setdefault", "pop", "popitem", "clear", "extend", "insert", "remove",
            "discard", "appendleft", "move_to_end", "put", "put_nowait"}

# What changes between calls but is no state kept on the scrape path, by class (or module),
# each with its reason. A new class of its kind is added here with its reason; a new cache
# goes into docs/performance.md's table.
NOT_STATE: Dict[str, str] = {
    "storpath.scrape.snapshot._Job": "one source's read in one snapshot",
    "storpath.scrape.families.SeriesColumns": "one family's rows in one scrape",
    "storpath.readers.pci.PciDevice": "a record: its address is set once, as it is made",
    "storpath.readers.pci.PciReader._problems": "one read's problems, handed back at its end",
    "storpath.base.configfile._BoundedComposer": "one YAML file's parse",
    "storpath.report.findings.Facts": "one `storpath check` run's facts",
    "storpath.report.findings.Outcome": "one `storpath check` run's findings",
    "storpath.commands.check._NoteCollector": "one `storpath check` run's notes",
    "storpath.report.capture.redact.Redactor": "one `storpath capture` run's replacements",
    "storpath.base.progress.Progress": "one command's progress line",
    "storpath.report.capture.files.Tree": "one `storpath capture` run's list of files",
    "storpath.readers.raid.records.RaidInventory": "one pass's inventory, built and handed on",
    "storpath.readers.raid.records.Bounds": "one tool output's parse: its counts against the bounds",
    "storpath.readers.raid.records.Fields": "one tool output's parse: the problems of its fields",
    "storpath.readers.raid.ssacli._Controller": "one ssacli output's parse: a controller's blocks as read",
    "storpath.http.cheroot_patches": "the HTTP server's connections and their bookkeeping (docs/serving.md)",
    "storpath.http.process.Signals": "the signals the process received, for its main loop",
    "storpath.http.server.Site": "one configuration's web settings, swapped whole on reload",
    "storpath.base.background.Scheduler": "the background tasks, made once per configuration",
    "storpath.commands.serve.Built": "one configuration's collectors; its two flags only say the first complete "
                                     "scrape was served and settled",
    "storpath.report.reloads.ReloadStatus": "whether the last configuration load worked, exported as metrics",
    "storpath.report.exporter.StorpathExporter._failing": "which collectors failed last, so each failure is logged "
                                                   "once when it starts and once when it ends",
    "storpath.readers.zfs.ZpoolReader.json_supported": "whether this host's zpool speaks JSON, learnt once",
    "storpath.scrape.probes.engine.ProbeEngine._closed": "whether the engine was closed (no new fio)",
    "storpath.scrape.probes.engine.ProbeEngine._running": "the fio processes running now, so close() can stop them",
    "storpath.scrape.slow._Scheduled.tasks": "a slow source's background tasks, made once",
    "storpath.http.landing.Landing": "the landing page of the last scrape: listed as the last snapshot's drawing",
    "storpath.collectors.REGISTRY": "the collectors that registered themselves on import",
    "storpath.report.findings.REGISTRY": "the findings that registered themselves on import",
    "storpath.report.findings.UNAVAILABLE": "the findings whose subsystem is not on this host, filled on import",
}


def _modules(package: str = PACKAGE):
    for folder, _, files in os.walk(package):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                module = "storpath." + os.path.relpath(path, package)[:-3].replace(os.sep, ".")
                yield module[:-len(".__init__")] if module.endswith(".__init__") else module, path


def _changed(function) -> Dict[str, set]:
    """Names a function changes: {"module": {names}, "self": {attributes}}."""
    out = {"module": set(), "self": set(), "rebound": set()}

    def base_of(target):
        return target.value if isinstance(target, ast.Subscript) else target

    for node in ast.walk(function):
        bases, rebound = [], []
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                if isinstance(target, ast.Subscript) or isinstance(node, ast.AugAssign):
                    bases.append(base_of(target))
                elif isinstance(target, ast.Attribute):
                    rebound.append(target)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            bases.append(node.func.value)
        elif isinstance(node, ast.Global):
            out["module"].update(node.names)
        for base in bases:
            if isinstance(base, ast.Name):
                out["module"].add(base.id)
            elif isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and \
                    base.value.id in ("self", "cls"):
                out["self"].add(base.attr)
        for target in rebound:
            if isinstance(target.value, ast.Name) and target.value.id in ("self", "cls"):
                out["rebound"].add(target.attr)
    return out


def _cached(node) -> bool:
    return any(re.search(r"\b(lru_cache|cache)\b", ast.unparse(d)) for d in node.decorator_list)


def found(package: str = PACKAGE) -> Dict[str, str]:
    """name -> what kind of state it is, for every piece of state in the package's code."""
    out: Dict[str, str] = {}
    for module, path in _modules(package):
        tree = ast.parse(open(path, encoding="utf-8").read())
        top_level = {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                     for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                     if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for name in _changed(node)["module"] & top_level:
                    out[f"{module}.{name}"] = "module data changed by a function"
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _cached(node):
                out[f"{module}.{node.name}"] = "cached function"
            if not isinstance(node, ast.ClassDef):
                continue
            for item in node.body:
                if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                if _cached(item):
                    out[f"{module}.{node.name}.{item.name}"] = "cached method"
                changed = _changed(item)
                kept = changed["self"] | (changed["rebound"] if item.name != "__init__" else set())
                for attribute in kept:
                    out[f"{module}.{node.name}.{attribute}"] = "attribute changed by " + item.name
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Call) and ast.unparse(inner.func) in ("threading.Thread", "Thread"):
                        out[f"{module}.{node.name}"] = "starts a thread"
    return out


def listed(path: str = PERFORMANCE) -> List[str]:
    """The code names of the table's "where" column (each `module.Name...` in backticks)."""
    text = open(path, encoding="utf-8").read()
    start = text.index(HEADING)
    end = text.find("\n## ", start + 1)
    names = []
    for line in text[start:end].splitlines():
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) < 4 or cells[0] == "state":
            continue
        names += ["storpath." + n for n in re.findall(r"`([A-Za-z_][\w.]*)`", cells[1])]
    return names


def _covered(name: str, names) -> bool:
    return any(name == n or name.startswith(n + ".") for n in names)


def unlisted(package: str = PACKAGE, path: str = PERFORMANCE) -> List[str]:
    table = listed(path)
    return sorted(f"{name} ({why})" for name, why in found(package).items()
                  if not _covered(name, table) and not _covered(name, NOT_STATE))


def test_every_piece_of_state_is_in_the_table():
    assert unlisted() == [], "add these to docs/performance.md's state table (or NOT_STATE with a reason)"


def _defined(name: str) -> bool:
    """Whether `storpath.module[.Class][.attribute]` is in the code: a module, a name it
    binds, a class, or an attribute the class sets on itself or its objects."""
    modules = dict(_modules())
    parts = name.split(".")
    for cut in range(len(parts), 1, -1):
        module = ".".join(parts[:cut])
        if module in modules:
            rest = parts[cut:]
            break
    else:
        return False
    if not rest:
        return True
    tree = ast.parse(open(modules[module], encoding="utf-8").read())
    top = {n.name: n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    bound = {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
             for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
    if len(rest) == 1:
        return rest[0] in top or rest[0] in bound
    cls = top.get(rest[0])
    if not isinstance(cls, ast.ClassDef) or len(rest) != 2:
        return False
    return any(isinstance(n, ast.Attribute) and n.attr == rest[1] and isinstance(n.value, ast.Name)
               and n.value.id in ("self", "cls") for n in ast.walk(cls)) or \
        any(isinstance(n, ast.FunctionDef) and n.name == rest[1] for n in cls.body)


def test_every_name_in_the_table_is_in_the_code():
    assert [n for n in listed() if not _defined(n)] == []


def test_a_new_cache_without_an_entry_fails(tmp_path):
    """A planted module cache, an lru_cache and an instance's dict: each is found unlisted."""
    import shutil

    package = tmp_path / "storpath"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    assert unlisted(str(package)) == []
    with open(package / "readers" / "md.py", "a", encoding="utf-8") as handle:
        handle.write("\n_SEEN = {}\n\ndef remember(k, v):\n    _SEEN[k] = v\n"
                     "\n@functools.lru_cache(maxsize=None)\ndef slow(x):\n    return x\n"
                     "\nclass Keeper:\n    def __init__(self):\n        self.kept = {}\n\n"
                     "    def keep(self, k):\n        self.kept.setdefault(k, 0)\n"
                     "\nclass Spawner:\n    def go(self):\n        threading.Thread(target=print).start()\n")
    assert unlisted(str(package)) == [
        "storpath.readers.md.Keeper.kept (attribute changed by keep)",
        "storpath.readers.md.Spawner (starts a thread)",
        "storpath.readers.md._SEEN (module data changed by a function)",
        "storpath.readers.md.slow (cached function)",
    ]
