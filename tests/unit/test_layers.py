"""The rules CONTRIBUTING.md's first section draws, read from CONTRIBUTING.md itself: every
storpath module is in one layer of its list and imports only from its own layer or the
layers above it; an `importlib.import_module` counts as an import; there are no import
cycles; imports sit at the top of their files (the lazy ones are listed in LAZY with their
reason); readers never log; analysis does no I/O."""

import ast
import os
import re
import shutil

import pytest

from tests.conftest import ROOT

PACKAGE = os.path.join(ROOT, "exporter", "storpath")
CONTRIBUTING = os.path.join(ROOT, "CONTRIBUTING.md")

# Imports inside a function, each with the reason it waits. An importlib target is written
# as the module that calls it and the package it loads from ("storpath.commands.*").
LAZY = {
    ("storpath.http.server", "storpath.landing"):
        "the landing page's modules (tree, findings) load on the first visit, not in a scrape-only exporter",
    ("storpath.http.webconfig", "bcrypt"): "only where --web.config.file configures basic auth",
    ("storpath.collectors.probes", "storpath.probes.engine"): "fio's machinery only where probe targets are configured",
    ("storpath.options", "storpath.configfile"): "PyYAML only where --config.file is given",
    ("storpath.http.webconfig", "storpath.configfile"): "PyYAML only where --web.config.file is given",
    ("storpath.exposition", "prometheus_client.parser"): "tests only: the serve path never parses its own text",
    ("storpath.cli", "storpath.commands.*"): "the one subcommand that runs (or all of them for --help)",
    ("storpath.collectors", "storpath.collectors.*"): "every collector module registers itself when loaded",
    ("storpath.findings", "storpath.findings.*"): "every findings module registers itself when loaded",
    ("storpath.capture.files", "storpath.readers.*"): "every reader names the files `storpath capture` takes",
}

# What reads or writes outside the process: an analysis module imports none of it, opens
# no file and runs no reader.
IO_MODULES = {"os", "io", "pathlib", "shutil", "glob", "socket", "subprocess", "tempfile", "fcntl", "mmap",
              "storpath.sysfs", "storpath.subprocesses", "storpath.atomicfile", "storpath.boundedjson"}


def layers(text=None):
    """(name, module prefixes) of each layer, lowest first, from CONTRIBUTING.md's list: a
    line that starts in the first column starts a layer, unless the one before it ended its
    modules with a comma. The package's own __init__ (storpath: the version) is the base."""
    text = text if text is not None else open(CONTRIBUTING, encoding="utf-8").read()
    block = re.search(r"^```\n(sysfs\.py.*?)^```", text, re.M | re.S)
    assert block, "CONTRIBUTING.md has no layer list (a code block that starts with sysfs.py)"
    found, continued = [], False
    for line in block.group(1).splitlines():
        if not line or line[0] == " ":
            continue
        names = re.split(r"\s{2,}", line, maxsplit=1)[0].strip()
        modules = ["storpath." + re.sub(r"(\.py|/)$", "", n.strip()) for n in names.split(",") if n.strip()]
        if continued:
            found[-1] += modules
        else:
            found.append(modules)
        continued = names.endswith(",")
    found[0].insert(0, "storpath")
    return tuple((group[0], tuple(group)) for group in found)


LAYERS = layers()


def _modules(package=PACKAGE):
    found = {}
    for folder, _, files in os.walk(package):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                module = os.path.relpath(path, os.path.dirname(package))[:-3].replace(os.sep, ".")
                found[module[:-len(".__init__")] if module.endswith(".__init__") else module] = path
    return found


def _parents(tree):
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return parents


def _in_function(node, parents):
    while id(node) in parents:
        node = parents[id(node)]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return True
    return False


def _importlib_target(call, bound, own):
    """The module an `importlib.import_module(...)` call names: a string, or an f-string
    whose parts are strings and `<module>.__name__` (anything else is one module below
    what comes before it: "storpath.commands.*")."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "import_module"
            or isinstance(func, ast.Name) and func.id == "import_module") or not call.args:
        return None
    arg = call.args[0]
    parts = arg.values if isinstance(arg, ast.JoinedStr) else [arg]
    text = ""
    for part in parts:
        value = part.value if isinstance(part, ast.FormattedValue) else part
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            text += value.value
        elif isinstance(value, ast.Attribute) and value.attr == "__name__" and isinstance(value.value, ast.Name):
            text += bound.get(value.value.id, value.value.id)
        elif isinstance(value, ast.Name) and value.id == "__name__":
            text += own
        else:
            return text + "*"
    return text


def _imports(path, known, own):
    """(imported module, at module level) of every import in a file, storpath's and others',
    importlib's included (a target ending in * for one module below a package)."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    parents = _parents(tree)
    # Imports under `if TYPE_CHECKING:` name types for annotations only and never run.
    typing_only = {id(inner) for node in tree.body if isinstance(node, ast.If)
                   and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                   for inner in ast.walk(node)}
    bound = {}  # a name the file binds by import -> the module it is
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        names = []
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                     for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.Call):
            target = _importlib_target(node, bound, own)
            if target is not None:
                names = [target]
        for name in names:
            yield name, not _in_function(node, parents)


def _expand(name, known):
    """A module, or every known module an importlib target ending in * may load."""
    if name.endswith("*"):
        prefix = name[:-1]
        return [m for m in known if m.startswith(prefix) and "." not in m[len(prefix):]]
    return [name]


