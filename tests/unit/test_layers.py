"""The layering CONTRIBUTING.md draws: every storpath module imports only from its own
layer or the layers below it, there are no import cycles, and imports sit at the top of
their files (the landing page's is the one documented lazy import)."""

import ast
import os

from tests.conftest import ROOT

PACKAGE = os.path.join(ROOT, "exporter", "storpath")

# Lowest first; a module belongs to the longest prefix that names it.
LAYERS = (
    ("base", ("storpath", "storpath.roots", "storpath.problems", "storpath.log", "storpath.parse", "storpath.units",
              "storpath.sysfs", "storpath.subprocesses", "storpath.buildinfo", "storpath.progress",
              "storpath.config", "storpath.background", "storpath.atomicfile",
              "storpath.boundedjson")),
    ("readers", ("storpath.readers",)),
    ("analysis", ("storpath.analysis",)),
    ("snapshot", ("storpath.snapshot",)),
    ("metrics", ("storpath.families", "storpath.exposition")),
    ("collectors", ("storpath.collectors", "storpath.probes")),
    ("scrape", ("storpath.exporter", "storpath.findings", "storpath.tree", "storpath.metricsdoc",
                "storpath.capture", "storpath.reloads")),
    ("http", ("storpath.http", "storpath.landing")),
    ("commands", ("storpath.commands", "storpath.cli", "storpath.__main__", "storpath.manpage")),
)
LAZY = {("storpath.http.server", "storpath.landing")}  # documented in http/server.py


def _modules():
    found = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                module = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].replace(os.sep, ".")
                found[module[:-len(".__init__")] if module.endswith(".__init__") else module] = path
    return found


def _imports(path, known):
    """(imported module, at top level) of every storpath import in a file."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    top = {id(node) for node in tree.body}
    # Imports under `if TYPE_CHECKING:` name types for annotations only and never run.
    typing_only = {id(inner) for node in tree.body if isinstance(node, ast.If)
                   and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                   for inner in ast.walk(node)}
    for node in ast.walk(tree):
        names = []
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("storpath"):
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                     for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("storpath")]
        for name in names:
            yield name, id(node) in top


def _layer(module):
    best = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    assert best is not None, f"{module} is in no layer: add it to LAYERS and to CONTRIBUTING.md"
    return best[0]


def _graph():
    modules = _modules()
    return modules, {m: list(_imports(path, modules)) for m, path in modules.items()}


def test_no_import_runs_back_up():
    _, graph = _graph()
    upward = [(m, d) for m, deps in graph.items() for d, _ in deps
              if d != m and _layer(d) > _layer(m) and (m, d) not in LAZY]
    assert upward == []


def test_imports_are_at_the_top_of_their_files():
    _, graph = _graph()
    inner = [(m, d) for m, deps in graph.items() for d, top in deps if not top and (m, d) not in LAZY]
    assert inner == []


def test_no_import_cycles():
    modules, graph = _graph()
    edges = {m: {d for d, _ in deps if d in modules and d != m} for m, deps in graph.items()}
    state, cycles = {}, []

    def visit(module, path):
        state[module] = "open"
        for dep in sorted(edges[module]):
            if state.get(dep) == "open":
                cycles.append(path + [module, dep])
            elif dep not in state:
                visit(dep, path + [module])
        state[module] = "done"

    for module in sorted(edges):
        if module not in state:
            visit(module, [])
    assert cycles == []


def test_readers_never_log():
    """A reader returns `Problem`s beside its records (the snapshot step, or the background
    task that ran it, logs them once): no module of storpath.readers imports logging or
    storpath.log. Levels come from storpath.problems."""
    modules, graph = _graph()
    found = []
    for module, path in sorted(modules.items()):
        if _layer(module) != _layer("storpath.readers"):
            continue
        tree = ast.parse(open(path, encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [(module, a.name) for a in node.names if a.name.split(".")[0] == "logging"]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "logging":
                found.append((module, node.module))
        found += [(module, dep) for dep, _ in graph[module] if dep == "storpath.log"]
    assert found == []
