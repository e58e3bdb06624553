"""The rules CONTRIBUTING.md's first section draws, read from CONTRIBUTING.md itself: every
storpath module is in one layer of its list and imports only from its own layer or the
layers above it; every import counts, however it is written (relative, inside a function,
under `if TYPE_CHECKING:`, `importlib.import_module` or `__import__`); there are no import
cycles; imports sit at the top of their files (the lazy ones are listed in LAZY with their
reason); readers never log; analysis does no I/O, judged by what it can reach (ANALYSIS_MAY_USE:
an allow-list, and every storpath name it takes must itself reach nothing else); collectors
never open files.

Every rule is shown to fail on violations planted in a copy of the package (PLANTED, at the
end)."""

import ast
import functools
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
    ("storpath.http.server", "storpath.http.landing"):
        "the landing page's modules (tree, findings) load on the first visit, not in a scrape-only exporter",
    ("storpath.http.webconfig", "bcrypt"): "only where --web.config.file configures basic auth",
    ("storpath.http.webconfig", "hashlib"): "keys the admitted users: only where basic auth is configured",
    ("storpath.http.webconfig", "ssl"): "ssl and OpenSSL load only where --web.config.file configures TLS",
    ("storpath.http.cheroot_patches", "ssl"): "a TLS handshake's errors: ssl is loaded with the TLS context by then",
    ("storpath.http.runbooks", "html"): "the runbooks' index page only, asked for rarely",
    ("storpath.scrape.slow", "storpath.scrape.probes.engine"): "fio's machinery only where probe targets are configured",
    ("storpath.commands.options", "storpath.base.configfile"): "PyYAML only where --config.file is given",
    ("storpath.examples", "tarfile"): "the example machines' archives are opened only where --example is given",
    ("storpath.http.webconfig", "storpath.base.configfile"): "PyYAML only where --web.config.file is given",
    ("storpath.scrape.exposition", "prometheus_client.parser"): "tests only: the serve path never parses its own text",
    ("storpath.cli", "storpath.commands.*"): "the one subcommand that runs (or all of them for --help)",
    ("storpath.cli", "storpath.commands.options"): "loaded (every collector and reader) with the garbage collector paused",
    ("storpath.collectors", "storpath.collectors.*"): "every collector module registers itself when loaded",
    ("storpath.report.findings", "storpath.report.findings.*"): "every findings module registers itself when loaded",
    ("storpath.report.capture.files", "storpath.readers.*"): "every reader names the files `storpath capture` takes",
    # A slow source's parsers load with the first output they parse: a host without that tool,
    # and a scrape-only exporter's start (benchmarks/startup.py), never import them.
    ("storpath.readers.raid.merge", "storpath.readers.raid.storcli"): "storcli's parser with its first output",
    ("storpath.readers.raid.merge", "storpath.readers.raid.megacli"): "MegaCli's parser with its first output",
    ("storpath.readers.raid.merge", "storpath.readers.raid.ssacli"): "ssacli's parser with its first output",
    ("storpath.readers.raid.merge", "storpath.readers.raid.arcconf"): "arcconf's parser with its first output",
    ("storpath.readers.raid.merge", "storpath.readers.raid.smartctl"): "smartctl's parser with its first output",
    ("storpath.readers.raid.tools", "storpath.readers.raid.arcconf"): "arcconf's parser only where arcconf runs",
}

# What an analysis module may use: these standard modules whole (none of them reads or writes
# outside the process), the named attributes of the others, the builtins but IMPURE_BUILTINS,
# and storpath's own names that reach nothing else (a reader's record type and its pure
# functions, storpath.base.units, analysis itself), each judged by its own code (`reaches`).
ANALYSIS_MAY_USE = {
    "__future__": None, "abc": None, "bisect": None, "collections": None, "collections.abc": None,
    "copy": None, "dataclasses": None, "decimal": None, "enum": None, "fractions": None,
    "functools": None, "heapq": None, "itertools": None, "math": None, "numbers": None,
    "operator": None, "re": None, "reprlib": None, "statistics": None, "string": None,
    "types": None, "typing": None,
    "sys": {"intern", "maxsize", "float_info"},
}
IMPURE_BUILTINS = {"open", "print", "input", "exec", "eval", "compile", "__import__", "breakpoint"}

