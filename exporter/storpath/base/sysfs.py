"""Small, fast helpers to read sysfs/procfs attributes.

Absence is normal (hardware without the feature, a device removed mid-scrape), so a
missing file is `None`, never an exception. Other failures (permission, I/O errors a
driver returns for an attribute) are also `None`; `read_attr_why` also says why, for the
callers that log it.

Names (list_dir, list_entries, link_name) are what the kernel gives: bytes, listed as str
the way Python lists file names, a byte that is not UTF-8 as a lone surrogate (PEP 383,
`dev-sdh\udcff`). Readers keep them so, which keeps the paths built from them right; every
output shows them through storpath.base.safetext. An attribute's content is text for a person
(a model, a state word): read_attr decodes it with U+FFFD for what is not UTF-8.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
import time
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, TypeVar

from storpath.base.parse import cut_text, parse_int

# The read each reading thread has outstanding, by thread: (file, time.monotonic() when the
# read started), set before the open and removed once the read returns. The snapshot
# (storpath.scrape.snapshot) calls a source blocked only when one read has been outstanding longer
# than its bound, and then names that read's file: a thread that is merely slow (a busy
# CPU, a big tree) has no read outstanding for long. Every read of a file's content below
# goes through `_start`/`_done`.
_READING: Dict[int, Tuple[str, float]] = {}
_now = time.monotonic


def outstanding(thread_id: int) -> Optional[Tuple[str, float]]:
    """The read the thread `thread_id` has outstanding through these helpers: (file, when it
    started, on time.monotonic()); None when it is not reading a file now."""
    return _READING.get(thread_id)


def overrun(thread_id: Optional[int], now: float, bound: float) -> Tuple[Optional[str], float]:
    """Whether the read the thread has outstanding overran `bound` seconds (what calls a read
    blocked: the scrape's reading lanes and the background tasks alike): (its file, `now`) when
    it started `bound` or more before `now`; otherwise (None, when to look again): the moment
    the read outstanding now would overrun, or `bound` from now when none is outstanding."""
    reading = outstanding(thread_id) if thread_id is not None else None
    if reading is None:
        return None, now + bound
    path, since = reading
    if now - since >= bound:
        return path, now
    return None, since + bound


def _start(path: str) -> int:
    ident = threading.get_ident()
    _READING[ident] = (path, _now())
    return ident


def _done(ident: int) -> None:
    _READING.pop(ident, None)


# errno values that mean "the thing is not there (any more)".
_GONE = {errno.ENOENT, errno.ENOTDIR, errno.ENODEV, errno.ENXIO}


# A sysfs attribute is at most a page (Documentation/filesystems/sysfs.rst: show() fills a
# PAGE_SIZE buffer). Other files (procfs tables such as /proc/mdstat and /proc/diskstats,
# captured command output) are read with WHOLE_FILE.
ATTRIBUTE_BYTES = 4096
WHOLE_FILE = 1 << 24


# ---- a folder read inside itself ------------------------------------------------------
#
# A support folder (a sosreport beside an lspci dump) is another machine's files, handed in:
# a link in it may lead anywhere (a private key, /dev/watchdog), a FIFO in it blocks an open for
# ever. Inside a folder given to `inside()`, every read below goes through `open_inside`, which
# holds by mechanism, not by a look beforehand: the path is opened with O_PATH (links followed,
# but nothing is opened for reading: a device's driver is not called, a FIFO does not block),
# what was opened is judged on the descriptor itself (where /proc/self/fd says it is, its type
# by fstat), and only a regular file or a folder inside is then opened for reading, through that
# same descriptor (no second lookup of the path, so no swap in between), with O_NONBLOCK. Every
# read is bounded by its caller's limit. What is refused is kept in the folder's list of
# refusals, which the reader reports.


class Refused(OSError):
    """A file of a folder read inside itself that was not opened: outside the folder, or
    neither a regular file nor a folder."""


_INSIDE: Dict[str, Tuple[str, List[str]]] = {}  # folder as given (absolute) -> (its real path, refusals)
_INSIDE_LOCK = threading.Lock()


@contextlib.contextmanager
def inside(folder: str) -> Iterator[List[str]]:
    """While in this block, every read of these helpers below `folder` stays inside it
    (open_inside). Yields the list of what was refused or could not be read there
    ("path: why"), for the caller to report."""
    given = os.path.abspath(folder)
    refusals: List[str] = []
    with _INSIDE_LOCK:
        _INSIDE[given] = (os.path.realpath(folder), refusals)
    try:
        yield refusals
    finally:
        with _INSIDE_LOCK:
            _INSIDE.pop(given, None)


def _confinement(path: str) -> Optional[Tuple[str, List[str]]]:
    """(the real folder, its refusals) when `path` lies in a folder read inside itself."""
    if not _INSIDE:
        return None
    absolute = os.path.abspath(path)
    for given, held in list(_INSIDE.items()):
        if absolute == given or absolute.startswith(given.rstrip(os.sep) + os.sep):
            return held
    return None


def _within(real: str, top: str) -> bool:
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def open_inside(path: str, top: Optional[str], directory: bool = False) -> int:
    """A descriptor open for reading on the regular file (or with `directory` the folder) at
    `path`, which must lie inside the real folder `top` once every link is followed (any
    place without `top`). Never opens a device node, a FIFO or a socket; Refused saying why
    (OSError when the path cannot be opened at all)."""
    flags = os.O_PATH | os.O_CLOEXEC
    handle = os.open(path, flags)
    try:
        real = os.readlink(f"/proc/self/fd/{handle}")
        if top is not None and not _within(real, top):
            raise Refused(errno.EACCES, f"leads outside {top} ({real}): not read", path)
        mode = os.fstat(handle).st_mode
        if stat.S_ISDIR(mode) and directory:
            wanted = os.O_RDONLY | os.O_DIRECTORY
        elif stat.S_ISREG(mode) and not directory:
            wanted = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
        else:
            kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
            raise Refused(errno.EACCES, f"{kind}: not read", path)
        # Reopened through the descriptor: the very file judged above, not the path looked up again.
        return os.open(f"/proc/self/fd/{handle}", wanted | os.O_CLOEXEC)
    finally:
        os.close(handle)


def _open_for_read(path: str) -> int:
    held = _confinement(path)
    if held is None:
        return os.open(path, os.O_RDONLY)
    try:
        return open_inside(path, held[0])
    except OSError as exc:
        if exc.errno not in _GONE or isinstance(exc, Refused):
            held[1].append(f"{path}: {exc.strerror or exc}")
        raise


def _listing(path: str) -> List[os.DirEntry]:
    held = _confinement(path)
    if held is None:
        with os.scandir(path) as it:
            return list(it)
    try:
        fd = open_inside(path, held[0], directory=True)
    except OSError as exc:
        if exc.errno not in _GONE or isinstance(exc, Refused):
            held[1].append(f"{path}: {exc.strerror or exc}")
        raise
    try:
        with os.scandir(fd) as it:
            return list(it)
    finally:
        os.close(fd)


def read_attr(path: str, limit: int = ATTRIBUTE_BYTES) -> Optional[str]:
    """The text of a sysfs attribute as parse.cut_text leaves it, or None if it cannot be read."""
    return read_attr_why(path, limit)[0]


def read_attr_why(path: str, limit: int = ATTRIBUTE_BYTES) -> Tuple[Optional[str], Optional[str]]:
    """Like read_attr, but also says why a read failed (None reason when the file is absent)."""
    ident = _start(path)
    try:
        # (a support folder being read inside itself goes through its confinement)
        fd = _open_for_read(path) if _INSIDE else os.open(path, os.O_RDONLY)
        try:
            data = os.read(fd, limit)
        finally:
            os.close(fd)
    except OSError as exc:
        return None, (None if exc.errno in _GONE and not isinstance(exc, Refused) else _why(exc))
    finally:
        _done(ident)
    return cut_text(data.decode("utf-8", "replace")), None


_Reported = TypeVar("_Reported")


def read_attr_noting(directory: str, name: str, problems: List[_Reported],
                     problem: Callable[[str, str], _Reported]) -> Optional[str]:
    """The attribute `name` below `directory` as read_attr reads it (None when absent or
    unreadable); a read that failed for another reason than absence adds problem(name, why)
    to `problems`, in the reader's own words (its Problem, md's error text)."""
    value, why = read_attr_why(os.path.join(directory, name))
    if why is not None:
        problems.append(problem(name, why))
    return value


def read_bytes(path: str, limit: int = 4096) -> Optional[bytes]:
    """The raw bytes of a file."""
    ident = _start(path)
    try:
        # (a support folder being read inside itself goes through its confinement)
        fd = _open_for_read(path) if _INSIDE else os.open(path, os.O_RDONLY)
        try:
            return os.read(fd, limit)
        finally:
            os.close(fd)
    except OSError:
        return None
    finally:
        _done(ident)


def _open_inside_for_read(path: str, _flags: int) -> int:
    return _open_for_read(path)


def read_many(paths: Sequence[str], limit: int = ATTRIBUTE_BYTES) -> List[Optional[bytes]]:
    """The raw bytes of each file, None for one that cannot be read: read_bytes for a
    device's attributes read every scrape, with one lookup of the reading thread for all."""
    ident = threading.get_ident()
    out: List[Optional[bytes]] = []
    append = out.append
    reading, now, read, close = _READING, _now, os.read, os.close
    # (a support folder being read inside itself goes through its confinement, as read_attr does)
    opener = _open_inside_for_read if _INSIDE else os.open
    try:
        for path in paths:
            reading[ident] = (path, now())
            try:
                fd = opener(path, os.O_RDONLY)
            except OSError:
                append(None)
                continue
            try:
                append(read(fd, limit))
            except OSError:
                append(None)
            finally:
                close(fd)
    finally:
        reading.pop(ident, None)
    return out


