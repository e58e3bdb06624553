"""Facts several collectors need, read once per scrape.

The PCI tree and the block devices feed the pcie, block and numa collectors (and more
later); reading them once per scrape, through readers that keep what cannot change per
device instance, keeps a scrape of a host with thousands of devices cheap. The
exporter starts each scrape with `new_scrape()`; within one scrape every collector gets
the same lists, or the same error (sysfs.RootUnreadable) when they could not be read.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from storpath.readers.block import BlockDevice, BlockReader
from storpath.readers.host import HostIdentity, read_host
from storpath.readers.pci import PciDevice, PciReader
from storpath.roots import Roots
from storpath.sysfs import RootUnreadable


class SharedReads:
    """The reads several collectors share within one scrape (or one `storpath check`):
    the PCI tree and the block devices. Not to be confused with findings.Facts, the
    machine as `storpath check` sees it, which reads through one of these."""

    def __init__(self, roots: Roots, hold_dirs: bool = False):
        # A long-running exporter holds each PCI device's directory open (see PciReader).
        self.roots = roots
        self.pci_reader = PciReader(roots, hold_dirs=hold_dirs)
        self.block_reader = BlockReader(roots)
        self._read: Dict[str, Union[list, Exception]] = {}  # what this scrape read, by name
        self._lock = threading.RLock()  # a read may build on another (blocks on the block listing)
        self._host: Optional[HostIdentity] = None
        self._kept: Dict[str, Any] = {}  # what collectors kept this scrape (keep())
        self._last: Optional[ScrapeFacts] = None

    def close(self) -> None:
        self.pci_reader.close()

    def new_scrape(self) -> None:
        with self._lock:
            self._read = {}

    def _once(self, name: str, read: Callable[[], list]) -> list:
        with self._lock:
            found = self._read.get(name)
            if found is None:
                try:
                    found = read()
                except RootUnreadable as exc:
                    found = exc
                self._read[name] = found
        if isinstance(found, Exception):
            raise found
        return found

    def pci(self) -> List[PciDevice]:
        return self._once("pci", self.pci_reader.read)

    def block_listing(self) -> List[Tuple[str, int]]:
        """/sys/class/block, listed once per scrape for the block and NVMe readers."""
        return self._once("block_listing", self.block_reader.list)

    def blocks(self) -> List[BlockDevice]:
        return self._once("blocks", lambda: self.block_reader.read(self.block_listing()))

    def host(self) -> HostIdentity:
        """DMI and the hypervisor: they do not change while the machine runs, so read once."""
        with self._lock:
            if self._host is None:
                self._host = read_host(self.roots)
            return self._host

    # ---- what the last scrape read, for the landing page ------------------------------
    def keep(self, name: str, value: Any) -> None:
        """A collector hands over a record it read or derived this scrape (md arrays, the
        link expectations) for the landing page to draw; kept until the next scrape ends."""
        with self._lock:
            self._kept[name] = value

    def end_scrape(self, finished_at: float) -> None:
        with self._lock:
            found = {name: value for name, value in self._read.items() if not isinstance(value, Exception)}
            self._last = ScrapeFacts(finished_at=finished_at, pci=found.get("pci"), blocks=found.get("blocks"),
                                     kept=self._kept)
            self._kept = {}

    def last_scrape(self) -> Optional["ScrapeFacts"]:
        """What the last finished scrape read; None before the first one."""
        return self._last


@dataclass(frozen=True)
class ScrapeFacts:
    """The records of one finished scrape. Records are never changed once read, so
    handing them over needs no copy."""

    finished_at: float  # Unix seconds
    pci: Optional[List[PciDevice]]  # None: not read (no collector needed it) or unreadable
    blocks: Optional[List[BlockDevice]]
    kept: Dict[str, Any] = field(default_factory=dict)  # what collectors kept (SharedReads.keep)


class FrozenReads:
    """SharedReads' interface over records already read: findings.Facts over a past scrape."""

    def __init__(self, pci: List[PciDevice], blocks: List[BlockDevice]):
        self._pci, self._blocks = pci, blocks

    def pci(self) -> List[PciDevice]:
        return self._pci

    def blocks(self) -> List[BlockDevice]:
        return self._blocks