# What opens, lists or writes files: a collector module uses none of it itself (its reads are
# a reader's, run by the snapshot step or a background task).
FILE_MODULES = {"os", "io", "pathlib", "shutil", "glob", "tempfile", "fcntl", "mmap", "builtins",
                "storpath.base.sysfs", "storpath.base.atomicfile", "storpath.base.boundedjson"}

# What a reader may not use to report: logging, storpath.base.log, warnings, or writing to the
# process's own streams. A reader returns problems.Problem.
LOGGING_MODULES = {"logging", "storpath.base.log", "warnings"}
LOGGING_ATTRIBUTES = {("sys", "stderr"), ("sys", "stdout")}


def layers(text=None):
    """(name, module prefixes) of each layer, lowest first, from CONTRIBUTING.md's list: a
    line that starts in the first column starts a layer, unless the one before it ended its
    modules with a comma. The package's own __init__ (storpath: the version) is the base."""
    text = text if text is not None else open(CONTRIBUTING, encoding="utf-8").read()
    block = re.search(r"^```\n(base/.*?)^```", text, re.M | re.S)
    assert block, "CONTRIBUTING.md has no layer list (a code block that starts with base/)"
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


_PARSED = {}


def _parse(path):
    """The tree of a file, parsed once per content."""
    text = open(path, encoding="utf-8").read()
    if text not in _PARSED:
        _PARSED[text] = ast.parse(text)
    return _PARSED[text]


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


def _base(own, is_package, level):
    """The package a relative import of `level` dots starts from."""
    parts = own.split(".") if is_package else own.split(".")[:-1]
    return ".".join(parts[:len(parts) - (level - 1)])


def _from_module(node, own, is_package):
    """The absolute module a `from ... import` names, relative ones resolved."""
    if not node.level:
        return node.module
    base = _base(own, is_package, node.level)
    return f"{base}.{node.module}" if node.module else base


def _dynamic_target(call, bound, own, is_package):
    """The module an `importlib.import_module(...)` or `__import__(...)` call names: a string,
    or an f-string whose parts are strings and `<module>.__name__`; anything else is one
    module below what comes before it ("storpath.commands.*"), or any module at all ("*").
    A relative name with a constant package is resolved."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in ("import_module", "__import__") or not call.args:
        return None
    if isinstance(func, ast.Name) and bound.get(name, "builtins." + name) not in (
            "importlib.import_module", "builtins.__import__"):
        return None
    arg = call.args[0]
    parts = arg.values if isinstance(arg, ast.JoinedStr) else \
        [arg.left, arg.right] if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add) else [arg]
    text = ""
    for part in parts:
        value = part.value if isinstance(part, ast.FormattedValue) else part
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            text += value.value
        elif isinstance(value, ast.Attribute) and value.attr == "__name__" and isinstance(value.value, ast.Name):
            text += bound.get(value.value.id, value.value.id)
        elif isinstance(value, ast.Name) and value.id == "__name__":
            text += own
        elif isinstance(value, ast.Name) and value.id == "__package__":
            text += own if is_package else own.rsplit(".", 1)[0]
        else:
            text += "*"
            break
    if text.startswith("."):
        package = call.args[1] if len(call.args) > 1 else next(
            (k.value for k in call.keywords if k.arg == "package"), None)
        level = len(text) - len(text.lstrip("."))
        if isinstance(package, ast.Constant) and isinstance(package.value, str):
            base = ".".join(package.value.split(".")[:len(package.value.split(".")) - (level - 1)])
        else:
            base = _base(own, is_package, level)
        rest = text[level:]
        text = f"{base}.{rest}" if rest else base
    return text


@functools.cache
def _bindings(tree, own, is_package):
    """A name the file binds by import -> the module it is, or "module.name" for a name
    imported from a module. Once per content (the planted copies differ in one file)."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            module = _from_module(node, own, is_package)
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{module}.{alias.name}"
    return bound


