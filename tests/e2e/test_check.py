"""`storpath check` on every fixture machine: the expected findings and exit status,
JSON for scripts, and a report that fits 80 columns with colour only on a terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.fixtures import machines

CASES = machines.all_cases()
ENV = {"PYTHONPATH": os.path.join(ROOT, "exporter")}
NVME_ALL = {(f"nvme{i}n1", "nvme.lba_format_not_best") for i in range(4)}

# (exit status, the warning and critical findings as (subject, kind), info findings that must be there).
EXPECTED = {
    ("am4-x570-firecuda", "healthy"): (1, NVME_ALL, set()),
    # A Gen4 drive in a Gen3 slot: a placement to review (info); nothing says it needs more than the slot.
    ("am4-x570-firecuda", "gen3-port"): (1, NVME_ALL, {("0000:07:00.0", "pcie.placement_below_capability")}),
    ("am4-x570-firecuda", "x2-link"): (1, NVME_ALL | {("0000:05:00.0", "pcie.link_width_below_expected")}, set()),
    ("am4-x570-firecuda", "gen3-trained"): (1, NVME_ALL | {("0000:06:00.0", "pcie.link_speed_below_expected")},
                                            set()),
    ("am4-x570-firecuda", "formatted-4k"): (1, NVME_ALL - {("nvme0n1", "nvme.lba_format_not_best")}, set()),
    ("am4-x570-firecuda", "sata-slowed"): (1, NVME_ALL | {("sda", "sata.link_limited_by_libata")}, set()),
    # libata.force lowers both limits alike: a decision, not a fault (analysis.sata.speed_limited).
    ("am4-x570-firecuda", "sata-forced"): (1, NVME_ALL, set()),
    ("am4-x570-firecuda", "hot-drive"): (1, NVME_ALL | {("nvme1", "nvme.temperature_above_warning"),
                                                        ("nvme1", "nvme.thermal_throttling")}, set()),
    ("dell-r900-sas1068e", "before-fix"): (1, {("0000:04:00.0", "sas.phy_at_lowered_minimum")}, set()),
    ("dell-r900-sas1068e", "after-fix"): (0, set(), set()),
    # Both ends of every link: SATA SSDs at 6.0 on 12 Gbit/s PHYs, a wide port at 6.0 to a SAS-2
    # expander, SAS drives of unknown capability (unverifiable): silent. Held below both ends: warns.
    ("supermicro-x11ssh-sas3008", "healthy"): (0, set(), set()),
    ("supermicro-x11ssh-sas3008", "hba-ssd-held"): (1, {("0000:01:00.0", "sas.phy_below_hardware_maximum")}, set()),
    ("supermicro-x11ssh-sas3008", "boot-ssd-held"): (1, {("sdg", "sata.link_below_hardware_limit")}, set()),
    # The SAS drives' Phy Control And Discover pages captured: the 12 Gbit/s drive at 6.0 on a 12 Gbit/s PHY warns;
    # the 6 Gbit/s drive at 6.0 and the 12 Gbit/s drives behind the 6 Gbit/s expander are silent.
    ("supermicro-x11ssh-sas3008", "sas-drives"): (1, {("0000:01:00.0", "sas.phy_below_hardware_maximum")}, set()),
    # The boot drive (Samsung PM9A3) is at 512 B though it rates 4 KiB as well: the larger format wins.
    ("epyc-7443-highpoint", "nps1"): (1, {("nvme0n1", "nvme.lba_format_not_best")},
                                      {("numa", "numa.storage_placement")}),
    ("epyc-7443-highpoint", "nps4"): (1, {("nvme0n1", "nvme.lba_format_not_best")},
                                      {("numa", "numa.storage_placement")}),
    ("epyc-7443-highpoint", "md-degraded"): (2, {("nvme0n1", "nvme.lba_format_not_best"), ("md1", "md.degraded")},
                                             set()),
    ("epyc-7443-highpoint", "md-recovering"): (2, {("nvme0n1", "nvme.lba_format_not_best"), ("md1", "md.degraded")},
                                               {("md1", "md.sync_running")}),
    ("epyc-7443-highpoint", "md-checking"): (1, {("nvme0n1", "nvme.lba_format_not_best")},
                                             {("md1", "md.sync_running")}),
    # An IMSM container (md127) is never degraded; volume md126 resyncs, md125 waits behind it (DELAYED).
    ("epyc-7443-highpoint", "imsm-delayed"): (1, {("nvme0n1", "nvme.lba_format_not_best")},
                                              {("md126", "md.sync_running"), ("md125", "md.sync_waiting")}),
    ("intel-r2224wft-switches", "zfs-degraded"): (2, {("zpool1", "zfs.pool_not_online")}, set()),
    # the same fault as OpenZFS 2.1 prints it (text `zpool status`, the lost vdev named by its GUID)
    ("intel-r2224wft-switches", "zfs-text-unavail"): (2, {("zpool1", "zfs.pool_not_online")}, set()),
    ("intel-r2224wft-switches", "zfs-full"): (1, {("zpool1", "zfs.capacity_high")}, set()),
    ("intel-r2224wft-switches", "zfs-checksum"): (1, {("zpool1", "zfs.vdev_errors")}, {("zpool1", "zfs.scrub_running")}),
    ("intel-r2224wft-switches", "healthy"): (0, set(), {("0000:3b:00.0", "pcie.shared_uplink_oversubscribed"),
                                                        ("0000:d8:00.0", "pcie.shared_uplink_oversubscribed")}),
    ("intel-r2224wft-switches", "uplink-x4"): (1, {("0000:d8:00.0", "pcie.link_width_below_expected")},
                                               {("0000:3b:00.0", "pcie.shared_uplink_oversubscribed")}),
    ("intel-r2224wft-switches", "misaligned-partition"): (1, {("sda1", "alignment.physical_block")},
                                                          {("nvme", "nvme.smart_unknown")}),
    ("supermicro-x10dri-hyperm2", "healthy"): (0, set(), set()),
    # The noise corpus (tests/e2e/test_noise_corpus.py): virtual machines say what they cannot know.
    ("qemu-q35-old-passthrough", "healthy"): (0, set(), {("host", "host.virtual_machine")}),
    ("qemu-q35-new-rciep", "healthy"): (0, set(), {("host", "host.virtual_machine")}),
    ("qemu-q35-new-rciep", "x2-passthrough"): (1, {("0000:01:00.0", "pcie.link_width_below_expected")},
                                               {("host", "host.virtual_machine")}),
    ("vmware-esxi-nas", "healthy"): (0, set(), {("host", "host.virtual_machine")}),
    ("cloud-nitro-instance", "healthy"): (0, set(), {("host", "host.virtual_machine")}),
    ("laptop-thinkpad-x1", "healthy"): (0, set(), set()),
    ("desktop-z690-single-socket", "healthy"): (0, set(), set()),
    # a GPU and a drive asleep in D3cold: their links are not read (it would wake them), never "below expected"
    ("desktop-z690-single-socket", "asleep"): (0, set(), {("0000:01:00.0", "pcie.device_suspended"),
                                                          ("0000:03:00.0", "pcie.device_suspended")}),
    # A Target Link Speed set below both ends: capped (info) with its cause, not a downgrade; below its own
    # target the link is a fault as ever.
    ("desktop-z690-single-socket", "capped-by-tool"): (0, set(), {("0000:02:00.0", "pcie.link_capped")}),
    ("desktop-z690-single-socket", "capped-thermal"): (0, set(), {("0000:02:00.0", "pcie.link_capped")}),
    ("desktop-z690-single-socket", "below-target"): (1, {("0000:02:00.0", "pcie.link_speed_below_expected")}, set()),
    # the twin left at x16: one drive at x4 on an x16 root port, said as information (not a fault)
    ("supermicro-x10dri-hyperm2", "unbifurcated"): (0, set(), {("0000:00:03.0", "inventory.wide_port_single_device")}),
    # Drives behind hardware RAID controllers (perccli, ssacli): the battery failed and both volumes fell to
    # write-through, VD 0/0 rebuilds, SSD 32:9 below both ends.
    ("dell-r730xd-perc-h730p", "degraded-writethrough"): (1, {
        ("storcli/c0", "raid.battery_failed"), ("storcli/c0 32:9", "raid.drive_link_below_expected"),
        ("storcli/c0 volume 0/0", "raid.cache_write_through"), ("storcli/c0 volume 0/0", "raid.volume_rebuilding"),
        ("storcli/c0 volume 1/1", "raid.cache_write_through")}, set()),
    ("dell-r730xd-perc-h730p", "healthy"): (0, set(), set()),
    # ssacli gives no drive capability: the MSA60 shelf at 1.5 Gbit/s is unverifiable (INFO), not a fault.
    ("hpe-dl380g7-p212-msa60", "as-found"): (1, {("ssacli/slot0", "raid.battery_failed"),
                                                 ("ssacli/slot0 volume 1", "raid.cache_write_through")},
                                             {("ssacli/slot0", "raid.drive_link_unverifiable"),
                                              ("ssacli/slot5", "raid.drive_link_unverifiable")}),
    # storcli's Link Speed 12.0 behind the expanders is not the drives' link: silent but for one INFO line.
    ("supermicro-hba9500-expanders", "healthy"): (0, set(), {("storcli/c0", "raid.drive_link_unverifiable")}),
    # 12 Gb/s SAS drives at 6.0 on a SAS-6G controller: the controller is the limit, not a fault.
    ("ibm-x3650m3-serveraid-m5015", "healthy"): (0, set(), set()),
    ("ibm-x3650m3-serveraid-m5015", "degraded"): (2, {("storcli/c0 volume 0/0", "raid.volume_degraded")}, set()),
    # Every path to the data: NVMe over Fabrics native multipath, and a dual-ported SAS shelf in dm-multipath.
    ("dell-r750-nvmeof", "healthy"): (0, set(), set()),
    ("dell-r750-nvmeof", "tcp-path-dead"): (1, {("nvme-subsys0", "paths.nvme_degraded"),
                                                ("nvme0n1", "paths.no_optimized_path")}, set()),
    ("dell-r750-nvmeof", "fc-path-dead"): (1, {("nvme-subsys1", "paths.nvme_degraded")}, set()),
    ("dell-r750-nvmeof", "fc-round-robin"): (0, set(), {("nvme-subsys1", "paths.numa_crossing")}),
    ("supermicro-dualport-sas-shelf", "healthy"): (0, set(), set()),
    ("supermicro-dualport-sas-shelf", "path-missing"): (1, {("sdc", "paths.drive_path_missing")}, set()),
    ("supermicro-dualport-sas-shelf", "path-failed"): (1, {("dm-3", "paths.map_degraded")}, set()),
    ("supermicro-dualport-sas-shelf", "mixed-rates"): (1, {("dm-1", "paths.mixed_link_rates")}, set()),
    # Boards built with devices in narrower slots: review items (info), the same on kernels before and after 6.13;
    # a dual-port NIC's link down is one finding; a quad 10 GbE NIC in a Gen2 x4 slot is held back by it.
    ("dell-r330-perc-h730", "healthy"): (0, set(), {("0000:03:00.0", "pcie.placement_below_capability"),
                                                    ("0000:04:00.0", "pcie.placement_below_capability")}),
    ("dell-r330-perc-h730", "kernel-6.13"): (0, set(), {("0000:03:00.0", "pcie.placement_below_capability"),
                                                        ("0000:04:00.0", "pcie.placement_below_capability")}),
    ("dell-r330-perc-h730", "nic-link-down"): (2, {("0000:02:00.0", "pcie.link_down")}, set()),
    ("dell-r710-quad-nic", "healthy"): (0, set(), {("0000:03:00.0", "pcie.placement_below_capability")}),
    ("dell-r710-quad-nic", "quad-nic-x4-gen2"): (1, {("0000:04:00.0", "pcie.slot_below_device_demand")},
                                                 {("0000:03:00.0", "pcie.placement_below_capability")}),
}


def storpath(*args, env=None):
    full = dict(os.environ, **ENV)
    full.pop("NO_COLOR", None)
    full.pop("COLUMNS", None)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "storpath", *args], capture_output=True, text=True, env=full,
                          timeout=120)


def paths(root):
    return [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={root}/captured"]


@pytest.mark.parametrize("name,variant", CASES, ids=[f"{n}:{v}" for n, v in CASES])
def test_check_finds_what_each_machine_has(name, variant, machine_tree):
    assert (name, variant) in EXPECTED, f"no expected `storpath check` result for {name}:{variant}: add one"
    status, problems, infos = EXPECTED[(name, variant)]
    result = storpath("check", "--json", *paths(machine_tree(name, variant)))
    assert "Traceback" not in result.stderr, result.stderr
    report = json.loads(result.stdout)
    found = {(f["subject"], f["kind"]) for f in report["findings"] if f["severity"] != "info"}
    found_info = {(f["subject"], f["kind"]) for f in report["findings"] if f["severity"] == "info"}
    assert found == problems, json.dumps(report["findings"], indent=1)
    assert infos <= found_info, found_info
    assert result.returncode == status == report["exit_code"]
    assert report["status"] == {0: "clean", 1: "warning", 2: "critical"}[status]
    assert not [f for f in report["findings"] if f["kind"] == "storpath.check_failed"]
    for finding in report["findings"]:
        assert finding["title"] and finding["evidence"] and finding["impact"] and finding["remedy"], finding


def test_healthy_reference_is_silent(machine_tree):
    result = storpath("check", *paths(machine_tree("supermicro-x10dri-hyperm2", "healthy")))
    assert result.returncode == 0, result.stdout
    # The machine first (DMI: what it is, bare metal or not), then nothing but the summary.
    assert result.stdout.startswith("host: Supermicro SYS-6028R-TR (board X10DRi, BIOS 3.2), bare metal\n\n"
                                    "summary: clean: no problems found; checked 6 PCIe links"), result.stdout
    assert "PCIe links" in result.stdout and "NVMe namespaces" in result.stdout


def test_link_fault_report_names_evidence_impact_and_remedy(machine_tree):
    result = storpath("check", *paths(machine_tree("am4-x570-firecuda", "x2-link")))
    text = result.stdout
    assert result.returncode == 1  # a warning, as the alert PcieLinkWidthBelowExpected
    assert text.startswith("host: ASUS System Product Name")
    block = next(b for b in text.split("\n\n") if b.startswith("0000:05:00.0"))
    assert block.startswith("0000:05:00.0  nvme1 · Seagate FireCuda 530")
    assert "WARNING   PCIe link trained at x2, both ends support x4" in block
    assert "trained 16 GT/s (Gen4) x2, expected 16 GT/s (Gen4) x4" in block
    assert "7.88 GB/s of link, 3.94 GB/s available (half lost) for nvme1n1" in block
    assert "bifurcation" in block
    assert text.rstrip().splitlines()[-2].startswith("summary: WARNING: 0 critical, 5 warnings, 1 info")


def test_nvme_remedy_carries_the_format_command_and_its_data_loss_warning(machine_tree):
    text = storpath("check", *paths(machine_tree("am4-x570-firecuda", "healthy"))).stdout
    assert "`nvme format /dev/nvme0n1 --lbaf=1` ERASES ALL DATA on the" in text
    # The same finding on the next drives is spelled out once, with each drive's own command.
    assert "as for nvme0n1 above" in text and "`nvme format /dev/nvme3n1 --lbaf=1`" in text


@pytest.mark.parametrize("name,variant", CASES, ids=[f"{n}:{v}" for n, v in CASES])
def test_report_fits_80_columns_without_colour_when_piped(name, variant, machine_tree):
    result = storpath("check", *paths(machine_tree(name, variant)))
    assert "\033[" not in result.stdout
    long = [line for line in result.stdout.splitlines() if len(line) > 80]
    assert not long, long


def test_colour_only_on_a_terminal_and_never_with_no_color(machine_tree):
    args = ["check", *paths(machine_tree("dell-r330-perc-h730", "nic-link-down"))]  # a link down: critical
    assert "\033[1;31mCRITICAL" in storpath(*args, "--color=always").stdout
    assert "\033[" not in storpath(*args, "--color=always", "--color=never").stdout

    def on_tty(env):
        leader, follower = pty.openpty()
        full = dict(os.environ, **ENV, **env)
        full.pop("COLUMNS", None)
        proc = subprocess.Popen([sys.executable, "-m", "storpath", *args], stdout=follower, stderr=subprocess.PIPE,
                                env=full)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(60)
        os.close(leader)
        return b"".join(chunks).decode()

    assert "\033[1;31m" in on_tty({"TERM": "xterm"})
    no_color = on_tty({"TERM": "xterm", "NO_COLOR": "1"})
    assert "\033[" not in no_color and "CRITICAL" in no_color


def test_columns_widen_the_report_up_to_100(machine_tree):
    text = storpath("check", *paths(machine_tree("am4-x570-firecuda", "x2-link")), env={"COLUMNS": "200"}).stdout
    widths = [len(line) for line in text.splitlines()]
    assert 80 < max(widths) <= 100


def test_disabled_collector_skips_its_findings(machine_tree):
    result = storpath("check", "--json", "--no-collector.nvme", *paths(machine_tree("am4-x570-firecuda", "healthy")))
    report = json.loads(result.stdout)
    assert result.returncode == 0
    assert not [f for f in report["findings"] if f["subsystem"] == "nvme"]
    assert report["skipped"]["nvme"] == "collector nvme disabled"


def test_not_a_sysfs_tree_is_a_clear_error(tmp_path):
    result = storpath("check", f"--path.sysfs={tmp_path}/nope")
    assert result.returncode == 3 and "is not a folder" in result.stderr and not result.stdout
    (tmp_path / "empty").mkdir()
    result = storpath("check", f"--path.sysfs={tmp_path}/empty")
    assert result.returncode == 3 and "does not look like sysfs" in result.stderr


def test_unreadable_values_become_notes_not_log_lines(machine_tree, tmp_path):
    import shutil

    root = tmp_path / "m"
    shutil.copytree(machine_tree("am4-x570-firecuda", "x2-link"), root, symlinks=True)
    speed = root / "sys/devices/pci0000:00/0000:00:03.2/0000:05:00.0/current_link_speed"
    speed.write_text("Unknown\n")
    result = storpath("check", *paths(root))
    assert "ts=" not in result.stderr, result.stderr
    assert "notes (values storpath could not read, left out):" in result.stdout
    assert "0000:05:00.0" in result.stdout.split("notes")[1]
    # The width fault still shows: one unreadable attribute hides nothing else.
    assert "PCIe link trained at x2" in result.stdout
    report = json.loads(storpath("check", "--json", *paths(root)).stdout)
    assert any(n.get("attribute") == "current_link_speed" for n in report["notes"])


@pytest.mark.parametrize("as_json", [False, True])
def test_probe_runs_fio_with_progress_and_flags_a_slow_target(as_json, machine_tree, tmp_path):
    from tests.conftest import require_tool

    require_tool("fio", "fio")
    config = tmp_path / "storpath.yml"
    config.write_text(
        "probes:\n"
        "  runtime: 1s\n"
        "  state_file: probes.json\n"
        "  busy_threshold: null\n"
        "  targets:\n"
        f"    - file: {tmp_path}/probe.dat\n"
        "      name: scratch\n"
        "      file_size: 8MiB\n"
        "      profiles: [seqread]\n"
        # No file can be read this fast: the probe must come out far below it.
        "      expected_read_bytes_per_second: 100000GB/s\n")
    args = ["check", f"--config.file={config}", "--probe", *paths(machine_tree("supermicro-x10dri-hyperm2", "healthy"))]
    result = storpath(*args, *(["--json"] if as_json else []), env={"STATE_DIRECTORY": str(tmp_path / "state")})
    assert "Traceback" not in result.stderr, result.stderr
    assert "probing scratch seqread" in result.stderr or "[1/1] scratch seqread" in result.stderr
    assert result.returncode == 1, result.stdout + result.stderr
    if as_json:
        report = json.loads(result.stdout)
        row = report["probes"][0]
        assert row["status"] == "ok" and row["read_bytes_per_second"] > 0
        assert [f["kind"] for f in report["findings"] if f["severity"] != "info"] == ["probe.below_expected"]
    else:
        assert "probes (read-only fio, run now):" in result.stdout
        assert re.search(r"scratch seqread: [\d.]+ [kMG]B/s of 1e\+05 GB/s expected \(0%\)", result.stdout), result.stdout
        assert "WARNING   seqread read" in result.stdout


@pytest.mark.parametrize("as_json", [True, False])
def test_a_reader_that_stops_early_ends_check_quietly(as_json, machine_tree):
    """`storpath check --json | head`: the reader is gone before check writes; it stops
    like other command-line tools, with no BrokenPipeError traceback."""
    full = dict(os.environ, **ENV)
    args = [sys.executable, "-m", "storpath", "check", *(["--json"] if as_json else []),
            *paths(machine_tree("intel-r2224wft-switches", "uplink-x4"))]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full)
    proc.stdout.close()  # nobody reads: every write of check meets a closed pipe
    _, err = proc.communicate(timeout=120)
    assert err.decode() == "", err.decode()
    assert proc.returncode == 1  # the verdict of the machine (a warning), as if the report had been read
