#!/usr/bin/env python3
"""The storpath lab: a real Linux kernel under QEMU with emulated storage hardware.

This module builds a bootable guest (Debian's kernel and an uncompressed initramfs made
with mmdebstrap), describes the emulated machines ("topologies") and boots them with a
command channel, so that a test can run commands in the guest, inject a fault and read the
kernel's view again, all in one boot.

    python3 tests/lab/lab.py build                 # build (or reuse) the cached image
    python3 tests/lab/lab.py boot nvme             # boot, print what the kernel sees, power off
    python3 tests/lab/lab.py shell nvme            # boot and run commands typed on stdin
    python3 tests/lab/lab.py run nvme -- CMD ...   # boot, run one command, power off
    python3 tests/lab/lab.py capture md            # boot, snapshot sysfs into captures/md.tar.gz
    python3 tests/lab/lab.py metrics nvme          # boot, run the exporter, print /metrics
    python3 tests/lab/lab.py build --variant zfs   # the zfs image (OpenZFS 2.1 from contrib, dkms)
    python3 tests/lab/lab.py capture zfs           # pools + faults -> tests/unit/data/zpool_2.1_lab.txt

Inside the guest the repository is mounted read-only at /mnt/repo (9p) and a per-boot
results directory is mounted read-write at /mnt/out. Commands run as root with
PYTHONPATH=/mnt/repo/exporter, so `python3 -m storpath` works without installing it.

Environment:
    STORPATH_LAB_CACHE        image cache (default ~/.cache/storpath-lab)
    STORPATH_LAB_MIRROR       Debian mirror URL for the guest (default http://deb.debian.org/debian;
                              "-security" is appended to it for the security suite)
    STORPATH_LAB_KERNEL       Debian kernel package (default: what linux-image-amd64 depends on)
    STORPATH_LAB_TCG_THREAD   "single" (default: one host thread for all vCPUs) or "multi"
    STORPATH_LAB_KEEP         keep the per-boot work directory (disks, console log)
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
CAPTURES_DIR = HERE / "captures"

# --------------------------------------------------------------------------------------
# The build recipe. Everything that changes the image belongs here: the cache key is a
# hash of this data (plus the kernel package version), so editing it triggers a rebuild.
# --------------------------------------------------------------------------------------

RECIPE_VERSION = 3

GUEST_PACKAGES = [
    "python3",
    "python3-prometheus-client",
    "python3-yaml",
    "python3-cheroot",
    "python3-bcrypt",
    "nvme-cli",
    "mdadm",
    "fio",
    "pciutils",
    "sg3-utils",
    "lsscsi",
    "kmod",
    "iproute2",
    "procps",
    "util-linux",
    "mount",
]

# Paths removed from the userland after installation: nothing the guest runs needs them
# (perl comes in only through usrmerge; udev's hardware database is not used without udevd).
PRUNE = [
    "usr/share/perl",
    "usr/share/perl5",
    "usr/lib/x86_64-linux-gnu/perl",
    "usr/lib/x86_64-linux-gnu/libperl.so.5.36",
    "usr/lib/x86_64-linux-gnu/libperl.so.5.36.0",
    "usr/lib/x86_64-linux-gnu/gconv",
    "usr/lib/udev/hwdb.bin",
    "usr/lib/udev/hwdb.d",
    "usr/lib/python3.11/test",
    "usr/lib/python3.11/ensurepip",
    "usr/lib/python3.11/idlelib",
    "usr/lib/python3.11/lib2to3",
    "usr/lib/python3.11/pydoc_data",
    "usr/lib/python3.11/tkinter",
    "usr/share/bash-completion",
    "usr/share/info",
    "var/cache/debconf",
    "var/log",
]

# Kernel modules copied into the initramfs (with their dependencies) and loaded at boot,
# in this order.
GUEST_MODULES = [
    "virtio_pci",
    "virtio_console",
    "9pnet_virtio",
    "9p",
    "virtio_blk",
    "nvme",
    "sd_mod",
    "sg",
    "scsi_transport_sas",
    "mptsas",
    "ahci",
    "md_mod",
    "raid0",
    "raid1",
    "raid10",
    "crc32c_generic",
    "raid456",
]

# Files the guest never needs; dropping them keeps the initramfs small and the boot fast.
DPKG_EXCLUDES = [
    "/usr/share/doc/*",
    "/usr/share/man/*",
    "/usr/share/info/*",
    "/usr/share/locale/*",
    "/usr/share/lintian/*",
    "/usr/share/zoneinfo/*",
]

GUEST_INIT = r"""#!/bin/sh
# storpath lab guest init (PID 1). Mounts the pseudo filesystems and the 9p shares,
# loads the storage drivers, then hands over to the command agent from the repository.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
echo 1 > /proc/sys/kernel/sysrq
hostname storpath-lab
for m in $(cat /etc/storpath-lab/modules); do
    modprobe "$m" || echo "storpath-lab: modprobe $m failed"
done
mkdir -p /mnt/repo /mnt/out
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro repo /mnt/repo || echo "storpath-lab: no repo share"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out /mnt/out || echo "storpath-lab: no out share"
ip link set lo up 2>/dev/null
# Wait for the block devices the drivers are still probing (no udev here).
i=0
while [ $i -lt 50 ] && [ -z "$(ls /sys/block 2>/dev/null)" ]; do sleep 0.1; i=$((i+1)); done
echo "storpath-lab: init done after $(cut -d' ' -f1 /proc/uptime) s"
AGENT=/mnt/repo/tests/lab/guest/agent.py
[ -f "$AGENT" ] || AGENT=/usr/local/sbin/storpath-lab-agent
python3 "$AGENT"
echo "storpath-lab: agent exited with $?; powering off"
sync
echo o > /proc/sysrq-trigger
sleep 10
"""


def cache_root() -> Path:
    env = os.environ.get("STORPATH_LAB_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "storpath-lab"


def _run(cmd: List[str], log: Callable[[str], None], **kw) -> subprocess.CompletedProcess:
    log("+ " + " ".join(shlex.quote(c) for c in cmd))
    return subprocess.run(cmd, check=True, **kw)


def host_suite() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                value = line.split("=", 1)[1].strip().strip('"')
                if value:
                    return value
    except OSError:
        pass
    return "bookworm"


def resolve_kernel_package() -> Dict[str, str]:
    """Name and candidate version of the Debian kernel image package to boot."""
    name = os.environ.get("STORPATH_LAB_KERNEL")
    if not name:
        out = subprocess.run(["apt-cache", "depends", "linux-image-amd64"],
                             capture_output=True, text=True, check=True).stdout
        m = re.search(r"Depends:\s*(linux-image-[0-9][^\s]*-amd64)\b", out)
        if not m:
            raise RuntimeError("cannot resolve the kernel package from linux-image-amd64 "
                               "(run apt-get update?)")
        name = m.group(1)
    out = subprocess.run(["apt-cache", "policy", name], capture_output=True, text=True,
                         check=True).stdout
    m = re.search(r"Candidate:\s*(\S+)", out)
    if not m or m.group(1) == "(none)":
        raise RuntimeError(f"no installable candidate for {name} (run apt-get update?)")
    return {"package": name, "version": m.group(1)}


# --- The optional "zfs" image variant (OpenZFS 2.1 from Debian's contrib) --------------
# Not part of the default image: zfs-dkms needs the kernel headers and a compiler in the
# chroot and takes minutes to build. The module is built by dkms for the guest kernel in
# a customize hook, kept aside, the build tools purged, and the module put back. The
# guest runs udevd (libzfs waits for udev to settle when it labels a whole disk).
ZFS_PACKAGES = ["zfs-dkms", "zfsutils-linux", "dkms", "udev"]  # + linux-headers-<release>
ZFS_MODULES = ["zfs"]
ZFS_INIT_UDEV = r"""# zfs variant: udevd, so that libzfs sees partitions and by-id links settle.
for u in /lib/systemd/systemd-udevd /usr/lib/systemd/systemd-udevd; do
    if [ -x "$u" ]; then
        "$u" --daemon && udevadm trigger --action=add && udevadm settle --timeout=60
        break
    fi
