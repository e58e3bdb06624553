"""What a reader derives once per device instance and keeps while the instance exists."""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Tuple


class InstanceCache:
    """What a reader derives once per device instance and keeps while it exists.

    Devices are listed with `list_entries` from a bus or class directory. The kernel
    creates a device's symlink there when the device is added and removes it with the
    device, and every sysfs node gets a fresh inode number: the inode tells a
    replacement apart from the device that was there, so facts that cannot change
    while a device exists (its place in the tree, its identity) are derived once and
    derived again only for a new instance. Checking costs nothing beyond the listing.
    Not thread-safe: readers call it under their own lock.
    """

    def __init__(self) -> None:
        self._entries: Dict[str, Tuple[int, object]] = {}

    def refresh(self, base: str, entries: Iterable[Tuple[str, int]],
                derive: Callable[[str, str], object]) -> List[tuple]:
        """(name, path, derived value) for every listed (name, inode); entries of devices
        no longer listed are forgotten."""
        out, seen, cache = [], set(), self._entries
        for name, inode in entries:
            entry = cache.get(name)
            path = base + "/" + name
            if entry is None or entry[0] != inode:
                entry = cache[name] = (inode, derive(name, path))
            seen.add(name)
            out.append((name, path, entry[1]))
        if len(seen) != len(cache):
            for gone in set(cache) - seen:
                del cache[gone]
        return out

    def replace(self, name: str, value: object) -> None:
        """A listed instance's value derived again (what could not be read at first sight)."""
        entry = self._entries.get(name)
        if entry is not None:
            self._entries[name] = (entry[0], value)

    def forget(self, name: str) -> None:
        self._entries.pop(name, None)
