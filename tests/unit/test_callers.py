"""Every public function and method of the package has a caller in the package: code that
only tests call is dead weight a reader must still understand (CONTRIBUTING.md).

Simple on purpose: a module-level function counts as called when its name appears in the
package outside its own body (a call, a reference, a name in a table or a string given to
getattr); a method when `.name` appears so. Names in `__all__` are no calls. Functions with
a decorator are registered by it (collectors, findings) and count as called."""

from __future__ import annotations

import ast
import os
from typing import Dict, Iterator, List, Tuple

PACKAGE = os.path.join(os.path.dirname(__file__), "..", "..", "exporter", "storpath")

# Called by someone other than the package, each for the reason given.
ALLOWED = {
    "base.log.forget_once_keys",  # tests reset the process-wide once-only log state between cases
    "base.background.Scheduler.run_all_once",  # tests run the background tasks synchronously
    # cheroot calls its adapter's and server's overrides
    "http.cheroot_patches.TLSAdapter.bind",
    "http.cheroot_patches.TLSAdapter.get_environ",
    "http.cheroot_patches.TLSAdapter.makefile",
    "http.cheroot_patches.WSGIServer.error_log",
    "http.cheroot_patches.WSGIServer.put_conn",
}


def _files(package: str) -> Iterator[Tuple[str, str]]:
    for folder, _, names in os.walk(package):
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                yield path, os.path.relpath(path, package)[:-3].replace(os.sep, ".")


def _public_functions(tree: ast.Module, module: str) -> Iterator[Tuple[str, ast.AST, bool]]:
    """(dotted name, node, is a method) of every public function without a decorator."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_") \
                and not node.decorator_list:
            yield f"{module}.{node.name}", node, False
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and not sub.name.startswith("_"):
                    yield f"{module}.{node.name}.{sub.name}", sub, True


def _uses(tree: ast.Module, path: str, found: Dict[str, List[Tuple[str, int, str]]]) -> None:
    exported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            exported |= {id(n) for n in ast.walk(node.value)}
    for node in ast.walk(tree):
        if id(node) in exported:
            continue
        if isinstance(node, ast.Name):
            found.setdefault(node.id, []).append((path, node.lineno, "name"))
        elif isinstance(node, ast.Attribute):
            found.setdefault(node.attr, []).append((path, node.lineno, "attribute"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            found.setdefault(node.value, []).append((path, node.lineno, "string"))


def uncalled(package: str = PACKAGE) -> List[str]:
    defined = []
    uses: Dict[str, List[Tuple[str, int, str]]] = {}
    for path, module in _files(package):
        tree = ast.parse(open(path, encoding="utf-8").read())
        defined += [(path, name, node, method) for name, node, method in _public_functions(tree, module)]
        _uses(tree, path, uses)
    out = []
    for path, name, node, method in defined:
        short = name.rsplit(".", 1)[1]
        calls = [use for use in uses.get(short, ())
                 if not (use[0] == path and node.lineno <= use[1] <= node.end_lineno)
                 and not (method and use[2] == "name")]
        if not calls and name not in ALLOWED:
            out.append(f"{name} ({os.path.relpath(path, package)}:{node.lineno})")
    return out


def test_every_public_function_has_a_caller_in_the_package():
    assert uncalled() == []


def test_a_function_only_tests_call_is_found(tmp_path):
    package = tmp_path / "storpath"
    package.mkdir()
    (package / "parse.py").write_text("def used():\n    return 1\n\n\ndef orphan():\n    return used()\n\n\n"
                                      "class Reader:\n    def read(self):\n        return orphan\n")
    (package / "sysfs.py").write_text("from storpath.parse import Reader\n\nReader().read()\n")
    assert uncalled(str(package)) == []
    (package / "parse.py").write_text("def used():\n    return 1\n\n\ndef orphan():\n    return used()\n")
    assert uncalled(str(package)) == ["parse.orphan (parse.py:5)"]


def test_the_allowed_exist():
    """An allow-list entry whose function went away goes too."""
    names = {name for path, module in _files(PACKAGE)
             for name, _, _ in _public_functions(ast.parse(open(path, encoding="utf-8").read()), module)}
    assert sorted(ALLOWED - names) == []
