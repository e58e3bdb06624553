"""The functions a value passes through from the file it is read from to the bytes on the
socket (a measurement, not a test; CONTRIBUTING.md's "One value from its sysfs file to the HTTP body").

How it counts: builds a fixture machine and runs `storpath serve` on it in this process as
the command does (commands.serve.Built: the collectors, their background tasks started and
waited for, the scraper; http.server.Server on a loopback port), then asks for /metrics
over a socket and reads the answer, with a profile hook on every thread (sys.setprofile and
threading.setprofile). The value passes through a function when the function is on a
thread's stack at one of these events (each counts the stack from the event's function to
the thread's first one: the functions that hand the value on):
- the read: the value's file is opened (an audit hook sees the `open`; the file is matched
  by its real path, so an open through a class directory's link, /sys/class/... into
  /sys/devices/..., is the same file's);
- the parse: a call made by a function that was on the stack at the open (or by such a
  call) whose arguments hold the file's text (its bytes, or its text stripped as the sysfs
  helpers return it); what it returns is the value's parsed form, and a call it made
  counts too when what that call returned is held by the parsed form (the record a parse
  builds from the fields it took out of the bytes);
- the hand-over, on any thread until the snapshot is made: the first return of the
  value's record (the walk names it: a PciDevice by its address, an MdArray by its
  name...) or of a parsed form; a return of a container that holds one, when the
  snapshot's field for it holds that container (the reader's list and its (records,
  problems), not a table of the records made for a lookup, nor another source's record
  that points at it: those do not hand the value on); the snapshot's own return. A
  later return of the same record (a walk up the PCI tree yielding it) hands nothing on.
  Where the walk names no record (NVMe Identify's best LBA size: a choice among the
  parsed formats), a function handed a part of the parsed form that returns one hands it on.
  A number, a string or a tuple is no parsed form by itself: equal ones are often one
  object (a table's constant), so its identity would name other devices' values too;
- the row and its text, past the snapshot: a call given the value's family (the `Family`
  object) together with its series' label values (matched by label name, in the family's
  order, or the `SeriesColumns` holding them); a call or return holding the value's line of
  text (`name{labels}` with its labels in name order, as text or bytes, up to six deep);
  the formatting: a call made by one given the row that returns the value's text as the
  line has it (exposition.go_float);
functions that only look at a record the value is in (a port type set on it, a depth
counted, an expectation derived) are not on its way. A comprehension or generator
expression is part of the function it is written in. Package frames are those whose file
lies in the package's own directory. The count is how many distinct functions there are,
and in how many files; every function is printed.

    python -m benchmarks.hops [--walk NAME]
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import os
import re
import sys
import tempfile
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "exporter"))
sys.path.insert(0, ROOT)

import storpath  # noqa: E402  (after the path above)

PACKAGE_DIR = os.path.dirname(os.path.abspath(storpath.__file__)) + os.sep


@dataclasses.dataclass(frozen=True)
class Walk:
    what: str
    machine: str
    variant: str
    file: str  # the end of the path of the file the value is read from
    family: str
    labels: str  # the series' labels as the exposition writes them
    field: str  # the snapshot's field that holds it
    record: Tuple[str, str, str] = ("", "", "")  # (type, attribute, value) of the record that holds it


WALKS = (
    Walk("PCIe current_link_speed", "am4-x570-firecuda", "healthy", "/0000:00:01.2/current_link_speed",
         "storpath_pcie_current_link_speed_transfers_per_second", 'address="0000:00:01.2"', "pci",
         ("PciDevice", "address", "0000:00:01.2")),
    Walk("SAS negotiated_linkrate", "supermicro-x11ssh-sas3008", "healthy", "/phy-0:0/negotiated_linkrate",
         "storpath_sas_phy_negotiated_link_rate_transfers_per_second", 'phy="phy-0:0"', "sas_phys",
         ("SasPhy", "name", "phy-0:0")),
    Walk("md degraded", "epyc-7443-highpoint", "md-degraded", "/md1/md/degraded", "storpath_md_degraded_disks",
         'device="md1"', "md", ("MdArray", "name", "md1")),
    Walk("NVMe Identify best LBA size", "am4-x570-firecuda", "healthy", "/nvme0/ns1.id-ns",
         "storpath_nvme_namespace_best_lba_size_bytes", 'device="nvme0n1"', "nvme_identify"),
    Walk("NVMe path state", "dell-r750-nvmeof", "healthy", "/nvme-subsys0/nvme0/state", "storpath_nvme_path_state",
         'controller="nvme0",state="live",subsystem="nvme-subsys0",transport="tcp"', "nvme_subsystems",
         ("SubsystemPath", "controller", "nvme0")),
    Walk("RAID drive negotiated rate", "dell-r730xd-perc-h730p", "healthy", "/storcli/drives.json",
         "storpath_raid_drive_negotiated_link_rate_transfers_per_second", 'controller="storcli/c0",slot="32:0"',
         "raid", ("RaidDrive", "slot", "32:0")),
)

Frame = Tuple[str, str]  # (file relative to the package, function)
DEPTH = 6


def package_frame(frame) -> Optional[Frame]:
    path = frame.f_code.co_filename
    if not path.startswith(PACKAGE_DIR):
        return None
    return path[len(PACKAGE_DIR):], frame.f_code.co_qualname


def stack(frame) -> List[Frame]:
    """The package's frames from `frame` to its thread's first."""
    out = []
    while frame is not None:
        found = package_frame(frame)
        if found is not None:
            out.append(found)
        frame = frame.f_back
    return out


def _small(value) -> bool:
    """A value Python shares between all who make it (None, booleans, small integers, the
    empty tuple): its identity says nothing of where it came from."""
    return value is None or isinstance(value, bool) or (isinstance(value, int) and -5 <= value <= 256) or \
        value == () or value == ""


def _children(obj, snapshot_field: str):
    if isinstance(obj, (str, bytes, bytearray, int, float, type(None))) or callable(obj) and not hasattr(obj, "__dict__"):
        return ()
    if isinstance(obj, dict):
        return list(obj.keys()) + list(obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)
    if type(obj).__name__ == "Snapshot":  # the machine's every value: only this one's part
        return [getattr(obj, snapshot_field, None)]
    if isinstance(obj, type) or type(obj).__module__ == "builtins":
        return ()
    if dataclasses.is_dataclass(obj):
        return [getattr(obj, f.name, None) for f in dataclasses.fields(obj)]
    slots = getattr(type(obj), "__slots__", ())
    found = [getattr(obj, s, None) for s in slots if isinstance(s, str)]
    return found + list(getattr(obj, "__dict__", {}).values())


def _held(obj, snapshot_field: str, depth: int = DEPTH) -> Iterator[Any]:
    """`obj` and what it holds, level by level, each once, up to `depth` deep (an object that
    cannot be looked into holds nothing)."""
    seen: Set[int] = set()
    level = [obj]
    for _ in range(depth + 1):
        after = []
        for item in level:
            if id(item) in seen:
                continue
            seen.add(id(item))
            yield item
            try:
                after.extend(_children(item, snapshot_field))
            except Exception:
                continue
        level = after


def holds(obj, match: Callable[[Any], bool], snapshot_field: str, depth: int = DEPTH) -> bool:
    for item in _held(obj, snapshot_field, depth):
        try:
            if match(item):
                return True
        except Exception:  # an object that cannot be looked into is no carrier
            continue
    return False


def serve_and_fetch(roots_dir: str, profile, watching: List[bool]) -> bytes:
    """`storpath serve` on the machine at `roots_dir`, with `profile` on every thread: its
    background tasks' first runs, then, with the tasks stopped, one GET /metrics over a socket.
    The body."""
    from storpath import cli
    from storpath.commands import serve
    from storpath.http import webconfig
    from storpath.http.server import Server
    from storpath.commands.options import resolve_config

    captured = os.path.join(roots_dir, "captured")
    argv = ["serve", f"--path.sysfs={roots_dir}/sys", f"--path.procfs={roots_dir}/proc", "--log.level=error",
            "--web.listen-address=127.0.0.1:0"]
    if os.path.isdir(captured):
        argv.append(f"--path.captured={captured}")
    config = resolve_config(cli.build_parser("serve").parse_args(argv))
    threading.setprofile(profile)
    sys.setprofile(profile)
    built = serve.Built(config)
    server = Server("127.0.0.1:0", serve._site(built, webconfig.WebConfig()))
    try:
        watching[0] = True
        built.start()
        for task in built.scheduler.tasks.values():
            task.wait_first_run(30.0)
        # No pass after the first ones: a pass that ran beside the scrape (triggered by it, or
        # due on a loaded machine) would hand on the scrape's own records from another thread,
        # and its functions are on no value's walk.
        built.scheduler.stop()
        server.start()
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        connection.request("GET", "/metrics")
        body = connection.getresponse().read()
        connection.close()
        return body
    finally:
        watching[0] = False
        sys.setprofile(None)
        threading.setprofile(None)
        server.stop()
        built.close()


def fold(found: Frame) -> Frame:
    """A comprehension or generator expression is part of the function it is written in:
    `f.<locals>.<listcomp>` is `f` (Python 3.12 inlines comprehensions; a generator
    expression stays a code object of its own)."""
    path, name = found
    while name.endswith(COMPREHENSIONS):
        name = name.rsplit(".<locals>.", 1)[0]
    return path, name


COMPREHENSIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


def series_line(spec: Walk) -> str:
    """`family{labels}` as the exposition writes it: its labels by name, in name order."""
    labels = label_map(spec)
    return spec.family + "{" + ",".join(f'{name}="{labels[name]}"' for name in sorted(labels)) + "}"


def label_map(spec: Walk) -> Dict[str, str]:
    return dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', spec.labels))


def targets(root: str, spec: Walk) -> Set[str]:
    """The real paths of the value's file: every file of the tree whose path ends with
    `spec.file`, and what that path names under any directory of the tree reached through a
    symbolic link (a class directory's entry: /sys/class/nvme-subsystem/nvme-subsys0/nvme0 is
    a link into /sys/devices)."""
    found = set()
    for folder, dirs, names in os.walk(root):
        for name in names + dirs:
            path = os.path.join(folder, name)
            if path.endswith(spec.file) and os.path.isfile(path):
                found.add(os.path.realpath(path))
            elif name in dirs and os.path.islink(path):
                for tail in _tails(spec.file, name):
                    if os.path.isfile(os.path.join(path, tail)):
                        found.add(os.path.realpath(os.path.join(path, tail)))
    return found


def _tails(file: str, name: str) -> List[str]:
    """What follows `name` in `file` where it is one of its components (`/a/b/c`, `b`: `c`)."""
    parts = file.strip("/").split("/")
    return ["/".join(parts[i + 1:]) for i, part in enumerate(parts[:-1]) if part == name]


def walk(spec: Walk) -> Set[Frame]:
    from tests.fixtures import machines

    root = tempfile.mkdtemp(prefix="hops-")
    machines.load(spec.machine).build(root, spec.variant)
    found: Set[Frame] = set()
    line = series_line(spec)
    line_bytes = line.encode()
    labels = label_map(spec)
    real = targets(root, spec)
    basename = os.path.basename(spec.file)
    opened: Dict[int, str] = {}  # thread -> the path it opened
    lock = threading.Lock()
    watching = [False]
    reading: Set[Any] = set()  # the frames on the stack at the file's open
    parsing: Set[Any] = set()  # the calls handed its text, while they run
    rowing: Set[Any] = set()  # the calls handed the value's row, while they run
    parsed: List[Any] = []  # the value's parsed forms (kept: their ids stay theirs)
    returned: Set[int] = set()  # the forms and records already handed back once
    kept: List[Any] = []  # what the decisions below hold ids of
    handed: List[Tuple[List[Frame], Any]] = []  # (stack, container holding a form) returned before the snapshot
    formatted: List[Tuple[List[Frame], str]] = []  # (stack, text) a call handed the row's value returned
    snapshots: List[Any] = []
    parts: Set[int] = set()  # the ids of what the parsed forms hold
    building: Dict[Any, List[Tuple[List[Frame], Any]]] = {}  # a parse call -> what its own calls returned

    if not real:
        raise SystemExit(f"{spec.what}: no file ending {spec.file} in {spec.machine}")
    texts: Set[Any] = set()
    for path in real:
        data = open(path, "rb").read()
        texts |= {data, data.decode("utf-8", "replace"), data.decode("utf-8", "replace").strip()}
    texts.discard("")
    texts.discard(b"")

    def audit(event, args):
        if not watching[0] or event != "open" or not isinstance(args[0], str):
            return
        if os.path.basename(args[0]) != basename or os.path.realpath(args[0]) not in real:
            return
        with lock:
            opened[threading.get_ident()] = args[0]
            frame = sys._getframe(1)
            found.update(stack(frame))
            while frame is not None:
                reading.add(frame)
                frame = frame.f_back

    kind, attribute, key = spec.record

    def is_form(item) -> bool:
        return any(item is form for form in parsed) or \
            bool(kind) and type(item).__name__ == kind and getattr(item, attribute, None) == key

    def is_part(item) -> bool:
        return id(item) in parts and not isinstance(item, (str, bytes, int, float, tuple))

    def is_line(item) -> bool:
        return isinstance(item, str) and line in item or isinstance(item, (bytes, bytearray)) and line_bytes in item

    def is_row(args) -> bool:
        for family in args:
            if type(family).__name__ == "Family" and getattr(family, "name", None) == spec.family:
                names = getattr(family, "labels", ())
                if set(names) != set(labels):
                    continue
                values = tuple(labels[name] for name in names)
                return any(a == values or values in (getattr(a, "labels", None) or ()) for a in args
                           if isinstance(a, tuple) or type(a).__name__ == "SeriesColumns")
        return False

    def profile(frame, event, arg):
        if not watching[0] or event not in ("call", "return") or package_frame(frame) is None:
            return
        code = frame.f_code
        if event == "call":
            names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
            args = [frame.f_locals.get(n) for n in names if n not in ("self", "cls")]
            caller = frame.f_back
            if (caller in reading or caller in parsing) and \
                    any(isinstance(a, (str, bytes)) and a in texts for a in args):
                with lock:
                    parsing.add(frame)  # what it returns is a parsed form
                    found.update(stack(frame))
            elif is_row(args):
                with lock:
                    rowing.add(frame)
                    found.update(stack(frame))
            elif any(holds(a, is_line, spec.field) for a in args):
                with lock:
                    found.update(stack(frame))
            return
        # a return
        if frame in parsing:
            # (value, why) from a parse function: the value is the parsed form as well
            forms = list(arg) if isinstance(arg, tuple) else [arg]
            made = [f for f in forms if not isinstance(f, (str, bytes, int, float, tuple, type(None)))]
            with lock:
                parsing.discard(frame)
                parsed.extend(made)
                returned.update(id(f) for f in forms)
                for form in made:
                    parts.update(i for i in _reachable(form) if i != id(form))
                # what the parse's own calls made of its input and it returned (a record built
                # from the fields it took out of the bytes)
                for frames, item in building.pop(frame, ()):
                    if any(id(item) in _reachable(form) for form in made):
                        found.update(frames)
            return
        if frame.f_back in parsing and not _small(item_of(arg)):
            with lock:
                building.setdefault(frame.f_back, []).append((stack(frame), arg))
        if not kind and not scraping(frame) and holds(arg, is_part, spec.field):
            # no record names the value: a part of its parsed form (the format a choice picks)
            # handed on by a function that was handed one
            code = frame.f_code
            names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
            given = [frame.f_locals.get(n) for n in names if n not in ("self", "cls")]
            if any(holds(a, is_part, spec.field) or holds(a, is_form, spec.field) for a in given):
                with lock:
                    found.update(stack(frame))
        if frame in rowing:
            with lock:
                rowing.discard(frame)
        if frame.f_back in rowing and isinstance(arg, str) and arg:
            # the row's value as text (decided once the line is known)
            with lock:
                formatted.append((stack(frame), arg))
        if type(arg).__name__ == "Snapshot":
            if holds(arg, is_form, spec.field):
                with lock:
                    snapshots.append(arg)
                    found.update(stack(frame))
            return
        if holds(arg, is_line, spec.field):
            with lock:
                found.update(stack(frame))
            return
        if snapshots and scraping(frame):
            return
        items = list(arg) if isinstance(arg, tuple) else [arg]
        for item in items:
            if _small(item) or isinstance(item, (str, bytes, int, float)):
                continue
            if is_form(item):
                with lock:
                    if id(item) not in returned:  # the form handed on from where it was made
                        returned.add(id(item))
                        kept.append(item)
                        found.update(stack(frame))
            elif holds(item, is_form, spec.field):
                with lock:
                    handed.append((stack(frame), item))

    def scraping(frame) -> bool:
        """Whether the scrape (StorpathExporter.collect) is on the stack: past the snapshot, the
        record is every value's; the value's own row and text are what carry it."""
        while frame is not None:
            if package_frame(frame) == ("exporter.py", "StorpathExporter.collect"):
                return True
            frame = frame.f_back
        return False

    sys.addaudithook(audit)
    body = serve_and_fetch(root, profile, watching)
    if line_bytes not in body:
        raise SystemExit(f"{spec.what}: {line} is not in the answer")
    if not opened:
        raise SystemExit(f"{spec.what}: no file {spec.file} was opened")
    if not snapshots:
        raise SystemExit(f"{spec.what}: no snapshot held the value")
    # A container handed back before the snapshot counts when the snapshot's field holds it
    # (the record's list, the reader's (records, problems)), not when it is a table of
    # the records made for a lookup or another source's record that points at it.
    into = _reachable(getattr(snapshots[-1], spec.field, None))
    for frames, item in handed:
        if id(item) in into:
            found.update(frames)
    # The value's text: what a call made by the value's row's formatting returned, when it is
    # the text after the series in the value's line.
    text = body[body.index(line_bytes) + len(line_bytes):].split(b"\n", 1)[0].decode().strip()
    for frames, item in formatted:
        if item == text:
            found.update(frames)
    return {fold(f) for f in found}


def item_of(value):
    return value[0] if isinstance(value, tuple) and value else value


def _reachable(obj, depth: int = DEPTH) -> Set[int]:
    """The ids of what `obj` holds (itself included), up to `depth` deep."""
    return {id(item) for item in _held(obj, "", depth)}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--walk", action="append", help="only the walks whose name starts with this")
    args = parser.parse_args(argv)
    for spec in WALKS:
        if args.walk and not any(spec.what.startswith(w) for w in args.walk):
            continue
        frames = walk(spec)
        files = {path for path, _ in frames}
        print(f"{spec.what}: {len(frames)} functions in {len(files)} files")
        for path, name in sorted(frames):
            print(f"    {path}: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
