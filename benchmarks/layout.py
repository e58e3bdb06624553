"""The package's plan as a table: modules and code lines per folder (the package root is
its own row), and the imports between folders (module pairs, every import however written:
at the top, inside functions, relative ones resolved).

    python -m benchmarks.layout [PACKAGE_DIR]

PACKAGE_DIR defaults to this checkout's exporter/storpath; give another checkout's to
compare two revisions."""

import ast
import collections
import os
import sys
from typing import Dict, Iterator, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = os.path.join(os.path.dirname(HERE), "exporter", "storpath")


def modules(package: str) -> Iterator[Tuple[str, str, bool]]:
    """(dotted name, path, is a package's __init__) of every module below `package`."""
    top = os.path.basename(package)
    for folder, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, package)[:-3].split(os.sep)
                init = rel[-1] == "__init__"
                yield ".".join([top] + (rel[:-1] if init else rel)), path, init


def folder_of(module: str, init: bool = False) -> str:
    """The folder a module sits in, one level below the package ("(root)" for the root's own
    modules); a package's __init__ is in its own folder."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or len(parts) == 2 and init else "(root)"


def code_lines(tree: ast.Module, text: str) -> int:
    """Lines that hold code: not blank, not comments, not docstrings."""
    doc = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
                    isinstance(first.value.value, str):
                doc.update(range(first.lineno, first.end_lineno + 1))
    return sum(1 for number, line in enumerate(text.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and number not in doc)


def imported(tree: ast.Module, own: str, init: bool, known: Dict[str, str]) -> Iterator[str]:
    """The package's modules `own` imports."""
    top = own.split(".")[0]
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = own.split(".") if init else own.split(".")[:-1]
                base = ".".join(parts[:len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names]
        for name in names:
            if name.split(".")[0] == top and name in known:
                yield name


def layout(package: str = DEFAULT):
    found = {name: (path, init) for name, path, init in modules(package)}
    per_folder = collections.defaultdict(lambda: [0, 0])
    edges = collections.Counter()
    for name, (path, init) in found.items():
        text = open(path, encoding="utf-8").read()
        tree = ast.parse(text)
        own = folder_of(name, init)
        per_folder[own][0] += 1
        per_folder[own][1] += code_lines(tree, text)
        for target in set(imported(tree, name, init, found)):
            if folder_of(target, found[target][1]) != own:
                edges[(own, folder_of(target, found[target][1]))] += 1
    return dict(per_folder), dict(edges)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    package = os.path.abspath(argv[0]) if argv else DEFAULT
    per_folder, edges = layout(package)
    print(f"{'folder':<14}{'modules':>8}{'code lines':>12}")
    for folder, (count, lines) in sorted(per_folder.items()):
        print(f"{folder:<14}{count:>8}{lines:>12}")
    total = [sum(v[i] for v in per_folder.values()) for i in (0, 1)]
    print(f"{'total':<14}{total[0]:>8}{total[1]:>12}")
    print("\nimports between folders (importing -> imported: module pairs)")
    for (source, target), count in sorted(edges.items()):
        print(f"  {source} -> {target}: {count}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
