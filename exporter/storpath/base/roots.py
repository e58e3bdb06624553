"""Filesystem roots. Every path the exporter reads is built from these, so a whole
machine can be replayed from a fixture tree (--path.sysfs, --path.procfs, --path.dev)."""

from __future__ import annotations

import os
from typing import Optional

from storpath.base.records import datarecord


@datarecord(frozen=True)
class Roots:
    """The filesystem roots every path is built from: sysfs, procfs, /dev, captured outputs, tracefs."""

    sysfs: str = "/sys"
    procfs: str = "/proc"
    # "" when no device node may be opened: --path.sysfs replays another machine and
    # --path.dev was not given (storpath.commands.options.resolve_config), so this host's
    # /dev/nvme* would not be the replayed machine's.
    dev: str = "/dev"
    # Outputs of privileged or slow commands (NVMe Identify data, zpool status) saved by
    # `storpath capture` or shipped with a fixture machine. When set, readers take their
    # data from here instead of running the command: a captured machine replays whole.
    captured: Optional[str] = None
    # Where tracefs is mounted (--path.tracefs); None: <sysfs>/kernel/tracing, so a fixture
    # tree given with --path.sysfs carries its own.
    tracefs: Optional[str] = None

    def sys(self, *parts: str) -> str:
        return os.path.join(self.sysfs, *parts)

    def proc(self, *parts: str) -> str:
        return os.path.join(self.procfs, *parts)

    def tracing(self, *parts: str) -> str:
        return os.path.join(self.tracefs or self.sys("kernel", "tracing"), *parts)

    @property
    def devices(self) -> bool:
        """Whether device nodes may be opened (ioctls, nvme-cli, fio on /dev paths)."""
        return bool(self.dev)

    def devpath(self, *parts: str) -> str:
        if not self.dev:
            raise ValueError("no device nodes: --path.sysfs replays another machine and --path.dev is not given")
        return os.path.join(self.dev, *parts)

    def captured_path(self, *parts: str) -> Optional[str]:
        return os.path.join(self.captured, *parts) if self.captured else None


NO_DEVICES = ("device nodes not opened: --path.sysfs is not /sys and --path.dev is not given, so NVMe Identify "
              "and SMART data are not read from this host's /dev (give --path.dev or --path.captured)")
