"""Small, fast helpers to read sysfs/procfs attributes.

Absence is normal (hardware without the feature, a device removed mid-scrape), so a
missing file is `None`, never an exception. Other failures (permission, I/O errors a
driver returns for an attribute) are also `None`, and the caller is told why through
`last_error` style return values only where it needs to log.
"""

from __future__ import annotations

import errno
import os
from typing import Callable, Dict, Iterable, List, Optional, Tuple

# errno values that mean "the thing is not there (any more)".
_GONE = {errno.ENOENT, errno.ENOTDIR, errno.ENODEV, errno.ENXIO}


def read_attr(path: str) -> Optional[str]:
    """The stripped text of a sysfs attribute, or None if it cannot be read."""
    value, _ = read_attr_why(path)
    return value


def read_attr_why(path: str) -> Tuple[Optional[str], Optional[str]]:
    """Like read_attr, but also says why a read failed (None reason when the file is absent)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        return None, (None if exc.errno in _GONE else os.strerror(exc.errno or 0))
    try:
        data = os.read(fd, 65536)
    except OSError as exc:
        return None, (None if exc.errno in _GONE else os.strerror(exc.errno or 0))
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace").strip(), None


def read_bytes(path: str, limit: int = 4096) -> Optional[bytes]:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_int(path: str, base: int = 10) -> Optional[int]:
    text = read_attr(path)
    if text is None:
        return None
    try:
        return int(text, base)
    except ValueError:
        return None


def parse_numa_node(text: Optional[str]) -> Optional[int]:
    """A device's numa_node: a node number or -1; anything else None."""
    if text is None:
        return None
    try:
        value = int(text.strip(), 10)
    except ValueError:
        return None
    return value if value >= -1 else None


def list_dir(path: str) -> List[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def link_name(path: str) -> Optional[str]:
    """The last component of a symlink's target (a driver's name, a device's name)."""
    try:
        return os.path.basename(os.readlink(path))
    except OSError:
        return None


class InstanceCache:
    """What a reader derives once per device instance and keeps while it exists.

    sysfs gives every device directory its own inode, and a device that is removed and
    replaced at the same name gets a new one: the inode tells a replacement apart from
    the device that was there, so facts that cannot change while a device exists (its
    place in the tree, its identity) are derived once and re-derived only for a new
    instance. Not thread-safe: readers call it under their own lock.
    """

    def __init__(self) -> None:
        self._entries: Dict[str, Tuple[int, object]] = {}

    def refresh(self, base: str, names: Iterable[str], derive: Callable[[str, str], object],
                real_path: Optional[Callable[[object], str]] = None) -> List[tuple]:
        """(name, path, derived value) for every name whose directory below `base` still
        exists; entries of devices that are gone are forgotten. With `real_path` (the
        device's own directory, remembered in the derived value) a known device is checked
        there instead of through the class symlink: a shorter walk for the kernel."""
        out, seen = [], set()
        for name in names:
            path = os.path.join(base, name)
            entry = self._entries.get(name)
            inode = None
            if entry is not None and real_path is not None:
                try:
                    inode = os.stat(real_path(entry[1])).st_ino
                except OSError:
                    inode = None  # gone, or moved: ask the symlink
            if inode is None:
                try:
                    inode = os.stat(path).st_ino
                except OSError:
                    continue  # removed between listing and reading
            if entry is None or entry[0] != inode:
                entry = self._entries[name] = (inode, derive(name, path))
            seen.add(name)
            out.append((name, path, entry[1]))
        for gone in set(self._entries) - seen:
            del self._entries[gone]
        return out

    def forget(self, name: str) -> None:
        self._entries.pop(name, None)