done
"""
IMAGE_VARIANTS = ("default", "zfs")


def kernel_release_of(package: str) -> str:
    """linux-image-6.1.0-56-amd64 -> 6.1.0-56-amd64"""
    return package[len("linux-image-"):] if package.startswith("linux-image-") else package


def recipe(variant: str = "default") -> dict:
    if variant not in IMAGE_VARIANTS:
        raise ValueError(f"unknown image variant {variant!r}; known: {', '.join(IMAGE_VARIANTS)}")
    r = _base_recipe()
    if variant == "zfs":
        release = kernel_release_of(r["kernel"]["package"])
        r["variant"] = "zfs"
        r["components"] = "main contrib"
        r["packages"] = sorted(set(r["packages"]) | set(ZFS_PACKAGES) | {f"linux-headers-{release}"})
        r["build_only"] = ["zfs-dkms", "dkms", f"linux-headers-{release}"]
        r["modules"] = r["modules"] + ZFS_MODULES
        marker = "AGENT=/mnt/repo/tests/lab/guest/agent.py\n"
        r["init"] = r["init"].replace(marker, ZFS_INIT_UDEV + marker)
    return r


def _base_recipe() -> dict:
    return {
        "recipe_version": RECIPE_VERSION,
        "suite": host_suite(),
        "mirror": os.environ.get("STORPATH_LAB_MIRROR", ""),
        "kernel": resolve_kernel_package(),
        "packages": sorted(GUEST_PACKAGES),
        "modules": GUEST_MODULES,
        "dpkg_excludes": DPKG_EXCLUDES,
        "prune": PRUNE,
        "init": GUEST_INIT,
    }


def recipe_hash(r: dict) -> str:
    blob = json.dumps(r, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclasses.dataclass
class Image:
    directory: Path
    kernel: Path
    initrd: Path
    kernel_release: str

    @classmethod
    def load(cls, directory: Path) -> "Image":
        meta = json.loads((directory / "image.json").read_text())
        return cls(directory, directory / "vmlinuz", directory / "initrd.cpio",
                   meta["kernel_release"])


def _module_closure(modroot: Path, wanted: List[str]) -> List[str]:
    """Paths (relative to modroot) of the wanted modules and everything they depend on."""
    deps: Dict[str, List[str]] = {}
    by_name: Dict[str, str] = {}
    for line in (modroot / "modules.dep").read_text().splitlines():
        if ":" not in line:
            continue
        path, rest = line.split(":", 1)
        deps[path] = rest.split()
        base = os.path.basename(path).split(".ko")[0]
        by_name[base] = path
        by_name[base.replace("-", "_")] = path
    builtin = set()
    if (modroot / "modules.builtin").exists():
        for line in (modroot / "modules.builtin").read_text().splitlines():
            builtin.add(os.path.basename(line).split(".ko")[0].replace("-", "_"))
    todo, seen = [], set()
    for name in wanted:
        key = name.replace("-", "_")
        if key in by_name:
            todo.append(by_name[key])
        elif key not in builtin:
            raise RuntimeError(f"kernel module {name} is neither a module nor built in")
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        todo.extend(deps.get(p, []))
    return sorted(seen)


def write_newc_cpio(root: Path, out: Path) -> None:
    """Write ROOT as an uncompressed newc cpio archive (the initramfs format), keeping
    symlinks, device nodes, modes and hard links as plain copies."""
    ino = 1

    def header(name: bytes, mode: int, size: int, nlink: int = 1, mtime: int = 0,
               rdev_major: int = 0, rdev_minor: int = 0) -> bytes:
        nonlocal ino
        fields = [ino, mode, 0, 0, nlink, mtime, size, 0, 0, rdev_major, rdev_minor,
                  len(name) + 1, 0]
        ino += 1
        h = b"070701" + b"".join(b"%08X" % f for f in fields) + name + b"\0"
        return h + b"\0" * ((4 - len(h) % 4) % 4)

    def pad(n: int) -> bytes:
        return b"\0" * ((4 - n % 4) % 4)

    with open(out, "wb") as f:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, root)
            entries = [] if rel_dir == "." else [rel_dir]
            base = "" if rel_dir == "." else rel_dir + "/"
            entries += [base + n for n in sorted(filenames)]
            # Symlinks to directories appear in dirnames; os.walk does not follow them.
            entries += [base + n for n in dirnames if os.path.islink(os.path.join(dirpath, n))]
            for rel in entries:
                full = os.path.join(root, rel)
                st = os.lstat(full)
                name = rel.encode()
                mode = st.st_mode
                if stat.S_ISLNK(mode):
                    target = os.readlink(full).encode()
                    f.write(header(name, mode, len(target)) + target + pad(len(target)))
                elif stat.S_ISREG(mode):
                    size = st.st_size
                    f.write(header(name, mode, size))
                    with open(full, "rb") as src:
                        shutil.copyfileobj(src, f)
                    f.write(pad(size))
                elif stat.S_ISDIR(mode):
                    f.write(header(name, mode, 0, nlink=2))
                elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                    f.write(header(name, mode, 0, rdev_major=os.major(st.st_rdev),
                                   rdev_minor=os.minor(st.st_rdev)))
                elif stat.S_ISFIFO(mode):
                    f.write(header(name, mode, 0))
        f.write(header(b"TRAILER!!!", 0, 0, nlink=1))


def _image_dir_name(variant: str, key: str) -> str:
    return key if variant == "default" else f"{variant}-{key}"


def build(force: bool = False, log: Callable[[str], None] = print, variant: str = "default") -> Image:
    """Build the guest image, or return the cached one for the current recipe.
    variant "zfs" is a separate image (cached as zfs-<hash> beside the default one)."""
    r = recipe(variant)
    key = recipe_hash(r)
    root = cache_root()
    final = root / _image_dir_name(variant, key)
    if (final / "image.json").exists() and not force:
        return Image.load(final)
    root.mkdir(parents=True, exist_ok=True)
    # One build at a time per cache; a second caller waits and then reuses the result.
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / "image.json").exists() and not force:
            return Image.load(final)
        return _build_locked(r, key, root, final, log)


def _build_locked(r: dict, key: str, root: Path, final: Path,
                  log: Callable[[str], None]) -> Image:
    for tool in ("mmdebstrap", "apt-get", "dpkg-deb"):
        if not shutil.which(tool):
            raise RuntimeError(f"{tool} is needed to build the lab image")
    if os.geteuid() != 0:
        raise RuntimeError("building the lab image needs root (mmdebstrap --mode=root, "
                           "chroot for depmod); booting a built image does not")
    variant = r.get("variant", "default")
    work = Path(tempfile.mkdtemp(prefix=f"{_image_dir_name(variant, key)}.build-", dir=root))
    t0 = time.monotonic()
    try:
        # 1. The kernel: Debian's image package, unpacked (not installed on the host).
        kpkg = r["kernel"]
        debdir = work / "deb"
        debdir.mkdir()
        _run(["apt-get", "download", f"{kpkg['package']}={kpkg['version']}"], log,
             cwd=debdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deb = next(debdir.glob("*.deb"))
        ktree = work / "kernel"
        _run(["dpkg-deb", "-x", str(deb), str(ktree)], log)
        vmlinuz = next((ktree / "boot").glob("vmlinuz-*"))
        release = vmlinuz.name[len("vmlinuz-"):]
        kmods = ktree / "lib" / "modules" / release

        # 2. The userland.
        rootfs = work / "rootfs"
        cmd = ["mmdebstrap", "--variant=essential", "--mode=root", "--quiet",
               "--include=" + ",".join(r["packages"])]
        cmd += [f"--dpkgopt=path-exclude={p}" for p in r["dpkg_excludes"]]
        if r.get("build_only"):
            # Build out-of-tree modules (zfs) for the guest kernel, keep them, drop the tools.
            mods = f"/lib/modules/{release}"
            cmd += [f"--customize-hook=chroot \"$1\" dkms autoinstall -k {release}",
                    f"--customize-hook=ls \"$1\"{mods}/updates/dkms/",
                    f"--customize-hook=cp -a \"$1\"{mods}/updates \"$1\"/root/lab-updates",
                    # The essential variant has no apt inside: mmdebstrap's own apt, from outside.
                    # Without mmdebstrap's APT_CONFIG that apt-get would act on the HOST and purge
                    # its compilers (it did once), so it only runs when the config points into
                    # the chroot being built.
                    "--customize-hook=case \"$MMDEBSTRAP_APT_CONFIG\" in \"\") "
                    "echo 'storpath-lab: no MMDEBSTRAP_APT_CONFIG; not purging (it would hit the host)'; exit 0;; esac; "
                    "grep -q \"$1\" \"$MMDEBSTRAP_APT_CONFIG\" || "
                    "{ echo 'storpath-lab: apt config does not point into the chroot; not purging'; exit 0; }; "
                    "APT_CONFIG=\"$MMDEBSTRAP_APT_CONFIG\" DEBIAN_FRONTEND=noninteractive "
                    "apt-get purge -y -q -o APT::AutoRemove::RecommendsImportant=false "
                    "-o APT::AutoRemove::SuggestsImportant=false --autoremove " + " ".join(r["build_only"])
                    + " || echo 'storpath-lab: purge of the build tools failed; image stays bigger'",
                    f"--customize-hook=rm -rf \"$1\"{mods} \"$1\"/usr/src/* \"$1\"/var/lib/dkms",
                    f"--customize-hook=mkdir -p \"$1\"{mods} && "
                    f"mv \"$1\"/root/lab-updates \"$1\"{mods}/updates"]
        cmd += ["--customize-hook=rm -rf \"$1\"/var/cache/apt \"$1\"/var/lib/apt/lists",
                r["suite"], str(rootfs)]
        mirror = r["mirror"] or "http://deb.debian.org/debian"
        security = (r["mirror"].rstrip("/") + "-security") if r["mirror"] else \
            "http://deb.debian.org/debian-security"
        comps = r.get("components", "main")
        cmd += [f"deb {mirror} {r['suite']} {comps}",
                f"deb {mirror} {r['suite']}-updates {comps}",
                f"deb {security} {r['suite']}-security {comps}"]
        # stdin closed: mmdebstrap reads a sources.list from a stdin that is not a terminal.
        _run(cmd, log, stdin=subprocess.DEVNULL)

        for rel in r["prune"]:
            target = rootfs / rel
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()

        # 3. The storage drivers and their dependencies: move the whole module tree in,
        #    let the guest's depmod compute the dependencies, keep only what is needed.
        dst_mods = rootfs / "lib" / "modules" / release
        dst_mods.parent.mkdir(parents=True, exist_ok=True)
        if dst_mods.exists():
            # Modules built in the chroot (zfs variant: updates/dkms) join the kernel's tree.
            if (dst_mods / "updates").is_dir():
                shutil.move(str(dst_mods / "updates"), str(kmods / "updates"))
            shutil.rmtree(dst_mods)
        shutil.move(str(kmods), str(dst_mods))
        _run(["chroot", str(rootfs), "depmod", "-a", release], log)
        keep = set(_module_closure(dst_mods, r["modules"]))
        for ko in list(dst_mods.rglob("*.ko*")):
            if str(ko.relative_to(dst_mods)) not in keep:
                ko.unlink()
        _run(["chroot", str(rootfs), "depmod", "-a", release], log)
        for sub in ("build", "source"):
            if (dst_mods / sub).is_symlink():
                (dst_mods / sub).unlink()

        # 4. Init, module list, fallback agent.
        (rootfs / "etc" / "storpath-lab").mkdir(parents=True, exist_ok=True)
        (rootfs / "etc" / "storpath-lab" / "modules").write_text("\n".join(r["modules"]) + "\n")
        (rootfs / "etc" / "storpath-lab" / "recipe.json").write_text(json.dumps(r, indent=1))
        (rootfs / "etc" / "hostname").write_text("storpath-lab\n")
        init = rootfs / "init"
        init.write_text(r["init"])
        init.chmod(0o755)
        agent = rootfs / "usr" / "local" / "sbin" / "storpath-lab-agent"
        agent.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(HERE / "guest" / "agent.py", agent)
        agent.chmod(0o755)

        # 5. Pack.
        out = work / "out"
        out.mkdir()
        write_newc_cpio(rootfs, out / "initrd.cpio")
        shutil.copy2(vmlinuz, out / "vmlinuz")
        (out / "image.json").write_text(json.dumps({
            "recipe": r, "hash": key, "kernel_release": release,
            "initrd_bytes": (out / "initrd.cpio").stat().st_size,
            "build_seconds": round(time.monotonic() - t0, 1),
        }, indent=1))
        if final.exists():
            shutil.rmtree(final)
        os.rename(out, final)
        # Older images are of no further use: keep the cache to one image per variant.
        prefix = "" if variant == "default" else re.escape(variant) + "-"
        for other in root.iterdir():
            if other != final and re.fullmatch(prefix + r"[0-9a-f]{16}(\.build-.*)?", other.name):
                shutil.rmtree(other, ignore_errors=True)
        log(f"lab image {key} built in {time.monotonic() - t0:.0f} s: {final}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Image.load(final)


# --------------------------------------------------------------------------------------
# Topologies: each a function that, given a directory for disk images, returns the QEMU
# arguments and kernel parameters of one emulated machine. The EXPECT_* tables describe
# what the kernel must see; tests assert against them.
# --------------------------------------------------------------------------------------

@dataclasses.dataclass
class Topology:
    name: str
    qemu_args: List[str]
    kernel_args: List[str] = dataclasses.field(default_factory=list)
    memory_mib: int = 1024
    cpus: int = 1
    description: str = ""


def _disk(diskdir: Path, name: str, size_mib: int) -> Path:
    p = diskdir / f"{name}.raw"
    with open(p, "wb") as f:
        f.truncate(size_mib * 1024 * 1024)
    return p


def _drive(diskdir: Path, drive_id: str, size_mib: int) -> List[str]:
    path = _disk(diskdir, drive_id, size_mib)
    return ["-drive", f"if=none,id={drive_id},format=raw,file={path},cache=unsafe"]


# NVMe controllers behind root ports of different capability. The emulated endpoint always
# trains at 2.5 GT/s x1, so every port shows a link below its own capability.
NVME_DRIVES = [
    # serial, port speed (GT/s, QEMU spelling), port width, NUMA node of the host bridge
    {"serial": "SPLAB0G4X4", "port_speed": "16", "port_width": 4, "numa_node": 0},
    {"serial": "SPLAB1G3X4", "port_speed": "8", "port_width": 4, "numa_node": 0},
    {"serial": "SPLAB2G3X2", "port_speed": "8", "port_width": 2, "numa_node": 0},
    {"serial": "SPLAB3NUMA1", "port_speed": "8", "port_width": 4, "numa_node": 1},
]
NVME_ENDPOINT_SPEED = "2.5 GT/s PCIe"
NVME_ENDPOINT_WIDTH = 1


def topology_nvme(diskdir: Path) -> Topology:
    half = 768
    args = [
        "-object", f"memory-backend-ram,id=mem0,size={half}M",
        "-object", f"memory-backend-ram,id=mem1,size={half}M",
        "-numa", "node,nodeid=0,cpus=0,memdev=mem0",
        "-numa", "node,nodeid=1,cpus=1,memdev=mem1",
        # A second PCIe host bridge whose devices belong to NUMA node 1.
        "-device", "pxb-pcie,id=pxb1,bus_nr=128,numa_node=1,bus=pcie.0,addr=0x10",
    ]
    for i, d in enumerate(NVME_DRIVES):
        bus = "pxb1" if d["numa_node"] == 1 else "pcie.0"
        addr = ",addr=0x0" if d["numa_node"] == 1 else f",addr=0x{4 + i:x}"
        args += ["-device", f"pcie-root-port,id=rp{i},bus={bus},chassis={i + 1},slot={i + 1}"
                 f"{addr},x-speed={d['port_speed']},x-width={d['port_width']}"]
        args += _drive(diskdir, f"nvd{i}", 128)
        args += ["-device", f"nvme,id=nvme{i},serial={d['serial']},bus=rp{i}",
                 "-device", f"nvme-ns,drive=nvd{i},bus=nvme{i},nsid=1"]
    return Topology("nvme", args, memory_mib=2 * half, cpus=2,
                    description="4 NVMe behind 16GT/s x4, 8GT/s x4, 8GT/s x2 root ports, "
                                "one behind a pxb-pcie host bridge on NUMA node 1")


# SAS: an LSI SAS1068 HBA with two disks (8 phys, 2 attached). SATA: the q35 board's own
# AHCI controller with disks on ports 1 and 2 (ata1, ata2); the kernel is told to hold ata1
# at 3.0 Gbps and ata2 at 1.5 Gbps.
SAS_DISKS = [
    {"id": "sas0", "scsi_id": 0, "wwn": "0x5000c50015ea71a0", "serial": "SPLABSAS0"},
    {"id": "sas1", "scsi_id": 1, "wwn": "0x5000c50015ea71b0", "serial": "SPLABSAS1"},
]
SAS_PHYS = 8
SATA_DISKS = [
    {"id": "sata0", "bus": "ide.0", "serial": "SPLABSATA0", "link": "link1", "force": "3.0Gbps"},
    {"id": "sata1", "bus": "ide.1", "serial": "SPLABSATA1", "link": "link2", "force": "1.5Gbps"},
]


def topology_sas(diskdir: Path) -> Topology:
    args = ["-device", "pcie-root-port,id=rp0,bus=pcie.0,chassis=1,slot=1,addr=0x4,"
                       "x-speed=8,x-width=8",
            "-device", "mptsas1068,id=sas0,bus=rp0"]
    for d in SAS_DISKS:
        args += _drive(diskdir, d["id"], 64)
        args += ["-device", f"scsi-hd,drive={d['id']},bus=sas0.0,scsi-id={d['scsi_id']},"
                            f"wwn={d['wwn']},serial={d['serial']}"]
    for d in SATA_DISKS:
        args += _drive(diskdir, d["id"], 64)
        args += ["-device", f"ide-hd,drive={d['id']},bus={d['bus']},serial={d['serial']}"]
    force = ",".join(f"{i + 1}:{d['force']}" for i, d in enumerate(SATA_DISKS))
    return Topology("sas", args, kernel_args=[f"libata.force={force}"],
                    description="mptsas1068 with 2 SAS disks; AHCI with 2 SATA disks held "
                                "at 3.0 and 1.5 Gbps")


# md: small disks to build arrays from in the guest: virtio disks vda..vdg and two NVMe.
MD_VIRTIO_DISKS = 7
MD_NVME_SERIALS = ["SPLABMD0", "SPLABMD1"]


def topology_md(diskdir: Path) -> Topology:
    args = []
    for i in range(MD_VIRTIO_DISKS):
        args += _drive(diskdir, f"vd{i}", 64)
        args += ["-device", f"virtio-blk-pci,drive=vd{i},serial=SPLABVD{i}"]
    for i, serial in enumerate(MD_NVME_SERIALS):
        args += ["-device", f"pcie-root-port,id=rp{i},bus=pcie.0,chassis={i + 1},"
                            f"slot={i + 1},x-speed=8,x-width=4"]
        args += _drive(diskdir, f"mdnvd{i}", 64)
        args += ["-device", f"nvme,id=mdnvme{i},serial={serial},bus=rp{i}",
                 "-device", f"nvme-ns,drive=mdnvd{i},bus=mdnvme{i},nsid=1"]
    return Topology("md", args, description="7 virtio disks and 2 NVMe for md arrays")


# zfs: pools built in the guest (needs the "zfs" image variant): 8 virtio disks for a
# raidz2 (vda-vdh), 4 for a raidz1 (vdi-vdl), 2 for cache (vdm, vdn), 1 spare disk (vdo) to
# replace with, and 2 NVMe for a mirrored log. 128 MiB each (ZFS needs 64 MiB a vdev).
ZFS_VIRTIO_DISKS = 15
ZFS_NVME_SERIALS = ["SPLABZIL0", "SPLABZIL1"]


def topology_zfs(diskdir: Path) -> Topology:
    args = []
    for i in range(ZFS_VIRTIO_DISKS):
        args += _drive(diskdir, f"zd{i}", 128)
        args += ["-device", f"virtio-blk-pci,drive=zd{i},serial=SPLABZD{i}"]
    for i, serial in enumerate(ZFS_NVME_SERIALS):
        args += ["-device", f"pcie-root-port,id=rp{i},bus=pcie.0,chassis={i + 1},"
                            f"slot={i + 1},x-speed=8,x-width=4"]
        args += _drive(diskdir, f"zilnvd{i}", 128)
        args += ["-device", f"nvme,id=zilnvme{i},serial={serial},bus=rp{i}",
                 "-device", f"nvme-ns,drive=zilnvd{i},bus=zilnvme{i},nsid=1"]
    return Topology("zfs", args, memory_mib=2048, cpus=2,
                    description="15 virtio disks and 2 NVMe for ZFS pools (image variant zfs)")


TOPOLOGIES: Dict[str, Callable[[Path], Topology]] = {
    "nvme": topology_nvme,
    "sas": topology_sas,
    "md": topology_md,
}

# Topologies that boot an image variant other than the default one; kept out of
# TOPOLOGIES (whose machines all have a committed sysfs capture under captures/).
VARIANT_TOPOLOGIES: Dict[str, Callable[[Path], Topology]] = {"zfs": topology_zfs}
TOPOLOGY_VARIANTS: Dict[str, str] = {"zfs": "zfs"}
ALL_TOPOLOGIES: Dict[str, Callable[[Path], Topology]] = {**TOPOLOGIES, **VARIANT_TOPOLOGIES}


# --------------------------------------------------------------------------------------
# Booting and talking to a guest.
# --------------------------------------------------------------------------------------

class LabError(RuntimeError):
    pass


@dataclasses.dataclass
class Result:
    cmd: str
    rc: int
    stdout: str
    stderr: str
    seconds: float

    def check(self) -> "Result":
        if self.rc != 0:
            raise LabError(f"guest command failed (rc={self.rc}): {self.cmd}\n"
                           f"stdout:\n{self.stdout}\nstderr:\n{self.stderr}")
        return self


GUEST_ENV = {
    "PYTHONPATH": "/mnt/repo/exporter",
    "PYTHONDONTWRITEBYTECODE": "1",
}


class Guest:
    """One booted lab machine. Use as a context manager, or call start()/stop()."""

    def __init__(self, topology: str, image: Optional[Image] = None,
                 workdir: Optional[Path] = None, repo: Path = REPO_ROOT,
                 extra_kernel_args: Optional[List[str]] = None,
                 log: Callable[[str], None] = lambda s: None):
        if topology not in ALL_TOPOLOGIES:
            raise LabError(f"unknown topology {topology!r}; known: {', '.join(ALL_TOPOLOGIES)}")
        self.topology_name = topology
        self.image = image
        self.repo = repo
        self.extra_kernel_args = extra_kernel_args or []
        self.log = log
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"storpath-lab-{topology}-"))
        self.out_dir = self.workdir / "out"
        self.console_log = self.workdir / "console.log"
        self.proc: Optional[subprocess.Popen] = None
        self.sock: Optional[socket.socket] = None
        self._buf = b""
        self._next_id = 1
        self.boot_seconds: Optional[float] = None
        self.hello: dict = {}

    # -- life cycle --------------------------------------------------------------------

    def qemu_command(self, sock_path: str) -> List[str]:
        image = self.image
        diskdir = self.workdir / "disks"
        diskdir.mkdir(parents=True, exist_ok=True)
        topo = ALL_TOPOLOGIES[self.topology_name](diskdir)
        self.topology = topo
        thread = os.environ.get("STORPATH_LAB_TCG_THREAD", "single")
        cmdline = ["console=ttyS0", "rdinit=/init", "panic=-1", "quiet",
                   "tsc=reliable"] + topo.kernel_args + self.extra_kernel_args
        return [
            "qemu-system-x86_64",
            "-machine", "q35", "-accel", f"tcg,thread={thread}",
            "-m", str(topo.memory_mib),
            "-smp", f"{topo.cpus},sockets={topo.cpus},cores=1,threads=1",
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-kernel", str(image.kernel), "-initrd", str(image.initrd),
            "-append", " ".join(cmdline),
            "-serial", f"file:{self.console_log}",
            "-device", "virtio-serial-pci,id=vser0",
            "-chardev", f"socket,id=ctl,path={sock_path}",
            "-device", "virtserialport,bus=vser0.0,chardev=ctl,name=storpath.ctl",
            "-virtfs", f"local,path={self.repo},mount_tag=repo,security_model=none,readonly=on",
            "-virtfs", f"local,path={self.out_dir},mount_tag=out,security_model=none",
        ] + topo.qemu_args

    def start(self, timeout: float = 300) -> "Guest":
        if self.image is None:
            self.image = build(log=self.log,
                               variant=TOPOLOGY_VARIANTS.get(self.topology_name, "default"))
        if not shutil.which("qemu-system-x86_64"):
            raise LabError("qemu-system-x86_64 is not installed")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        # A short socket path: unix socket paths are limited to 108 bytes.
        self._sockdir = tempfile.mkdtemp(prefix="splab-")
        sock_path = os.path.join(self._sockdir, "ctl")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(sock_path)
        listener.listen(1)
        cmd = self.qemu_command(sock_path)
        (self.workdir / "qemu-command").write_text(" ".join(shlex.quote(c) for c in cmd) + "\n")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                     stdout=open(self.workdir / "qemu.log", "wb"),
                                     stderr=subprocess.STDOUT)
        listener.settimeout(0.5)
        deadline = t0 + 30
        try:
            while True:
                try:
                    self.sock, _ = listener.accept()
                    break
                except socket.timeout:
                    if self.proc.poll() is not None or time.monotonic() > deadline:
                        raise LabError("QEMU did not connect its control channel:\n"
                                       + self._diagnostics())
        finally:
            listener.close()
        self.hello = self._receive(deadline=t0 + timeout)
        if self.hello.get("event") != "ready":
            raise LabError(f"unexpected first message from the guest: {self.hello}")
        self.boot_seconds = time.monotonic() - t0
        self.log(f"lab guest {self.topology_name} ready after {self.boot_seconds:.1f} s")
        return self

    def stop(self, timeout: float = 30) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                if self.sock:
                    self._send({"op": "poweroff"})
                self.proc.wait(timeout=timeout)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        if self.sock:
            self.sock.close()
            self.sock = None
        if getattr(self, "_sockdir", None):
            shutil.rmtree(self._sockdir, ignore_errors=True)
        # The disk images are big (sparse) files; drop them unless asked to keep everything.
        if not os.environ.get("STORPATH_LAB_KEEP"):
            shutil.rmtree(self.workdir / "disks", ignore_errors=True)
            if self._own_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "Guest":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- channel -----------------------------------------------------------------------

    def _diagnostics(self) -> str:
        parts = []
        for f in ("qemu.log", "console.log"):
            p = self.workdir / f
            if p.exists():
                text = p.read_text(errors="replace")
                parts.append(f"--- {f} (last 3000 chars) ---\n{text[-3000:]}")
        return "\n".join(parts)

    def _send(self, msg: dict) -> None:
        self.sock.sendall(json.dumps(msg).encode() + b"\n")

    def _receive(self, deadline: float) -> dict:
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LabError("timed out waiting for the guest\n" + self._diagnostics())
            self.sock.settimeout(min(remaining, 1.0))
            try:
                chunk = self.sock.recv(1 << 16)
            except socket.timeout:
                if self.proc.poll() is not None:
                    raise LabError("QEMU exited\n" + self._diagnostics())
                continue
            if not chunk:
                raise LabError("the guest closed its control channel\n" + self._diagnostics())
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def run(self, cmd: str, timeout: float = 120, check: bool = True,
            env: Optional[Dict[str, str]] = None, stdin: Optional[bytes] = None) -> Result:
        """Run a shell command in the guest as root and wait for it.

        A command that leaves a process running in the background must redirect that
        process's output (see spawn()), or the call waits until the process ends."""
        req_id = self._next_id
        self._next_id += 1
        merged = dict(GUEST_ENV)
        merged.update(env or {})
        req = {"id": req_id, "op": "run", "cmd": cmd, "timeout": timeout, "env": merged}
        if stdin is not None:
            req["stdin_b64"] = base64.b64encode(stdin).decode()
        self._send(req)
        resp = self._receive(deadline=time.monotonic() + timeout + 30)
        if resp.get("id") != req_id:
            raise LabError(f"out-of-order reply from the guest: {resp}")
        res = Result(cmd, resp["rc"],
                     base64.b64decode(resp["stdout_b64"]).decode(errors="replace"),
                     base64.b64decode(resp["stderr_b64"]).decode(errors="replace"),
                     resp["seconds"])
        return res.check() if check else res

    def sh(self, cmd: str, **kw) -> str:
        """Run a command that must succeed; return its stdout."""
        return self.run(cmd, **kw).stdout

    def read(self, path: str) -> str:
        """Content of one guest file, trailing newline removed."""
        return self.run(f"cat {shlex.quote(path)}").stdout.rstrip("\n")

    def read_many(self, *patterns: str) -> Dict[str, Optional[str]]:
        """Contents of guest files (shell glob patterns allowed) in one round trip:
        {path: text without trailing newline, or None if unreadable}."""
        script = ("for f in " + " ".join(patterns) + "; do "
                  "if v=$(cat \"$f\" 2>/dev/null); then printf '%s\\036%s\\037' \"$f\" \"$v\"; "
                  "else printf '%s\\036\\035\\037' \"$f\"; fi; done")
        out = self.run(script).stdout
        res: Dict[str, Optional[str]] = {}
        for rec in out.split("\x1f"):
            if "\x1e" in rec:
                k, v = rec.split("\x1e", 1)
                res[k] = None if v == "\x1d" else v
        return res

    def realpath(self, path: str) -> str:
        return self.run(f"readlink -f {shlex.quote(path)}").stdout.strip()

    def spawn(self, cmd: str, name: str) -> int:
        """Start a background process in the guest; its output goes to /tmp/NAME.log."""
        out = self.run(f"setsid sh -c {shlex.quote(cmd)} > /tmp/{name}.log 2>&1 < /dev/null & "
                       f"echo $!").stdout
        return int(out.strip())

    def wait_http(self, url: str, timeout: float = 60) -> str:
        """Fetch URL inside the guest, retrying until it answers; return the body."""
        script = ("import sys,time,urllib.request\n"
                  "end=time.time()+float(sys.argv[2])\n"
                  "while True:\n"
                  "    try:\n"
                  "        sys.stdout.write(urllib.request.urlopen(sys.argv[1],timeout=30)"
                  ".read().decode()); break\n"
                  "    except Exception as e:\n"
                  "        if time.time()>end: raise\n"
                  "        time.sleep(0.5)\n")
        return self.run(f"python3 -c {shlex.quote(script)} {shlex.quote(url)} {timeout}",
                        timeout=timeout + 60).stdout


