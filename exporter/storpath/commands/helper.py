"""`storpath helper`: the one process that holds the capabilities the privileged reads need,
answering `storpath serve` over a Unix socket (storpath.base.privhelper: framing, limits).

It takes only its fixed commands, each argument checked against a strict pattern or a fixed
set; no argv, path or tool name comes from the request:

    raid          tool storcli|megacli|ssacli|arcconf, args one of the tool's fixed lists
                  (storpath.readers.raid.tools; arcconf's controller number 1-16)
    smartctl      device_id 0-65535, device /dev/sdX (a block device node): smartctl -j -i
                  -d sat+megaraid,ID DEV
    dmsetup-status                      dmsetup status --target multipath
    nvme-identify controller nvmeN, nsid 1..0xfffffffe: Identify Namespace (ioctl, else nvme-cli)
    smart-log     controller nvmeN: the SMART / Health log (ioctl, else nvme-cli)
    id-ctrl       controller nvmeN: Identify Controller (ioctl, else nvme-cli): the temperature thresholds
    sg-modes      node sgN|sdX: sg_modes --page=0x19,0x1 --raw (the SAS drive's PHYs)
    pci-config    address DDDD:BB:DD.F, length 256|4096: the function's config space, bounded

Every command runs with the bounded runners (storpath.base.subprocesses: deadline, process
group killed, output capped), one at a time. No network, no HTTP. Under systemd socket
activation (LISTEN_FDS=1) it serves the socket it is handed.

It answers only root, its own user and its own group (the peer's credentials, SO_PEERCRED),
and the users given with --helper.allow-uid: the exporter runs as the helper's user (systemd:
both units are User=storpath, which DynamicUser gives one UID and GID while either runs) or in
its group (a pod: the helper root in the exporter's group 9866), so a socket that must be open to
every local user (a DynamicUser has no fixed group to give it) still answers no one else.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shutil
import socket
import stat
import struct
import sys
import threading
import time
from typing import Callable, Dict, FrozenSet, List, Optional, Set, Tuple

from storpath.base import log, privhelper
from storpath.base.subprocesses import Finished, run_command
from storpath.readers import nvme as nvme_reader
from storpath.readers import nvme_health
from storpath.readers.dm_multipath import STATUS_ARGS, find_dmsetup
from storpath.readers.raid.tools import (MAX_ARCCONF_CONTROLLERS, MEGACLI_ARGS, SSACLI_ARGS, STORCLI_ARGS,
                                         find_tool)
from storpath.readers.sas_pcd import sg_modes_command

LOG = log.get("helper")
CONTROLLER = re.compile(r"nvme[0-9]{1,4}")
DISK = re.compile(r"/dev/sd[a-z]{1,4}")
SG_NODE = re.compile(r"sg[0-9]{1,5}|sd[a-z]{1,4}")
PCI_FUNCTION = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]")
CONFIG_LENGTHS = (256, 4096)
DEFAULT_TIMEOUT = 30.0
# How long a client gets to send its request once connected.
REQUEST_TIMEOUT = 5.0
ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C", "LANG": "C"}


class Refused(ValueError):
    """A request that is not one of the fixed commands, or an argument that fails its check."""


def _raid_args() -> Dict[str, List[List[str]]]:
    arcconf = [["LIST"]]
    for number in range(1, MAX_ARCCONF_CONTROLLERS + 1):
        arcconf += [["GETCONFIG", str(number), "AL"], ["GETSTATUS", str(number)]]
    return {"storcli": [list(a) for a in STORCLI_ARGS.values()], "megacli": [list(a) for a in MEGACLI_ARGS.values()],
            "ssacli": [list(SSACLI_ARGS)], "arcconf": arcconf}


RAID_ARGS = _raid_args()


def _string(request: dict, key: str, pattern: "re.Pattern[str]") -> str:
    value = request.get(key)
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise Refused(f"{key} must match {pattern.pattern}")
    return value


def _integer(request: dict, key: str, low: int, high: int) -> int:
    value = request.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise Refused(f"{key} must be an integer from {low} to {high}")
    return value


def _only(request: dict, *keys: str) -> None:
    extra = sorted(set(request) - {"cmd", "timeout", *keys})
    if extra:
        raise Refused(f"unexpected field(s) {', '.join(extra)}")


def _timeout(request: dict) -> float:
    value = request.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 300:
        raise Refused("timeout must be a number of seconds from 0 to 300")
    return float(value)


def _tool(name: str) -> str:
    binary = find_tool(name)
    if binary is None:
        raise Refused(f"{name} is not installed where the helper runs")
    return binary


def _block_node(path: str) -> str:
    try:
        if not stat.S_ISBLK(os.stat(path).st_mode):
            raise Refused(f"{path} is not a block device")
    except OSError as exc:
        raise Refused(f"{path}: {exc.strerror}") from None
    return path


# ---- the fixed commands: each (request) -> argv to run, or bytes read in-process ------------

def _raid(request: dict) -> List[str]:
    _only(request, "tool", "args")
    tool, args = request.get("tool"), request.get("args")
    if tool not in RAID_ARGS:
        raise Refused(f"tool must be one of {', '.join(sorted(RAID_ARGS))}")
    if args not in RAID_ARGS[tool]:
        raise Refused(f"args are not one of {tool}'s fixed commands")
    return [_tool(tool), *args]


def _smartctl(request: dict) -> List[str]:
    _only(request, "device_id", "device")
    device_id = _integer(request, "device_id", 0, 65535)
    device = _block_node(_string(request, "device", DISK))
    return [_tool("smartctl"), "-j", "-i", "-d", f"sat+megaraid,{device_id}", device]


def _dmsetup(request: dict) -> List[str]:
    _only(request)
    return [find_dmsetup("dmsetup"), *STATUS_ARGS]


def _sg_modes(request: dict) -> List[str]:
    _only(request, "node")
    node = _string(request, "node", SG_NODE)
    path = f"/dev/{node}"
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise Refused(f"{path}: {exc.strerror}") from None
    if not (stat.S_ISBLK(mode) or stat.S_ISCHR(mode)):
        raise Refused(f"{path} is not a device node")
    return sg_modes_command(_which("sg_modes"), path)


def _which(name: str) -> str:
    found = shutil.which(name, path=ENV["PATH"])
    if found is None:
        raise Refused(f"{name} is not installed where the helper runs")
    return found


def _nvme_identify(request: dict, timeout: float, sysfs: str) -> Tuple[bytes, str]:
    _only(request, "controller", "nsid")
    controller = _string(request, "controller", CONTROLLER)
    nsid = _integer(request, "nsid", 1, 0xFFFFFFFE)
    device = f"/dev/{controller}"
    try:
        return nvme_reader.identify_ioctl(device, nsid, timeout), "raw"
    except nvme_reader.IdentifyError as exc:
        ioctl_error = str(exc)
    try:
        return nvme_reader.identify_nvme_cli(device, nsid, timeout=timeout).encode(), "json"
    except nvme_reader.IdentifyError as exc:
        raise Refused(f"ioctl: {ioctl_error}; nvme-cli: {exc}") from None


def _admin_read(request: dict, timeout: float, ioctl: Callable[[str, float], bytes], subcommand: str
                ) -> Tuple[bytes, str]:
    _only(request, "controller")
    controller = _string(request, "controller", CONTROLLER)
    device = f"/dev/{controller}"
    try:
        return ioctl(device, timeout), "raw"
    except nvme_reader.IdentifyError as exc:
        ioctl_error = str(exc)
    try:
        return nvme_reader.identify_nvme_cli(device, 0, timeout=timeout, subcommand=subcommand).encode(), "json"
    except nvme_reader.IdentifyError as exc:
        raise Refused(f"ioctl: {ioctl_error}; nvme-cli: {exc}") from None


def _smart_log(request: dict, timeout: float, sysfs: str) -> Tuple[bytes, str]:
    return _admin_read(request, timeout, nvme_health.smart_log_ioctl, "smart-log")


def _id_ctrl(request: dict, timeout: float, sysfs: str) -> Tuple[bytes, str]:
    return _admin_read(request, timeout, nvme_health.id_ctrl_ioctl, "id-ctrl")


def _pci_config(request: dict, timeout: float, sysfs: str) -> Tuple[bytes, str]:
    _only(request, "address", "length")
    address = _string(request, "address", PCI_FUNCTION)
    length = request.get("length")
    if length not in CONFIG_LENGTHS or isinstance(length, bool):
        raise Refused(f"length must be one of {', '.join(map(str, CONFIG_LENGTHS))}")
    path = os.path.join(sysfs, "bus", "pci", "devices", address, "config")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise Refused(f"{path}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Refused(f"{path} is not a regular file")
        return os.read(fd, length), "raw"
    finally:
        os.close(fd)


RUNS: Dict[str, Callable[[dict], List[str]]] = {"raid": _raid, "smartctl": _smartctl, "dmsetup-status": _dmsetup,
                                                "sg-modes": _sg_modes}
READS: Dict[str, Callable[[dict, float, str], Tuple[bytes, str]]] = {"nvme-identify": _nvme_identify,
                                                                "smart-log": _smart_log, "id-ctrl": _id_ctrl,
                                                                "pci-config": _pci_config}
COMMANDS = sorted([*RUNS, *READS])


def answer(request: dict, sysfs: str = "/sys") -> dict:
    """The reply to one request (never raises for a bad one: it is refused with the reason).
    `sysfs`: where the helper reads config space (its own --path.sysfs, never the request's)."""
    command = request.get("cmd")
    try:
        if command not in RUNS and command not in READS:
            raise Refused(f"unknown command; the helper takes only {', '.join(COMMANDS)}")
        timeout = _timeout(request)
        if command in READS:
            data, form = READS[command](request, timeout, sysfs)
            return {"ok": True, "rc": 0, "stdout": privhelper.encode_output(data), "stderr": "", "format": form,
                    "elapsed": 0.0}
        argv = RUNS[command](request)
        try:
            done: Finished = run_command(argv, timeout, env=ENV)
        except OSError as exc:
            raise Refused(f"cannot run {argv[0]}: {exc.strerror}") from None
        return {"ok": True, "rc": done.returncode, "stdout": privhelper.encode_output(done.stdout),
                "stderr": privhelper.encode_output(done.stderr), "elapsed": round(done.elapsed, 3)}
    except Refused as exc:
        return {"ok": False, "error": str(exc)}


_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def peer_ids(conn: socket.socket) -> Tuple[Optional[int], Optional[int]]:
    """The connected peer's user and group IDs as the kernel recorded them at connect (None: not told)."""
    try:
        _, uid, gid = _PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    except (OSError, struct.error):
        return None, None
    return uid, gid


class Helper:
    """Serves `sock`: one connection at a time is read (bounded in size and time), one command
    at a time runs. Only the users in `allowed` and the members of group `group` are answered
    (by default root, the helper's own user and its own group)."""

    def __init__(self, sock: socket.socket, allowed: Optional[FrozenSet[int]] = None, sysfs: str = "/sys",
                 group: Optional[int] = None):
        self.sock = sock
        self.sysfs = sysfs
        self.allowed = allowed if allowed is not None else frozenset({0, os.geteuid()})
        self.group = os.getegid() if group is None else group
        self._stop = threading.Event()
        self._one = threading.Lock()
        self._refused_uids: Set[int] = set()

    def serve_forever(self) -> None:
        self.sock.settimeout(0.5)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                raise
            threading.Thread(target=self._handle, args=(conn,), name="storpath-helper-conn", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            uid, gid = peer_ids(conn)
            if uid is None or (uid not in self.allowed and gid != self.group):
                key = -1 if uid is None else uid
                if key not in self._refused_uids and len(self._refused_uids) < 64:
                    self._refused_uids.add(key)
                    log.kv(LOG, logging.WARNING, "helper refused a connection from a user it does not serve",
                           uid=str(uid), gid=str(gid), allowed=",".join(map(str, sorted(self.allowed))),
                           group=str(self.group))
                _send(conn, {"ok": False, "error": f"user {uid} is not served by this helper"}, REQUEST_TIMEOUT)
                return
            try:
                request = privhelper.recv_frame(conn, privhelper.MAX_REQUEST, time.monotonic() + REQUEST_TIMEOUT)
            except (ValueError, ConnectionError, socket.timeout, OSError) as exc:
                _send(conn, {"ok": False, "error": f"bad request: {exc}"}, REQUEST_TIMEOUT)
                return
            with self._one:
                reply = answer(request, self.sysfs)
            if not reply["ok"]:
                log.kv(LOG, logging.WARNING, "helper refused a request", command=str(request.get("cmd"))[:40],
                       reason=reply["error"])
            _send(conn, reply, 30.0)


def _send(conn: socket.socket, doc: dict, timeout: float) -> None:
    """One reply, bounded in time; a client that went away is no error of the helper's."""
    try:
        conn.settimeout(timeout)
        privhelper.send_frame(conn, doc)
    except OSError:
        pass


def _socket_or_nothing(path: str) -> bool:
    """Whether `path` is a socket or absent (a name the helper may take)."""
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return True


def listening_socket(path: Optional[str], mode: int = 0o660) -> socket.socket:
    """The socket systemd handed over (LISTEN_FDS=1 for this process), else one bound at `path`."""
    if os.environ.get("LISTEN_PID") == str(os.getpid()) and os.environ.get("LISTEN_FDS") == "1":
        return socket.socket(fileno=3)
    if not path:
        raise ValueError("--helper.socket PATH is needed (or systemd socket activation)")
    if not _socket_or_nothing(path):  # (a socket left by an earlier run is replaced)
        raise OSError(errno.EEXIST, f"{path} exists and is not a socket")
    # Bound and listening under a name of its own, then renamed into place: a client never finds
    # the path before it is accepted (a socket bound but not yet listening refuses connections).
    # The name is short (an AF_UNIX path has at most 107 bytes) and in the same folder (rename).
    temporary = os.path.join(os.path.dirname(path), f".{os.getpid()}")
    if _socket_or_nothing(temporary):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)  # left by a run of the same process ID
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o777 & ~mode)
        try:
            sock.bind(temporary)
        finally:
            os.umask(old)
        sock.listen(16)
        os.rename(temporary, path)
    except OSError:
        sock.close()
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return sock


