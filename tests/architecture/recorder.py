"""What the process does outside itself, and which code did it.

An audit hook (`sys.addaudithook`, PEP 578) is told of every file opened, directory listed,
process started and socket used, however the code spelled it: `open`, `os` re-exported by
another module, pathlib, `dataclasses.builtins.open`, a callable taken from a registry, a
function found with `pkgutil.resolve_name`. Each of those is kept as an `Event` with the
thread that did it and the Python stack that led to it, every frame named by its module
(`f_globals["__name__"]`): the house rules (tests/architecture/rules.py) then ask which
layers were on the stack, not how the call was written.

A hook cannot be removed: one is installed, the first time `recording()` is used, for the
life of the process, and keeps nothing outside a `recording()` block.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, List, NamedTuple, Optional, Tuple

# The audit events recorded (docs.python.org/3/library/audit_events.html), by what they
# reach: every event whose name starts with "socket." is a socket's too.
WATCHED = {
    **dict.fromkeys(("open", "os.listdir", "os.scandir", "glob.glob", "glob.glob/2", "os.mkdir", "os.rmdir",
                     "os.remove", "os.rename", "os.link", "os.symlink", "os.truncate", "os.chmod", "os.chown",
                     "os.utime", "os.chdir", "os.getxattr", "os.listxattr", "os.setxattr", "os.removexattr",
                     "shutil.copyfile", "shutil.copymode", "shutil.copystat", "shutil.copytree", "shutil.rmtree",
                     "shutil.move", "tempfile.mkstemp", "tempfile.mkdtemp", "fcntl.ioctl", "fcntl.fcntl",
                     "fcntl.flock", "fcntl.lockf", "mmap.__new__"), "file"),
    **dict.fromkeys(("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "os.fork",
                     "os.forkpty", "pty.spawn", "os.kill", "os.killpg", "ctypes.dlopen"), "process"),
    **dict.fromkeys(("http.client.connect", "urllib.Request", "ftplib.connect", "smtplib.connect",
                     "poplib.connect", "imaplib.open", "nntplib.connect", "telnetlib.Telnet.open",
                     "webbrowser.open"), "socket"),
}


class Frame(NamedTuple):
    module: str  # the module whose code runs: f_globals["__name__"]
    function: str  # its qualified name ("PcieCollector.values")
    line: int
    # For a method called `values` (what every collector provides), its object's class
    # ("storpath.collectors.pcie.PcieCollector"), wherever its code was written; else "".
    owner: str

    def __str__(self) -> str:
        return f"{self.module}.{self.function}:{self.line}"


@dataclass(frozen=True)
class Event:
    kind: str  # file, process or socket
    event: str  # the audit event: "open", "os.listdir", "subprocess.Popen", "socket.connect"
    target: str  # what it reached: a path, a command, an address
    thread: str
    stack: Tuple[Frame, ...]  # innermost first

    def __str__(self) -> str:
        return f"{self.event}({self.target}) on thread {self.thread}"


_events: Optional[List[Event]] = None
_installed = False
_install_lock = threading.Lock()


def _owner(frame) -> str:
    code = frame.f_code
    if code.co_name != "values" or not code.co_argcount or code.co_varnames[0] != "self":
        return ""
    cls = type(frame.f_locals.get("self"))
    return f"{cls.__module__}.{cls.__qualname__}"


def _target(event: str, args: tuple) -> str:
    # socket.* events pass the socket first, what it reaches second.
    shown = args[1:2] if event.startswith("socket.") and len(args) > 1 else args[:1]
    text = repr(shown[0]) if shown else ""
    return text if len(text) <= 200 else text[:197] + "..."


def _hook(event: str, args: tuple) -> None:
    events = _events
    if events is None:
        return
    kind = WATCHED.get(event) or ("socket" if event.startswith("socket.") else None)
    if kind is None:
        return
    stack = []
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        stack.append(Frame(frame.f_globals.get("__name__", "?"), code.co_qualname, frame.f_lineno,
                           _owner(frame) if code.co_name == "values" else ""))
        frame = frame.f_back
    events.append(Event(kind, event, _target(event, args), threading.current_thread().name, tuple(stack)))


@contextmanager
def recording() -> Iterator[List[Event]]:
    """Every watched event, on every thread, while the block runs (one block at a time)."""
    global _events, _installed
    with _install_lock:
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True
        if _events is not None:
            raise RuntimeError("recording() blocks do not nest")
        events = _events = []
    try:
        yield events
    finally:
        _events = None