def boot(topology: str, **kw) -> Guest:
    return Guest(topology, **kw).start()


# --------------------------------------------------------------------------------------
# Fault set-ups shared by the capture command and the tests.
# --------------------------------------------------------------------------------------

MD_SETUP = r"""
set -e
echo 1 > /proc/sys/dev/raid/speed_limit_min
# md0: a clean raid1 on two virtio disks.
mdadm --create /dev/md0 --run --level=1 --raid-devices=2 --metadata=1.2 --assume-clean /dev/vda /dev/vdb
# md1: raid0 on two virtio disks.
mdadm --create /dev/md1 --run --level=0 --raid-devices=2 --metadata=1.2 /dev/vdc /dev/vdd
# md2: raid1 on the two NVMe namespaces, then one member failed: degraded.
# (sysfs pads NVMe serials with spaces to 20 characters.)
ns_of() { for c in /sys/class/nvme/nvme*; do [ "$(tr -d ' ' < $c/serial)" = "$1" ] && echo "$(basename $c)n1"; done; true; }
N0=$(ns_of SPLABMD0)
N1=$(ns_of SPLABMD1)
mdadm --create /dev/md2 --run --level=1 --raid-devices=2 --metadata=1.2 --assume-clean /dev/$N0 /dev/$N1
mdadm /dev/md2 --fail /dev/$N1
# md3: raid5 on three virtio disks; mdadm builds it degraded and recovers onto the last
# member, throttled so the capture shows the recovery in progress.
mdadm --create /dev/md3 --run --level=5 --raid-devices=3 --metadata=1.2 /dev/vde /dev/vdf /dev/vdg
echo 64 > /sys/block/md3/md/sync_speed_max
sleep 2
cat /proc/mdstat
"""