def read_int(path: str, base: int = 10) -> Optional[int]:
    text = read_attr(path)
    if text is None:
        return None
    if base == 10:
        return parse_int(text)
    try:
        return int(text, base)
    except ValueError:
        return None


class RootUnreadable(Exception):
    """A reader cannot read the directory it finds its devices in: what it would report
    is unknown, not empty. The collector fails this scrape (storpath_scrape_collector_success
    0) with this as the logged reason, as prometheus/procfs returns an error for a mount
    point it cannot read. Absent hardware (a class directory missing below a readable
    filesystem root: no such driver loaded) is not this: it lists as empty."""


def _unreadable(path: str, root: Optional[str], exc: OSError) -> bool:
    """Whether a failed listing of `path` below `root` means the reader cannot read its root."""
    if root is None:
        return False
    if exc.errno in _GONE:
        try:
            os.scandir(root).close()
        except OSError as root_exc:
            raise RootUnreadable(f"{root}: {os.strerror(root_exc.errno or 0)}") from None
        return False
    return True


def _why(exc: OSError) -> str:
    return exc.strerror if isinstance(exc, Refused) else os.strerror(exc.errno or 0)


def list_dir(path: str, root: Optional[str] = None) -> List[str]:
    """The sorted entries of a directory; [] if it is absent or unreadable. With `root`
    (the filesystem root it lies below: --path.sysfs, --path.procfs) a directory a reader
    depends on: RootUnreadable if it cannot be read, or if it is absent because `root`
    itself cannot be read."""
    ident = _start(path)
    try:
        if _confinement(path) is None:
            return sorted(os.listdir(path))  # the machine's own sysfs: as before, no entry objects
        return sorted(entry.name for entry in _listing(path))
    except OSError as exc:
        if _unreadable(path, root, exc):
            raise RootUnreadable(f"{path}: {_why(exc)}") from None
        return []
    finally:
        _done(ident)


def link_name(path: str) -> Optional[str]:
    """The last component of a symlink's target (a driver's name, a device's name)."""
    ident = _start(path)
    try:
        target = os.readlink(path)
    except OSError:
        return None
    finally:
        _done(ident)
    return target[target.rfind("/") + 1:]


def list_entries(path: str, root: Optional[str] = None) -> List[Tuple[str, int]]:
    """(name, inode) of every entry of a directory, sorted by name; [] if absent or
    unreadable, or with `root` RootUnreadable as for list_dir.

    The inodes come with the listing itself (getdents), with no stat per entry. sysfs
    gives every node a new inode number when it is created, so the inode of a class or
    bus symlink (/sys/bus/pci/devices/<address>) tells one device instance from another
    that later appears under the same name."""
    ident = _start(path)
    try:
        entries = [(entry.name, entry.inode()) for entry in _listing(path)]
    except OSError as exc:
        if _unreadable(path, root, exc):
            raise RootUnreadable(f"{path}: {_why(exc)}") from None
        return []
    finally:
        _done(ident)
    entries.sort()
    return entries


