"""Facts several collectors need, read once per scrape.

The PCI tree and the block devices feed the pcie, block and numa collectors (and more
later); reading them once per scrape, through readers that keep what cannot change per
device instance, keeps a scrape of a host with thousands of devices cheap. The
exporter starts each scrape with `new_scrape()`; within one scrape every collector gets
the same lists.
"""

from __future__ import annotations

import threading
from typing import List, Optional

from storpath.readers.block import BlockDevice, BlockReader
from storpath.readers.host import HostIdentity, read_host
from storpath.readers.pci import PciDevice, PciReader
from storpath.roots import Roots


class ScrapeFacts:
    def __init__(self, roots: Roots, hold_dirs: bool = False):
        # A long-running exporter holds each PCI device's directory open (see PciReader).
        self.roots = roots
        self.pci_reader = PciReader(roots, hold_dirs=hold_dirs)
        self.block_reader = BlockReader(roots)
        self._pci: Optional[List[PciDevice]] = None
        self._blocks: Optional[List[BlockDevice]] = None
        self._host: Optional[HostIdentity] = None
        self._lock = threading.Lock()

    def close(self) -> None:
        self.pci_reader.close()

    def new_scrape(self) -> None:
        with self._lock:
            self._pci = None
            self._blocks = None

    def pci(self) -> List[PciDevice]:
        with self._lock:
            if self._pci is None:
                self._pci = self.pci_reader.read()
            return self._pci

    def blocks(self) -> List[BlockDevice]:
        with self._lock:
            if self._blocks is None:
                self._blocks = self.block_reader.read()
            return self._blocks

    def host(self) -> HostIdentity:
        """DMI and the hypervisor: they do not change while the machine runs, so read once."""
        with self._lock:
            if self._host is None:
                self._host = read_host(self.roots)
            return self._host