# One namespace reformatted to 4 KiB LBAs, so a capture holds both block sizes.
NVME_SETUP = r"""
set -e
for c in /sys/class/nvme/nvme*; do
    if [ "$(tr -d ' ' < $c/serial)" = SPLAB1G3X4 ]; then nvme format /dev/$(basename $c)n1 --lbaf=4 --force; fi
done
sleep 1
"""


# ZFS (topology zfs, image variant zfs): pools made like the fixtures' from the disks'
# /dev/disk/by-id names (so `zpool status -L` differs from `zpool status`), then degraded,
# corrupted and scrubbed, with zpool's output captured after each step.
ZFS_SETUP = r"""
set -e
modprobe zfs
udevadm settle --timeout=60
byid() { for l in /dev/disk/by-id/*; do case "$l" in *-part*) continue;; esac
         [ "$(readlink -f "$l")" = "/dev/$1" ] && { echo "$l"; return; }; done; echo "/dev/$1"; }
ns_of() { for c in /sys/class/nvme/nvme*; do [ "$(tr -d ' ' < $c/serial)" = "$1" ] && echo "$(basename $c)n1"; done; true; }
Z1=""; for d in vda vdb vdc vdd vde vdf vdg vdh; do Z1="$Z1 $(byid $d)"; done
Z2=""; for d in vdi vdj vdk vdl; do Z2="$Z2 $(byid $d)"; done
L0=$(byid $(ns_of SPLABZIL0)); L1=$(byid $(ns_of SPLABZIL1))
zpool create -o ashift=13 zpool1 raidz2 $Z1
zpool create zpool2 raidz1 $Z2 log mirror $L0 $L1 cache $(byid vdm) $(byid vdn)
dd if=/dev/urandom of=/zpool1/data bs=1M count=96 status=none
dd if=/dev/urandom of=/zpool2/data bs=1M count=64 status=none
sync
zpool scrub -w zpool2
"""