def _imports(path, known, own):
    """(imported module, at module level) of every import in a file, storpath's and others':
    relative ones resolved, those inside functions and under `if TYPE_CHECKING:` kept (a
    name imported for a type still ties the layers), importlib's and __import__'s included
    (a target ending in * for one module below a package, "*" for any)."""
    return _imports_of(_parse(path), os.path.basename(path) == "__init__.py", frozenset(known), own)


@functools.cache
def _imports_of(tree, is_package, known, own):
    """_imports of a parsed file: once per content, module name and set of known modules."""
    found = []
    parents = _parents(tree)
    bound = _bindings(tree, own, is_package)
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom):
            module = _from_module(node, own, is_package)
            names = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.Call):
            target = _dynamic_target(node, bound, own, is_package)
            if target is not None:
                names = [target]
        found += [(name, not _in_function(node, parents)) for name in names]
    return found


def _expand(name, known):
    """A module, or every known module an importlib target ending in * may load."""
    if name == "*":
        return list(known)
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
    known = frozenset(modules)
    return modules, {m: _imports(path, known, m) for m, path in modules.items()}


def _storpath_edges(graph, modules):
    """(module, imported storpath module, the import as written, at module level)."""
    for m, deps in graph.items():
        for written, top in deps:
            if written.split(".")[0] not in ("storpath", "*"):
                continue
            for d in _expand(written, modules):
                yield m, d, written, top


def no_layer(package=PACKAGE, table=LAYERS):
    modules = _modules(package)
    return sorted(m for m in modules if _layer(m, table) is None)


def upward(package=PACKAGE, table=LAYERS):
    modules, graph = _graph(package)
    return sorted({(m, d) for m, d, written, _ in _storpath_edges(graph, modules)
                   if d != m and _layer(m, table) is not None and _layer(d, table) is not None
                   and _layer(d, table) > _layer(m, table) and (m, written) not in LAZY})


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


# --- what a module's code can reach --------------------------------------------------------

def _annotation_ids(tree):
    """Nodes inside annotations: a type named is no capability used."""
    skip = set()
    for node in ast.walk(tree):
        notes = []
        if isinstance(node, ast.AnnAssign):
            notes.append(node.annotation)
        elif isinstance(node, ast.arg) and node.annotation is not None:
            notes.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            notes.append(node.returns)
        for note in notes:
            skip.update(id(inner) for inner in ast.walk(note))
    return skip


def _uses(node, skip):
    """(name, attribute or None) of every name `node` loads: `os.listdir` -> ("os", "listdir"),
    `roots.os.listdir` -> ("roots", "os"), `open` -> ("open", None)."""
    found = set()
    for inner in ast.walk(node):
        if id(inner) in skip:
            continue
        if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name):
            found.add((inner.value.id, inner.attr))
            skip.add(id(inner.value))
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Load) and id(inner) not in skip:
            found.add((inner.id, None))
    return found


@functools.cache
def _file_uses(tree):
    """`_uses` of a whole file, its annotations left out: once per content."""
    return _uses(tree, _annotation_ids(tree))


