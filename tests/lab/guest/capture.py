#!/usr/bin/env python3
"""Snapshot the storage-relevant parts of sysfs and procfs into a tar.gz (run in the guest).

The archive holds paths relative to / (sys/..., proc/...), so extracting it into a
directory gives a root usable with --path.sysfs=DIR/sys --path.procfs=DIR/proc; NVMe
Identify Namespace data goes to captured/nvme/<ctrl>/ns<nsid>.{json,id-ns}, the layout
of storpath's --path.captured=DIR/captured.
Symlinks are stored as symlinks with their original targets; attribute files are stored
with their real content (sysfs reports 4096 bytes for every file); files that cannot be
read (write-only, or an error such as EIO/EINVAL) are left out. Nothing is followed
through a symlink, so the walk cannot loop.

    python3 capture.py OUT.tar.gz
"""

import glob
import io
import os
import re
import stat
import subprocess
import sys
import tarfile
import time

# Whole subtrees copied file by file.
TREES = [
    "/sys/devices/system/node",
    "/sys/devices/system/cpu",
    "/sys/devices/virtual/block",
    "/sys/devices/virtual/nvme-subsystem",
    "/sys/module/libata/parameters",
    "/sys/module/nvme_core/parameters",
    "/sys/module/md_mod/parameters",
]
# Directories whose entries are symlinks into /sys/devices (copied as symlinks, one level).
LINK_DIRS = [
    "/sys/bus/pci/devices",
    "/sys/block",
    "/sys/class/block",
    "/sys/class/nvme",
    "/sys/class/nvme-subsystem",
    "/sys/class/sas_phy",
    "/sys/class/sas_port",
    "/sys/class/sas_host",
    "/sys/class/sas_device",
    "/sys/class/sas_end_device",
    "/sys/class/ata_link",
    "/sys/class/ata_port",
    "/sys/class/ata_device",
    "/sys/class/scsi_host",
    "/sys/class/scsi_disk",
    "/sys/class/scsi_device",
    "/sys/class/pci_bus",
]
PROC_FILES = ["/proc/mdstat", "/proc/partitions", "/proc/cpuinfo", "/proc/meminfo",
              "/proc/version", "/proc/cmdline", "/proc/sys/dev/raid/speed_limit_min",
              "/proc/sys/dev/raid/speed_limit_max"]

# Attributes never read: binary BARs and ROMs, write-only triggers, and files that can
# block or disturb the device.
SKIP_FILES = re.compile(r"^(rom|resource\d*(_wc)?|vpd|remove|rescan|reset|new_id|remove_id|"
                        r"bind|unbind|uevent_seqnum|delete|scan|flush_rescan|"
                        r"firmware_update|dev_rescan|trigger)$")
SKIP_DIRS = re.compile(r"^(cpuidle|cpufreq|trace|hotplug|msi_irqs|holders_dummy)$")
# Block devices we do not want (the kernel's loop and ram disks).
SKIP_BLOCK = re.compile(r"^(loop|ram)\d+$")
MAX_FILE = 64 * 1024
MAX_DEPTH = 40