ZFS_DEGRADE = r"""
set -e
zpool offline zpool1 $(ls /dev/disk/by-id/virtio-SPLABZD2 2>/dev/null || echo vdc)
# Overwrite part of one raidz1 member of zpool2 behind ZFS's back (data region only:
# the labels sit in the first and last 512 KiB), so the scrub finds checksum errors.
dd if=/dev/urandom of=/dev/vdj1 bs=1M seek=8 count=48 conv=notrunc status=none
sync
echo 3 > /proc/sys/vm/drop_caches
zpool scrub zpool1
zpool scrub zpool2
"""

ZFS_CAPTURE_HEADER = """\
# Output of OpenZFS 2.1 (Debian bookworm contrib: zfs-dkms + zfsutils-linux) on a real kernel under
# QEMU (tests/lab, topology zfs), made by `python3 tests/lab/lab.py capture zfs` with LC_ALL=C TZ=UTC.
# zpool1: raidz2 of 8 virtio disks, ashift=13; zpool2: raidz1 of 4 virtio disks, mirrored log on 2 NVMe,
# 2 cache disks; pools created from /dev/disk/by-id names. Phases: healthy (zpool2 scrubbed);
# vdc offlined in zpool1 and vdj1 overwritten in zpool2, scrubs started; zpool1's scrub paused;
# both scrubs finished; vdc back online and resilvered.
# Layout: '=== PHASE <name>', then '### <command>' and its stdout ('[rc=N stderr]': its stderr).
"""

