"""CONTRIBUTING.md's walkthrough ("One value from its sysfs file to the HTTP body") stays
true: every `module.name` it cites resolves in the package, and `storpath serve` on a fixture
machine, traced on every thread while it answers one GET /metrics, hands one value (a PCIe
device's current_link_speed) through the functions of its numbered steps in the
walkthrough's order: each step's call holds the value, or a form of it, in its arguments or
what it returns. A step bypassed for that value alone fails the check."""

from __future__ import annotations

import importlib
import os
import re
import threading
from typing import Dict, List, Optional

import pytest

from benchmarks import hops

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


# The value the walkthrough follows: step 11's line names the device and the value.
ADDRESS = "0000:02:00.0"
FILE = f"/{ADDRESS}/current_link_speed"
FAMILY = "storpath_pcie_current_link_speed_transfers_per_second"
SERIES = f'{FAMILY}{{address="{ADDRESS}"}}'


def _qualified(frame) -> Optional[str]:
    """`module.Qualname` of a storpath frame, found by the package's own directory (a
    checkout in a folder named `storpath` is no different)."""
    path = frame.f_code.co_filename
    if not path.startswith(hops.PACKAGE_DIR):
        return None
    module = path[len(hops.PACKAGE_DIR):-3].replace(os.sep, ".")
    module = module[:-len(".__init__")] if module.endswith(".__init__") else module
    return f"{module}.{frame.f_code.co_qualname}"


class Trace:
    """Every storpath call of a served scrape, on every thread, in call order, each marked
    when it held the value: in its arguments or what it returned, as the file's path, the
    text read from it and what parsing made of it (followed by identity from call to call),
    the PciDevice of ADDRESS, the snapshot and rows holding it, or its line of text."""

    def __init__(self):
        self.calls: List[List] = []  # [name, holds the value, was handed the file's path]
        self.forms: List[object] = []  # what calls holding the value returned: its derived forms
        self._open: Dict[int, int] = {}  # frame id -> index in calls
        self._lock = threading.Lock()

    def _is_form(self, item) -> bool:
        if isinstance(item, str) and (item.endswith(FILE) or SERIES in item):
            return True
        if isinstance(item, (bytes, bytearray)) and SERIES.encode() in item:
            return True
        if type(item).__name__ == "PciDevice" and getattr(item, "address", None) == ADDRESS:
            return True
        return any(item is form for form in self.forms)

    @staticmethod
    def _row(args) -> bool:
        """The value's family and its label values, as Rows.add is handed them."""
        return any(getattr(a, "name", None) == FAMILY for a in args) and (ADDRESS,) in args

    def holds(self, obj) -> bool:
        return hops.holds(obj, self._is_form, "pci", depth=6)

    def profile(self, frame, event, arg):
        if event not in ("call", "return"):
            return
        name = _qualified(frame)
        if name is None:
            return
        code = frame.f_code
        if event == "call":
            args = [frame.f_locals.get(n) for n in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
                    if n not in ("self", "cls")]
            held = any(self.holds(a) for a in args) or self._row(args)
            with self._lock:
                self._open[id(frame)] = len(self.calls)
                self.calls.append([name, held, _handed_file(args)])
        else:
            with self._lock:
                index = self._open.pop(id(frame), None)
            if index is None:
                return
            if self.holds(arg) or self.calls[index][1]:
                self.calls[index][1] = True
                # A number or a string is no form by itself: equal ones are often one object (a
                # table's constant), whose identity would name other devices' values too. The
                # text a call handed the file's path returns is this file's.
                handed = self.calls[index][2]
                text = (str, bytes) if handed is None else ()
                forms = [arg] + list(arg) if isinstance(arg, tuple) else [arg]
                if type(handed) is int and isinstance(arg, (list, tuple)) and handed < len(arg):
                    forms.append(arg[handed])  # of a read of several files, the one of this file
                with self._lock:
                    self.forms.extend(f for f in forms if not hops._small(f) and not isinstance(f, (int, float) + text))


def _handed_file(args) -> Optional[object]:
    """Whether a call was handed the file's path: True for the path itself, its index for a
    sequence of paths (a read of several files, sysfs.read_many), None when not."""
    for arg in args:
        if isinstance(arg, str) and arg.endswith(FILE):
            return True
        if isinstance(arg, (list, tuple)):
            for index, item in enumerate(arg):
                if isinstance(item, str) and item.endswith(FILE):
                    return index
    return None


def traced_serve(root: str) -> Trace:
    """Every storpath function `storpath serve` calls, on all threads, for one GET /metrics
    of the machine at `root` (benchmarks.hops.serve_and_fetch: the server, its scraper,
    the snapshot's reading thread and the background tasks)."""
    trace = Trace()
    watching = [False]

    def profile(frame, event, arg):
        if watching[0]:
            trace.profile(frame, event, arg)

    trace.body = hops.serve_and_fetch(root, profile, watching)
    return trace


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


def not_followed(expected: List[str], trace: Trace) -> Optional[str]:
    """None when each step, in the walkthrough's order, has a call that held the value (the
    value or a form of it in its arguments or return); else the first step without one."""
    return out_of_order(expected, [name for name, held, _ in trace.calls if held])


def test_every_name_the_walkthrough_cites_resolves():
    text = section()
    assert len(cited(text)) >= 20
    assert unresolved(text) == []


def test_a_served_scrape_carries_the_value_through_every_step_in_order(machine_tree):
    expected = steps(section())
    assert len(expected) >= 10
    trace = traced_serve(machine_tree("am4-x570-firecuda", "healthy"))
    assert SERIES.encode() in trace.body
    assert SERIES in section(), "the walkthrough's line is not the one followed here"
    assert not_followed(expected, trace) is None, (expected, sorted({n for n, held, _ in trace.calls if held}))