class Reach:
    """What each name of each storpath module can reach outside the process, by its code:
    a name is pure when everything it uses is pure; a standard module is pure when
    `allowed` lists it (whole, or the attribute used); a builtin unless `impure_builtins`
    names it; a storpath name by the same judgement of its own module's code."""

    def __init__(self, package, allowed, impure_builtins):
        self.modules = _modules(package)
        self.allowed = allowed
        self.impure_builtins = impure_builtins
        self.tables = {}
        self.memo = {}

    def table(self, module):
        """name -> (kind, what): ("import", "module" or "module.name") or ("code", uses)."""
        if module not in self.tables:
            path = self.modules[module]
            self.tables[module] = self._table(_parse(path), module, os.path.basename(path) == "__init__.py")
        return self.tables[module]

    @staticmethod
    @functools.cache
    def _table(tree, module, is_package):
        """The table of one file's tree, worked out once per content (the planted copies
        differ in one file)."""
        skip = _annotation_ids(tree)
        names = {k: ("import", v) for k, v in _bindings(tree, module, is_package).items()}
        top_uses = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names[node.name] = ("code", _uses(node, set(skip)))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                uses = _uses(node.value, set(skip)) if node.value is not None else set()
                for target in targets:
                    for leaf in ast.walk(target):
                        if isinstance(leaf, ast.Name):
                            names[leaf.id] = ("code", uses)
            elif not isinstance(node, (ast.Import, ast.ImportFrom)):
                top_uses |= _uses(node, set(skip))
        names[None] = ("code", top_uses)  # statements that run when the module loads
        return names

    def module(self, module, attribute=None):
        """Why `module` (or its `attribute`) is not pure, or None."""
        if module in self.modules:
            if attribute is not None:
                if f"{module}.{attribute}" in self.modules and attribute not in self.table(module):
                    return self.module(f"{module}.{attribute}")
                return self.name(module, attribute)
            for name in self.table(module):
                why = self.name(module, name)
                if why:
                    return why
            return None
        for candidate in (module, module.split(".")[0]):
            if candidate in self.allowed:
                names = self.allowed[candidate]
                if names is None or attribute in names:
                    return None
                break
        return module + (f".{attribute}" if attribute else "")

    def name(self, module, name):
        """Why `name` in storpath `module` is not pure, or None."""
        key = (module, name)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = None  # a name that uses itself is as pure as the rest of it
        table = self.table(module)
        if name not in table:
            why = self.module(f"{module}.{name}") if f"{module}.{name}" in self.modules else None
        else:
            kind, what = table[name]
            if kind == "import":
                why = self._imported(what)
            else:
                why = self.uses(module, what)
        self.memo[key] = why
        return why

    def _imported(self, target, attribute=None):
        if target in self.modules:
            return self.module(target, attribute)
        owner, _, last = target.rpartition(".")
        if owner in self.modules:
            why = self.name(owner, last)
            if why is None and attribute is not None and f"{owner}.{last}" in self.modules:
                return self.module(f"{owner}.{last}", attribute)
            return why
        if attribute is not None and target in self.allowed:
            return self.module(target, attribute)
        if owner:
            return self.module(owner, last) if owner in self.allowed or owner.split(".")[0] in self.allowed \
                else target
        return self.module(target, attribute)

    def uses(self, module, uses):
        table = self.table(module)
        for name, attribute in sorted(uses, key=str):
            if name in table:
                kind, what = table[name]
                if kind == "import":
                    why = self._imported(what, attribute)
                else:
                    why = self.name(module, name)
            elif name in self.impure_builtins:
                why = f"builtins.{name}"
            else:
                why = None  # a local, a parameter or a harmless builtin
            if why:
                return f"{name}{'.' + attribute if attribute else ''} -> {why}" if not why.startswith(name) else why
        return None


def reader_logging(package=PACKAGE, table=LAYERS):
    """(module, what) for every way a reader module reports other than returning problems."""
    modules, graph = _graph(package)
    readers = _layer("storpath.readers", table)
    found = []
    for m, deps in graph.items():
        if _layer(m, table) != readers:
            continue
        found += [(m, d) for d, _ in deps if d.split(".")[0] in LOGGING_MODULES or d in LOGGING_MODULES
                  or any(d.startswith(x + ".") for x in LOGGING_MODULES)]
        tree = _parse(modules[m])
        bound = _bindings(tree, m, modules[m].endswith("__init__.py"))
        for name, attribute in _file_uses(tree):
            target = bound.get(name)
            if name == "print" and target is None:
                found.append((m, "print()"))
            elif target is not None and (target, attribute) in LOGGING_ATTRIBUTES:
                found.append((m, f"{target}.{attribute}"))
    return sorted(set(found))