class Capture:
    def __init__(self, out):
        self.tar = tarfile.open(out, "w:gz", compresslevel=9)
        self.seen = set()
        self.now = int(time.time())
        self.devices = set()

    def close(self):
        self.tar.close()

    def _name(self, path):
        return path.lstrip("/")

    def add_dir_entry(self, path):
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            p = "/" + "/".join(parts[:i])
            if p in self.seen:
                continue
            self.seen.add(p)
            ti = tarfile.TarInfo(self._name(p))
            ti.type = tarfile.DIRTYPE
            ti.mode = 0o755
            ti.mtime = self.now
            self.tar.addfile(ti)

    def add_link(self, path):
        if path in self.seen:
            return
        self.add_dir_entry(os.path.dirname(path))
        self.seen.add(path)
        ti = tarfile.TarInfo(self._name(path))
        ti.type = tarfile.SYMTYPE
        ti.linkname = os.readlink(path)
        ti.mode = 0o777
        ti.mtime = self.now
        self.tar.addfile(ti)

    def add_file(self, path, st):
        if path in self.seen:
            return
        if not st.st_mode & 0o444:
            return
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                data = os.read(fd, MAX_FILE)
            finally:
                os.close(fd)
        except OSError:
            return
        self.add_dir_entry(os.path.dirname(path))
        self.seen.add(path)
        ti = tarfile.TarInfo(self._name(path))
        ti.size = len(data)
        ti.mode = stat.S_IMODE(st.st_mode)
        ti.mtime = self.now
        self.tar.addfile(ti, io.BytesIO(data))

    def walk(self, top, depth=0):
        if depth > MAX_DEPTH or top in self.seen:
            return
        try:
            names = sorted(os.listdir(top))
        except OSError:
            return
        self.add_dir_entry(top)
        for n in names:
            p = os.path.join(top, n)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                self.add_link(p)
            elif stat.S_ISDIR(st.st_mode):
                if SKIP_DIRS.match(n) or (top.endswith("/block") and SKIP_BLOCK.match(n)):
                    continue
                self.walk(p, depth + 1)
            elif stat.S_ISREG(st.st_mode):
                if not SKIP_FILES.match(n):
                    self.add_file(p, st)

    def add_output(self, name, data):
        """A command's output as the file `name` (relative to the archive's root, such as
        captured/dmsetup/status.txt), with its folders."""
        self.add_dir_entry("/" + os.path.dirname(name))
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        ti.mode = 0o644
        ti.mtime = self.now
        self.tar.addfile(ti, io.BytesIO(data))

    def add_links_of(self, d):
        try:
            names = sorted(os.listdir(d))
        except OSError:
            return
        self.add_dir_entry(d)
        for n in names:
            if SKIP_BLOCK.match(n):
                continue
            p = os.path.join(d, n)
            if os.path.islink(p):
                self.add_link(p)
                self.devices.add(os.path.realpath(p))


def add_nvme_identify(c):
    """Identify Namespace of every NVMe namespace, as storpath's --path.captured reads it:
    captured/nvme/<controller>/ns<nsid>.json (nvme-cli JSON) and .id-ns (raw 4096 bytes)."""
    for ctrl_dir in sorted(glob.glob("/sys/class/nvme/nvme*")):
        ctrl = os.path.basename(ctrl_dir)
        for ns_dir in sorted(glob.glob(os.path.join(ctrl_dir, ctrl + "n*"))):
            try:
                with open(os.path.join(ns_dir, "nsid")) as f:
                    nsid = f.read().strip()
            except OSError:
                continue
            for suffix, extra in ((".json", ["--output-format=json"]),
                                  (".id-ns", ["--raw-binary"])):
                try:
                    data = subprocess.run(
                        ["nvme", "id-ns", "/dev/" + ctrl, "--namespace-id=" + nsid] + extra,
                        capture_output=True, timeout=60, check=True).stdout
                except (OSError, subprocess.SubprocessError):
                    continue
                c.add_output(f"captured/nvme/{ctrl}/ns{nsid}{suffix}", data)


def add_dmsetup_status(c):
    """`dmsetup status --target multipath` as storpath's --path.captured reads it
    (captured/dmsetup/status.txt), where the host has a multipath map (a dm device whose
    dm/uuid starts with mpath-)."""
    maps = []
    for uuid in glob.glob("/sys/block/dm-*/dm/uuid"):
        try:
            with open(uuid) as f:
                if f.read().startswith("mpath-"):
                    maps.append(uuid)
        except OSError:
            continue
    if not maps:
        return
    try:
        data = subprocess.run(["dmsetup", "status", "--target", "multipath"],
                              capture_output=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return
    c.add_output("captured/dmsetup/status.txt", data)


def main():
    out = sys.argv[1]
    c = Capture(out)
    for d in LINK_DIRS:
        c.add_links_of(d)
    # Every PCI hierarchy (one per host bridge) in full: it holds the PCI devices, their
    # NVMe controllers, SCSI/ATA hosts, SAS phys and the block devices below them.
    for n in sorted(os.listdir("/sys/devices")):
        if n.startswith("pci"):
            c.walk(os.path.join("/sys/devices", n))
    for t in TREES:
        if os.path.isdir(t):
            c.walk(t)
    # Anything a class link points to that lives elsewhere.
    for dev in sorted(c.devices):
        if os.path.isdir(dev):
            c.walk(dev)
    add_nvme_identify(c)
    add_dmsetup_status(c)
    for f in PROC_FILES:
        try:
            st = os.stat(f)
        except OSError:
            continue
        c.add_file(f, st)
    c.close()
    print(f"{out}: {os.path.getsize(out)} bytes, {len(c.seen)} entries")


if __name__ == "__main__":
    main()
