"""NVMe controllers and namespaces from sysfs, and the LBA formats a namespace supports
from Identify Namespace.

sysfs (Documentation/ABI/testing/sysfs-class-nvme, drivers/nvme/host/sysfs.c):
- /sys/class/nvme/nvmeX/{model,serial,firmware_rev,transport,address,state}: the
  controller; model, serial and firmware are space-padded to 40/20/8 bytes as in
  Identify Controller. `device` links to the PCI function for the pcie transport.
- namespaces are block devices: nvmeXnY directly below the controller, or, with native
  multipath (CONFIG_NVME_MULTIPATH), under /sys/devices/virtual/nvme-subsystem/
  nvme-subsysN/nvmeNnY with `multipath/` linking to the hidden per-controller path
  disks nvmeNcXnY (see readers/block.py). `nsid` is the namespace ID; `size` is in
  512-byte sectors whatever the LBA size; queue/{logical,physical}_block_size and
  queue/optimal_io_size are in bytes (Documentation/ABI/stable/sysfs-block).

The supported LBA formats are not in sysfs. They come from the Identify Namespace data
structure (NVMe Base Specification, Identify command opcode 06h, CNS 00h, 4096 bytes):
byte 25 NLBAF (number of LBA formats, zero-based), byte 26 FLBAS (format in use: bits
3:0 the low index, bits 6:5 the high index when there are more than 16 formats), and
from byte 128 one 4-byte LBA Format descriptor per format: bits 15:0 MS (metadata
bytes), bits 23:16 LBADS (data size as a power of two; below 9 means not available),
bits 25:24 RP (relative performance: 0 Best, 1 Better, 2 Good, 3 Degraded).

Reading it is privileged and may be slow, so `identify_namespace` is for background
tasks only. In order it takes the data from:
1. Roots.captured, when set (and then nothing else is tried: a replayed machine never
   touches this host's devices). Layout, written by `storpath capture` and fixtures:
       <captured>/nvme/<controller>/ns<nsid>.id-ns   the raw 4096-byte structure
                                                     (what `nvme id-ns -b` prints)
       <captured>/nvme/<controller>/ns<nsid>.json    `nvme id-ns -o json` output
   The raw file wins when both exist; the file's mtime is when the data was read.
2. the admin ioctl NVME_IOCTL_ADMIN_CMD (include/uapi/linux/nvme_ioctl.h) on the
   controller's character device /dev/nvmeX, with the namespace ID. The kernel allows
   it with CAP_SYS_ADMIN, and since 6.2 also without for Identify Namespace to whoever
   may open the device node (usually root only).
3. `nvme id-ns /dev/nvmeX --namespace-id=N --output-format=json` (nvme-cli), if
   installed, with a timeout.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import re
import shutil
import stat
import threading
import time
from typing import Dict, List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base import atomicfile, boundedjson, privhelper
from storpath.base.subprocesses import run_command
from storpath.base.parse import attribute_text, parse_identity, parse_int
from storpath.readers.block import physical_block_size
from storpath.readers.instances import InstanceCache
from storpath.readers.pci import PCI_ADDRESS
from storpath.base.roots import Roots
from storpath.base.sysfs import list_dir, list_entries, read_attr, read_bytes, read_int, read_many

IDENTIFY_BYTES = 4096
OPCODE_IDENTIFY = 0x06
CNS_NAMESPACE = 0x00
RELATIVE_PERFORMANCE = ("best", "better", "good", "degraded")  # RP field values 0..3
CAPTURED_DIR = "nvme"

# What this reader reads (storpath capture takes these, and capture_commands' output).
CAPTURE_SYSFS = (
    "class/nvme/*",
    "class/nvme/*/{device,address,model,serial,firmware_rev,transport,state}",
    "class/block/nvme*/{nsid,size,queue/logical_block_size,queue/physical_block_size,queue/optimal_io_size}",
)

_NAMESPACE_DISK = re.compile(r"^nvme(\d+)n(\d+)$")  # not nvme0n1p1 (partition), not nvme0c1n1 (path)
_CONTROLLER = re.compile(r"^nvme\d+$")
_PATH_DISK_CONTROLLER = re.compile(r"^nvme\d+c(\d+)n\d+$")


# ---- records -----------------------------------------------------------------------

@datarecord(frozen=True)
class NvmeController:
    """One NVMe controller as sysfs shows it: its PCI address, identity and transport."""

    name: str  # nvme0
    address: Optional[str]  # PCI address for the pcie transport, None for fabrics
    model: Optional[str]
    serial: Optional[str]
    firmware: Optional[str]
    transport: Optional[str]  # pcie, tcp, rdma, fc, loop


@datarecord(frozen=True)
class NvmeNamespace:
    """One NVMe namespace as sysfs shows it: its block device, controller, ID, size and block sizes."""

    device: str  # block device: nvme0n1
    controller: Optional[str]  # the controller to send Identify to (first path with multipath)
    nsid: Optional[int]
    size_bytes: Optional[int]
    logical_block_size: Optional[int]  # the LBA data size in use, bytes
    physical_block_size: Optional[int]
    optimal_io_size: Optional[int]  # 0 when the drive gives no preference
    instance: Optional[int] = None  # inode of its /sys/class/block symlink: new for a new namespace

    @property
    def fingerprint(self) -> Tuple:
        """What changes when the namespace is reformatted or replaced: a new Identify is due.
        (The size is read again only with a new LBA size or a new namespace instance.)"""
        return (self.controller, self.nsid, self.size_bytes, self.logical_block_size, self.instance)


@datarecord(frozen=True)
class LbaFormat:
    """One LBA Format descriptor: its index, data and metadata sizes, relative performance."""

    index: int
    data_size: int  # bytes
    metadata_size: int  # bytes
    relative_performance: int  # 0 best .. 3 degraded

    @property
    def relative_performance_name(self) -> str:
        return RELATIVE_PERFORMANCE[self.relative_performance]


@datarecord(frozen=True)
class IdentifyNamespace:
    """What Identify Namespace says: the available formats, the one in use, the size in blocks."""

    formats: Tuple[LbaFormat, ...]  # the available formats (LBADS >= 9), by index
    in_use_index: int
    size_blocks: int  # NSZE, in logical blocks

    @property
    def in_use(self) -> Optional[LbaFormat]:
        for fmt in self.formats:
            if fmt.index == self.in_use_index:
                return fmt
        return None


@datarecord(frozen=True)
class IdentifyResult:
    """One Identify Namespace read: the data or why it is unknown, where it came from and when."""

    identify: Optional[IdentifyNamespace]
    source: Optional[str]  # captured, ioctl, nvme-cli
    error: Optional[str]  # why the formats are unknown
    read_at: float  # Unix time the data was read (captured: the file's mtime)


class IdentifyError(Exception):
    """Identify Namespace data that cannot be read or makes no sense."""


# ---- pure parsers ------------------------------------------------------------------

def _in_use_index(flbas: int, nlbaf: int) -> int:
    low = flbas & 0x0F
    # Bits 6:5 extend the index only when more than 16 formats exist (NVMe 2.0); older
    # drives may leave junk there, so they are ignored otherwise.
    if nlbaf >= 16:
        return low | (((flbas >> 5) & 0x03) << 4)
    return low


def _build(nlbaf: int, flbas: int, descriptors: List[Tuple[int, int, int]], size_blocks: int) -> IdentifyNamespace:
    if not 0 <= nlbaf <= 63:
        raise IdentifyError(f"NLBAF {nlbaf} out of range 0-63")
    formats = []
    for index, (ms, lbads, rp) in enumerate(descriptors[:nlbaf + 1]):
        if lbads < 9 or lbads > 31:  # "not currently available" (or nonsense)
            continue
        formats.append(LbaFormat(index=index, data_size=1 << lbads, metadata_size=ms, relative_performance=rp & 0x3))
    in_use = _in_use_index(flbas, nlbaf)
    if in_use > nlbaf:
        raise IdentifyError(f"FLBAS selects format {in_use} but NLBAF says only {nlbaf + 1} exist")
    if not formats:
        raise IdentifyError("no available LBA format (an inactive namespace reads as all zeros)")
    if not any(f.index == in_use for f in formats):
        raise IdentifyError(f"format {in_use} in use is not an available format")
    return IdentifyNamespace(formats=tuple(formats), in_use_index=in_use, size_blocks=size_blocks)


def parse_identify_namespace(data: bytes) -> IdentifyNamespace:
    """Parse the 4096-byte Identify Namespace data structure (little endian)."""
    if len(data) < 384:
        raise IdentifyError(f"Identify Namespace data is {len(data)} bytes, expected {IDENTIFY_BYTES}")
    size_blocks = int.from_bytes(data[0:8], "little")
    nlbaf = data[25]
    flbas = data[26]
    descriptors = []
    for index in range(min(nlbaf, 63) + 1):
        word = int.from_bytes(data[128 + 4 * index:132 + 4 * index], "little")
        descriptors.append((word & 0xFFFF, (word >> 16) & 0xFF, (word >> 24) & 0x3))
    return _build(nlbaf, flbas, descriptors, size_blocks)


def _json_int(value, maximum: int) -> int:
    """A field of nvme-cli's JSON: a number, or a string of ASCII digits, from 0 to the
    field's width (int() would take 1e400 as an overflow, '+3', '3_0' or other scripts' digits)."""
    number = value if isinstance(value, int) and not isinstance(value, bool) else (
        parse_int(value) if isinstance(value, str) else None)
    if number is None or not 0 <= number <= maximum:
        raise ValueError(f"{value!r} is not a whole number from 0 to {maximum}")
    return number


def json_object(text: str, error: type = IdentifyError) -> dict:
    """nvme-cli's `-o json` output as a dict; `error` (an IdentifyError) when it is not one."""
    try:
        doc = boundedjson.loads(text)
    except ValueError as exc:
        raise error(f"nvme-cli output is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise error("nvme-cli output is not a JSON object")
    return doc


def parse_id_ns_json(text: str) -> IdentifyNamespace:
    """Parse `nvme id-ns -o json` (nvme-cli 1.x and 2.x): the raw fields nlbaf, flbas,
    nsze and lbafs: [{ms, ds, rp}] where ds is the LBADS exponent."""
    doc = json_object(text)
    try:
        nlbaf = _json_int(doc["nlbaf"], 0xFF)
        flbas = _json_int(doc["flbas"], 0xFF)
        lbafs = doc["lbafs"]
        size_blocks = _json_int(doc.get("nsze", 0), (1 << 64) - 1)
        descriptors = [(_json_int(f["ms"], 0xFFFF), _json_int(f["ds"], 0xFF), _json_int(f["rp"], 0xFF))
                       for f in lbafs]
    except (KeyError, TypeError, ValueError) as exc:
        raise IdentifyError(f"nvme-cli JSON lacks the LBA format fields ({type(exc).__name__}: {exc})") from None
    if len(descriptors) < nlbaf + 1:
        raise IdentifyError(f"nvme-cli JSON lists {len(descriptors)} LBA formats, NLBAF says {nlbaf + 1}")
    return _build(nlbaf, flbas, descriptors, size_blocks)


# ---- sysfs -------------------------------------------------------------------------

def _controller_identity(name: str, path: str) -> Optional[NvmeController]:
    """What cannot change while the controller exists: its PCI function and identity;
    None for a controller removed since the listing."""
    if not os.path.isdir(path):
        return None
    address = None
    try:
        device = os.path.basename(os.path.realpath(os.path.join(path, "device")))
        if PCI_ADDRESS.match(device):
            address = device
    except OSError:
        pass
    if address is None:
        attr = parse_identity(read_attr(os.path.join(path, "address")))
        if attr and PCI_ADDRESS.match(attr):
            address = attr
    return NvmeController(
        name=name, address=address,
        model=parse_identity(read_attr(os.path.join(path, "model"))),
        serial=parse_identity(read_attr(os.path.join(path, "serial"))),
        firmware=parse_identity(read_attr(os.path.join(path, "firmware_rev"))),
        transport=parse_identity(read_attr(os.path.join(path, "transport"))))


def _controller_of(block_path: str, real: str) -> Optional[str]:
    parent = os.path.basename(os.path.dirname(real))
    if _CONTROLLER.match(parent):
        return parent  # namespace directly below its controller (no multipath)
    if "nvme-subsystem" in real.split(os.sep):
        for path_disk in list_dir(os.path.join(block_path, "multipath")):
            target = os.path.realpath(os.path.join(block_path, "multipath", path_disk))
            owner = os.path.basename(os.path.dirname(target))
            if _CONTROLLER.match(owner):
                return owner
            match = _PATH_DISK_CONTROLLER.match(path_disk)
            if match:
                return f"nvme{match.group(1)}"
    return None


def _namespace_place(name: str, path: str) -> Optional[Tuple[Optional[str], Optional[int], str]]:
    """(controller, nsid, real directory) of a namespace block device: fixed while it exists."""
    match = _NAMESPACE_DISK.match(name)
    real = os.path.realpath(path)
    if not os.path.isdir(real):
        return None  # vanished
    nsid = read_int(os.path.join(path, "nsid"))
    if nsid is None and "nvme-subsystem" not in real.split(os.sep):
        # Without the `nsid` attribute (old kernels) and without multipath, the name's
        # number is the namespace's instance, its ID on single-namespace drives.
        nsid = int(match.group(2))
    return _controller_of(path, real), nsid, real


class NvmeReader:
    """Reads controllers and namespaces, remembering per device instance (known by the
    inode of its class symlink) what cannot change: a controller's identity and PCI
    function, a namespace's controller and ID. A namespace's LBA size is read every time
    (an `nvme format` changes it); its size, physical block size and optimal I/O size
    are read again when the LBA size changes, and for a new namespace instance."""

    def __init__(self, roots: Roots):
        self.roots = roots
        self._controllers = InstanceCache()
        self._namespaces = InstanceCache()
        self._lock = threading.Lock()
        self._previous: Dict[str, Tuple[object, NvmeNamespace]] = {}  # device -> (instance, record)

    def controllers(self) -> List[NvmeController]:
        """Every /sys/class/nvme/nvmeX; an empty list without the class (no nvme driver)."""
        base = self.roots.sys("class", "nvme")
        entries = [e for e in list_entries(base, self.roots.sysfs) if _CONTROLLER.match(e[0])]
        with self._lock:
            found = self._controllers.refresh(base, entries, _controller_identity)
        return [identity for _, _, identity in found if identity is not None]

    def namespaces(self, listing: Optional[List[Tuple[str, int]]] = None) -> List[NvmeNamespace]:
        """Every NVMe namespace block device; one sysfs read each while nothing changes.
        `listing`: a listing of /sys/class/block made this scrape, else one is made."""
        base = self.roots.sys("class", "block")
        if listing is None:
            listing = list_entries(base, self.roots.sysfs)
        entries = [e for e in listing if _NAMESPACE_DISK.match(e[0])]
        result: List[NvmeNamespace] = []
        with self._lock:
            found = self._namespaces.refresh(base, entries, _namespace_place)
            previous, self._previous = self._previous, {}
            instances = dict(entries)
            placed = [(name, place) for name, _, place in found if place is not None]
            # One pass over the files read every scrape (the reading thread looked up once).
            sizes = read_many([place[2] + "/queue/logical_block_size" for _, place in placed])
            for (name, place), raw in zip(placed, sizes):
                controller, nsid, real = place
                lba = parse_int(attribute_text(raw))
                instance, before = previous.get(name, (None, None))
                if instance is place and before.logical_block_size == lba:
                    ns = before  # the same instance and format: size and I/O sizes as read then
                else:
                    if lba is None and not os.path.isdir(real):
                        continue  # removed since the listing
                    sectors = read_int(real + "/size")
                    ns = NvmeNamespace(
                        device=name, controller=controller, nsid=nsid, instance=instances.get(name),
                        size_bytes=sectors * 512 if sectors is not None else None, logical_block_size=lba,
                        physical_block_size=physical_block_size(real),
                        optimal_io_size=read_int(real + "/queue/optimal_io_size"))
                self._previous[name] = (place, ns)
                result.append(ns)
        return result


def read_controllers(roots: Roots) -> List[NvmeController]:
    """One-shot read of every controller (commands that read a machine once)."""
    return NvmeReader(roots).controllers()


def read_namespaces(roots: Roots) -> List[NvmeNamespace]:
    """One-shot read of every namespace (commands that read a machine once)."""
    return NvmeReader(roots).namespaces()


# ---- Identify Namespace: captured, ioctl, nvme-cli ----------------------------------

class _NvmePassthruCmd(ctypes.Structure):
    """struct nvme_passthru_cmd (alias nvme_admin_cmd), include/uapi/linux/nvme_ioctl.h."""
    _fields_ = [
        ("opcode", ctypes.c_uint8), ("flags", ctypes.c_uint8), ("rsvd1", ctypes.c_uint16),
        ("nsid", ctypes.c_uint32), ("cdw2", ctypes.c_uint32), ("cdw3", ctypes.c_uint32),
        ("metadata", ctypes.c_uint64), ("addr", ctypes.c_uint64),
        ("metadata_len", ctypes.c_uint32), ("data_len", ctypes.c_uint32),
        ("cdw10", ctypes.c_uint32), ("cdw11", ctypes.c_uint32), ("cdw12", ctypes.c_uint32),
        ("cdw13", ctypes.c_uint32), ("cdw14", ctypes.c_uint32), ("cdw15", ctypes.c_uint32),
        ("timeout_ms", ctypes.c_uint32), ("result", ctypes.c_uint32),
    ]


def _iowr(kind: int, number: int, size: int) -> int:
    # asm-generic/ioctl.h: dir (read|write = 3) << 30 | size << 16 | type << 8 | nr
    return (3 << 30) | (size << 16) | (kind << 8) | number


NVME_IOCTL_ADMIN_CMD = _iowr(ord("N"), 0x41, ctypes.sizeof(_NvmePassthruCmd))  # 0xC0484E41


def _errno_text(exc: OSError, path: str) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{path}: permission denied (Identify needs root or CAP_SYS_ADMIN)"
    if exc.errno in (errno.ENOENT, errno.ENODEV, errno.ENXIO):
        return f"{path}: no such device"
    if exc.errno == errno.ENOTTY:
        return f"{path}: not an NVMe controller (ioctl not supported)"
    return f"{path}: {os.strerror(exc.errno or 0)}"


def admin_command(char_device: str, opcode: int, nsid: int, cdw10: int, length: int, what: str,
                  timeout: float = 10.0) -> bytes:
    """One admin command that reads `length` bytes, through NVME_IOCTL_ADMIN_CMD on
    /dev/nvmeX (Identify, Get Log Page); raises IdentifyError naming `what`."""
    try:
        st = os.stat(char_device)
    except OSError as exc:
        raise IdentifyError(_errno_text(exc, char_device)) from None
    if not stat.S_ISCHR(st.st_mode):
        raise IdentifyError(f"{char_device}: not a character device")
    try:
        fd = os.open(char_device, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise IdentifyError(_errno_text(exc, char_device)) from None
    try:
        buf = ctypes.create_string_buffer(length)
        cmd = _NvmePassthruCmd(opcode=opcode, nsid=nsid, addr=ctypes.addressof(buf), data_len=length, cdw10=cdw10,
                               timeout_ms=max(1, int(timeout * 1000)))
        try:
            status = fcntl.ioctl(fd, NVME_IOCTL_ADMIN_CMD, cmd, True)
        except OSError as exc:
            raise IdentifyError(_errno_text(exc, char_device)) from None
        if status != 0:  # a positive return is the NVMe completion status
            raise IdentifyError(f"{char_device}: {what} failed with NVMe status 0x{status:x}")
        return bytes(buf.raw)
    finally:
        os.close(fd)


def identify_ioctl(char_device: str, nsid: int, timeout: float = 10.0) -> bytes:
    """Identify Namespace through the admin ioctl on /dev/nvmeX; raises IdentifyError."""
    return admin_command(char_device, OPCODE_IDENTIFY, nsid, CNS_NAMESPACE, IDENTIFY_BYTES,
                         f"Identify Namespace {nsid}", timeout)


def identify_nvme_cli(char_device: str, nsid: int, nvme_cli: str = "nvme", timeout: float = 10.0,
                      subcommand: str = "id-ns") -> str:
    """`nvme id-ns ... -o json` output (or another controller-wide `subcommand`:
    id-ctrl, smart-log); raises IdentifyError. A drive that hangs the command in the
    kernel cannot hang the task: storpath.base.subprocesses gives up on it."""
    binary = shutil.which(nvme_cli)
    if binary is None:
        raise IdentifyError(f"nvme-cli not installed ({nvme_cli!r} not found)")
    namespace = [f"--namespace-id={nsid}"] if subcommand == "id-ns" else []
    cmd = [binary, subcommand, char_device, *namespace, "--output-format=json"]
    try:
        done = run_command(cmd, timeout)
    except OSError as exc:
        raise IdentifyError(f"cannot run {binary}: {exc.strerror}") from None
    if done.timed_out:
        raise IdentifyError(f"`{' '.join(cmd)}` did not finish within {timeout:g} s")
    if done.returncode != 0:
        raise IdentifyError(f"`{' '.join(cmd)}` exited {done.returncode}: {done.first_error_line() or 'no output'}")
    return done.stdout.decode("utf-8", "replace")


def capture_commands(roots: Roots, folder: str) -> List[str]:
    """Identify Namespace of every namespace, as the raw 4096-byte structure (ioctl) or
    nvme-cli's JSON, into the layout storpath.readers.nvme reads back."""
    notes = []
    if not roots.devices:
        return [f"NVMe Identify: {NO_DEVICES_REASON}"]
    for ns in read_namespaces(roots):
        if ns.controller is None or ns.nsid is None:
            continue
        target = os.path.join(folder, CAPTURED_DIR, ns.controller)
        char_device = roots.devpath(ns.controller)
        try:
            data, name = identify_ioctl(char_device, ns.nsid), f"ns{ns.nsid}.id-ns"
        except IdentifyError as ioctl_error:
            try:
                data, name = identify_nvme_cli(char_device, ns.nsid).encode(), f"ns{ns.nsid}.json"
            except IdentifyError as cli_error:
                notes.append(f"{ns.device}: ioctl: {ioctl_error}; nvme-cli: {cli_error}")
                continue
        os.makedirs(target, exist_ok=True)
        atomicfile.replace_file(os.path.join(target, name), data)
    return notes


def captured_paths(roots: Roots, controller: str, nsid: int) -> Tuple[str, str]:
    """(raw, json) paths of captured Identify Namespace data; only with Roots.captured."""
    folder = roots.captured_path(CAPTURED_DIR, controller)
    if folder is None:
        raise ValueError("Roots.captured is not set")
    return os.path.join(folder, f"ns{nsid}.id-ns"), os.path.join(folder, f"ns{nsid}.json")


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return time.time()


def _from_captured(roots: Roots, controller: str, nsid: int) -> IdentifyResult:
    raw_path, json_path = captured_paths(roots, controller, nsid)
    try:
        if os.path.exists(raw_path):
            data = read_bytes(raw_path, IDENTIFY_BYTES)
            if data is None:
                raise IdentifyError(f"cannot read {raw_path}")
            return IdentifyResult(parse_identify_namespace(data), "captured", None, _mtime(raw_path))
        if os.path.exists(json_path):
            with open(json_path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
            return IdentifyResult(parse_id_ns_json(text), "captured", None, _mtime(json_path))
    except IdentifyError as exc:
        return IdentifyResult(None, "captured", f"captured data: {exc}", time.time())
    except OSError as exc:
        return IdentifyResult(None, "captured", f"captured data: {json_path}: {exc.strerror}", time.time())
    return IdentifyResult(None, "captured", f"no captured Identify data ({raw_path} or {json_path})", time.time())


# Why nothing was read from a device node when Roots.devices is False.
NO_DEVICES_REASON = "no device node opened: --path.sysfs replays another machine and --path.dev is not given"


def _from_helper(controller: str, nsid: int, timeout: float) -> IdentifyResult:
    """Identify Namespace read by `storpath helper` (the ioctl there, else nvme-cli there)."""
    now = time.time()
    try:
        reply = privhelper.ask({"cmd": "nvme-identify", "controller": controller, "nsid": nsid, "timeout": timeout},
                               timeout + 5.0)
        data = privhelper.decode_output(reply.get("stdout"))
        if reply.get("format") == "json":
            return IdentifyResult(parse_id_ns_json(data.decode("utf-8", "replace")), "helper", None, now)
        return IdentifyResult(parse_identify_namespace(data), "helper", None, now)
    except (OSError, IdentifyError) as exc:
        return IdentifyResult(None, None, f"helper: {exc}", now)


def identify_namespace(roots: Roots, controller: str, nsid: int, nvme_cli: str = "nvme",
                       timeout: float = 10.0) -> IdentifyResult:
    """The namespace's LBA formats, or why they are unknown. Privileged and possibly
    slow (a drive may take the whole timeout): call from a background task only."""
    if roots.captured:
        return _from_captured(roots, controller, nsid)
    if not roots.devices:
        return IdentifyResult(None, None, NO_DEVICES_REASON, time.time())
    char_device = roots.devpath(controller)
    now = time.time()
    if privhelper.configured():
        return _from_helper(controller, nsid, timeout)
    try:
        return IdentifyResult(parse_identify_namespace(identify_ioctl(char_device, nsid, timeout)), "ioctl", None, now)
    except IdentifyError as exc:
        ioctl_error = str(exc)
    try:
        text = identify_nvme_cli(char_device, nsid, nvme_cli, timeout)
        return IdentifyResult(parse_id_ns_json(text), "nvme-cli", None, time.time())
    except IdentifyError as exc:
        return IdentifyResult(None, None, f"ioctl: {ioctl_error}; nvme-cli: {exc}", now)