def analysis_io(package=PACKAGE, table=LAYERS):
    """(module, why) for every analysis module that can reach past ANALYSIS_MAY_USE: through an
    import, a builtin (open, print), a storpath name whose own code reaches further (a
    reader's read function, a helper module with `os` in it: `roots.os.listdir`)."""
    reach = Reach(package, ANALYSIS_MAY_USE, IMPURE_BUILTINS)
    analysis = _layer("storpath.analysis", table)
    found = []
    for module in sorted(reach.modules):
        if _layer(module, table) != analysis:
            continue
        for name, (kind, what) in reach.table(module).items():
            if kind == "import" and (what in ANALYSIS_MAY_USE or what.split(".")[0] in ANALYSIS_MAY_USE):
                continue  # a standard module imported whole: the attributes used are judged where used
            why = reach.name(module, name)
            if why:
                found.append((module, f"{name or '<module>'}: {why}"))
    return found


def collectors_files(package=PACKAGE):
    """(module, what) for every file-capable module, builtin or attribute a collector module
    uses itself."""
    modules = _modules(package)
    found = []
    for module, path in sorted(modules.items()):
        if module.split(".")[:2] != ["storpath", "collectors"]:
            continue
        tree = _parse(path)
        bound = _bindings(tree, module, path.endswith("__init__.py"))
        for name, attribute in _file_uses(tree):
            target = bound.get(name)
            if target is None:
                if name == "open":
                    found.append((module, "open()"))
                continue
            reached = [target, f"{target}.{attribute}" if attribute else target]
            if any(r in FILE_MODULES or r.split(".")[0] in FILE_MODULES - {"storpath"} for r in reached):
                found.append((module, reached[-1]))
            elif target in modules and attribute is not None:
                # a module's own imports reached through it: roots.os
                inner = _bindings(_parse(modules[target]), target, modules[target].endswith("__init__.py"))
                if inner.get(attribute) in FILE_MODULES or (inner.get(attribute) or "").split(".")[0] in \
                        FILE_MODULES - {"storpath"}:
                    found.append((module, f"{target}.{attribute}"))
        for d, _ in _imports(path, modules, module):
            if d in FILE_MODULES or d.split(".")[0] in FILE_MODULES - {"storpath"} or \
                    d.rpartition(".")[0] in FILE_MODULES:
                found.append((module, d))
    return sorted(set(found))


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
    task that ran it, logs them once): no module of storpath.readers imports logging,
    storpath.base.log or warnings, prints, or writes to sys.stderr. Levels come from storpath.base.problems."""
    assert reader_logging() == []


def test_analysis_does_no_io():
    assert analysis_io() == []


def test_collectors_never_open_files():
    assert collectors_files() == []


def test_the_layer_list_is_read_as_written():
    """The parse of CONTRIBUTING.md's list: a comma carries a layer onto the next line."""
    assert [name for name, _ in LAYERS] == ["storpath", "storpath.readers", "storpath.analysis",
                                             "storpath.scrape", "storpath.collectors", "storpath.report",
                                             "storpath.http", "storpath.commands"]
    assert "storpath.base" in LAYERS[0][1] and "storpath.manpage" in LAYERS[-1][1]