@pytest.mark.parametrize("bypass", ["read", "parse", "row"])
def test_a_step_bypassed_for_the_value_is_caught(machine_tree, monkeypatch, bypass):
    """The same scrape with one step bypassed for ADDRESS alone (the others still go through
    it): the step no longer holds the value, and the check names it."""
    from storpath.scrape import families
    from storpath.collectors import pcie
    from storpath.readers import pci

    if bypass == "read":  # the file read without storpath.base.sysfs
        real = pci.read_many

        def read(paths, *args, **kwargs):
            if any(path.endswith(FILE) for path in paths):
                out = []
                for path in paths:
                    try:
                        with open(path, "rb") as handle:
                            out.append(handle.read())
                    except OSError:
                        out.append(None)
                return out
            return real(paths, *args, **kwargs)

        monkeypatch.setattr(pci, "read_many", read)
        step = "base.sysfs.read_many"
    elif bypass == "parse":  # the speed taken without parse_pcie_speed_raw
        real_parse = pci.parse_pcie_speed_raw
        real_read = pci.read_many
        mine = []

        def read(paths, *args, **kwargs):
            found = real_read(paths, *args, **kwargs)
            mine.extend(raw for path, raw in zip(paths, found) if path.endswith(FILE))
            return found

        def parse(raw):
            if mine and raw is mine[-1]:
                return float(raw.split()[0]) * 1e9, None
            return real_parse(raw)

        monkeypatch.setattr(pci, "read_many", read)
        monkeypatch.setattr(pci, "parse_pcie_speed_raw", parse)
        step = "base.parse.parse_pcie_speed_raw"
    else:  # the row put into its family's series without Rows.add
        real_add = families.Rows.add

        def add(self, family, labels, value):
            if family is pcie.CURRENT_SPEED and labels == (ADDRESS,):
                series = self.setdefault(family, families.SeriesColumns())
                series.labels.append(labels)
                series.values.append(value)
                return None
            return real_add(self, family, labels, value)

        monkeypatch.setattr(families.Rows, "add", add)
        step = "scrape.families.Rows.add"
    trace = traced_serve(machine_tree("am4-x570-firecuda", "healthy"))
    assert SERIES.encode() in trace.body  # the answer is the same
    assert not_followed(steps(section()), trace) == step


@pytest.mark.parametrize("plant", ["renamed", "swapped"])
def test_a_walkthrough_that_lies_is_caught(tmp_path, machine_tree, plant):
    """The checks above on a copy of CONTRIBUTING.md with a planted untruth."""
    text = section()
    if plant == "renamed":  # a name that no longer exists
        copy = text.replace("`base.sysfs.read_many`", "`base.sysfs.read_many_cached`", 1)
        assert unresolved(copy) == ["base.sysfs.read_many_cached"]
    else:  # two steps in the wrong order: the answer's pieces before the flight that makes them
        copy = text.replace("**`http.scrape.Flight.chunks`**", "**`@@`**", 1) \
            .replace("**`exposition.pieces`**", "**`http.scrape.Flight.chunks`**", 1) \
            .replace("**`@@`**", "**`exposition.pieces`**", 1)
        (tmp_path / "CONTRIBUTING.md").write_text(copy)
        trace = traced_serve(machine_tree("am4-x570-firecuda", "healthy"))
        assert not_followed(steps(section(str(tmp_path / "CONTRIBUTING.md"))), trace) is not None


def hops_listed(text: str, walk: str = "PCIe") -> List[str]:
    """The functions CONTRIBUTING writes out for one of benchmarks.hops' walks, as
    `module.Qualname`."""
    start = text.index(f"<!-- hops: {walk} -->")
    block = text[start:text.index("<!-- /hops -->", start)]
    return sorted(re.findall(r"`([\w.]+)`", block))


def _as_cited(found) -> str:
    """benchmarks.hops' (file, function) as CONTRIBUTING cites it: `module.Qualname`."""
    path, name = found
    module = path[:-3].replace(os.sep, ".")
    module = module[:-len(".__init__")] if module.endswith(".__init__") else module
    return f"{module}.{name}"


def test_the_pcie_walk_written_out_is_the_one_benchmarks_hops_counts():
    """CONTRIBUTING's PCIe walk, counted by hand, is what `python -m benchmarks.hops` finds:
    the same functions, none more, none fewer; and its count there is the tool's."""
    text = section()
    listed = hops_listed(text)
    spec = next(w for w in hops.WALKS if w.what.startswith("PCIe"))
    frames = hops.walk(spec)
    found = sorted(_as_cited(f) for f in frames)
    assert found == listed
    files = len({path for path, _ in frames})
    assert f"PCIe {len(found)} functions in {files} files" in " ".join(text.split())


def test_benchmarks_hops_counts_no_comprehension_and_matches_labels_by_name():
    """A comprehension is its function's; a row is found by its labels' names, whatever
    their order in the family (the NVMe path state's are not in name order)."""
    assert hops.fold(("a.py", "f.<locals>.<listcomp>")) == ("a.py", "f")
    assert hops.fold(("a.py", "f.<locals>.g.<locals>.<genexpr>")) == ("a.py", "f.<locals>.g")
    assert hops.fold(("a.py", "f.<locals>.<lambda>")) == ("a.py", "f.<locals>.<lambda>")
    spec = next(w for w in hops.WALKS if w.what.startswith("NVMe path"))
    assert hops.series_line(hops.dataclasses.replace(spec, labels='transport="tcp",controller="nvme0",'
                                                     'subsystem="nvme-subsys0",state="live"')) == \
        'storpath_nvme_path_state{controller="nvme0",state="live",subsystem="nvme-subsys0",transport="tcp"}'
