"""`storpath capture -o FILE.tar.gz [--redact]`: the files storpath reads, in one archive.

What is captured follows the readers: every module of storpath.readers declares the
sysfs and procfs files it reads as glob patterns relative to the root
(`CAPTURE_SYSFS`, `CAPTURE_PROCFS`; `{a,b}` alternatives and `..` are allowed), and may
define `capture_commands(roots, folder)` to save the outputs of the commands it runs
(NVMe Identify, zpool) into `folder` in the layout it reads back through Roots.captured.
A new attribute is declared once, beside the code that reads it.

sysfs symlinks are kept as symlinks (the readers resolve them to find a device's place in
the tree), so the extracted archive replays with
`storpath check|serve --path.sysfs=X/sys --path.procfs=X/proc --path.captured=X/captured`.
"""

from __future__ import annotations

import glob
import hashlib
import hmac
import importlib
import io
import json
import logging
import os
import pkgutil
import re
import secrets
import sys
import tarfile
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from storpath import __version__, log, readers
from storpath.cli import roots_from
from storpath.roots import Roots

LOG = log.get("capture")

MAX_FILE_BYTES = 1 << 20

# Attributes whose whole value identifies a piece of hardware (serial numbers, world wide
# names, EUI-64/NGUID, SAS addresses, NQNs that embed a serial).
SECRET_ATTRIBUTES = frozenset({"serial", "vpd_pg80", "vpd_pg83", "wwid", "wwn", "eui", "nguid", "uuid",
                               "sas_address", "subsysnqn", "hostnqn", "unique_id", "port_name", "node_name"})
# NQNs embed the serial among other words (vendor, model): the serial is replaced inside
# them, and the whole NQN only when no known serial is found in it.
NQN_ATTRIBUTES = frozenset({"subsysnqn", "hostnqn"})
# Keys of JSON command outputs (nvme-cli, zpool -j) with the same kind of values.
SECRET_JSON_KEYS = frozenset({"sn", "serial", "serial_number", "eui64", "nguid", "uuid", "subnqn", "wwn", "wwid",
                              "guid", "pool_guid", "vdev_guid", "devid", "phys_path", "load_guid"})
# Shorter secrets are only replaced where they are a whole value: replacing "12" in
# every file would garble numbers.
MIN_SUBSTRING_SECRET = 6

README = """\
# storpath capture

Made by storpath {version} on {created} from {sysfs} and {procfs}.
{redacted}

It holds the sysfs and procfs files storpath reads (symlinks kept as symlinks) and the
outputs of the commands it runs (`nvme id-ns`, `zpool`), in `captured/`.

Replay it:

    tar xzf {archive}
    storpath check --path.sysfs={top}/sys --path.procfs={top}/proc --path.captured={top}/captured
    storpath serve --path.sysfs={top}/sys --path.procfs={top}/proc --path.captured={top}/captured

MANIFEST.json lists what was captured, the files that could not be read, and the
commands that ran.
"""


def add_parser(sub, common):
    parser = sub.add_parser(
        "capture", parents=[common], help="Save the files storpath reads into an archive, to replay elsewhere.",
        description="Snapshot exactly the sysfs/procfs files storpath reads, and the outputs of the commands it "
                    "runs (nvme id-ns, zpool), into a .tar.gz that `storpath check` and `storpath serve` replay "
                    "with --path.sysfs/--path.procfs/--path.captured. Attach it to a bug report.")
    parser.add_argument("-o", "--output", required=True, metavar="FILE.tar.gz", help="Archive to write.")
    parser.add_argument("--redact", action="store_true",
                        help="Replace serial numbers, WWNs, EUI-64/NGUIDs and SAS addresses, consistently across "
                             "all files, so the archive can be shared.")
    parser.set_defaults(run=run)


# ---- what the readers read ----------------------------------------------------------

