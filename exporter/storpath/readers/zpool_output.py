"""What zpool prints, parsed: pure functions from text to records, no I/O.

- `zpool status -j --json-int -L` (OpenZFS 2.3 and later; cmd/zpool/zpool_main.c,
  status_callback_json: {"output_version": {...}, "pools": {<name>: {"state", "vdevs":
  {<pool>: root vdev with nested "vdevs"}, "logs", "l2cache", "spares", "special",
  "dedup", "scan_stats", "error_count"}}});
- the text of `zpool status -p -L` (any OpenZFS or ZoL release: print_status_config);
- `zpool list -Hp -o name,size,alloc,free,frag,cap,health,ashift`.

Running zpool and reading its state from kstat is storpath.readers.zfs.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base import boundedjson
from storpath.base.parse import parse_int

POOL_STATES = ("online", "degraded", "faulted", "offline", "removed", "unavail", "suspended")
VDEV_STATES = ("online", "degraded", "faulted", "offline", "removed", "unavail")
SCAN_FUNCTIONS = ("scrub", "resilver", "error_scrub")
SCAN_STATES = ("scanning", "paused", "finished", "canceled")
ERROR_TYPES = ("read", "write", "checksum")


class ZpoolOutputError(ValueError):
    """zpool printed something this parser does not understand."""


@datarecord
class Vdev:
    """One vdev of a pool's tree: its type, class, state, parent and error counts."""

    name: str  # as zpool prints it with -L: raidz2-0, mirror-1, nvme0n1, sda
    type: Optional[str]  # root, raidz, mirror, disk, file, draid...; None from the text layout
    vdev_class: str  # normal, log, special, dedup, cache, spare
    state: Optional[str]  # lower case, one of VDEV_STATES; None when zpool said something else
    parent: Optional[str]  # name of the parent vdev; None for the root
    read_errors: Optional[int] = None
    write_errors: Optional[int] = None
    checksum_errors: Optional[int] = None
    leaf: bool = False


@datarecord
class ScanStatus:
    """A pool's last or running scan (scrub, resilver, error scrub): its state, times, progress and errors."""

    function: str  # one of SCAN_FUNCTIONS
    state: str  # one of SCAN_STATES
    start_time: Optional[float] = None  # Unix seconds
    end_time: Optional[float] = None  # Unix seconds, finished or canceled scans only
    progress: Optional[float] = None  # 0..1 while scanning or paused
    errors: Optional[int] = None


@datarecord
class ZfsPool:
    """One ZFS pool: its state, vdev tree, scan, data errors, capacity, ashift and creation time."""

    name: str
    state: Optional[str] = None  # lower case, one of POOL_STATES
    vdevs: List[Vdev] = field(default_factory=list)
    scan: Optional[ScanStatus] = None
    data_errors: Optional[int] = None  # error_count: blocks with permanent errors
    size_bytes: Optional[int] = None
    allocated_bytes: Optional[int] = None
    free_bytes: Optional[int] = None
    fragmentation_ratio: Optional[float] = None
    ashift: Optional[int] = None
    created_at: Optional[float] = None  # Unix seconds: the creation of the pool's root dataset (zfs get)


# ---- state words -------------------------------------------------------------

def pool_state(word: Optional[str]) -> Optional[str]:
    if not isinstance(word, str) or not word:  # JSON may hold anything there
        return None
    value = word.strip().lower()
    return value if value in POOL_STATES else None


def vdev_state(word: Optional[str]) -> Optional[str]:
    """zpool_state_to_name() words; a hot spare reads AVAIL or INUSE, which are healthy;
    early 2.3 JSON printed HEALTHY (the vdev_state_t name) for ONLINE."""
    if not isinstance(word, str) or not word:  # JSON may hold anything there
        return None
    value = word.strip().lower()
    if value in ("avail", "inuse", "healthy"):
        return "online"
    if value == "cant_open":
        return "unavail"
    return value if value in VDEV_STATES else None


# ---- numbers -----------------------------------------------------------------

_NICE = re.compile(r"^(\d{1,20}(?:\.\d{1,9})?)([KMGTPE]?)$", re.ASCII)
_UINT64 = 1 << 64  # zpool's counters and sizes are uint64_t
_NICE_SCALE = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}


