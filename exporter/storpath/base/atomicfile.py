"""Every file storpath writes is written here: into a temporary file beside it, synced,
then renamed over it. A reader of the file sees the old one or the new one, never half
of either, and a write that fails for any reason (a full filesystem, a file size limit,
an exception in the middle of writing, Ctrl-C) removes its temporary file before the
failure goes on: nothing is left behind but what a crash of the whole process leaves.

The temporary file is created with O_EXCL and O_NOFOLLOW (a name planted there, a link
included, is an error, never written through), and the rename replaces a link at the
destination rather than following it. With `dir_fd`, every step works relative to that
folder, so a folder swapped for a link meanwhile is not followed either.
"""

from __future__ import annotations

import os
from typing import BinaryIO, Callable, Optional, Union

Content = Union[bytes, Callable[[BinaryIO], None]]


def _open_temp(name: str, dir_fd: Optional[int], mode: int, reclaim: bool) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(name, flags, mode, dir_fd=dir_fd)
    except FileExistsError:
        if not reclaim:
            raise
    # A fixed temporary name found taken: what an interrupted write of ours left (a crash,
    # a power cut). unlink removes a link itself, never what it points at.
    os.unlink(name, dir_fd=dir_fd)
    return os.open(name, flags, mode, dir_fd=dir_fd)


def replace_file(path: str, content: Content, *, mode: int = 0o644, dir_fd: Optional[int] = None,
                 temp_name: Optional[str] = None) -> None:
    """Write `content` (bytes, or a function that writes to the binary file it is given)
    to `path` through a temporary file in the same folder, then rename it over `path`.

    `mode` is the new file's mode (less the umask). `dir_fd`: `path` is a name in that
    folder. `temp_name`: a fixed temporary name (in the same folder) instead of a fresh
    random one, for a large file whose leftover after a crash must not pile up: one found
    there is removed first. Raises what the write raised, after removing the temporary file."""
    folder, name = os.path.split(path)
    temp = os.path.join(folder, temp_name or f".{name}.{os.urandom(6).hex()}.tmp")
    fd = _open_temp(temp, dir_fd, mode, reclaim=temp_name is not None)
    try:
        with os.fdopen(fd, "wb") as handle:
            if callable(content):
                content(handle)
            else:
                handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(temp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    _sync_folder(folder, dir_fd)


def _sync_folder(folder: str, dir_fd: Optional[int]) -> None:
    """Make the rename itself durable; a folder that cannot be synced is no reason to fail:
    the file is in place."""
    try:
        if dir_fd is not None:
            os.fsync(dir_fd)
            return
        fd = os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


__all__ = ["replace_file"]
