"""The wire between `storpath serve` and `storpath helper`, the process that holds the
capabilities (CAP_SYS_ADMIN, CAP_SYS_RAWIO, CAP_DAC_READ_SEARCH) the privileged reads need.

The serving process parses HTTP from the network: it runs with no capability at all. What
needs one (the RAID tools, dmsetup, NVMe Identify and SMART log, smartctl, sg_modes, PCI
config space past 64 bytes) is asked of the helper over a Unix socket, as one of its fixed
commands with validated arguments (storpath.commands.helper); never an argv.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. A request is at most
MAX_REQUEST bytes (the helper refuses a longer one unread), a reply at most MAX_REPLY. One
request per connection. A reply:
    {"ok": true, "rc": 0 | null (timed out), "stdout": base64, "stderr": base64, "elapsed": s}
    {"ok": false, "error": "why the request was refused or could not run"}
A helper that is not there, does not answer within the timeout or answers garbage is a
HelperError (an OSError: the callers' "cannot run" path), never a hang.
"""

from __future__ import annotations

import base64
import binascii
import json
import socket
import struct
import time
from typing import Dict, Optional

from storpath.base.subprocesses import MAX_OUTPUT, Finished

MAX_REQUEST = 4096
# A command's output (stdout and stderr, at most MAX_OUTPUT together) in base64, with room for the rest.
MAX_REPLY = MAX_OUTPUT * 4 // 3 + 65536
_HEADER = struct.Struct(">I")

# The helper's socket, set once at start by `storpath serve --helper.socket` (None: run locally).
_SOCKET: Dict[str, Optional[str]] = {"path": None}


class HelperError(OSError):
    """The helper could not be asked, or refused: the message says which and why."""

    def __init__(self, message: str):
        super().__init__(message)
        self.strerror = message

    def __str__(self) -> str:
        return self.strerror


def use(path: Optional[str]) -> None:
    """Ask the helper at `path` from now on (None: run privileged reads in this process)."""
    _SOCKET["path"] = path or None


def configured() -> Optional[str]:
    return _SOCKET["path"]


def send_frame(sock: socket.socket, doc: dict) -> None:
    body = json.dumps(doc, separators=(",", ":")).encode()
    sock.sendall(_HEADER.pack(len(body)) + body)


def _recv_exactly(sock: socket.socket, size: int, deadline: Optional[float]) -> bytes:
    chunks = []
    left = size
    while left:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise socket.timeout("timed out")
            sock.settimeout(remaining)
        data = sock.recv(min(left, 1 << 20))
        if not data:
            raise ConnectionError(f"connection closed after {size - left} of {size} bytes")
        chunks.append(data)
        left -= len(data)
    return b"".join(chunks)


def recv_frame(sock: socket.socket, limit: int, deadline: Optional[float] = None) -> dict:
    """One frame as a JSON object; ValueError when it is over `limit` bytes (not read) or not
    a JSON object; socket.timeout past `deadline`; ConnectionError when the peer went away."""
    (size,) = _HEADER.unpack(_recv_exactly(sock, _HEADER.size, deadline))
    if size > limit:
        raise ValueError(f"frame of {size} bytes is over the limit of {limit}")
    body = _recv_exactly(sock, size, deadline)
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    return doc


def ask(request: dict, timeout: float, path: Optional[str] = None) -> dict:
    """Send one request to the helper and return its reply (ok true); HelperError otherwise.
    `timeout` bounds the whole exchange: the command's own deadline plus a few seconds."""
    path = path or configured()
    if path is None:
        raise HelperError("no helper socket configured")
    deadline = time.monotonic() + timeout
    what = request.get("cmd", "?")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(max(0.01, timeout))
            sock.connect(path)
            try:
                send_frame(sock, request)
            except (BrokenPipeError, ConnectionResetError):
                pass  # it may have answered (a refusal) and closed before reading: its answer is still there
            reply = recv_frame(sock, MAX_REPLY, deadline)
    except socket.timeout:
        raise HelperError(f"helper at {path} did not answer {what} within {timeout:g} s") from None
    except ValueError as exc:
        raise HelperError(f"helper at {path} answered {what} with a bad reply: {exc}") from None
    except OSError as exc:
        raise HelperError(f"helper at {path} cannot be asked {what}: {exc.strerror or exc}") from None
    if not reply.get("ok"):
        raise HelperError(f"helper refused {what}: {reply.get('error', 'no reason given')}")
    return reply


def decode_output(text: object, key: str = "stdout") -> bytes:
    """A reply's base64 field as bytes; HelperError when it is not base64."""
    try:
        return base64.b64decode(text or "", validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise HelperError(f"helper's reply has a bad {key}") from None


def _b64(reply: dict, key: str) -> bytes:
    return decode_output(reply.get(key), key)


def ask_command(request: dict, timeout: float, path: Optional[str] = None) -> Finished:
    """A fixed command run by the helper, as storpath.base.subprocesses.run_command would have
    ended it here (returncode None: it ran past its deadline there)."""
    reply = ask(request, timeout + 5.0, path)
    rc = reply.get("rc")
    if rc is not None and not isinstance(rc, int):
        raise HelperError("helper's reply has a bad rc")
    elapsed = reply.get("elapsed")
    return Finished([f"helper:{request.get('cmd')}"], rc, _b64(reply, "stdout"), _b64(reply, "stderr"),
                    float(elapsed) if isinstance(elapsed, (int, float)) else 0.0)


def encode_output(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