ZFS_CAPTURE_COMMANDS = [
    "zpool status -p",
    "zpool status -p -L",
    "zpool list -Hp -o name,size,alloc,free,frag,cap,health,ashift",
    "grep -H . /proc/spl/kstat/zfs/*/state",
]


def zfs_capture_text(guest: Guest, log: Callable[[str], None] = lambda s: None) -> str:
    """Run ZFS_SETUP and the fault steps in a zfs guest; return the sectioned capture
    (tests/unit/data/zpool_2.1_lab.txt): '=== PHASE <name>' lines, then '### <command>'
    and its stdout; '### <command> [rc=N stderr]' when it failed."""
    env = {"LC_ALL": "C", "LANG": "C", "TZ": "UTC"}
    out: List[str] = []

    def cap(cmds: List[str]) -> None:
        for c in cmds:
            res = guest.run(c, check=False, env=env, timeout=300)
            if res.rc == 0:
                out.append(f"### {c}\n{res.stdout}")
            else:
                out.append(f"### {c}\n{res.stdout}")
                out.append(f"### {c} [rc={res.rc} stderr]\n{res.stderr}")

    def phase(name: str) -> None:
        log(f"zfs capture: phase {name}")
        out.append(f"=== PHASE {name}\n")

    guest.sh(ZFS_SETUP, env=env, timeout=1800)
    phase("healthy")
    cap(["zpool version", "uname -r", "zpool status -j --json-int -L"] + ZFS_CAPTURE_COMMANDS)
    guest.sh(ZFS_DEGRADE, env=env, timeout=600)
    phase("degraded-scrub-running")
    cap(ZFS_CAPTURE_COMMANDS)
    guest.sh("zpool scrub -p zpool1", env=env)
    phase("scrub-paused")
    cap(ZFS_CAPTURE_COMMANDS[:2])
    guest.sh("zpool scrub zpool1 && zpool wait -t scrub zpool1 && zpool wait -t scrub zpool2",
             env=env, timeout=1800)
    phase("degraded-scrub-finished")
    cap(ZFS_CAPTURE_COMMANDS)
    guest.sh("zpool online zpool1 $(ls /dev/disk/by-id/virtio-SPLABZD2 2>/dev/null || echo vdc) && "
             "zpool wait -t resilver zpool1", env=env, timeout=1800)
    phase("online-resilvered")
    cap(ZFS_CAPTURE_COMMANDS)
    return "".join(s if s.endswith("\n") else s + "\n" for s in out)


