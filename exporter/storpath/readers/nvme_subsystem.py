"""NVMe native multipath: every path (controller) of every NVMe subsystem, from
/sys/class/nvme-subsystem/nvme-subsysN/.

The kernel's references: Documentation/ABI/testing/sysfs-class-nvme (the controller
attributes), drivers/nvme/host/core.c and sysfs.c (the subsystem's `subsysnqn`, `model`,
`serial`, `firmware_rev`; a controller's `state`, `transport`, `address`, `numa_node`) and
drivers/nvme/host/multipath.c (`iopolicy`, a path disk's `ana_state`). The layout with
CONFIG_NVME_MULTIPATH:

    /sys/class/nvme-subsystem/nvme-subsys0/
        subsysnqn, model, serial, firmware_rev, iopolicy (numa, round-robin, queue-depth)
        nvme0 -> ../../nvme-fabrics/ctl/nvme0     one link per controller: one path each
            state       new, live, resetting, connecting, deleting, "deleting (no IO)", dead
            transport   pcie, tcp, rdma, fc, loop
            address     "0000:01:00.0" (pcie), "traddr=10.0.0.1,trsvcid=4420,src_addr=..." (tcp),
                        "nn-0x...:pn-0x..." (fc)
            numa_node   -1 when the kernel does not know (fabrics without a bound adapter)
            nvme0c0n1/  the namespace's path disk through this controller (hidden)
                ana_state   optimized, non-optimized, inaccessible, persistent-loss, change;
                            only when the controller reports ANA (nvme_ctrl_use_ana)
        nvme0n1/        the namespace's head disk, the one block device users open

A controller being deleted leaves the link a moment before its directory: an entry whose
`state` cannot be read is still a path, in state "unknown". No nvme-subsystem class (a
kernel without NVMe, or without multipath) lists as no subsystems, not as an error.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from functools import partial
from typing import Dict, List, Mapping, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.parse import attribute_text, natural_key, parse_identity, parse_numa_node
from storpath.base.problems import INFO, Problem
from storpath.base.roots import Roots
from storpath.readers.instances import InstanceCache
from storpath.base.sysfs import list_dir, list_entries, read_attr_noting, read_attr_why, read_many

CAPTURE_SYSFS = (
    "class/nvme-subsystem/*",
    "class/nvme-subsystem/*/{subsysnqn,model,serial,firmware_rev,iopolicy}",
    "class/nvme-subsystem/*/nvme*/{state,transport,address,numa_node}",
    "class/nvme-subsystem/*/nvme*/nvme*c*n*/ana_state",
)

# drivers/nvme/host/sysfs.c, nvme_sysfs_show_state: the controller states, as printed. The
# kernel has spelled NVME_CTRL_DELETING_NOIO "deleting (no IO)" (5.x) and "deleting (noio)".
CONTROLLER_STATES = ("new", "live", "resetting", "connecting", "deleting", "dead")
_STATE_SPELLINGS = {state: state for state in CONTROLLER_STATES}
_STATE_SPELLINGS.update({"deleting (no IO)": "deleting", "deleting (noio)": "deleting"})
UNKNOWN_STATE = "unknown"
PATH_STATES = CONTROLLER_STATES + (UNKNOWN_STATE,)
# drivers/nvme/host/multipath.c, nvme_ana_state_names.
ANA_STATES = ("optimized", "non-optimized", "inaccessible", "persistent-loss", "change")

_CONTROLLER = re.compile(r"^nvme\d+$", re.ASCII)
_HEAD_DISK = re.compile(r"^nvme\d+n\d+$", re.ASCII)
_PATH_DISK = re.compile(r"^nvme(?P<subsys>\d+)c(?P<ctrl>\d+)n(?P<ns>\d+)$", re.ASCII)
# A name parse.natural_key splits into a word and a number only (its PCI address form aside).
_WORD_NUMBER = re.compile(r"^(\D+)(\d+)$")


@datarecord(frozen=True)
class NamespacePath:
    """One namespace reached through one controller: the hidden path disk nvmeXcYnZ."""

    disk: str  # nvme0c1n1
    namespace: str  # the head disk users open: nvme0n1
    ana_state: Optional[str]  # None when the controller does not report ANA


@datarecord(frozen=True)
class SubsystemPath:
    """One controller of a subsystem: one path to its namespaces."""

    controller: str  # nvme1
    state: str  # one of PATH_STATES ("deleting (no IO)" read as deleting; unreadable or unknown: unknown)
    raw_state: Optional[str]  # what the kernel printed
    transport: Optional[str]  # pcie, tcp, rdma, fc, loop
    address: Optional[str]
    numa_node: Optional[int]  # None: -1 (the kernel does not know) or no attribute
    namespace_paths: Tuple[NamespacePath, ...] = ()

    @property
    def live(self) -> bool:
        return self.state == "live"


@datarecord(frozen=True)
class NvmeSubsystem:
    """One NVMe subsystem: its identity, I/O policy, paths (controllers) and namespaces' head disks."""

    name: str  # nvme-subsys0
    nqn: Optional[str]
    model: Optional[str]
    serial: Optional[str]
    iopolicy: Optional[str]  # numa, round-robin, queue-depth
    paths: Tuple[SubsystemPath, ...]
    namespaces: Tuple[str, ...]  # head disks: nvme0n1

    @property
    def live_paths(self) -> int:
        return sum(1 for path in self.paths if path.live)


