"""The guest image: the recipe (what goes into it, hashed into the cache key) and its build
(Debian's kernel and an uncompressed initramfs made with mmdebstrap), cached."""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

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
    "dmsetup",
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
    "dm_mod",
    "dm_multipath",
    "dm_round_robin",
    "nvme_tcp",
    "nvmet_tcp",
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
