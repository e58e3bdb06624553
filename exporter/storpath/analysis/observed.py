"""The highest link a function reached over a window of samples: what a GPU's or
accelerator's link does when it is busy (it trains down when idle). Pure; the samples come
from the `pcie_observed` slow source's background task (storpath.scrape.slow, readers.link_samples)."""

from __future__ import annotations

from collections import deque
from typing import Deque, Dict, Iterable, Mapping, Optional, Tuple

from storpath.base.records import datarecord
from storpath.readers.link_samples import Sample
from storpath.readers.pci import PciDevice

# PCI base classes whose link follows the load: display controllers (0x03: VGA, 3D) and
# processing accelerators (0x12). The rules' pcie.load_dependent_classes says the same.
LOAD_DEPENDENT_BASE_CLASSES = frozenset({0x03, 0x12})


def follows_load(class_code: Optional[int]) -> bool:
    return class_code is not None and class_code >> 16 in LOAD_DEPENDENT_BASE_CLASSES


def sampled(devices: Iterable[PciDevice]) -> Dict[str, str]:
    """address -> sysfs directory of every GPU and accelerator with a link: the functions
    whose link is sampled between scrapes."""
    return {d.address: d.static.path for d in devices
            if d.static.has_link and d.static.path and follows_load(d.static.class_code)}


@datarecord(frozen=True)
class Observed:
    """One function's link over the window: the highest speed and width sampled (each on
    its own: a width fault shows while the speed is at its top), how many samples."""

    max_speed: Optional[float]
    max_width: Optional[int]
    samples: int


class Window:
    """Samples of the last `seconds`, per address; `add` at each sampling, `observed` for the
    maxima. Not thread-safe: its owner locks."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._samples: Dict[str, Deque[Tuple[float, Sample]]] = {}

    def add(self, now: float, samples: Mapping[str, Sample], present: Iterable[str]) -> None:
        """The samples taken at `now`; addresses not in `present` (gone) are forgotten."""
        keep = set(present)
        for address in list(self._samples):
            if address not in keep:
                del self._samples[address]
        for address, sample in samples.items():
            if address in keep:
                self._samples.setdefault(address, deque()).append((now, sample))
        horizon = now - self.seconds
        for queue in self._samples.values():
            while queue and queue[0][0] < horizon:
                queue.popleft()

    def observed(self) -> Dict[str, Observed]:
        out: Dict[str, Observed] = {}
        for address, queue in self._samples.items():
            speeds = [s for _, (s, _) in queue if s is not None]
            widths = [w for _, (_, w) in queue if w is not None]
            out[address] = Observed(max(speeds) if speeds else None, max(widths) if widths else None, len(queue))
        return out


# The classes whose links the change sampler watches, by the name the config gives them
# (`collectors.pcie.link_sample_classes`): PCI base classes (PCI Code and ID Assignment spec).
LINK_CLASSES: Mapping[str, frozenset] = {
    "storage": frozenset({0x01}),
    "network": frozenset({0x02}),
    "gpu": LOAD_DEPENDENT_BASE_CLASSES,
    "bridge": frozenset({0x06}),  # switch ports and root ports
}


def watched_links(devices: Iterable[PciDevice], classes: Iterable[str]) -> Dict[str, str]:
    """address -> sysfs directory of every function with a link whose base class is one of
    `classes` (names of LINK_CLASSES; "all": every function with a link)."""
    names = set(classes)
    bases = set()
    for name in names:
        bases |= LINK_CLASSES.get(name, frozenset())
    every = "all" in names
    return {d.address: d.static.path for d in devices
            if d.static.has_link and d.static.path
            and (every or (d.static.class_code is not None and d.static.class_code >> 16 in bases))}


class ChangeCounter:
    """Changes of each link's (speed, width) from one sample to the next, counted since the
    address was first watched: a link that drops and retrains between two scrapes moves it
    although both scrapes read the same link. An unreadable sample (None) is no change and
    leaves the last readable one as the reference. Not thread-safe: its owner locks."""

    def __init__(self) -> None:
        self._last: Dict[str, Sample] = {}
        self._counts: Dict[str, int] = {}

    def watch(self, present: Iterable[str]) -> None:
        """Addresses in `present` are counted from now (0 when new); others are forgotten."""
        keep = set(present)
        for address in list(self._counts):
            if address not in keep:
                del self._counts[address]
                self._last.pop(address, None)
        for address in keep:
            self._counts.setdefault(address, 0)

    def add(self, samples: Mapping[str, Sample]) -> None:
        for address, (speed, width) in samples.items():
            if address not in self._counts:
                continue
            last = self._last.get(address)
            if last is not None:
                last_speed, last_width = last
                speed = last_speed if speed is None else speed
                width = last_width if width is None else width
                if (speed, width) != last:
                    self._counts[address] += 1
            self._last[address] = (speed, width)

    def counts(self) -> Dict[str, int]:
        return dict(self._counts)


@datarecord(frozen=True)
class LinkChangeCounts:
    """The `pcie_link_changes` slow source's record: changes per watched function, by which
    source they were counted (`tracepoint`, `sampler`, `none`), and, from the tracepoint, per
    function and the kernel's cause (a name of readers.link_events.CAUSES)."""

    counts: Mapping[str, int]
    source: str
    causes: Mapping[Tuple[str, str], int]


class EventCounter:
    """Changes of each watched link counted from the kernel's pcie_link_event events
    (readers.link_events): an event names the port above a link; it counts, for each watched
    function below that port (and the port itself where it is watched), when its (speed, width)
    differs from the port's last one (the link as the scrape read it before the first event).
    An event that repeats the link's state (a status bit, the bandwidth controller enabled on
    a steady link) is no change. Not thread-safe: its owner locks."""

    def __init__(self) -> None:
        self._below: Dict[str, Tuple[str, ...]] = {}  # port -> the watched functions on its link
        self._last: Dict[str, Tuple[Optional[float], Optional[int]]] = {}  # port -> its link now
        self._counts: Dict[str, int] = {}
        self._causes: Dict[Tuple[str, str], int] = {}

    def watch(self, devices: Iterable[PciDevice], watched: Iterable[str]) -> None:
        """The functions in `watched` (addresses of `devices`) are counted from now (0 when
        new); others are forgotten. A port's reference is the link its functions were read at."""
        keep = set(watched)
        below: Dict[str, list] = {}
        for device in devices:
            if device.address not in keep:
                continue
            for port in (device.static.parent, device.address):
                if port:
                    below.setdefault(port, []).append(device)
        self._below = {port: tuple(d.address for d in ds) for port, ds in below.items()}
        for port, ds in below.items():
            if port not in self._last:
                self._last[port] = (ds[0].current_link_speed, ds[0].current_link_width)
        for port in list(self._last):
            if port not in below:
                del self._last[port]
        for address in list(self._counts):
            if address not in keep:
                del self._counts[address]
        for key in list(self._causes):
            if key[0] not in keep:
                del self._causes[key]
        for address in keep:
            self._counts.setdefault(address, 0)

    def add(self, events: Iterable) -> None:
        for event in events:
            functions = self._below.get(event.port)
            if not functions:
                continue
            now = (event.speed, event.width)
            if now == self._last.get(event.port):
                continue
            self._last[event.port] = now
            for address in functions:
                self._counts[address] = self._counts.get(address, 0) + 1
                key = (address, event.cause)
                self._causes[key] = self._causes.get(key, 0) + 1

    def counts(self) -> Dict[str, int]:
        return dict(self._counts)

    def causes(self) -> Dict[Tuple[str, str], int]:
        return dict(self._causes)