def _layer(module, table=LAYERS):
    best = None
    for index, (_, prefixes) in enumerate(table):
        for prefix in prefixes:
            package = prefix != "storpath"  # the package's own __init__, not everything in it
            if (module == prefix or package and module.startswith(prefix + ".")) and \
                    (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    return None if best is None else best[0]


def _graph(package=PACKAGE):
    modules = _modules(package)
    return modules, {m: list(_imports(path, modules, m)) for m, path in modules.items()}


def _storpath_edges(graph, modules):
    """(module, imported storpath module, the import as written, at module level)."""
    for m, deps in graph.items():
        for written, top in deps:
            if written.split(".")[0] != "storpath":
                continue
            for d in _expand(written, modules):
                yield m, d, written, top


def no_layer(package=PACKAGE, table=LAYERS):
    modules = _modules(package)
    return sorted(m for m in modules if _layer(m, table) is None)


def upward(package=PACKAGE, table=LAYERS):
    modules, graph = _graph(package)
    return sorted((m, d) for m, d, written, _ in _storpath_edges(graph, modules)
                  if d != m and _layer(m, table) is not None and _layer(d, table) is not None
                  and _layer(d, table) > _layer(m, table) and (m, written) not in LAZY)


def inner_imports(package=PACKAGE):
    _, graph = _graph(package)
    return sorted((m, d) for m, deps in graph.items() for d, top in deps if not top and (m, d) not in LAZY)


def cycles(package=PACKAGE):
    modules, graph = _graph(package)
    edges = {m: set() for m in modules}
    for m, d, written, _ in _storpath_edges(graph, modules):
        # A registry package loading its own modules by name (they import its `register`)
        # runs after the package is whole: not a cycle. Any other importlib target is.
        if d in modules and d != m and written != m + ".*":
            edges[m].add(d)
    state, found = {}, []

    def visit(module, path):
        state[module] = "open"
        for dep in sorted(edges[module]):
            if state.get(dep) == "open":
                found.append(path + [module, dep])
            elif dep not in state:
                visit(dep, path + [module])
        state[module] = "done"

    for module in sorted(edges):
        if module not in state:
            visit(module, [])
    return found


def reader_logging(package=PACKAGE, table=LAYERS):
    modules, graph = _graph(package)
    readers = _layer("storpath.readers", table)
    return sorted((m, d) for m, deps in graph.items() if _layer(m, table) == readers
                  for d, _ in deps if d.split(".")[0] == "logging" or d == "storpath.log")


def analysis_io(package=PACKAGE, table=LAYERS):
    """(module, what) for every import of an I/O module, reader class or open() in analysis."""
    modules, graph = _graph(package)
    analysis = _layer("storpath.analysis", table)
    found = []
    for module, path in sorted(modules.items()):
        if _layer(module, table) != analysis:
            continue
        found += [(module, d) for d, _ in graph[module]
                  if d in IO_MODULES or d.split(".")[0] in IO_MODULES - {"storpath"}]
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                found.append((module, "open()"))
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("storpath.readers"):
                found += [(module, f"{node.module}.{a.name}") for a in node.names
                          if a.name.endswith("Reader") or a.name.startswith("read_")]
    return found


def test_every_module_is_in_a_layer():
    assert no_layer() == [], "add these to CONTRIBUTING.md's layer list"


def test_no_import_runs_back_up():
    assert upward() == []


def test_imports_are_at_the_top_of_their_files():
    assert inner_imports() == []


def test_no_import_cycles():
    assert cycles() == []


def test_readers_never_log():
    """A reader returns `Problem`s beside its records (the snapshot step, or the background
    task that ran it, logs them once): no module of storpath.readers imports logging or
    storpath.log. Levels come from storpath.problems."""
    assert reader_logging() == []


def test_analysis_does_no_io():
    assert analysis_io() == []


def test_the_layer_list_is_read_as_written():
    """The parse of CONTRIBUTING.md's list: a comma carries a layer onto the next line."""
    assert [name for name, _ in LAYERS] == ["storpath", "storpath.readers", "storpath.analysis",
                                             "storpath.snapshot", "storpath.exposition", "storpath.collectors",
                                             "storpath.exporter", "storpath.http",
                                             "storpath.options"]
    assert "storpath.safetext" in LAYERS[0][1] and "storpath.manpage" in LAYERS[-1][1]


PLANTED = [
    ("commands/serve.py", "\nfrom storpath.cli import main\n", cycles),  # cli loads commands by importlib
    ("readers/md.py", "\nimport importlib\n\ndef f():\n    importlib.import_module('storpath.findings.md')\n", upward),
    ("config.py", "\ndef f():\n    import yaml\n", inner_imports),
    ("newthing.py", "X = 1\n", no_layer),
    ("readers/md.py", "\nimport logging\n", reader_logging),
    ("readers/pci.py", "\nfrom storpath import log\n", reader_logging),
    ("analysis/md.py", "\ndef f(path):\n    return open(path).read()\n", analysis_io),
    ("analysis/topology.py", "\nfrom storpath.readers.pci import PciReader\n", analysis_io),
    ("analysis/zfs.py", "\nimport os\n", analysis_io),
]


@pytest.mark.parametrize("path,text,check", PLANTED, ids=[f"{p}:{c.__name__}" for p, _, c in PLANTED])
def test_each_rule_fails_on_a_violation_planted_in_a_copy(tmp_path, path, text, check):
    package = str(tmp_path / "storpath")
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    assert check(package) == []
    with open(os.path.join(package, path), "a", encoding="utf-8") as handle:
        handle.write(text)
    assert check(package) != []