# ---- pure parsers ------------------------------------------------------------

def parse_controller_state(text: Optional[str]) -> str:
    """'live' -> 'live'; 'deleting (no IO)' -> 'deleting'; None or anything else -> 'unknown'."""
    if text is None:
        return UNKNOWN_STATE
    return _STATE_SPELLINGS.get(text.strip(), UNKNOWN_STATE)


def parse_ana_state(text: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """(state, None), (None, None) when absent, (None, reason) for a word the kernel never prints."""
    if text is None:
        return None, None
    word = text.strip()
    if word in ANA_STATES:
        return word, None
    return None, f"unknown ana_state {text!r}"


def _natural(entries: List[Tuple[str, int]]) -> List[Tuple[str, int]]:
    """(name, inode) entries in natural order (nvme2 before nvme10); most lists here hold one.
    Names that are all a word and a number (nvme-subsys12, as the kernel names them) sort by
    (word, number), the order parse.natural_key gives them, without splitting each name."""
    if len(entries) < 2:
        return entries
    keys = []
    for name, _ in entries:
        match = _WORD_NUMBER.match(name)
        if match is None:
            return sorted(entries, key=lambda entry: natural_key(entry[0]))
        keys.append((match.group(1), int(match.group(2))))
    order = sorted(range(len(entries)), key=keys.__getitem__)
    return [entries[i] for i in order]


def _unreadable(device: str, attribute: str, why: str) -> Problem:
    return Problem("NVMe subsystem attribute unreadable", (("device", device), ("attribute", attribute), ("err", why)))


# ---- reading -----------------------------------------------------------------

_NOT_SEEN = object()  # a controller the states' pass did not list (it came after): its record kept stands


class ControllerStates:
    """Every NVMe controller's `state`, in one pass over /sys/class/nvme: what `storpath serve`
    reads on its own schedule (storpath.scrape.slow.NvmeControllerStates) so that a scrape
    reads nothing of a local drive's subsystem. Where each state file is (the controller's
    own folder, no class link to follow each pass) is found once per controller instance."""

    def __init__(self, roots: Roots):
        self.roots = roots
        self._where = InstanceCache()

    def read(self) -> Dict[str, Optional[bytes]]:
        """Controller (nvme0) -> its `state` as read (None: unreadable); no controllers: {}."""
        base = self.roots.sys("class", "nvme")
        listed = [entry for entry in list_entries(base) if _CONTROLLER.match(entry[0])]
        known = self._where.refresh(base, listed, lambda name, path: os.path.realpath(path) + "/state")
        return dict(zip((name for name, _, _ in known), read_many([where for _, _, where in known])))


class NvmeSubsystemReader:
    """Reads /sys/class/nvme-subsystem on each call. What cannot change while a subsystem or
    controller exists (NQN, model, serial; transport, address, NUMA node) is read once per
    instance (readers.instances.InstanceCache); states, the I/O policy and ANA states every call.
    A subsystem's listing is kept while the controllers and NVMe disks are unchanged (`read`),
    and a local drive's record while its one controller's state reads the same: read by this
    reader each call, or, given `ControllerStates`' latest pass, as that pass read it."""

    def __init__(self, roots: Roots):
        self.roots = roots
        self._subsystems = InstanceCache()
        self._controllers: Dict[str, InstanceCache] = {}  # subsystem -> its controllers' statics
        # Each subsystem's listing (its controller links and head disks), kept while the
        # controllers and NVMe disks the kernel lists are the ones of the read that made it.
        # A local drive's subsystem (one PCIe path) keeps its record too, with where its one
        # controller's state is: served again while that state reads the same.
        self._listed: Dict[str, Tuple[int, List[Tuple[str, int]], Tuple[str, ...],
                                      Optional[Tuple[str, NvmeSubsystem]]]] = {}
        self._members: Optional[tuple] = None  # (/sys/class/nvme, NVMe disks of /sys/class/block) then
        self._unsure = False  # this read met a controller going away: list again next time

    def read(self, block_listing: Optional[List[Tuple[str, int]]] = None,
             local_states: Optional[Mapping[str, Optional[bytes]]] = None
             ) -> Tuple[List[NvmeSubsystem], List[Problem]]:
        """Every subsystem. `block_listing`: /sys/class/block's (name, inode) listed this
        scrape (else it is listed here). `local_states`: the controllers' states as the last
        pass of `ControllerStates` read them (storpath serve reads them on their own schedule):
        a local drive kept is compared with its controller's state there, and served as kept
        when that pass did not see its controller; None: each local drive kept has its
        controller's state read here, now.

        A subsystem's folder gains or loses a controller link only with a controller of
        /sys/class/nvme (drivers/nvme/host/core.c: nvme_init_subsystem links a controller
        device that exists, its removal goes with the device's), and a head disk only with
        its block device (one device_add makes both): so while those two listings are the
        last read's, names and inodes alike, and every controller they list was linked in one
        subsystem folder listed then (none in between: a controller not linked yet, or a link
        left a moment by one gone), each subsystem's listing is that read's. On a host of
        1024 local drives this saves 1024 directory listings a scrape."""
        base = self.roots.sys("class", "nvme-subsystem")
        problems: List[Problem] = []
        members = self._membership(block_listing)
        if members != self._members:
            self._listed = {}
        self._unsure = False
        inodes: Dict[str, int] = {}

        def derive(name: str, folder: str) -> Dict[str, Optional[str]]:
            unreadable = partial(_unreadable, name)
            return {attr: parse_identity(read_attr_noting(folder, attr, problems, unreadable))
                    for attr in ("subsysnqn", "model", "serial")}

        listed = _natural(list_entries(base, self.roots.sysfs))
        inodes.update(listed)
        # The local drives kept (one PCIe controller each: most subsystems of a host): their
        # controllers' states read in one pass, each compared with the state its record holds.
        local = {name: kept[3] for name, kept in self._listed.items()
                 if kept[3] is not None and kept[0] == inodes.get(name)}
        if local_states is None:
            states = dict(zip(local, read_many([where for where, _ in local.values()])))
        else:
            states = {name: local_states.get(record.paths[0].controller, _NOT_SEEN)
                      for name, (_, record) in local.items()}
        subsystems = [self._subsystem(folder, name, statics, problems, inodes[name], states.get(name))
                      for name, folder, statics in self._subsystems.refresh(base, listed, derive)]
        for gone in set(self._controllers) - {s.name for s in subsystems}:
            del self._controllers[gone]
        for gone in set(self._listed) - set(inodes):
            del self._listed[gone]
        linked = sorted(c for _, controllers, _, _ in self._listed.values() for c, _ in controllers)
        self._members = members if not self._unsure and linked == [c for c, _ in members[0]] else None
        return subsystems, problems

    def _membership(self, block_listing: Optional[List[Tuple[str, int]]]) -> tuple:
        """(controllers of /sys/class/nvme, NVMe disks of /sys/class/block), each (name, inode)
        sorted by name."""
        if block_listing is None:
            block_listing = list_entries(self.roots.sys("class", "block"))
        controllers = tuple(e for e in list_entries(self.roots.sys("class", "nvme")) if _CONTROLLER.match(e[0]))
        return controllers, tuple(e for e in block_listing if e[0].startswith("nvme"))

    def _subsystem(self, folder: str, name: str, statics: Dict[str, Optional[str]],
                   problems: List[Problem], inode: int, state_now: object = None) -> NvmeSubsystem:
        """The subsystem's record. `state_now`: for a local drive kept, its controller's state
        as read this pass (None: not read, or unreadable: then read again here, with why;
        _NOT_SEEN: the states' pass has not seen its controller yet, the record kept stands)."""
        kept = self._listed.get(name)
        if kept is not None and kept[0] == inode:
            controllers, heads, local = kept[1], kept[2], kept[3]
            if local is not None and state_now is not None:
                # The same folder, the same one controller instance: only its state can differ.
                if state_now is _NOT_SEEN or attribute_text(state_now) == local[1].paths[0].raw_state:
                    return local[1]
        else:
            controllers, heads = self._list(folder)
        self._listed[name] = (inode, controllers, heads, None)
        cache = self._controllers.get(name)
        if cache is None:
            cache = self._controllers[name] = InstanceCache()

        def derive(controller: str, path: str) -> Tuple[Optional[str], Optional[str], Optional[int], str]:
            """What is read once per controller instance: its transport, address and NUMA node,
            and where its `state` is (the controller's own folder: no link to follow each read)."""
            unreadable = partial(_unreadable, controller)
            transport, address, node = (read_attr_noting(path, attr, problems, unreadable)
                                        for attr in ("transport", "address", "numa_node"))
            numa_node = parse_numa_node(node)
            # -1, the kernel's "no node" (NUMA_NO_NODE), is no node of a path: None.
            return (transport or None, address or None, None if numa_node == -1 else numa_node,
                    os.path.realpath(path) + "/state")

        known = cache.refresh(folder, controllers, derive)
        # A local drive of one PCIe controller (most subsystems of a host) has no I/O policy to
        # choose and no ANA state to report: its state alone is read each scrape (on a host of
        # 1024 such drives this source took 127 ms a scrape, more than the whole PCI tree).
        # Decided on what this read found (a controller whose state is gone is forgotten, its
        # transport with it), so a long-running reader answers as a fresh one would.
        paths = [self._path(path, controller, statics, cache, problems) for controller, path, statics in known]
        iopolicy = None
        if len(paths) != 1 or paths[0].transport != "pcie":
            iopolicy = parse_identity(read_attr_noting(folder, "iopolicy", problems, partial(_unreadable, name)))
            paths = [replace(path, namespace_paths=self._namespace_paths(path_folder, path.controller,
                                                                                     problems))
                     for path, (_, path_folder, _) in zip(paths, known)]
        subsystem = NvmeSubsystem(name=name, nqn=statics["subsysnqn"], model=statics["model"],
                                  serial=statics["serial"], iopolicy=iopolicy, paths=tuple(paths), namespaces=heads)
        if len(paths) == 1 and paths[0].transport == "pcie" and paths[0].state != UNKNOWN_STATE:
            # A read of it now would give this again, problems (none) included, while its state reads the same.
            self._listed[name] = (inode, controllers, heads, (known[0][2][3], subsystem))
        return subsystem

    @staticmethod
    def _list(folder: str) -> Tuple[List[Tuple[str, int]], Tuple[str, ...]]:
        """A subsystem folder's controller links (nvme1: name, inode) and head disks (nvme1n1),
        each in natural order."""
        # One pass over the folder: controller links (nvme1) and head disks (nvme1n1) both
        # start with "nvme"; its attributes (model, serial, power/...) do not.
        controllers, heads = [], []
        for entry in list_entries(folder):
            if entry[0].startswith("nvme"):
                if _CONTROLLER.match(entry[0]):
                    controllers.append(entry)
                elif _HEAD_DISK.match(entry[0]):
                    heads.append(entry[0])
        if len(heads) > 1:
            heads = [head for head, _ in _natural([(head, 0) for head in heads])]
        return _natural(controllers), tuple(heads)

    def _path(self, folder: str, controller: str, known: Tuple[Optional[str], Optional[str], Optional[int], str],
              cache: InstanceCache, problems: List[Problem]) -> SubsystemPath:
        text, why = read_attr_why(known[3])
        if why is not None:
            problems.append(_unreadable(controller, "state", why))
        if text is None:
            # A controller going away: its link may outlive its folder for a moment. What was
            # kept of it is no reading of now (a fresh read finds nothing either); forgotten,
            # so it is read again if the folder is still there next time.
            cache.forget(controller)
            self._unsure = True
            known = (None, None, None, "")
        state = parse_controller_state(text)
        if text is not None and state == UNKNOWN_STATE:
            problems.append(Problem("NVMe controller state not known", (("device", controller), ("value", text)),
                                    INFO))
        transport, address, node, _ = known
        return SubsystemPath(controller=controller, state=state, raw_state=text, transport=transport,
                             address=address, numa_node=node, namespace_paths=())

    @staticmethod
    def _namespace_paths(folder: str, controller: str, problems: List[Problem]) -> Tuple[NamespacePath, ...]:
        found = []
        for entry in sorted(list_dir(folder), key=natural_key):
            match = _PATH_DISK.match(entry)
            if not match:
                continue
            text, why = read_attr_why(os.path.join(folder, entry, "ana_state"))
            state, bad = parse_ana_state(text)
            if bad is not None:
                problems.append(Problem("NVMe ana_state not known", (("device", entry), ("value", text))))
            namespace = f"nvme{match.group('subsys')}n{match.group('ns')}"
            found.append(NamespacePath(disk=entry, namespace=namespace, ana_state=state))
        return tuple(found)