def add_parser(sub, common):
    parser = sub.add_parser("helper", parents=[common], help="Run the privileged reads for `storpath serve`.",
                            description="Listen on a Unix socket and run only fixed privileged reads (RAID tools, "
                                        "dmsetup, NVMe Identify and SMART log, smartctl, sg_modes, PCI config "
                                        "space) for `storpath serve --helper.socket`. No network, no HTTP.")
    parser.add_argument("--helper.socket", dest="helper_socket", metavar="PATH",
                        help="The Unix socket to listen on (not needed under systemd socket activation).")
    parser.add_argument("--helper.socket-mode", dest="helper_socket_mode", metavar="OCTAL", default="0660",
                        help="Permissions of the socket created (default 0660: owner and group).")
    parser.add_argument("--helper.allow-uid", dest="helper_allow_uid", metavar="UID", type=int, action="append",
                        help="Also answer this user ID (repeat for several); root, the helper's own user and "
                             "its own group are always answered, no one else.")
    parser.set_defaults(run=run)


def run(args, config) -> int:
    try:
        sock = listening_socket(args.helper_socket or config["helper"]["socket"], int(args.helper_socket_mode, 8))
    except (ValueError, OSError) as exc:
        print(f"storpath helper: {exc}", file=sys.stderr)
        return 2
    allowed = frozenset({0, os.geteuid(), *(args.helper_allow_uid or ())})
    log.kv(LOG, logging.INFO, "helper listening", socket=args.helper_socket or "fd 3", commands=",".join(COMMANDS),
           uids=",".join(map(str, sorted(allowed))), gid=str(os.getegid()))
    helper = Helper(sock, allowed, config["paths"]["sysfs"])
    try:
        helper.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return 0
