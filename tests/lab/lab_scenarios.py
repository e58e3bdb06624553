"""What tests do in a guest: array, namespace and pool setups, fault injection, captures of
zpool output."""

from __future__ import annotations

from typing import Callable, Dict, List

from lab_guest import Guest

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
# multipath: the PCIe NVMe subsystem's second controller removed while the host runs, the
# second tcp path of an NVMe/TCP subsystem (the kernel's target over the loopback) lost and
# restored, and a dm-multipath map over the two sd paths of one SAS disk with one path
# failed and restored.
# --------------------------------------------------------------------------------------

# Shell helpers: the controller below a root port, a controller's port and PCI address, the head namespace of the
# subsystem (nvmeXnY, the multipath node; the per-path nvmeXcYnZ are hidden) and the sd
# devices of the shared SAS disk.
MULTIPATH_HELPERS = r"""
ctrl_of() { for c in /sys/class/nvme/nvme*; do case "$(readlink -f $c/device)" in */$1/*) basename $c;; esac; done; true; }
port_of() { basename "$(dirname "$(readlink -f /sys/class/nvme/$1/device)")"; }
pci_of() { basename "$(readlink -f /sys/class/nvme/$1/device)"; }
head_ns() { for d in /sys/class/nvme-subsystem/nvme-subsys*; do [ "$(cat $d/subsysnqn)" = "$1" ] && for n in $d/nvme*n1; do basename $n; done; done | head -n1; }
TCP_NQN=%(tcp_nqn)s
PCI_NQN=%(pci_nqn)s
T=/sys/kernel/config/nvmet
sd_paths() { for d in /sys/block/sd*; do [ "$(cat $d/device/wwid)" = "naa.%(wwn)s" ] && basename $d; done; true; }
""" % {"wwn": "5000c50015ea7200", "tcp_nqn": "nqn.2026-11.io.storpath:lab-tcp",
       "pci_nqn": "nqn.2019-08.org.qemu:storpath-lab-multipath"}

# The map as multipathd would make it (uuid mpath-<WWID>, WWID "3" + NAA), built with
# dmsetup's multipath target directly: one priority group, round-robin over both paths.
MULTIPATH_MAP = "mpatha"
MULTIPATH_MAP_UUID = "mpath-35000c50015ea7200"
MULTIPATH_SETUP = MULTIPATH_HELPERS + r"""
set -e
set -- $(sd_paths)
[ $# -eq 2 ] || { echo "expected 2 sd paths of the shared disk, got: $*" >&2; exit 1; }
SZ=$(cat /sys/block/$1/size)
dmsetup create %(name)s --uuid %(uuid)s --table \
  "0 $SZ multipath 0 0 1 1 round-robin 0 2 1 $(cat /sys/block/$1/dev) 1000 $(cat /sys/block/$2/dev) 1000"
# No udevd in the guest: the /dev/mapper node is made here.
dmsetup mknodes %(name)s
# NVMe/TCP over the loopback: the kernel's own target (nvmet) exports a file-backed
# namespace on two ports, the host connects to both (ctrl_loss_tmo -1: a lost path is
# retried, and listed, until it comes back), so native multipath joins two tcp paths.
ip link set lo up
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
truncate -s 32M /tmp/tcp-ns.img
mkdir -p /etc/nvme
echo nqn.2014-08.org.nvmexpress:uuid:5b4e1b38-0a1c-4d2f-9c47-1f2e3d4c5b6a > /etc/nvme/hostnqn
echo 5b4e1b38-0a1c-4d2f-9c47-1f2e3d4c5b6a > /etc/nvme/hostid
mkdir $T/subsystems/$TCP_NQN
echo 1 > $T/subsystems/$TCP_NQN/attr_allow_any_host
mkdir $T/subsystems/$TCP_NQN/namespaces/1
echo -n /tmp/tcp-ns.img > $T/subsystems/$TCP_NQN/namespaces/1/device_path
# The initramfs's /tmp takes no O_DIRECT (6.1): the target's file backend must buffer.
echo 1 > $T/subsystems/$TCP_NQN/namespaces/1/buffered_io
echo 1 > $T/subsystems/$TCP_NQN/namespaces/1/enable
for p in 1 2; do
  mkdir $T/ports/$p
  echo tcp > $T/ports/$p/addr_trtype; echo ipv4 > $T/ports/$p/addr_adrfam
  echo 127.0.0.1 > $T/ports/$p/addr_traddr; echo 442$p > $T/ports/$p/addr_trsvcid
  ln -s $T/subsystems/$TCP_NQN $T/ports/$p/subsystems/$TCP_NQN
  nvme connect -t tcp -a 127.0.0.1 -s 442$p -n $TCP_NQN --ctrl-loss-tmo=-1 --reconnect-delay=2
done
# A pattern on each NVMe head namespace, read back after its second path is gone.
dd if=/dev/urandom of=/tmp/pattern bs=4096 count=16 status=none
for q in $PCI_NQN $TCP_NQN; do dd if=/tmp/pattern of=/dev/$(head_ns $q) bs=4096 oflag=direct status=none; done
dmsetup status %(name)s
""" % {"name": MULTIPATH_MAP, "uuid": MULTIPATH_MAP_UUID}