def nvme_ctrl_by_serial(guest: Guest) -> Dict[str, str]:
    """serial -> controller name (nvme0...), read in the guest."""
    out = guest.sh("for c in /sys/class/nvme/nvme*; do echo \"$(basename $c) $(cat $c/serial)\"; done")
    res = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            res[parts[1]] = parts[0]
    return res


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------

def _print(s: str) -> None:
    print(s, file=sys.stderr, flush=True)


def capture(guest: Guest, name: str, dest_dir: Path = CAPTURES_DIR) -> Path:
    guest.sh(f"python3 /mnt/repo/tests/lab/guest/capture.py /mnt/out/{name}.tar.gz",
             timeout=300)
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / f"{name}.tar.gz"
    shutil.copyfile(guest.out_dir / f"{name}.tar.gz", dest)
    return dest


class Scrape:
    """One parsed /metrics exposition (needs prometheus_client on the host)."""

    def __init__(self, text: str):
        from prometheus_client.parser import text_string_to_metric_families
        self.text = text
        self.samples = []
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                self.samples.append((s.name, dict(s.labels), s.value))

    def series(self, name: str, **labels) -> list:
        """[(labels, value)] of NAME whose labels include the given ones."""
        return [(lab_, v) for n, lab_, v in self.samples
                if n == name and all(lab_.get(k) == str(val) for k, val in labels.items())]

    def value(self, name: str, **labels) -> Optional[float]:
        """The value of the one series matching, None when there is none."""
        found = self.series(name, **labels)
        if len(found) > 1:
            raise AssertionError(f"{name}{labels} is not unique: {found}")
        return found[0][1] if found else None

    def label_sets(self, name: str, **labels) -> list:
        return [lab_ for lab_, _ in self.series(name, **labels)]


