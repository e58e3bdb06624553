"""The functions a value passes through from the file it is read from to the bytes on the
socket (a measurement, not a test; CONTRIBUTING.md's "Count the hops").

How it counts: builds a fixture machine and runs `storpath serve` on it in this process as
the command does (commands.serve.Built: the collectors, their background tasks started and
waited for, the scraper; http.server.Server on a loopback port), then asks for /metrics
over a socket and reads the answer, with a profile hook on every thread (sys.setprofile and
threading.setprofile). A function is on the walk when it is on a thread's stack at one of:
- the read: the file is opened (an audit hook sees the `open`);
- the parse: a call made by a function that was on the stack at the open (or by such a
  call) whose arguments hold the file's text (its bytes, or its text stripped as the sysfs
  helpers return it); what that call returns is the value's parsed form;
- the hand-over: a return of something that holds a parsed form or the record made of it,
  on any thread until the snapshot is made (the snapshot's return included); past it, in
  the scrape, the record is handed to whatever judges any of its values, so there only
  the value's row and text count (the walk names the record: a PciDevice by its address, an MdArray by
  its name...; held in a tuple, list, dict, record or the snapshot's field for it, up to
  six deep). A number, a string or a tuple is no parsed form by itself: equal ones are often
  one object (a table's constant), so its identity would name other devices' values too;
- the row and its text: a call given the value's family (the `Family` object) together
  with its series' label values (or the `SeriesColumns` holding them), or a call or return
  holding the value's line of text (`name{labels}`, as text or bytes, up to six deep).
Each is the stack from the event's function to the thread's first one: the functions that
hand the value on. Package frames are those whose file lies in the package's own directory.
The count is how many distinct functions there are, and in how many files; every function
is printed.

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
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

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
         "storpath_sas_phy_negotiated_link_rate_transfers_per_second", 'phy="phy-0:0"', "sas",
         ("SasPhy", "name", "phy-0:0")),
    Walk("md degraded", "epyc-7443-highpoint", "md-degraded", "/md1/md/degraded", "storpath_md_degraded_disks",
         'device="md1"', "md", ("MdArray", "name", "md1")),
    Walk("NVMe Identify best LBA size", "am4-x570-firecuda", "healthy", "/nvme0/ns1.id-ns",
         "storpath_nvme_namespace_best_lba_size_bytes", 'device="nvme0n1"', "nvme_identify"),
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


def holds(obj, match: Callable[[Any], bool], snapshot_field: str, depth: int = DEPTH) -> bool:
    seen: Set[int] = set()
    level = [obj]
    for _ in range(depth + 1):
        after = []
        for item in level:
            if id(item) in seen:
                continue
            seen.add(id(item))
            try:
                if match(item):
                    return True
                after.extend(_children(item, snapshot_field))
            except Exception:  # an object that cannot be looked into is no carrier
                continue
        level = after
    return False


def serve_and_fetch(roots_dir: str, profile, watching: List[bool]) -> bytes:
    """`storpath serve` on the machine at `roots_dir`, with `profile` on every thread: its
    background tasks' first runs, then one GET /metrics over a socket. The body."""
    from storpath import cli
    from storpath.commands import serve
    from storpath.http import webconfig
    from storpath.http.server import Server
    from storpath.options import resolve_config

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


def walk(spec: Walk) -> Set[Frame]:
    from tests.fixtures import machines

    root = tempfile.mkdtemp(prefix="hops-")
    machines.load(spec.machine).build(root, spec.variant)
    found: Set[Frame] = set()
    line = f"{spec.family}{{{spec.labels}}}"
    line_bytes = line.encode()
    opened: Dict[int, str] = {}  # thread -> the path it opened
    parsed: List[Any] = []  # the value's parsed forms (kept: their ids stay theirs)
    watching = [False]
    lock = threading.Lock()

    def audit(event, args):
        if watching[0] and event == "open" and isinstance(args[0], str) and args[0].endswith(spec.file):
            with lock:
                opened[threading.get_ident()] = args[0]
                frame = sys._getframe(1)
                found.update(stack(frame))
                while frame is not None:
                    reading.add(frame)
                    frame = frame.f_back

    texts = set()
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if path.endswith(spec.file):
                data = open(path, "rb").read()
                texts |= {data, data.decode("utf-8", "replace"), data.decode("utf-8", "replace").strip()}
    texts.discard("")
    texts.discard(b"")

    def is_line(item) -> bool:
        return isinstance(item, str) and line in item or isinstance(item, (bytes, bytearray)) and line_bytes in item

    kind, attribute, key = spec.record

    def is_parsed(item) -> bool:
        return any(item is form for form in parsed) or \
            type(item).__name__ == kind and getattr(item, attribute, None) == key

    def profile(frame, event, arg):
        if not watching[0] or event not in ("call", "return") or package_frame(frame) is None:
            return
        names = frame.f_code.co_varnames[:frame.f_code.co_argcount + frame.f_code.co_kwonlyargcount]
        args = [frame.f_locals.get(n) for n in names if n not in ("self", "cls")] if event == "call" else [arg]
        hit = False
        if event == "call" and (frame.f_back in reading or frame.f_back in parsing):
            if any(isinstance(a, (str, bytes)) and a in texts for a in args):
                hit = True
                parsing.add(frame)  # what it returns is a parsed form
        if event == "return" and frame in parsing:
            parsing.discard(frame)
            # (value, why) from a parse function: the value is the parsed form as well
            forms = list(arg) if isinstance(arg, tuple) else [arg]
            with lock:
                parsed.extend(f for f in forms if not isinstance(f, (str, bytes, int, float, tuple, type(None))))
            hit = True
        if not hit and event == "return" and (type(arg).__name__ == "Snapshot" or not scraping(frame)) and \
                holds(arg, is_parsed, spec.field):
            hit = True
        if not hit and event == "call" and any(getattr(a, "name", None) == spec.family and
                                               type(a).__name__ == "Family" for a in args) and \
                any(a == label_values or label_values in getattr(a, "labels", ()) for a in args):
            hit = True
        if not hit and any(holds(a, is_line, spec.field) for a in args):
            hit = True
        if hit:
            with lock:
                found.update(stack(frame))

    def scraping(frame) -> bool:
        """Whether the scrape (StorpathExporter.collect) is on the stack: past the snapshot, the
        record is every value's; the value's own row and text are what carry it."""
        while frame is not None:
            if package_frame(frame) == ("exporter.py", "StorpathExporter.collect"):
                return True
            frame = frame.f_back
        return False

    label_values = tuple(re.findall(r'="((?:[^"\\]|\\.)*)"', spec.labels))
    reading: Set[Any] = set()  # the frames on the stack at the file's open
    parsing: Set[Any] = set()  # the calls handed its text, while they run
    sys.addaudithook(audit)
    body = serve_and_fetch(root, profile, watching)
    if line_bytes not in body:
        raise SystemExit(f"{spec.what}: {line} is not in the answer")
    if not opened:
        raise SystemExit(f"{spec.what}: no file ending {spec.file} was opened")
    return found


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