# Path B of the PCIe NVMe subsystem: its PCI function removed from the running host (the kernel
# deletes the controller, as on a surprise removal or a failed slot), and the second path
# of the map failed in the map (`dmsetup message ... fail_path`, what multipathd does when
# its checker finds a path down).
MULTIPATH_FAIL = MULTIPATH_HELPERS + r"""
set -e
B=$(ctrl_of %(b)s)
echo 1 > /sys/bus/pci/devices/$(pci_of $B)/remove
# The target stops exporting the tcp subsystem on port 2: the host's controller on it
# loses its connection and keeps reconnecting (state connecting), listed but not live.
rm $T/ports/2/subsystems/$TCP_NQN
set -- $(sd_paths)
dmsetup message %(name)s 0 fail_path $(cat /sys/block/$2/dev)
dmsetup status %(name)s
""" % {"b": "0000:00:05.0", "name": MULTIPATH_MAP}

MULTIPATH_RESTORE = MULTIPATH_HELPERS + r"""
set -e
set -- $(sd_paths)
dmsetup message %(name)s 0 reinstate_path $(cat /sys/block/$2/dev)
dmsetup status %(name)s
ln -s $T/subsystems/$TCP_NQN $T/ports/2/subsystems/$TCP_NQN
# The host reconnects within its reconnect delay (2 s).
for i in $(seq 60); do
  n=0; for c in /sys/class/nvme/nvme*; do [ "$(cat $c/subsysnqn)" = "$TCP_NQN" ] && [ "$(cat $c/state)" = live ] && n=$((n+1)); done
  [ $n -eq 2 ] && break; sleep 1
done
[ $n -eq 2 ]
""" % {"name": MULTIPATH_MAP}

# The other path keeps serving: the pattern reads back through the head namespace
# (uncached), and the map reads through its remaining path.
MULTIPATH_READ_BACK = MULTIPATH_HELPERS + r"""
set -e
for q in $PCI_NQN $TCP_NQN; do
  dd if=/dev/$(head_ns $q) of=/tmp/readback bs=4096 count=16 iflag=direct status=none
  cmp /tmp/pattern /tmp/readback
done
dd if=/dev/mapper/%(name)s of=/dev/null bs=4096 count=64 iflag=direct status=none
echo served
""" % {"name": MULTIPATH_MAP}

# The three captures: all healthy; all failed; the map and the tcp path restored (the removed
# PCIe controller stays gone).
MULTIPATH_TCP_NQN = "nqn.2026-11.io.storpath:lab-tcp"
MULTIPATH_CAPTURES = ("multipath-healthy", "multipath-failed", "multipath-restored")