def test_the_package_root_holds_the_entry_points_only():
    """The layers are folders: the root of the package holds at most five modules (the
    version, the entry points, the manual), and every layer but the command line's is one
    folder, named as CONTRIBUTING.md's list names it."""
    root = sorted(name for name in os.listdir(PACKAGE) if name.endswith(".py"))
    assert len(root) <= 5, root
    assert all(prefixes == (name,) for name, prefixes in LAYERS[1:-1]), LAYERS
    assert LAYERS[0][1] == ("storpath", "storpath.base")
    for name, prefixes in LAYERS:
        for prefix in prefixes[1:] if name == "storpath" else prefixes:
            path = os.path.join(os.path.dirname(PACKAGE), *prefix.split("."))
            assert os.path.isdir(path) or os.path.isfile(path + ".py"), prefix


# (file in a copy of the package, text appended to it, the check that must then fail). Each
# is a way the rules were once fooled or could be.
PLANTED = [
    # layers, however the import is written
    ("readers/md.py", "\nfrom storpath.report.exporter import StorpathExporter\n", upward),
    ("readers/md.py", "\nfrom ..report.exporter import StorpathExporter\n", upward),
    ("readers/md.py", "\nfrom ..report import exporter\n", upward),
    ("readers/__init__.py", "\nfrom ..collectors import pcie\n", upward),
    ("readers/md.py", "\ndef f():\n    from ..report.findings import md\n", upward),
    ("readers/md.py", "\nimport importlib\n\ndef f():\n    importlib.import_module('storpath.report.findings.md')\n", upward),
    ("readers/md.py", "\nfrom importlib import import_module\n\ndef f():\n    import_module('..http.server', "
                      "'storpath.readers')\n", upward),
    ("readers/md.py", "\ndef f(name):\n    return __import__('storpath.http.server')\n", upward),
    ("readers/md.py", "\nimport importlib\n\ndef f(name):\n    return importlib.import_module(name)\n", upward),
    ("readers/md.py", "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from storpath.collectors.md import MdCollector\n", upward),
    ("analysis/md.py", "\nfrom storpath.scrape.snapshot import Snapshot\n", upward),
    ("commands/serve.py", "\nfrom storpath.cli import main\n", cycles),  # cli loads commands by importlib
    ("base/parse.py", "\nfrom ..readers import pci\n", upward),
    ("base/log.py", "\nfrom . import units\n", cycles),  # units imports log
    ("base/config.py", "\ndef f():\n    import yaml\n", inner_imports),
    ("base/config.py", "\ndef f():\n    from . import units\n", inner_imports),
    ("newthing.py", "X = 1\n", no_layer),
    # readers never log
    ("readers/md.py", "\nimport logging\n", reader_logging),
    ("readers/md.py", "\nimport logging.handlers\n", reader_logging),
    ("readers/md.py", "\nfrom logging import getLogger\n", reader_logging),
    ("readers/pci.py", "\nfrom storpath.base import log\n", reader_logging),
    ("readers/pci.py", "\nfrom ..base import log\n", reader_logging),
    ("readers/pci.py", "\nfrom ..base.log import get\n", reader_logging),
    ("readers/pci.py", "\nimport warnings\n", reader_logging),
    ("readers/pci.py", "\ndef f(x):\n    print(x)\n", reader_logging),
    ("readers/pci.py", "\nimport sys\n\ndef f(x):\n    sys.stderr.write(x)\n", reader_logging),
    ("readers/pci.py", "\ndef f():\n    import importlib\n    importlib.import_module('logging')\n", reader_logging),
    # analysis does no I/O: by what it can reach
    ("analysis/md.py", "\ndef f(path):\n    return open(path).read()\n", analysis_io),
    ("analysis/md.py", "\nimport builtins\n\ndef f(path):\n    return builtins.open(path).read()\n", analysis_io),
    ("analysis/md.py", "\ndef f(x):\n    print(x)\n", analysis_io),
    ("analysis/topology.py", "\nfrom storpath.readers.pci import PciReader\n", analysis_io),
    ("analysis/topology.py", "\nfrom ..readers.pci import PciReader\n", analysis_io),
    ("analysis/zfs.py", "\nimport os\n", analysis_io),
    ("analysis/zfs.py", "\nfrom os import listdir\n", analysis_io),
    ("analysis/zfs.py", "\nimport pathlib\n\ndef f(p):\n    return pathlib.Path(p).read_text()\n", analysis_io),
    ("analysis/zfs.py", "\ndef f():\n    import subprocess\n    return subprocess.run(['zpool'])\n", analysis_io),
    ("analysis/zfs.py", "\nfrom storpath.base import roots\n\ndef f(p):\n    return roots.os.listdir(p)\n",
     analysis_io),
    ("analysis/zfs.py", "\nfrom storpath.base import roots as r\n\ndef _listing(p):\n    return r.os.listdir(p)\n",
     analysis_io),
    ("analysis/zfs.py", "\nfrom storpath.readers.block import device_physical_block_size\n\n"
                        "def f(roots, d):\n    return device_physical_block_size(roots, d)\n", analysis_io),
    ("analysis/zfs.py", "\nfrom storpath.readers import block\n\n"
                        "def f(roots, d):\n    return block.device_physical_block_size(roots, d)\n", analysis_io),
    ("analysis/zfs.py", "\nfrom storpath.base.sysfs import read_attr\n", analysis_io),
    ("analysis/zfs.py", "\nfrom storpath.base import sysfs\n\ndef f(p):\n    return sysfs.read_attr(p)\n", analysis_io),
    ("analysis/zfs.py", "\nfrom storpath.base.roots import os\n", analysis_io),
    ("analysis/zfs.py", "\nimport importlib\n\ndef f():\n    return importlib.import_module('os')\n", analysis_io),
    ("analysis/zfs.py", "\ndef f():\n    return __import__('os')\n", analysis_io),
    ("analysis/zfs.py", "\nimport sys\n\ndef f(x):\n    sys.stdout.write(x)\n", analysis_io),
    # collectors never open files
    ("collectors/md.py", "\ndef f(p):\n    return open(p).read()\n", collectors_files),
    ("collectors/md.py", "\nimport os\n", collectors_files),
    ("collectors/md.py", "\nfrom storpath.base.sysfs import read_attr\n", collectors_files),
    ("collectors/md.py", "\nfrom ..base.sysfs import read_attr\n", collectors_files),
    ("collectors/md.py", "\nfrom storpath.base import roots\n\ndef f(p):\n    return roots.os.listdir(p)\n",
     collectors_files),
    ("collectors/md.py", "\ndef f(p):\n    from pathlib import Path\n    return Path(p).read_text()\n",
     collectors_files),
]
def _plant(package, path, text):
    full = os.path.join(package, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "a", encoding="utf-8") as handle:
        handle.write(text)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    package = str(tmp_path_factory.mktemp("pristine") / "storpath")
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    return package


@pytest.mark.parametrize("path,text,check", PLANTED, ids=[f"{p}:{c.__name__}:{i}" for i, (p, _, c) in
                                                          enumerate(PLANTED)])
def test_each_rule_fails_on_a_violation_planted_in_a_copy(tmp_path, pristine, path, text, check):
    package = str(tmp_path / "storpath")
    shutil.copytree(pristine, package)
    assert check(package) == []
    _plant(package, path, text)
    assert check(package) != []


def test_an_io_helper_in_a_reader_is_caught_where_analysis_calls_it(tmp_path, pristine):
    """A reader's helper that lists a directory (a `_listing`), reached from analysis
    through a pure-looking function of the same reader."""
    package = str(tmp_path / "storpath")
    shutil.copytree(pristine, package)
    _plant(package, "readers/zfs.py", "\nimport os as _os\n\ndef _listing(p):\n    return _os.listdir(p)\n\n"
                                      "def vdev_names(p):\n    return sorted(_listing(p))\n")
    assert analysis_io(package) == []
    _plant(package, "analysis/zfs.py", "\nfrom storpath.readers.zfs import vdev_names\n\n"
                                       "def f(p):\n    return vdev_names(p)\n")
    assert analysis_io(package) != []
