"""Filesystem roots. Every path the exporter reads is built from these, so a whole
machine can be replayed from a fixture tree (--path.sysfs, --path.procfs, --path.dev)."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Roots:
    sysfs: str = "/sys"
    procfs: str = "/proc"
    dev: str = "/dev"

    def sys(self, *parts: str) -> str:
        return os.path.join(self.sysfs, *parts)

    def proc(self, *parts: str) -> str:
        return os.path.join(self.procfs, *parts)

    def devpath(self, *parts: str) -> str:
        return os.path.join(self.dev, *parts)