def exporter_metrics(guest: Guest, port: int = 9866, extra_args: str = "") -> str:
    """Start the exporter in the guest (once) and return one scrape of /metrics."""
    if not getattr(guest, "_exporter_pid", None):
        guest._exporter_pid = guest.spawn(
            f"exec python3 -m storpath serve --web.listen-address=:{port} "
            f"--path.sysfs=/sys --path.procfs=/proc {extra_args}", "storpath")
    return guest.wait_http(f"http://127.0.0.1:{port}/metrics")


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description="storpath lab: QEMU guests with emulated storage")
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build (or reuse) the cached kernel + initramfs")
    b.add_argument("--force", action="store_true")
    b.add_argument("--variant", choices=IMAGE_VARIANTS, default="default",
                   help="image variant (zfs: OpenZFS from contrib, built with dkms)")
    for name, helptext in (("boot", "boot, show the kernel's view of the storage, power off"),
                           ("shell", "boot and run shell commands read from stdin"),
                           ("capture", "boot and snapshot sysfs into tests/lab/captures"),
                           ("metrics", "boot, run the exporter, print /metrics")):
        s = sub.add_parser(name, help=helptext)
        s.add_argument("topology", choices=sorted(ALL_TOPOLOGIES))
    r = sub.add_parser("run", help="boot, run one command, power off")
    r.add_argument("topology", choices=sorted(ALL_TOPOLOGIES))
    r.add_argument("command", nargs=argparse.REMAINDER)
    sub.add_parser("topologies", help="list the topologies")
    args = p.parse_args(argv)

    if args.cmd == "topologies":
        for name, fn in ALL_TOPOLOGIES.items():
            with tempfile.TemporaryDirectory() as d:
                t = fn(Path(d))
            print(f"{name:6} {t.description}")
        return 0
    t0 = time.monotonic()
    variant = getattr(args, "variant", None) or TOPOLOGY_VARIANTS.get(
        getattr(args, "topology", ""), "default")
    image = build(force=getattr(args, "force", False), log=_print, variant=variant)
    _print(f"image ready in {time.monotonic() - t0:.1f} s: {image.directory}")
    if args.cmd == "build":
        return 0
    with Guest(args.topology, image=image, log=_print) as g:
        _print(f"guest ready in {g.boot_seconds:.1f} s (kernel {g.hello.get('release')}, "
               f"guest uptime {g.hello.get('uptime')} s)")
        if args.cmd == "boot":
            print(g.sh("lspci -nn; echo; for d in /sys/bus/pci/devices/*; do "
                       "[ -f $d/current_link_speed ] && echo \"$(basename $d) "
                       "cur=$(cat $d/current_link_speed) x$(cat $d/current_link_width) "
                       "max=$(cat $d/max_link_speed) x$(cat $d/max_link_width) "
                       "numa=$(cat $d/numa_node)\"; done; echo; lsblk 2>/dev/null || "
                       "ls /sys/block"))
        elif args.cmd == "run":
            cmd = " ".join(shlex.quote(c) for c in args.command if c != "--")
            res = g.run(cmd, check=False, timeout=3600)
            sys.stdout.write(res.stdout)
            sys.stderr.write(res.stderr)
            return res.rc
        elif args.cmd == "shell":
            _print("type shell commands, one per line; end with EOF (Ctrl-D)")
            for line in sys.stdin:
                if not line.strip():
                    continue
                res = g.run(line, check=False, timeout=3600)
                sys.stdout.write(res.stdout)
                sys.stdout.write(res.stderr)
                if res.rc:
                    print(f"[rc={res.rc}]")
                sys.stdout.flush()
        elif args.cmd == "capture":
            if args.topology == "md":
                g.sh(MD_SETUP, timeout=300)
            elif args.topology == "nvme":
                g.sh(NVME_SETUP, timeout=300)
            elif args.topology == "zfs":
                text = zfs_capture_text(g, log=_print)
                dest = REPO_ROOT / "tests" / "unit" / "data" / "zpool_2.1_lab.txt"
                dest.write_text(ZFS_CAPTURE_HEADER + text)
                _print(f"wrote {dest} ({dest.stat().st_size} bytes)")
                return 0
            dest = capture(g, args.topology)
            _print(f"wrote {dest} ({dest.stat().st_size} bytes)")
        elif args.cmd == "metrics":
            t1 = time.monotonic()
            print(exporter_metrics(g))
            _print(f"boot to first scrape: {time.monotonic() - t1 + g.boot_seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
