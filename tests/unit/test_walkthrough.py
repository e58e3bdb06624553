"""CONTRIBUTING.md's walkthrough ("One value from its sysfs file to the HTTP body") stays
true: every `module.name` it cites resolves in the package, and a scrape of a fixture
machine, traced, calls the functions of its numbered steps in the walkthrough's order."""

from __future__ import annotations

import importlib
import os
import re
import sys
import threading
from typing import List, Optional

import pytest

from benchmarks.hops import profiled_scrape
from storpath.roots import Roots

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CONTRIBUTING = os.path.join(ROOT, "CONTRIBUTING.md")
SECTION = "## One value from its sysfs file to the HTTP body"
PACKAGE_DIR = os.path.join(ROOT, "exporter", "storpath")
# The top-level modules and packages of storpath: a cited name starting with one is code.
TOP = {name[:-3] if name.endswith(".py") else name for name in os.listdir(PACKAGE_DIR)
       if not name.startswith("_") and (name.endswith(".py") or os.path.isdir(os.path.join(PACKAGE_DIR, name)))}


def section(path: str = CONTRIBUTING) -> str:
    text = open(path, encoding="utf-8").read()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start:end if end >= 0 else len(text)]


def cited(text: str) -> List[str]:
    """Every `a.b...` in backticks whose first part is a storpath module or package (a file
    name, `snapshot.py`, is no citation of code)."""
    return [name for name in re.findall(r"`([A-Za-z_][\w.]*\.[\w.]+)`", text)
            if name.split(".")[0] in TOP and not name.endswith(".py")]


def steps(text: str) -> List[str]:
    """The function each numbered step names first, in bold."""
    return re.findall(r"^\d+\. \*\*`([\w.]+)`\*\*", text, re.MULTILINE)


MISSING = object()


def resolve(name: str) -> Optional[object]:
    """The object `name` (relative to storpath) names, or None."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module("storpath." + ".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            fields = getattr(obj, "__dataclass_fields__", {})
            obj = fields[attr] if attr in fields else getattr(obj, attr, MISSING)
            if obj is MISSING:
                break
        if obj is not MISSING:
            return obj
    return None


def unresolved(text: str) -> List[str]:
    return [name for name in cited(text) if resolve(name) is None]


def _qualified(frame) -> Optional[str]:
    path = frame.f_code.co_filename
    if "/storpath/" not in path:
        return None
    module = path.split("/storpath/", 1)[1][:-3].replace("/", ".")
    return f"{module}.{frame.f_code.co_qualname}"


def traced_scrape(root: str) -> List[str]:
    """Every storpath function a scrape and its answer call, in call order, on all threads."""
    roots = Roots(sysfs=os.path.join(root, "sys"), procfs=os.path.join(root, "proc"))
    calls: List[str] = []
    lock = threading.Lock()

    def profile(frame, event, arg):
        if event == "call":
            name = _qualified(frame)
            if name is not None:
                with lock:
                    calls.append(name)

    profiled_scrape(roots, profile)
    return calls


def out_of_order(expected: List[str], calls: List[str]) -> Optional[str]:
    """None when `expected` is a subsequence of `calls`; else the first step not found after
    the one before it."""
    at = 0
    for name in expected:
        try:
            at = calls.index(name, at) + 1
        except ValueError:
            return name
    return None


def test_every_name_the_walkthrough_cites_resolves():
    text = section()
    assert len(cited(text)) >= 20
    assert unresolved(text) == []


def test_a_traced_scrape_calls_the_walkthroughs_functions_in_its_order(machine_tree):
    expected = steps(section())
    assert len(expected) >= 10
    calls = traced_scrape(machine_tree("am4-x570-firecuda", "healthy"))
    assert out_of_order(expected, calls) is None, (expected, sorted(set(calls)))


@pytest.mark.parametrize("plant", ["renamed", "swapped"])
def test_a_walkthrough_that_lies_is_caught(tmp_path, machine_tree, plant):
    """The checks above on a copy of CONTRIBUTING.md with a planted untruth."""
    text = section()
    if plant == "renamed":  # a name that no longer exists
        copy = text.replace("`sysfs.read_attr_why`", "`sysfs.read_attr_cached`", 1)
        assert unresolved(copy) == ["sysfs.read_attr_cached"]
    else:  # two steps in the wrong order: the answer's pieces before the flight that makes them
        copy = text.replace("**`http.scrape.Flight.chunks`**", "**`@@`**", 1) \
            .replace("**`exposition.pieces`**", "**`http.scrape.Flight.chunks`**", 1) \
            .replace("**`@@`**", "**`exposition.pieces`**", 1)
        (tmp_path / "CONTRIBUTING.md").write_text(copy)
        calls = traced_scrape(machine_tree("am4-x570-firecuda", "healthy"))
        assert out_of_order(steps(section(str(tmp_path / "CONTRIBUTING.md"))), calls) is not None