def parse_count(value: Any) -> Optional[int]:
    """An error count as zpool prints it: 3, "3", or without -p "1.2K" (zfs_nicenum)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value < _UINT64 else None
    if not isinstance(value, str):
        return None
    match = _NICE.match(value.strip())
    if not match:
        return None
    count = int(float(match.group(1)) * _NICE_SCALE[match.group(2)])
    return count if count < _UINT64 else None


def _int(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value < _UINT64 else None
    if isinstance(value, str):
        return parse_int(value, maximum=_UINT64 - 1)
    return None


# ---- zpool status -j --json-int ------------------------------------------------

_JSON_CLASSES = (("vdevs", "normal"), ("logs", "log"), ("special", "special"), ("dedup", "dedup"),
                 ("l2cache", "cache"), ("spares", "spare"))


def parse_status_json(text: str) -> List[ZfsPool]:
    """Pools from `zpool status -j --json-int`. Raises ZpoolOutputError when the text
    is not that document at all; a pool or vdev with odd fields yields what it has."""
    try:
        doc = boundedjson.loads(text)
    except ValueError as exc:
        raise ZpoolOutputError(f"zpool status JSON does not parse: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("pools", {}), dict):
        raise ZpoolOutputError("zpool status JSON has no \"pools\" object")
    pools = []
    for key, data in (doc.get("pools") or {}).items():
        if not isinstance(data, dict):
            continue
        name = str(data.get("name") or key)
        pool = ZfsPool(name=name, state=pool_state(data.get("state")))
        pool.data_errors = parse_count(data.get("error_count"))
        for section, vdev_class in _JSON_CLASSES:
            tree = data.get(section)
            if isinstance(tree, dict):
                for child in tree.values():
                    if isinstance(child, dict):
                        _walk_json_vdev(child, vdev_class, None, pool.vdevs, section == "vdevs")
        raw_root = (data.get("vdevs") or {}).get(name) if isinstance(data.get("vdevs"), dict) else None
        root = next((v for v in pool.vdevs if v.parent is None and v.name == name and v.vdev_class == "normal"), None)
        if root is not None and isinstance(raw_root, dict):
            root.type = root.type or "root"
            pool.size_bytes = _int(raw_root.get("total_space"))
            pool.allocated_bytes = _int(raw_root.get("alloc_space"))
            if pool.size_bytes is not None and pool.allocated_bytes is not None:
                pool.free_bytes = pool.size_bytes - pool.allocated_bytes
        scan = data.get("scan_stats")
        if isinstance(scan, dict):
            pool.scan = _json_scan(scan)
        pools.append(pool)
    return pools


def _walk_json_vdev(data: Dict[str, Any], vdev_class: str, parent: Optional[str], out: List[Vdev],
                    normal_tree: bool) -> None:
    name = data.get("name")
    if not isinstance(name, str) or not name:
        return
    vtype = data.get("vdev_type") if isinstance(data.get("vdev_type"), str) else None
    children = data.get("vdevs") if isinstance(data.get("vdevs"), dict) else {}
    # A log, special or dedup vdev may sit in the normal tree too (its "class" says so);
    # zpool lists it under its own heading, so it is taken from there only.
    own_class = data.get("class")
    if normal_tree and parent is not None and isinstance(own_class, str) and own_class not in ("normal", ""):
        return
    out.append(Vdev(name=name, type=vtype, vdev_class=vdev_class, state=vdev_state(data.get("state")),
                    parent=parent, read_errors=parse_count(data.get("read_errors")),
                    write_errors=parse_count(data.get("write_errors")),
                    checksum_errors=parse_count(data.get("checksum_errors")), leaf=not children))
    for child in children.values():
        if isinstance(child, dict):
            _walk_json_vdev(child, vdev_class, name, out, normal_tree)


_SCAN_FUNCTION_WORDS = {"SCRUB": "scrub", "RESILVER": "resilver", "ERRORSCRUB": "error_scrub"}


def _json_time(value: Any) -> Optional[float]:
    """--json-int gives Unix seconds; without it zpool prints a date string."""
    number = _int(value)
    return float(number) if number else None


def _json_scan(scan: Dict[str, Any]) -> Optional[ScanStatus]:
    function = _SCAN_FUNCTION_WORDS.get(str(scan.get("function", "")).upper())
    state_word = str(scan.get("state", "")).upper().replace("DSS_", "")
    if function is None or state_word in ("", "NONE"):
        return None
    if state_word == "SCANNING":
        state = "paused" if _int(scan.get("scrub_pause")) else "scanning"
    elif state_word in ("FINISHED", "CANCELED"):
        state = state_word.lower()
    else:
        return None
    result = ScanStatus(function=function, state=state, start_time=_json_time(scan.get("start_time")),
                        errors=parse_count(scan.get("errors")))
    if state in ("finished", "canceled"):
        result.end_time = _json_time(scan.get("end_time"))
    else:
        to_examine = _int(scan.get("to_examine")) or 0
        skipped = _int(scan.get("skipped")) or 0
        issued = _int(scan.get("issued"))
        # zpool's "% done" (print_scan_scrub_resilver_status): issued over what is to
        # be examined minus what a resilver skips.
        total = to_examine - skipped
        if issued is not None and total > 0:
            result.progress = min(1.0, issued / total)
    return result


# ---- zpool status (text) -------------------------------------------------------

_SECTION_CLASSES = {"logs": "log", "cache": "cache", "spares": "spare", "special": "special", "dedup": "dedup"}
_CTIME = re.compile(r"(\w{3})\s+(\w{3})\s+(\d{1,2})\s+(\d{2}):(\d{2}):(\d{2})\s+(\d{4})")
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                                        "Dec"), start=1)}


def parse_ctime(text: str) -> Optional[float]:
    """'Sun Nov  9 03:12:45 2025' -> Unix seconds. zpool prints ctime() in its local
    time; storpath runs it with TZ=UTC, and captures are made the same way."""
    match = _CTIME.search(text)
    if not match or match.group(2) not in _MONTHS:
        return None
    fields = (int(match.group(7)), _MONTHS[match.group(2)], int(match.group(3)), int(match.group(4)),
              int(match.group(5)), int(match.group(6)), 0, 0, 0)
    if not (1 <= fields[2] <= 31 and fields[3] < 24 and fields[4] < 60 and fields[5] < 61):
        return None
    return float(calendar.timegm(fields))


def parse_scan_line(lines: List[str]) -> Optional[ScanStatus]:
    """The `scan:` paragraph of the text output (first line after 'scan:', then the
    indented progress lines)."""
    if not lines:
        return None
    first = lines[0].strip()
    rest = " ".join(line.strip() for line in lines[1:])
    match = re.match(r"^(scrub|resilver|error scrub)\s+(in progress|paused|canceled)\s+(since|on)\s+(.*)$", first)
    if match:
        function = {"scrub": "scrub", "resilver": "resilver", "error scrub": "error_scrub"}[match.group(1)]
        word = match.group(2)
        state = {"in progress": "scanning", "paused": "paused", "canceled": "canceled"}[word]
        when = parse_ctime(match.group(4))
        scan = ScanStatus(function=function, state=state)
        if state == "canceled":
            scan.end_time = when
        else:
            scan.start_time = when
            # A paused scan's first line holds the pause time; OpenZFS 2.1 prints the
            # start on the next line ("scrub started on <ctime>").
            # At most a ctime's length before its year: linear in `rest` however many "started on" it holds.
            started = re.search(r"started on\s+(.{1,60}?[0-9]{4})", rest) if state == "paused" else None
            if started and parse_ctime(started.group(1)) is not None:
                scan.start_time = parse_ctime(started.group(1))
            # Up to three digits not inside a longer run: a run of thousands was quadratic.
            done = re.search(r"(?<![0-9.])([0-9]{1,3}(?:\.[0-9]{1,9})?)%\s+done", rest)
            if done:
                scan.progress = min(1.0, float(done.group(1)) / 100)
        return scan
    match = re.match(r"^(scrub repaired|resilvered|error scrub repaired)\s+\S+(?:\s+\([^)]*\))?\s+in\s+.+?\s+with\s+"
                     r"([0-9]{1,18})\s+errors\s+on\s+(.*)$", first)
    if match:
        function = {"scrub repaired": "scrub", "resilvered": "resilver",
                    "error scrub repaired": "error_scrub"}[match.group(1)]
        return ScanStatus(function=function, state="finished", errors=int(match.group(2)),
                          end_time=parse_ctime(match.group(3)))
    return None


_VDEV_LINE = re.compile(r"^(?P<indent>\s*)(?P<name>\S+)\s+(?P<state>[A-Z_]+)(?:\s+(?P<read>\S+)\s+(?P<write>\S+)"
                        r"\s+(?P<cksum>\S+))?")


def parse_status_text(text: str) -> List[ZfsPool]:
    """Pools from the text of `zpool status -p -L` (any OpenZFS or ZoL release)."""
    if "pool:" not in text:
        if text.strip() in ("no pools available", ""):
            return []
        raise ZpoolOutputError("zpool status text has no 'pool:' line")
    pools: List[ZfsPool] = []
    for block in re.split(r"(?m)^(?=[ \t]*pool: )", text):  # not \s: it crossed every blank line below
        if "pool:" not in block:
            continue
        pools.append(_parse_text_pool(block))
    return pools


def _parse_text_pool(block: str) -> ZfsPool:
    lines = block.splitlines()
    # The block starts at a `pool:` line, but splitlines() also breaks at \r and others.
    i = next(n for n, line in enumerate(lines) if "pool:" in line) + 1
    name = lines[i - 1].split("pool:", 1)[1].strip()
    pool = ZfsPool(name=name)
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("state:"):
            pool.state = pool_state(stripped.split(":", 1)[1])
        elif stripped.startswith("scan:"):
            scan_lines = [stripped.split(":", 1)[1]]
            while i + 1 < len(lines) and lines[i + 1].startswith("\t") and not lines[i + 1].strip().endswith(":"):
                i += 1
                scan_lines.append(lines[i])
            pool.scan = parse_scan_line(scan_lines)
        elif stripped == "config:":
            i = _parse_text_config(lines, i + 1, pool)
            continue
        elif stripped.startswith("errors:"):
            words = stripped.split(":", 1)[1].strip()
            if words.startswith("No known data errors"):
                pool.data_errors = 0
            else:
                count = re.match(r"^([0-9]{1,18})\s+data errors", words)
                if count:
                    pool.data_errors = int(count.group(1))
        i += 1
    return pool


def _parse_text_config(lines: List[str], i: int, pool: ZfsPool) -> int:
    """The NAME STATE READ WRITE CKSUM table. Nesting is by indentation (two spaces a
    level after the leading tab); class headings (logs, cache, spares, special, dedup)
    stand alone at the top level."""
    stack: List[Tuple[int, str]] = []
    vdev_class = "normal"
    header_seen = False
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("errors:"):
            break
        if not stripped:
            if header_seen and pool.vdevs:
                i += 1
                if i < len(lines) and lines[i].startswith("\t"):
                    continue
                break
            i += 1
            continue
        if stripped.startswith("NAME") and "STATE" in stripped:
            header_seen = True
            i += 1
            continue
        body = line[1:] if line.startswith("\t") else line
        indent = len(body) - len(body.lstrip(" "))
        if stripped in _SECTION_CLASSES and indent == 0:
            vdev_class = _SECTION_CLASSES[stripped]
            stack = [(-1, "")]
            i += 1
            continue
        match = _VDEV_LINE.match(body)
        if not match:
            i += 1
            continue
        name = match.group("name")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack and stack[-1][1] else None
        is_root = indent == 0 and vdev_class == "normal" and name == pool.name
        vdev = Vdev(name=name, type="root" if is_root else None, vdev_class=vdev_class,
                    state=vdev_state(match.group("state")), parent=None if is_root else parent,
                    read_errors=parse_count(match.group("read")), write_errors=parse_count(match.group("write")),
                    checksum_errors=parse_count(match.group("cksum")))
        if vdev.parent is None and not is_root and vdev_class == "normal":
            vdev.parent = pool.name
        pool.vdevs.append(vdev)
        stack.append((indent, name))
        i += 1
    names_with_children = {v.parent for v in pool.vdevs if v.parent}
    for vdev in pool.vdevs:
        vdev.leaf = vdev.name not in names_with_children and vdev.type != "root"
        if vdev.leaf and vdev.type is None:
            # The text names a file vdev by its absolute path, a disk by its device name.
            vdev.type = "file" if vdev.name.startswith("/") else "disk"
        if vdev.type is None and not vdev.leaf:
            kind = re.match(r"^(raidz\d?|mirror|draid\d?|replacing|spare)(?:[:-]|$)", vdev.name)
            vdev.type = ("raidz" if kind.group(1).startswith("raidz") else
                         "draid" if kind.group(1).startswith("draid") else kind.group(1)) if kind else None
    return i


# ---- zpool list -Hp, zfs get -Hp ---------------------------------------------------

def _tab_rows(text: str, count: int, what: str) -> Iterator[List[str]]:
    """The stripped fields of each non-blank line of -H output (tab separated); a line
    without exactly `count` fields raises ZpoolOutputError naming `what`."""
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != count:
            raise ZpoolOutputError(f"{what} line has {len(fields)} fields, expected {count}: {line!r}")
        yield [field.strip() for field in fields]


def parse_list(text: str) -> Dict[str, Dict[str, Optional[float]]]:
    """`zpool list -Hp -o name,size,alloc,free,frag,cap,health,ashift`: tab separated,
    exact numbers; "-" where a value is unknown (fragmentation of a pool without
    spacemap_histogram, everything of an UNAVAIL pool)."""
    result: Dict[str, Dict[str, Optional[float]]] = {}
    for name, size, alloc, free, frag, _cap, _health, ashift in _tab_rows(text, 8, "zpool list"):
        frag_value = _int(frag.rstrip("%"))
        ashift_value = _int(ashift)
        result[name] = {
            "size": _int(size),
            "alloc": _int(alloc),
            "free": _int(free),
            "frag": frag_value / 100 if frag_value is not None and frag_value <= 100 else None,
            "ashift": ashift_value if ashift_value else None,  # 0: chosen per vdev, not a pool setting
        }
    return result


# ---- zfs get -Hp -o name,value creation -----------------------------------------

# A pool has no creation property of its own; its root dataset is made by `zpool create`
# and carries the pool's creation time. Before 2001 no ZFS pool existed; 2^40 s is far
# past any real clock: values outside are garbage, not dates.
_CREATION_MIN, _CREATION_MAX = 978307200, 1 << 40


def parse_creation(text: str) -> Dict[str, float]:
    """Pool name -> creation time (Unix seconds) from `zfs get -Hp -o name,value creation
    POOL...`: one tab-separated line per dataset. Lines of child datasets (a '/' in the
    name) and values that are not plausible Unix seconds are left out; a line that is not
    two fields raises ZpoolOutputError."""
    result: Dict[str, float] = {}
    for name, value in _tab_rows(text, 2, "zfs get"):
        if not name or "/" in name or "@" in name:
            continue
        seconds = _int(value)
        if seconds is not None and _CREATION_MIN <= seconds < _CREATION_MAX:
            result[name] = float(seconds)
    return result


def apply_creation(pools: List[ZfsPool], creation: Dict[str, float]) -> None:
    for pool in pools:
        if pool.name in creation:
            pool.created_at = creation[pool.name]


def apply_list(pools: List[ZfsPool], listing: Dict[str, Dict[str, Optional[float]]]) -> None:
    by_name = {p.name: p for p in pools}
    for name, values in listing.items():
        pool = by_name.get(name)
        if pool is None:
            pool = ZfsPool(name=name)
            pools.append(pool)
            by_name[name] = pool
        for attr, key in (("size_bytes", "size"), ("allocated_bytes", "alloc"), ("free_bytes", "free"),
                          ("fragmentation_ratio", "frag"), ("ashift", "ashift")):
            if values.get(key) is not None:
                setattr(pool, attr, values[key])