@dataclass
class ReaderFiles:
    name: str
    sysfs: Tuple[str, ...] = ()
    procfs: Tuple[str, ...] = ()
    commands: Optional[Callable[[Roots, str], Optional[List[str]]]] = None


def reader_files() -> Tuple[List[ReaderFiles], Dict[str, str]]:
    """What every reader module reads, and the readers that could not be imported."""
    found: List[ReaderFiles] = []
    broken: Dict[str, str] = {}
    for info in pkgutil.iter_modules(readers.__path__):
        if info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"{readers.__name__}.{info.name}")
        except Exception as exc:  # a reader being written right now must not stop a capture
            broken[info.name] = f"{type(exc).__name__}: {exc}"
            continue
        found.append(ReaderFiles(
            name=info.name,
            sysfs=tuple(getattr(module, "CAPTURE_SYSFS", ())),
            procfs=tuple(getattr(module, "CAPTURE_PROCFS", ())),
            commands=getattr(module, "capture_commands", None)))
    return found, broken


def expand_braces(pattern: str) -> List[str]:
    """'a/{b,c}/d' -> ['a/b/d', 'a/c/d'] (no nesting needed)."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if not match:
        return [pattern]
    out = []
    for choice in match.group(1).split(","):
        out.extend(expand_braces(pattern[:match.start()] + choice + pattern[match.end():]))
    return out


# ---- a snapshot of part of a filesystem, symlinks kept ------------------------------

@dataclass
class Tree:
    """Paths relative to one root: regular files (content), directories, symlinks."""

    root: str
    files: Dict[str, bytes] = field(default_factory=dict)
    dirs: set = field(default_factory=set)
    links: Dict[str, str] = field(default_factory=dict)
    unreadable: Dict[str, str] = field(default_factory=dict)
    mtimes: Dict[str, float] = field(default_factory=dict)  # kept: "when captured data was read" is its mtime

    def add_pattern(self, pattern: str) -> int:
        count = 0
        prefix = os.path.join(self.root, "")
        for expanded in expand_braces(pattern):
            for path in sorted(glob.glob(glob.escape(prefix) + expanded)):
                # Not os.path.relpath: it would fold "a/link/../b" lexically, and ".." must
                # be taken after the symlink is followed, as the kernel does.
                self.add(path[len(prefix):])
                count += 1
        return count

    def _real(self, rel: str, depth: int = 0) -> Optional[str]:
        """Walk `rel` component by component from the root, recording every symlink on
        the way and the directories the walk passes; return the real relative path, or
        None when the path leaves the root or does not exist."""
        if depth > 40:
            return None
        current = ""
        parts = [p for p in rel.split("/") if p and p != "."]
        for index, part in enumerate(parts):
            if part == "..":
                if not current:
                    return None
                current = os.path.dirname(current)
                continue
            candidate = f"{current}/{part}" if current else part
            full = os.path.join(self.root, candidate)
            if os.path.islink(full):
                try:
                    target = os.readlink(full)
                except OSError:
                    return None
                self.links[candidate] = target
                if os.path.isabs(target):
                    return None  # points outside the tree (e.g. /proc/self): kept as a link only
                resolved = self._real(os.path.join(os.path.dirname(candidate), target), depth + 1)
                if resolved is None:
                    return None
                current = resolved
            elif os.path.lexists(full):
                current = candidate
            else:
                return None
            if index < len(parts) - 1 and current:
                self.dirs.add(current)
        return current

    def add(self, rel: str) -> None:
        real = self._real(rel)
        if real is None or real in self.files:
            return
        full = os.path.join(self.root, real)
        if os.path.isdir(full):
            self.dirs.add(real)
            return
        try:
            fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            self.unreadable[real] = exc.strerror or str(exc)
            return
        try:
            self.mtimes[real] = os.fstat(fd).st_mtime
            chunks, size = [], 0
            while size < MAX_FILE_BYTES:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except OSError as exc:
            # Drivers answer some attributes with an error (a SAS counter the HBA will not
            # give): the reader sees the same as a missing file, so leave it out.
            self.unreadable[real] = exc.strerror or str(exc)
            return
        finally:
            os.close(fd)
        self.files[real] = b"".join(chunks)
        if os.path.dirname(real):
            self.dirs.add(os.path.dirname(real))

    def add_tree(self, rel: str = "") -> None:
        """Everything below `rel` (a captured-commands folder)."""
        base = os.path.join(self.root, rel)
        for dirpath, dirnames, filenames in os.walk(base):
            for name in dirnames + filenames:
                self.add(os.path.relpath(os.path.join(dirpath, name), self.root))


# ---- redaction ----------------------------------------------------------------------

class Redactor:
    """Replaces identifiers consistently: the same serial gets the same stand-in in
    sysfs, in nvme-cli and in zpool output. Stand-ins keep the value's shape (hex stays
    hex of the same length, a prefix such as `eui.` or `0x` stays) so readers parse them
    as before; they come from a random key, so they cannot be traced back."""

    def __init__(self, key: Optional[bytes] = None):
        self.key = key or secrets.token_bytes(16)
        self.mapping: Dict[str, str] = {}
        self._serials = 0

    def token(self, value: str) -> str:
        if value in self.mapping:
            return self.mapping[value]
        digest = hmac.new(self.key, value.encode(), hashlib.sha256).hexdigest() * 4
        prefix, body = "", value
        match = re.match(r"^(0x|eui\.|naa\.|t10\.|nvme\.|uuid\.|nqn\.[^:]*:)(.*)$", value, re.I)
        if match:
            prefix, body = match.group(1), match.group(2)
        if body and re.fullmatch(r"[0-9a-fA-F]+", body) and (prefix or len(body) >= 12):
            stand_in = prefix + (digest[:len(body)].upper() if body.isupper() else digest[:len(body)])
        elif body and re.fullmatch(r"[0-9a-fA-F-]{36}", body):  # a UUID
            stand_in = prefix + "-".join(digest[a:b] for a, b in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32)))
        else:
            self._serials += 1
            stand_in = prefix + f"REDACTED{self._serials:04d}"
        if set(value) <= {"0", "x", "-", ".", "e", "u", "i"} or not value.strip("0x-."):
            stand_in = value  # all zeros: "not set", nothing to hide
        self.mapping[value] = stand_in
        return stand_in

    def learn_files(self, tree: Tree) -> None:
        for rel, data in tree.files.items():
            if os.path.basename(rel) in SECRET_ATTRIBUTES - NQN_ATTRIBUTES:
                value = data.decode("utf-8", "replace").strip()
                if value:
                    self.token(value)

    def learn_json(self, value) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key.lower() in SECRET_JSON_KEYS and isinstance(item, (str, int)) and str(item).strip():
                    self.token(str(item).strip())
                else:
                    self.learn_json(item)
        elif isinstance(value, list):
            for item in value:
                self.learn_json(item)

    def apply(self, rel: str, data: bytes) -> bytes:
        name = os.path.basename(rel)
        if name == "config":
            return data[:256]  # the PCIe Device Serial Number capability lives above 0x100
        if name.endswith(".id-ns") and len(data) >= 128:
            # Identify Namespace: NGUID at bytes 104-119, EUI-64 at 120-127 (NVMe base spec).
            out = bytearray(data)
            for start, end in ((104, 120), (120, 128)):
                if any(out[start:end]):
                    token = self.token(out[start:end].hex())
                    out[start:end] = bytes.fromhex(token)[:end - start]
            return bytes(out)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return self._apply_bytes(data)
        if name in SECRET_ATTRIBUTES - NQN_ATTRIBUTES:
            value = text.strip()
            return text.replace(value, self.token(value)).encode() if value else data
        replaced = self._substrings(text)
        if name in NQN_ATTRIBUTES and replaced == text and text.strip():
            value = text.strip()
            return text.replace(value, self.token(value)).encode()
        return replaced.encode()

    def _substrings(self, text: str) -> str:
        for secret in sorted(self.mapping, key=len, reverse=True):
            if len(secret) >= MIN_SUBSTRING_SECRET and secret != self.mapping[secret]:
                text = text.replace(secret, self.mapping[secret])
        return text

    def _apply_bytes(self, data: bytes) -> bytes:
        for secret in sorted(self.mapping, key=len, reverse=True):
            stand_in = self.mapping[secret]
            if len(secret) >= MIN_SUBSTRING_SECRET and secret != stand_in:
                data = data.replace(secret.encode(), stand_in.encode()[:len(secret)].ljust(len(secret), b" "))
        return data


# ---- the archive --------------------------------------------------------------------

def snapshot(roots: Roots, work: str, redact: bool) -> Dict:
    """Read everything into memory, then let `write_archive` store it. Returns the manifest."""
    found, broken = reader_files()
    sys_tree, proc_tree = Tree(roots.sysfs), Tree(roots.procfs)
    per_reader: Dict[str, Dict[str, int]] = {}
    commands: List[Dict] = []
    for reader in found:
        counts = {"sysfs": 0, "procfs": 0}
        for pattern in reader.sysfs:
            counts["sysfs"] += sys_tree.add_pattern(pattern)
        for pattern in reader.procfs:
            counts["procfs"] += proc_tree.add_pattern(pattern)
        per_reader[reader.name] = counts
    captured_tree = Tree(os.path.join(work, "captured"))
    os.makedirs(captured_tree.root, exist_ok=True)
    if roots.captured:
        # Capturing a replayed machine: its command outputs are already saved.
        if os.path.isdir(roots.captured):
            captured_tree = Tree(roots.captured)
            captured_tree.add_tree()
    else:
        for reader in found:
            if reader.commands is None:
                continue
            started = time.monotonic()
            try:
                notes = reader.commands(roots, captured_tree.root) or []
                commands.append({"reader": reader.name, "ok": True, "notes": list(notes),
                                 "seconds": round(time.monotonic() - started, 3)})
            except Exception as exc:  # a failing command must not lose the rest of the capture
                commands.append({"reader": reader.name, "ok": False, "error": f"{type(exc).__name__}: {exc}"})
        captured_tree.add_tree()
    redactor = Redactor() if redact else None
    if redactor:
        redactor.learn_files(sys_tree)
        for rel, data in captured_tree.files.items():
            if rel.endswith(".json"):
                try:
                    redactor.learn_json(json.loads(data))
                except ValueError:
                    pass
        for tree in (sys_tree, proc_tree, captured_tree):
            tree.files = {rel: redactor.apply(rel, data) for rel, data in tree.files.items()}
    return {
        "trees": {"sys": sys_tree, "proc": proc_tree, "captured": captured_tree},
        "manifest": {
            "format": 1,
            "storpath_version": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "source": {"sysfs": roots.sysfs, "procfs": roots.procfs, "captured": roots.captured},
            "redacted": bool(redact),
            "redacted_values": len(redactor.mapping) if redactor else 0,
            "readers": per_reader,
            "readers_not_loaded": broken,
            "files": {name: len(tree.files) for name, tree in (("sys", sys_tree), ("proc", proc_tree),
                                                                 ("captured", captured_tree))},
            "unreadable": {f"{name}/{rel}": why for name, tree in (("sys", sys_tree), ("proc", proc_tree))
                           for rel, why in sorted(tree.unreadable.items())},
            "commands": commands,
        },
    }


def archive_top(output: str) -> str:
    base = os.path.basename(output)
    for suffix in (".tar.gz", ".tgz", ".tar"):
        if base.endswith(suffix):
            base = base[:-len(suffix)]
            break
    return re.sub(r"[^A-Za-z0-9._-]", "_", base) or "storpath-capture"


def write_archive(output: str, top: str, trees: Dict[str, Tree], manifest: Dict, readme: str) -> None:
    mtime = int(time.time())

    def info(name: str, kind: bytes, size: int = 0, link: str = "", when: Optional[float] = None) -> tarfile.TarInfo:
        entry = tarfile.TarInfo(f"{top}/{name}" if name else top)
        entry.type, entry.size, entry.mtime = kind, size, int(when if when is not None else mtime)
        entry.mode = 0o755 if kind == tarfile.DIRTYPE else (0o777 if kind == tarfile.SYMTYPE else 0o644)
        entry.linkname = link
        entry.uname = entry.gname = ""
        return entry

    tmp = f"{output}.tmp{os.getpid()}"
    with tarfile.open(tmp, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(info("", tarfile.DIRTYPE))
        for name, tree in trees.items():
            tar.addfile(info(name, tarfile.DIRTYPE))
            dirs = set()
            for rel in tree.dirs | {os.path.dirname(r) for r in list(tree.files) + list(tree.links)}:
                while rel and rel not in dirs:
                    dirs.add(rel)
                    rel = os.path.dirname(rel)
            for rel in sorted(dirs - set(tree.links)):
                tar.addfile(info(f"{name}/{rel}", tarfile.DIRTYPE))
            for rel in sorted(tree.files):
                data = tree.files[rel]
                when = tree.mtimes.get(rel) if name == "captured" else None
                tar.addfile(info(f"{name}/{rel}", tarfile.REGTYPE, len(data), when=when), io.BytesIO(data))
            for rel in sorted(tree.links):
                tar.addfile(info(f"{name}/{rel}", tarfile.SYMTYPE, link=tree.links[rel]))
        for name, text in (("README.md", readme), ("MANIFEST.json", json.dumps(manifest, indent=2) + "\n")):
            data = text.encode()
            tar.addfile(info(name, tarfile.REGTYPE, len(data)), io.BytesIO(data))
    os.replace(tmp, output)


def run(args, config) -> int:
    roots = roots_from(config)
    if not os.path.isdir(roots.sysfs):
        print(f"storpath capture: {roots.sysfs} is not a folder (see --path.sysfs)", file=sys.stderr)
        return 3
    output = args.output
    top = archive_top(output)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="storpath-capture-") as work:
        result = snapshot(roots, work, args.redact)
        manifest = result["manifest"]
        readme = README.format(
            version=__version__, created=manifest["created"], sysfs=roots.sysfs, procfs=roots.procfs,
            redacted=("Serial numbers, WWNs, EUI-64/NGUIDs and SAS addresses are replaced by stand-ins "
                      "(consistently: one drive keeps one stand-in everywhere)." if args.redact else
                      "Not redacted: it contains serial numbers and WWNs (use --redact to replace them)."),
            archive=os.path.basename(output), top=top)
        try:
            write_archive(output, top, result["trees"], manifest, readme)
        except OSError as exc:
            print(f"storpath capture: cannot write {output}: {exc.strerror or exc}", file=sys.stderr)
            return 1
    files = manifest["files"]
    print(f"storpath capture: wrote {output}: {files['sys']} sysfs, {files['proc']} procfs and "
          f"{files['captured']} command output files{' (redacted)' if args.redact else ''}.", file=sys.stderr)
    for name, why in manifest["readers_not_loaded"].items():
        log.kv(LOG, logging.WARNING, "reader not loaded, its files are missing from the capture", reader=name,
               err=why)
    for command in manifest["commands"]:
        if not command.get("ok"):
            log.kv(LOG, logging.WARNING, "command outputs not captured", reader=command["reader"],
                   err=command.get("error", ""))
    print(f"Replay: tar xzf {os.path.basename(output)} && storpath check --path.sysfs={top}/sys "
          f"--path.procfs={top}/proc --path.captured={top}/captured", file=sys.stderr)
    return 0


__all__ = ["add_parser", "run", "reader_files", "expand_braces", "Tree", "Redactor", "snapshot",
           "write_archive", "archive_top"]
