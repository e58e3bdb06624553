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
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the lab_* modules beside this file

from lab_image import *  # noqa: F401,F403 (lab.X: what tests and the CLI use)
from lab_topologies import *  # noqa: F401,F403 (lab.X: what tests and the CLI use)
from lab_guest import *  # noqa: F401,F403 (lab.X: what tests and the CLI use)
from lab_scenarios import *  # noqa: F401,F403 (lab.X: what tests and the CLI use)


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


def capture_lspci(guest: Guest, name: str, dest_dir: Path = CAPTURES_DIR / "lspci") -> List[Path]:
    """`lspci -vvnn` and the sysfs snapshot of one boot, for tests/e2e/test_lspci.py (the
    same machine judged from either)."""
    guest.sh(f"lspci -vvnn > /mnt/out/{name}.lspci-vvnn.txt", timeout=120)
    written = [capture(guest, name, dest_dir)]
    dest_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(guest.out_dir / f"{name}.lspci-vvnn.txt", dest_dir / f"{name}.lspci-vvnn.txt")
    return written + [dest_dir / f"{name}.lspci-vvnn.txt"]


def capture_multipath(guest: Guest, dest_dir: Path = CAPTURES_DIR) -> List[Path]:
    """The three multipath captures: healthy, failed (NVMe path B removed, map path 2
    failed), restored (map path reinstated). Checks the surviving paths serve after the
    failure."""
    healthy, failed, restored = MULTIPATH_CAPTURES
    guest.sh(MULTIPATH_SETUP, timeout=300)
    done = [capture(guest, healthy, dest_dir)]
    guest.sh(MULTIPATH_FAIL, timeout=300)
    guest.sh(MULTIPATH_READ_BACK, timeout=300)
    done.append(capture(guest, failed, dest_dir))
    guest.sh(MULTIPATH_RESTORE, timeout=300)
    done.append(capture(guest, restored, dest_dir))
    return done


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


def scrape_until(guest: Guest, predicate: Callable[[Scrape], object], timeout: float = 240,
                 what: str = "condition") -> Scrape:
    """Scrape the guest's exporter again until predicate(scrape) is true; return that scrape.
    On timeout fails naming `what`, with the last scrape's tail and the exporter's log."""
    end = time.monotonic() + timeout
    while True:
        s = Scrape(exporter_metrics(guest))
        if predicate(s):
            return s
        if time.monotonic() > end:
            log = guest.run("tail -50 /tmp/storpath.log", check=False).stdout
            raise AssertionError(f"timed out waiting for {what}\nlast scrape:\n{s.text[-3000:]}\nexporter log:\n{log}")
        time.sleep(2)


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
                           ("lspci", "boot and write `lspci -vvnn` and a sysfs snapshot of the same boot into "
                                     "tests/lab/captures/lspci"),
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
        elif args.cmd == "lspci":
            for dest in capture_lspci(g, args.topology):
                _print(f"wrote {dest} ({dest.stat().st_size} bytes)")
        elif args.cmd == "capture":
            if args.topology == "md":
                g.sh(MD_SETUP, timeout=300)
            elif args.topology == "nvme":
                g.sh(NVME_SETUP, timeout=300)
            elif args.topology == "multipath":
                for dest in capture_multipath(g):
                    _print(f"wrote {dest} ({dest.stat().st_size} bytes)")
                return 0
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
