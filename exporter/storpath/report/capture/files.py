"""What the readers read (each reader module declares CAPTURE_SYSFS / CAPTURE_PROCFS and
may define capture_commands), and a snapshot of part of a filesystem with symlinks kept."""

from __future__ import annotations

import glob
import importlib
import os
import pkgutil
import re
from dataclasses import field
from typing import Callable, Dict, List, Optional, Tuple

from storpath.base.records import datarecord
from storpath import readers
from storpath.base.roots import Roots
from storpath.readers.power import WAKING_ATTRIBUTES, read_sleep

MAX_FILE_BYTES = 1 << 20


# ---- what the readers read ----------------------------------------------------------

@datarecord
class ReaderFiles:
    """What one reader module reads: its CAPTURE_SYSFS and CAPTURE_PROCFS paths and its capture_commands."""

    name: str
    sysfs: Tuple[str, ...] = ()
    procfs: Tuple[str, ...] = ()
    commands: Optional[Callable[[Roots, str], Optional[List[str]]]] = None


def reader_files() -> Tuple[List[ReaderFiles], Dict[str, str]]:
    """What every reader module reads, and the readers that could not be imported."""
    found: List[ReaderFiles] = []
    broken: Dict[str, str] = {}
    for info in pkgutil.walk_packages(readers.__path__, prefix=f"{readers.__name__}."):
        rel = info.name[len(readers.__name__) + 1:]
        name = rel.replace(".", "_")  # raid.storcli: raid_storcli, as the capture has always named it
        if rel.rsplit(".", 1)[-1].startswith("_"):
            continue
        try:
            module = importlib.import_module(f"{readers.__name__}.{rel}")
        except Exception as exc:  # a reader being written right now must not stop a capture
            broken[name] = f"{type(exc).__name__}: {exc}"
            continue
        found.append(ReaderFiles(
            name=name,
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

@datarecord
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
        if os.path.basename(real) in WAKING_ATTRIBUTES and read_sleep(os.path.dirname(full)) is not None:
            # A sleeping PCI function: reading its link or config space would wake it
            # (storpath.readers.power). Kept empty, so that the replay has the attribute and, its
            # power attributes saying it sleeps, reads it no more than the reader here did.
            self.files[real] = b""
            self.unreadable[real] = "not read: the device sleeps, and reading it would wake it"
            self.dirs.add(os.path.dirname(real))
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
