"""md RAID: the parsers on a real kernel's output, the reader on malformed trees, the
collector's exposition, and (where the kernel has md) a live array on loop devices."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

import pytest
from prometheus_client import generate_latest

from storpath.base.background import Scheduler
from storpath.collectors.base import Context
from storpath.collectors.md import MdCollector
from storpath.report.exporter import StorpathExporter
from storpath.readers.md import (parse_first_int, parse_mdstat, parse_member_state, parse_slot, parse_sync_completed,
                                 read_md_arrays)
from storpath.base.roots import Roots
from tests.conftest import require_root, require_tool
from tests.fixtures import machines
from tests.fixtures.builders_md import mdstat_text

CAPTURE = os.path.join(os.path.dirname(__file__), "data", "md_lab_6.1.txt")


def load_capture():
    """phase -> {"files": {path: text}, "links": {path: target}} from the lab capture."""
    phases, current, path = {}, None, None
    with open(CAPTURE) as handle:
        for line in handle.read().splitlines():
            if line.startswith("#") and current is None:
                continue
            if line.startswith("=== PHASE "):
                current = phases.setdefault(int(line.split()[2]), {"files": {}, "links": {}})
                path = None
            elif line.startswith("=== FILE "):
                path = line[len("=== FILE "):]
                current["files"][path] = ""
            elif line.startswith("=== LINK "):
                link, target = line[len("=== LINK "):].split(" -> ")
                current["links"][link] = target
                path = None
            elif path is not None:
                current["files"][path] += line + "\n"
    return phases


def materialise(phase, root):
    """Write a captured phase as a sysfs/procfs tree under root."""
    for path, text in phase["files"].items():
        if not (path.startswith("/sys/block/") or path == "/proc/mdstat"):
            continue
        dest = os.path.join(root, path.lstrip("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "w") as handle:
            handle.write(text)
    for link, target in phase["links"].items():
        if re.match(r"^/sys/block/md\d+$", link):
            continue
        dest = os.path.join(root, link.lstrip("/"))
        if link.endswith("/block"):
            # the member's block device directory, kept at its captured place
            real = os.path.normpath(os.path.join(os.path.dirname(link), target))
            os.makedirs(os.path.join(root, real.lstrip("/")), exist_ok=True)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        os.symlink(target, dest)
    return Roots(sysfs=os.path.join(root, "sys"), procfs=os.path.join(root, "proc"))


@pytest.fixture(scope="module")
def capture():
    return load_capture()


# ---- /proc/mdstat ----------------------------------------------------------------

def test_mdstat_of_real_kernel_phase_one(capture):
    arrays = parse_mdstat(capture[1]["files"]["/proc/mdstat"])
    assert sorted(arrays) == ["md0", "md1"]
    md0, md1 = arrays["md0"], arrays["md1"]
    assert (md0.active, md0.level, md0.blocks) == (True, "raid0", 126976)
    assert [(m.name, m.descriptor, m.flags) for m in md0.members] == [("vdb", 1, ()), ("vda", 0, ())]
    assert md0.raid_disks is None  # raid0 prints no [n/m]
    assert (md1.raid_disks, md1.working_disks, md1.member_map) == (2, 1, "U_")
    assert [(m.name, m.flags) for m in md1.members] == [("vdd", ("faulty",)), ("vdc", ())]


def test_mdstat_of_real_kernel_recovery_check_spare(capture):
    arrays = parse_mdstat(capture[2]["files"]["/proc/mdstat"])
    assert sorted(arrays) == ["md0", "md1", "md2", "md3"]
    md2, md3 = arrays["md2"], arrays["md3"]
    assert (md2.sync_action, md2.sync_done, md2.sync_total) == ("recover", 2048, 64512)
    assert [(m.name, m.descriptor, m.flags) for m in md2.members] == [("vdf", 2, ()), ("vde", 0, ())]
    assert md3.sync_action == "check"
    assert {m.name: m.flags for m in md3.members} == {"vdg": ("spare",), "nvme1n1": ("write_mostly",),
                                                      "nvme0n1": ()}
    assert [m.name for m in arrays["md1"].members] == ["vdc"]


@pytest.mark.parametrize("text", ["", "garbage\n\x00\x01", "md0 :", "md0 : active raid1 ][\n   [2/x] [U?]\n",
                                  "Personalities : [raid1]\nunused devices: <none>\n"])
def test_mdstat_malformed_gives_what_it_holds(text):
    arrays = parse_mdstat(text)
    for array in arrays.values():
        assert array.raid_disks is None and array.members == []


def test_mdstat_pending_resync_and_bitmap_line():
    text = ("Personalities : [raid1] [raid6] [raid5] [raid4]\n"
            "md127 : active (auto-read-only) raid5 sdd1[3] sdc1[1] sdb1[0]\n"
            "      1953260544 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/3] [UUU]\n"
            "        resync=PENDING\n"
            "      bitmap: 0/8 pages [0KB], 65536KB chunk\n\n"
            "unused devices: <none>\n")
    md = parse_mdstat(text)["md127"]
    # status_resync: `if (mddev->recovery_cp < MaxSector) { seq_printf(seq, "\tresync=PENDING"); return 1; }`
    # with no sync running: a waiting sync, not an action (sysfs sync_action reads idle then).
    assert (md.read_only, md.level, md.raid_disks, md.sync_action, md.sync_waiting, md.sync_done) == (
        "auto-read-only", "raid5", 3, None, "PENDING", None)


# ---- sysfs values ----------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [("4", (4, None)), ("4 (3)", (4, None)), (None, (None, None))])
def test_first_int(text, expected):
    assert parse_first_int(text) == expected


@pytest.mark.parametrize("text", ["", "x", "-1", "Unknown"])
def test_first_int_rejects(text):
    value, why = parse_first_int(text)
    assert value is None and why


@pytest.mark.parametrize("text,expected", [("8192 / 129024", (8192, 129024)), ("none", None), ("delayed", None)])
def test_sync_completed(text, expected):
    assert parse_sync_completed(text) == (expected, None)


@pytest.mark.parametrize("text", ["8192/0", "9 / 8", "half", "1 / 2 / 3"])
def test_sync_completed_rejects(text):
    value, why = parse_sync_completed(text)
    assert value is None and why


def test_member_state_and_slot():
    assert parse_member_state("in_sync,write_mostly") == ("in_sync", "write_mostly")
    assert parse_member_state("") == ()
    assert parse_slot("none") == (None, None) and parse_slot("3") == (3, None)
    assert parse_slot("x")[1]


# ---- the reader on the real kernel's tree -------------------------------------------

def test_reader_on_real_kernel_tree(capture, tmp_path):
    roots = materialise(capture[2], str(tmp_path))
    arrays = {a.name: a for a in read_md_arrays(roots)[0]}
    md0, md1, md2, md3 = (arrays[n] for n in ("md0", "md1", "md2", "md3"))
    assert (md0.level, md0.chunk_size_bytes, md0.degraded, md0.sync_action, md0.raid_disks) == (
        "raid0", 524288, None, None, 2)
    assert (md1.degraded, md1.sync_action, md1.chunk_size_bytes) == (1, "idle", None)
    assert [(m.name, m.slot, m.state) for m in md1.members] == [("vdc", 0, ("in_sync",))]
    assert md2.sync_action == "recover" and md2.sync_completed == (8192, 129024)
    assert [(m.name, m.slot, m.state) for m in md2.members] == [("vde", 0, ("in_sync",)), ("vdf", 1, ("spare",))]
    assert md3.sync_action == "check"
    assert [(m.name, m.slot, m.state) for m in md3.members] == [
        ("nvme0n1", 0, ("in_sync",)), ("nvme1n1", 1, ("in_sync", "write_mostly")), ("vdg", None, ("spare",))]
    assert all(not a.errors for a in arrays.values())


def test_reader_faulty_member_still_attached(capture, tmp_path):
    roots = materialise(capture[1], str(tmp_path))
    md1 = {a.name: a for a in read_md_arrays(roots)[0]}["md1"]
    assert [(m.name, m.slot, m.state) for m in md1.members] == [("vdc", 0, ("in_sync",)), ("vdd", None, ("faulty",))]


def test_idle_array_has_no_sync_ratio_whatever_sync_completed_says(capture, tmp_path):
    """Older kernels print done/total in sync_completed while sync_action reads idle (no
    MD_RECOVERY_RUNNING test in sync_completed_show): nothing runs, so no ratio (not 0)."""
    roots = materialise(capture[2], str(tmp_path))
    with open(os.path.join(roots.sysfs, "block", "md1", "md", "sync_completed"), "w") as handle:
        handle.write("0 / 130816\n")
    md1 = {a.name: a for a in read_md_arrays(roots)[0]}["md1"]
    assert (md1.sync_action, md1.sync_completed, md1.sync_waiting, md1.errors) == ("idle", None, None, [])
    text = generate_latest(StorpathExporter([MdCollector(Context(roots=roots, scheduler=Scheduler()))])).decode()
    assert 'storpath_md_sync_completed_ratio{device="md1"}' not in text
    assert value(text, 'storpath_md_sync_completed_ratio{device="md2"}') == pytest.approx(8192 / 129024)


def test_reader_survives_broken_values_and_missing_sysfs(capture, tmp_path):
    roots = materialise(capture[2], str(tmp_path))
    md = os.path.join(roots.sysfs, "block", "md2", "md")
    # (raid_disks "" is not broken: raid_disks_show prints nothing for 0; see the container test)
    for name, text in (("array_state", "exploded\n"), ("sync_completed", "lots\n"), ("raid_disks", "many\n"),
                       ("sync_action", "dance\n")):
        with open(os.path.join(md, name), "w") as handle:
            handle.write(text)
    shutil.rmtree(os.path.join(roots.sysfs, "block", "md3"))  # md3 only in mdstat now
    found, problems = read_md_arrays(roots)
    arrays = {a.name: a for a in found}
    md2 = arrays["md2"]
    # What could not be read is reported beside the arrays (the snapshot step logs it).
    assert [(p.message, p.fields) for p in problems] == [
        ("md attribute unreadable", (("device", "md2"), ("err", error))) for error in md2.errors]
    assert md2.array_state is None and md2.raid_disks == 2  # raid_disks back-filled from mdstat
    assert md2.sync_action == "recover"  # from mdstat's progress line
    assert md2.sync_completed == (4096, 129024)  # mdstat counts 1 KiB blocks
    assert any("array_state" in e for e in md2.errors) and any("sync_completed" in e for e in md2.errors)
    md3 = arrays["md3"]
    assert (md3.level, md3.raid_disks, md3.degraded) == ("raid1", 2, 0)
    assert {(m.name, m.state, m.slot_known) for m in md3.members} == {
        ("vdg", ("spare",), False), ("nvme1n1", ("write_mostly",), False), ("nvme0n1", (), False)}
    assert arrays["md0"].chunk_size_bytes == 524288  # the others untouched


def test_no_md_at_all(tmp_path):
    (tmp_path / "sys" / "block").mkdir(parents=True)
    (tmp_path / "proc").mkdir()
    assert read_md_arrays(Roots(sysfs=str(tmp_path / "sys"), procfs=str(tmp_path / "proc")))[0] == []


# ---- the fixture builder matches the real kernel ----------------------------------------

def _attr_names(files, array):
    prefix = f"/sys/block/{array}/md/"
    names = set()
    for path in files:
        if path.startswith(prefix):
            rest = path[len(prefix):]
            names.add(re.sub(r"^dev-[^/]+", "dev-X", rest))
    return names - {"new_dev", "bitmap_set_bits"}  # write-only


def test_builder_writes_the_kernels_attribute_set(capture, tmp_path):
    root = str(tmp_path)
    machines.load("epyc-7443-highpoint").build(root, "md-checking")
    built = set()
    for array in ("md0", "md1"):
        base = os.path.join(root, "sys", "block", array, "md")
        names = set()
        for dirpath, _dirs, files in os.walk(base):
            for name in files:
                rel = os.path.relpath(os.path.join(dirpath, name), base)
                names.add(re.sub(r"^dev-[^/]+", "dev-X", rel))
        built.add((array, frozenset(names)))
    real_raid0 = _attr_names(capture[2]["files"], "md0")
    real_raid1 = _attr_names(capture[2]["files"], "md1")
    built = dict(built)
    assert built["md0"] == real_raid0
    assert built["md1"] == real_raid1


def test_builder_mdstat_parses_like_the_kernels():
    from tests.fixtures.builders_md import MdArraySpec, MdMemberSpec

    spec = MdArraySpec(name="md2", level="raid1", component_kib=64512, minor=2, bitmap=False, raid_disks=2,
                       sync_action="recover", sync_done_sectors=4096, sync_speed_kib=64,
                       members=[MdMemberSpec("vde", 0), MdMemberSpec("vdf", 1, state="spare", descriptor=2)])
    text = mdstat_text([spec])
    assert "md2 : active raid1 vdf[2] vde[0]\n      64512 blocks super 1.2 [2/1] [U_]\n" in text
    assert "      [>....................]  recovery =  3.1% (2048/64512) finish=" in text  # as the kernel printed
    parsed = parse_mdstat(text)["md2"]
    assert (parsed.sync_action, parsed.sync_done, parsed.working_disks) == ("recover", 2048, 1)


# ---- the collector ----------------------------------------------------------------------

def exposition(machine, variant):
    root = tempfile.mkdtemp()
    machines.load(machine).build(root, variant)
    roots = Roots(sysfs=f"{root}/sys", procfs=f"{root}/proc")
    collector = MdCollector(Context(roots=roots, scheduler=Scheduler()))
    return generate_latest(StorpathExporter([collector])).decode()


def value(text, series):
    match = re.search(r"^" + re.escape(series) + r" (\S+)$", text, re.M)
    return float(match.group(1)) if match else None


def test_collector_raid0_has_no_redundancy_metrics():
    text = exposition("epyc-7443-highpoint", "nps1")
    assert value(text, 'storpath_md_chunk_size_bytes{device="md0"}') == 524288
    assert value(text, 'storpath_md_raid_disks{device="md0"}') == 4
    assert value(text, 'storpath_md_array_state{device="md0",state="clean"}') == 1
    assert 'storpath_md_degraded_disks{device="md0"}' not in text
    assert 'storpath_md_sync_action{action="idle",device="md0"}' not in text
    members = re.findall(r'storpath_md_member_info\{device="md0",disk="(nvme\dn1)",member="\1",slot="(\d)",'
                         r'state="in_sync"\} 1.0', text)
    assert members == [("nvme1n1", "0"), ("nvme2n1", "1"), ("nvme3n1", "2"), ("nvme4n1", "3")]
    assert value(text, 'storpath_md_member_numa_nodes{device="md0"}') == 1


@pytest.mark.parametrize("variant,action,degraded,ratio", [
    ("md-degraded", "idle", 1, None), ("md-recovering", "recover", 1, 0.37), ("md-checking", "check", 0, 0.62)])
def test_collector_raid1_variants(variant, action, degraded, ratio):
    text = exposition("epyc-7443-highpoint", variant)
    assert value(text, f'storpath_md_sync_action{{action="{action}",device="md1"}}') == 1
    assert value(text, 'storpath_md_degraded_disks{device="md1"}') == degraded
    got = value(text, 'storpath_md_sync_completed_ratio{device="md1"}')
    assert (got is None) if ratio is None else got == pytest.approx(ratio, abs=0.005)
    assert value(text, 'storpath_md_level_info{device="md1",level="raid1"}') == 1
    if variant == "md-recovering":
        assert 'storpath_md_member_info{device="md1",disk="sdb",member="sdb",slot="1",state="spare"} 1.0' in text
    if variant == "md-checking":
        assert value(text, 'storpath_md_mismatch_bytes{device="md1"}') == 256 * 512


def test_collector_imsm_container_and_delayed_resync():
    text = exposition("epyc-7443-highpoint", "imsm-delayed")
    # the container: inactive, no level's redundancy, raid_disks empty (0), members spares
    assert value(text, 'storpath_md_level_info{device="md127",level="container"}') == 1
    assert value(text, 'storpath_md_array_state{device="md127",state="inactive"}') == 1
    assert value(text, 'storpath_md_raid_disks{device="md127"}') == 0
    assert 'storpath_md_degraded_disks{device="md127"}' not in text
    assert 'storpath_md_sync_waiting{device="md127"}' not in text
    assert 'storpath_md_member_info{device="md127",disk="sda",member="sda",slot="none",state="spare"} 1.0' in text
    # volume 0 resyncing, volume 1 delayed behind it: resync in sync_action, no ratio, waiting 1
    assert value(text, 'storpath_md_sync_action{action="resync",device="md126"}') == 1
    assert value(text, 'storpath_md_sync_completed_ratio{device="md126"}') == pytest.approx(0.41, abs=0.005)
    assert value(text, 'storpath_md_sync_waiting{device="md126"}') == 0
    assert value(text, 'storpath_md_sync_action{action="resync",device="md125"}') == 1
    assert 'storpath_md_sync_completed_ratio{device="md125"}' not in text
    assert value(text, 'storpath_md_sync_waiting{device="md125"}') == 1
    for volume in ("md126", "md125"):
        assert value(text, f'storpath_md_degraded_disks{{device="{volume}"}}') == 0
        assert value(text, f'storpath_md_raid_disks{{device="{volume}"}}') == 2


def test_builder_imsm_mdstat_as_the_kernel_prints_it(tmp_path):
    """md_seq_show's layout for a container (no personality) and status_resync's DELAYED."""
    root = str(tmp_path)
    machines.load("epyc-7443-highpoint").build(root, "imsm-delayed")
    with open(os.path.join(root, "proc", "mdstat")) as handle:
        text = handle.read()
    assert "md127 : inactive sdb[1](S) sda[0](S)\n      5288 blocks super external:imsm\n       \n" in text
    assert "md125 : active raid1 sdb[1] sda[0]\n      363988992 blocks super external:/md127/1 [2/2] [UU]\n" \
           "      \tresync=DELAYED\n      \n" in text
    assert text.startswith("Personalities : [raid0] [raid1] \n")
    parsed = parse_mdstat(text)
    assert not parsed["md127"].active and parsed["md127"].level is None
    assert [m.flags for m in parsed["md127"].members] == [("spare",), ("spare",)]
    assert parsed["md125"].sync_waiting == "DELAYED" and parsed["md125"].sync_action is None
    assert parsed["md126"].sync_action == "resync"
    md = os.path.join(root, "sys", "block")
    for array, expected in (("md127", "external:imsm"), ("md126", "external:/md127/0"),
                            ("md125", "external:/md127/1")):
        with open(os.path.join(md, array, "md", "metadata_version")) as handle:
            assert handle.read().strip() == expected
    assert not os.path.exists(os.path.join(md, "md127", "md", "sync_action"))  # no personality, no sync thread
    with open(os.path.join(md, "md125", "md", "sync_completed")) as handle:
        assert handle.read().strip() == "delayed"


def test_collector_on_machine_without_md():
    text = exposition("am4-x570-firecuda", "healthy")
    assert "storpath_md_array_state{" not in text


# ---- live: a real md array on loop devices -------------------------------------------------

def _md_unavailable():
    if not (os.path.exists("/proc/mdstat") or os.path.isdir("/sys/module/md_mod")):
        modprobe = shutil.which("modprobe")
        if modprobe:
            subprocess.run([modprobe, "raid1"], capture_output=True, timeout=30)
        if not os.path.exists("/proc/mdstat"):
            return ("this kernel has no md driver (no /proc/mdstat, md_mod not loadable); the real-kernel md "
                    "formats are covered by tests/unit/data/md_lab_6.1.txt, captured under QEMU (tests/lab)")
    return None


def test_live_md_array_on_loop_devices(tmp_path):
    require_root("creating loop devices and md arrays")
    require_tool("mdadm", "mdadm")
    require_tool("losetup", "mount")
    reason = _md_unavailable()
    if reason:
        pytest.skip(reason)
    loops, name = [], None
    try:
        for i in range(2):
            image = tmp_path / f"disk{i}.img"
            with open(image, "wb") as handle:
                handle.truncate(64 << 20)
            loops.append(subprocess.run(["losetup", "--find", "--show", str(image)], check=True, capture_output=True,
                                        text=True).stdout.strip())
        free = next(f"md{n}" for n in range(100, 127) if not os.path.exists(f"/sys/block/md{n}"))
        name = free
        subprocess.run(["mdadm", "--create", f"/dev/{name}", "--run", "--level=1", "--raid-devices=2",
                        "--metadata=1.2", "--assume-clean", *loops], check=True, capture_output=True, timeout=60)
        subprocess.run(["mdadm", f"/dev/{name}", "--fail", loops[1]], check=True, capture_output=True, timeout=60)
        array = {a.name: a for a in read_md_arrays(Roots())[0]}[name]
        assert (array.level, array.raid_disks, array.degraded, array.sync_action) == ("raid1", 2, 1, "idle")
        states = {m.name: m.state for m in array.members}
        assert states[os.path.basename(loops[1])] == ("faulty",)
        assert states[os.path.basename(loops[0])] == ("in_sync",)
    finally:
        if name:
            subprocess.run(["mdadm", "--stop", f"/dev/{name}"], capture_output=True, timeout=60)
        for loop in loops:
            subprocess.run(["mdadm", "--zero-superblock", loop], capture_output=True, timeout=60)
            subprocess.run(["losetup", "-d", loop], capture_output=True, timeout=60)


# ---- sysfs is authoritative; containers, waiting syncs, members without a slot file ------

def _tree(root, mdstat, arrays):
    """A sysfs/procfs tree: arrays = {name: {attribute: text, "dev-<m>/<attr>": text}}."""
    os.makedirs(os.path.join(root, "sys", "block"), exist_ok=True)
    for name, attrs in arrays.items():
        for attr, text in attrs.items():
            path = os.path.join(root, "sys", "block", name, "md", attr)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as handle:
                handle.write(text + "\n")
    os.makedirs(os.path.join(root, "proc"), exist_ok=True)
    with open(os.path.join(root, "proc", "mdstat"), "w") as handle:
        handle.write(mdstat)
    return Roots(sysfs=os.path.join(root, "sys"), procfs=os.path.join(root, "proc"))


def _read(roots):
    arrays, problems = read_md_arrays(roots)
    return {a.name: a for a in arrays}, problems


def _findings(arrays):
    from storpath.report.findings import Outcome
    from storpath.report.findings.md import check

    class Facts:
        def part(self, name):
            return arrays

        def block_devices(self):
            return []

        def pci_devices(self):
            return []

    out = Outcome("md")
    check(Facts(), out)
    return {(f.subject, f.kind): f for f in out.findings}


def _rows(arrays):
    from types import SimpleNamespace
    collector = MdCollector.__new__(MdCollector)
    rows = collector.values(SimpleNamespace(md=arrays, blocks=[], pci=[]))
    return {(family.name, labels): value for family, series in rows.items()
            for labels, value in zip(series.labels, series.values) if value is not None}


def test_sysfs_sync_completed_none_is_not_replaced_by_mdstat(tmp_path):
    # drivers/md/md.c, sync_completed_show:
    #     if (!test_bit(MD_RECOVERY_RUNNING, &mddev->recovery))
    #         return sprintf(page, "none\n");
    # while /proc/mdstat (md_seq_show -> status_resync) still prints a progress line
    # computed from curr_resync / resync_max_sectors: sysfs is the array's word.
    mdstat = ("Personalities : [raid6] [raid5] [raid4]\n"
              "md5 : active raid5 sde[4] sdd[2] sdc[1] sdb[0]\n"
              "      3906764800 blocks super 1.2 level 5, 512k chunk, algorithm 2 [4/4] [UUUU]\n"
              "      [=>...................]  reshape =  8.6% (168037376/1953382400) finish=301.2min "
              "speed=98765K/sec\n\nunused devices: <none>\n")
    roots = _tree(str(tmp_path), mdstat, {"md5": {
        "array_state": "clean", "level": "raid5", "raid_disks": "4 (3)", "degraded": "0", "chunk_size": "524288",
        "sync_action": "reshape", "sync_completed": "none", "mismatch_cnt": "0",
        **{f"dev-sd{c}/{a}": v for i, c in enumerate("bcde") for a, v in (("slot", str(i)), ("state", "in_sync"))}}})
    arrays, problems = _read(roots)
    md5 = arrays["md5"]
    assert problems == []
    assert (md5.sync_action, md5.sync_completed, md5.sync_waiting, md5.raid_disks) == ("reshape", None, None, 4)
    finding = _findings([md5])[("md5", "md.sync_running")]
    assert finding.title == "reshape in progress" and "done" not in finding.title
    assert ("storpath_md_sync_completed_ratio", ("md5",)) not in _rows([md5])


def test_unreadable_sysfs_sync_completed_is_filled_from_mdstat(tmp_path):
    mdstat = ("md5 : active raid1 sdc[1] sdb[0]\n      1000 blocks super 1.2 [2/2] [UU]\n"
              "      [==>..................]  resync = 10.0% (100/1000) finish=1.0min speed=100K/sec\n\n")
    roots = _tree(str(tmp_path), mdstat, {"md5": {"array_state": "active", "level": "raid1", "raid_disks": "2",
                                                  "degraded": "0", "sync_action": "resync"}})
    arrays, _ = _read(roots)  # no sync_completed file: mdstat gives the numbers
    assert arrays["md5"].sync_completed == (200, 2000)


# An IMSM container as mdadm assembles it: level "container" (level_show prints
# mddev->clevel when no personality runs), array_state "inactive", raid_disks empty
# (raid_disks_show: `if (mddev->raid_disks == 0) return 0;`), members with slot "none"
# (slot_show: `if (rdev->raid_disk < 0) return sprintf(page, "none\n");`) and state
# "spare"; no degraded/sync_* files (md_redundancy_group needs a personality). In
# /proc/mdstat, md_seq_show prints it "inactive" with its members as (S) and the
# metadata as " super external:imsm".
CONTAINER_MDSTAT = ("Personalities : [raid1]\n"
                    "md126 : active raid1 sda[1] sdb[0]\n"
                    "      468851712 blocks super external:/md127/0 [2/1] [U_]\n\n"
                    "md127 : inactive sdb[1](S) sda[0](S)\n"
                    "      10402 blocks super external:imsm\n\n"
                    "unused devices: <none>\n")
CONTAINER = {"array_state": "inactive", "level": "container", "raid_disks": "", "chunk_size": "0",
             "metadata_version": "external:imsm",
             "dev-sda/slot": "none", "dev-sda/state": "spare", "dev-sdb/slot": "none", "dev-sdb/state": "spare"}


def test_imsm_container_is_neither_degraded_nor_unreadable(tmp_path):
    degraded_volume = {"array_state": "active", "level": "raid1", "raid_disks": "2", "degraded": "1",
                       "chunk_size": "0", "sync_action": "idle", "sync_completed": "none", "mismatch_cnt": "0",
                       "metadata_version": "external:/md127/0", "dev-sdb/slot": "0", "dev-sdb/state": "in_sync"}
    roots = _tree(str(tmp_path), CONTAINER_MDSTAT, {"md127": CONTAINER, "md126": degraded_volume})
    arrays, problems = _read(roots)
    md127 = arrays["md127"]
    assert problems == []  # an empty raid_disks is the kernel's 0, not an unreadable value
    assert (md127.container, md127.level, md127.array_state, md127.raid_disks, md127.degraded) == (
        True, "container", "inactive", 0, None)
    assert [(m.name, m.slot, m.slot_known) for m in md127.members] == [("sda", None, True), ("sdb", None, True)]
    findings = _findings(list(arrays.values()))
    assert not [key for key in findings if key[0] == "md127"]
    # The volume inside it still is judged: a real degraded array stays critical.
    assert findings[("md126", "md.degraded")].title == "raid1 array degraded: 1 of 2 members missing"
    rows = _rows(list(arrays.values()))
    assert ("storpath_md_degraded_disks", ("md127",)) not in rows
    assert rows[("storpath_md_degraded_disks", ("md126",))] == 1
    assert rows[("storpath_md_raid_disks", ("md127",))] == 0
    assert rows[("storpath_md_level_info", ("md127", "container"))] == 1
    assert not [key for key in rows if key[0] in ("storpath_md_sync_action", "storpath_md_sync_waiting")
                and key[1][0] == "md127"]


def test_container_known_only_from_mdstat_is_not_degraded(tmp_path):
    roots = _tree(str(tmp_path), CONTAINER_MDSTAT, {})
    arrays, _ = _read(roots)
    assert (arrays["md127"].array_state, arrays["md127"].degraded) == ("inactive", None)
    assert arrays["md126"].degraded == 1  # from [2/1]


def test_sync_delayed_is_waiting_not_running(tmp_path):
    # md_do_sync sets curr_resync = MD_RESYNC_DELAYED while another array on the same
    # disks syncs; sync_completed_show then prints "delayed\n" and status_resync
    # `if (resync < MD_RESYNC_ACTIVE) { seq_printf(seq, "\tresync=DELAYED"); return 1; }`.
    # action_show still says "resync" (MD_RECOVERY_RUNNING and MD_RECOVERY_SYNC are set).
    mdstat = ("Personalities : [raid1]\n"
              "md2 : active raid1 sdb2[1] sda2[0]\n"
              "      104857600 blocks super 1.2 [2/2] [UU]\n"
              "      \tresync=DELAYED\n\n"
              "md1 : active raid1 sdb1[1] sda1[0]\n"
              "      52428800 blocks super 1.2 [2/2] [UU]\n"
              "      [====>................]  resync = 21.3% (11167744/52428800) finish=3.4min "
              "speed=200000K/sec\n\nunused devices: <none>\n")
    base = {"array_state": "active", "level": "raid1", "raid_disks": "2", "degraded": "0", "chunk_size": "0",
            "sync_action": "resync", "mismatch_cnt": "0"}
    roots = _tree(str(tmp_path), mdstat, {"md1": dict(base, sync_completed="22335488 / 104857600"),
                                          "md2": dict(base, sync_completed="delayed")})
    arrays, problems = _read(roots)
    assert problems == []
    assert (arrays["md2"].sync_waiting, arrays["md2"].sync_completed) == ("DELAYED", None)
    assert arrays["md1"].sync_waiting is None
    findings = _findings(list(arrays.values()))
    waiting = findings[("md2", "md.sync_waiting")]
    assert waiting.title == "resync waiting for another array on the same disks"
    assert "throughput is shared" not in waiting.impact
    assert ("md2", "md.sync_running") not in findings
    assert findings[("md1", "md.sync_running")].title == "resync in progress, 21.3% done"
    rows = _rows(list(arrays.values()))
    assert rows[("storpath_md_sync_waiting", ("md2",))] == 1 and rows[("storpath_md_sync_waiting", ("md1",))] == 0
    assert ("storpath_md_sync_completed_ratio", ("md2",)) not in rows


def test_sync_delayed_from_mdstat_alone(tmp_path):
    mdstat = "md2 : active raid1 sdb2[1] sda2[0]\n      1000 blocks super 1.2 [2/2] [UU]\n      \tresync=DELAYED\n\n"
    arrays, _ = _read(_tree(str(tmp_path), mdstat, {}))
    assert (arrays["md2"].sync_waiting, arrays["md2"].sync_action) == ("DELAYED", None)
    assert set(_findings([arrays["md2"]])) == {("md2", "md.sync_waiting")}


def test_sync_pending_is_waiting(tmp_path):
    # An auto-read-only array not yet written: no sync runs (sysfs sync_action "idle",
    # sync_completed "none"), status_resync prints "\tresync=PENDING" as recovery_cp < MaxSector.
    mdstat = ("md127 : active (auto-read-only) raid5 sdd1[3] sdc1[1] sdb1[0]\n"
              "      1953260544 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/3] [UUU]\n"
              "        resync=PENDING\n\n")
    roots = _tree(str(tmp_path), mdstat, {"md127": {
        "array_state": "read-auto", "level": "raid5", "raid_disks": "3", "degraded": "0", "chunk_size": "524288",
        "sync_action": "idle", "sync_completed": "none", "mismatch_cnt": "0"}})
    arrays, _ = _read(roots)
    md127 = arrays["md127"]
    assert (md127.sync_action, md127.sync_waiting) == ("idle", "PENDING")
    finding = _findings([md127])[("md127", "md.sync_waiting")]
    assert finding.title == "resync pending, not started" and "read-auto" in finding.evidence
    assert _rows([md127])[("storpath_md_sync_waiting", ("md127",))] == 1


def test_member_without_slot_file_has_empty_slot(tmp_path):
    # slot_show prints "none" itself for spares and failed members (raid_disk < 0); a
    # member directory without the file says nothing about its role.
    roots = _tree(str(tmp_path), "", {"md0": {
        "array_state": "clean", "level": "raid1", "raid_disks": "2", "degraded": "0", "sync_action": "idle",
        "sync_completed": "none", "dev-sda/slot": "0", "dev-sda/state": "in_sync", "dev-sdb/state": "in_sync",
        "dev-sdc/slot": "none", "dev-sdc/state": "spare"}})
    arrays, problems = _read(roots)
    assert problems == []
    rows = _rows(list(arrays.values()))
    slots = {labels[1]: labels[3] for (name, labels) in rows if name == "storpath_md_member_info"}
    assert slots == {"sda": "0", "sdb": "", "sdc": "none"}
