"""The link as trained now, of a few PCI functions, read often: GPUs and accelerators lower
their link's speed (and, by NVIDIA's and AMD's own account, its width) while idle and raise
it when busy, so one reading per scrape says little. `collectors.gpu` samples them about
once a second between scrapes with this read: two small sysfs attributes per function
(current_link_speed, current_link_width: Documentation/ABI/testing/sysfs-bus-pci), after
power/runtime_status, so that a GPU that sleeps is never woken by its monitor."""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, Mapping, Optional, Tuple

from storpath.base.parse import parse_pcie_speed_raw, parse_pcie_width_raw
from storpath.base.sysfs import read_many
from storpath.readers.power import read_sleep

Sample = Tuple[Optional[float], Optional[int]]  # (transfers per second, lanes); None: unreadable


def parse_sample(speed_raw: Optional[bytes], width_raw: Optional[bytes]) -> Sample:
    """One function's link from its two attributes' bytes as read (None: not read). No I/O."""
    speed = parse_pcie_speed_raw(speed_raw)[0] if speed_raw is not None else None
    width = parse_pcie_width_raw(width_raw, allow_zero=True)[0] if width_raw is not None else None
    return speed, width


def read_samples(paths: Mapping[str, str]) -> Dict[str, Sample]:
    """address -> its link now, for each function's sysfs directory in `paths`. A function
    gone since (nothing readable) is left out; one unreadable attribute is None. A function
    that sleeps (storpath.readers.power) is left out too: reading its link would wake it."""
    out: Dict[str, Sample] = {}
    for address, path in paths.items():
        if read_sleep(path) is not None:
            continue
        speed_raw, width_raw = read_many((path + "/current_link_speed", path + "/current_link_width"))
        if speed_raw is None and width_raw is None:
            continue
        out[address] = parse_sample(speed_raw, width_raw)
    return out


class SharedLinkReads:
    """One read of a link for every sampler of it: the GPU sampler (collectors.gpu) and the link
    change sampler (collectors.pcie) both sample a GPU's link, each on its own schedule; a
    sampler's pass takes a function's link as another sampler read it since this sampler's own
    last pass (and within `max_age`), and reads it itself otherwise. A function that sleeps is
    read by neither (read_samples). Thread-safe: each sampler runs in its own task."""

    KEEP = 600.0  # a reading older than this is forgotten (a function no sampler watches now)

    def __init__(self, read: Callable[[Mapping[str, str]], Dict[str, Sample]] = None) -> None:
        self._read = read or read_samples
        self._lock = threading.Lock()
        self._taken: Dict[str, Tuple[float, Optional[Sample]]] = {}  # path -> (when, its link; None: not read)

    def reader(self) -> "LinkReader":
        return LinkReader(self)

    def take(self, paths: Mapping[str, str], since: float, max_age: float) -> Dict[str, Sample]:
        now = time.monotonic()
        out: Dict[str, Sample] = {}
        todo: Dict[str, str] = {}
        with self._lock:
            for address, path in paths.items():
                taken = self._taken.get(path)
                if taken is not None and taken[0] > since and now - taken[0] <= max_age:
                    if taken[1] is not None:
                        out[address] = taken[1]
                else:
                    todo[address] = path
        read = self._read(todo) if todo else {}
        now = time.monotonic()
        with self._lock:
            for address, path in todo.items():
                self._taken[path] = (now, read.get(address))
            for path in [p for p, (when, _) in self._taken.items() if now - when > self.KEEP]:
                del self._taken[path]
        out.update(read)
        return out


class LinkReader:
    """One sampler's view of SharedLinkReads: what it takes is no older than its last pass."""

    def __init__(self, shared: SharedLinkReads) -> None:
        self._shared = shared
        self._last = float("-inf")

    def read(self, paths: Mapping[str, str], max_age: float) -> Dict[str, Sample]:
        """`paths`' links: as another sampler read them since this one's last read (at most
        `max_age` seconds ago), or read now. Never this sampler's own earlier reading."""
        samples = self._shared.take(paths, self._last, max_age)
        self._last = time.monotonic()  # after its own readings: they are never taken again
        return samples


_SHARED: Dict[object, SharedLinkReads] = {}
_SHARED_LOCK = threading.Lock()


def shared_reads(key: object) -> SharedLinkReads:
    """The SharedLinkReads of one machine (`key`: its Roots): one per exporter."""
    with _SHARED_LOCK:
        return _SHARED.setdefault(key, SharedLinkReads())
