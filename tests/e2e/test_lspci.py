"""`storpath check --lspci` and `storpath tree --lspci`: an lspci dump judged by the same
analysis as sysfs (tests/fixtures/lspci, the lab's QEMU boot captured both ways)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest

from tests.conftest import ROOT

ENV = {"PYTHONPATH": os.path.join(ROOT, "exporter"), "COLUMNS": "100"}
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "lspci")
LAB = os.path.join(ROOT, "tests", "lab", "captures", "lspci")
TRAINED_LOW = {"pcie.link_speed_below_expected", "pcie.link_width_below_expected", "pcie.link_trained_low",
               "pcie.link_down"}


def storpath(*args):
    return subprocess.run([sys.executable, "-m", "storpath", *args], capture_output=True, text=True,
                          env={**os.environ, **ENV}, timeout=120)


def check_json(path, *extra):
    done = storpath("check", "--json", f"--lspci={path}", *extra)
    data = json.loads(done.stdout)
    assert data["exit_code"] == done.returncode
    return data


def loud(data):
    return {(f["subject"], f["kind"]) for f in data["findings"] if f["severity"] != "info"}


def test_step_down_fires_and_lspci_downgraded_on_one_end_does_not():
    """The NVMe drive at x2 of the x4 both ends support is a warning (as its alert); the I210 at its own
    2.5 GT/s x1, whose port lspci marks "(downgraded)", is not a fault at all."""
    data = check_json(os.path.join(FIXTURES, "chipset-switch.txt"))
    assert loud(data) == {("0000:03:00.0", "pcie.link_width_below_expected")}
    assert data["status"] == "warning"
    assert not [f for f in data["findings"] if f["subject"] in ("0000:04:00.0", "0000:02:09.0")]


def test_link_at_what_both_ends_allow_is_silent():
    for name in ("bmc-bridge.txt", "quad-nic-x4.txt"):
        data = check_json(os.path.join(FIXTURES, name))
        assert data["findings"] == [], name
        assert data["exit_code"] == 0


def test_r330_port_with_rates_in_lnkcap2_only_is_no_step_down():
    data = check_json(os.path.join(FIXTURES, "r330-lnkcap2-port.txt"))
    assert not [f for f in data["findings"] if f["kind"] in TRAINED_LOW]
    assert data["exit_code"] < 2


def test_report_says_what_a_dump_cannot_show():
    data = check_json(os.path.join(FIXTURES, "quad-nic-x4.txt"))
    said = " ".join(data["lspci"]["cannot_show"])
    assert "AER" in said and "drives" in said and "LnkCap2" in said
    assert data["skipped"]["md"] == "not in an lspci dump"
    text = storpath("check", f"--lspci={os.path.join(FIXTURES, 'quad-nic-x4.txt')}").stdout
    assert "cannot show: AER error counters" in " ".join(text.split())


def test_sosreport_folder(tmp_path):
    os.makedirs(tmp_path / "sos_commands" / "pci")
    shutil.copy(os.path.join(FIXTURES, "chipset-switch.txt"), tmp_path / "sos_commands" / "pci" / "lspci_-nnvv")
    os.makedirs(tmp_path / "proc")
    (tmp_path / "proc" / "cpuinfo").write_text("processor\t: 0\nflags\t\t: fpu vme sse2 hypervisor\n")
    data = check_json(tmp_path)
    assert data["host"]["virtualization"] == "vm"
    assert data["lspci"]["origin"].endswith("sos_commands/pci/lspci_-nnvv")


def test_supportconfig_folder(tmp_path):
    with open(os.path.join(FIXTURES, "chipset-switch.txt"), encoding="utf-8") as handle:
        dump = handle.read()
    (tmp_path / "hardware.txt").write_text(
        "#==[ Command ]======================================#\n# /sbin/lspci -nnvv\n" + dump
        + "#==[ Command ]======================================#\n# /usr/sbin/hwinfo --short\ncpu:\n")
    data = check_json(tmp_path)
    assert loud(data) == {("0000:03:00.0", "pcie.link_width_below_expected")}


def test_tree_from_a_dump():
    done = storpath("tree", "--ascii", f"--lspci={os.path.join(FIXTURES, 'chipset-switch.txt')}")
    assert done.returncode == 1, done.stderr
    assert "0000:03:00.0" in done.stdout and "0000:01:00.0" in done.stdout


def test_no_dump_is_a_clear_message(tmp_path):
    done = storpath("check", f"--lspci={tmp_path}")
    assert done.returncode == 3 and "no lspci -vv output" in done.stderr
    (tmp_path / "notes.txt").write_text("hello\n")
    done = storpath("check", f"--lspci={tmp_path / 'notes.txt'}")
    assert done.returncode == 3 and "holds no PCI function" in done.stderr


def _verdicts(data):
    return sorted((f["subject"], f["kind"], f["severity"]) for f in data["findings"] if f["subsystem"] == "pcie")


@pytest.mark.parametrize("topology", ["nvme"])
def test_lab_boot_same_verdicts_from_lspci_and_sysfs(topology, tmp_path):
    """One QEMU boot (tests/lab: `python3 tests/lab/lab.py lspci nvme`) read both ways: its
    `lspci -vvnn` and its sysfs give the same PCIe verdicts."""
    capture = os.path.join(LAB, f"{topology}.tar.gz")
    dump = os.path.join(LAB, f"{topology}.lspci-vvnn.txt")
    if not os.path.exists(capture):
        pytest.skip(f"no lab capture {capture}: run `python3 tests/lab/lab.py lspci {topology}`")
    with tarfile.open(capture) as archive:
        archive.extractall(tmp_path, filter="data")
    root = str(tmp_path)
    replay = json.loads(storpath("check", "--json", "--collector.disable-defaults", "--collector.pcie",
                                 f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc").stdout)
    from_dump = check_json(dump)
    assert from_dump["host"]["virtualization"] == replay["host"]["virtualization"] == "vm"
    assert _verdicts(from_dump) == _verdicts(replay)
    assert [c for c in from_dump["checked"] if c["what"] == "PCIe links"] == \
        [c for c in replay["checked"] if c["what"] == "PCIe links"]


def test_lab_boot_same_links_from_lspci_and_sysfs(tmp_path):
    """Link by link, the lab boot's dump and its sysfs give the same records and expectations:
    port types, both ends' capabilities, the link as trained, what the verdict rests on."""
    from storpath.readers.lspci import read_dump
    from storpath.base.roots import Roots
    from storpath.scrape.snapshot import from_lspci, take_once

    capture = os.path.join(LAB, "nvme.tar.gz")
    if not os.path.exists(capture):
        pytest.skip(f"no lab capture {capture}: run `python3 tests/lab/lab.py lspci nvme`")
    with tarfile.open(capture) as archive:
        archive.extractall(tmp_path, filter="data")
    replay = take_once(Roots(sysfs=str(tmp_path / "sys"), procfs=str(tmp_path / "proc"), dev=""),
                       ["pci", "pcie_expected", "host"])
    record, _ = read_dump(os.path.join(LAB, "nvme.lspci-vvnn.txt"))
    dump = from_lspci(record)

    def records(snapshot):
        return {d.address: (d.port_type, d.static.parent, d.static.class_code, d.static.vendor_id,
                            d.static.device_id, d.static.numa_node, d.static.has_link, d.static.max_link_speed,
                            d.static.max_link_width, d.current_link_speed, d.current_link_width)
                for d in snapshot.pci if d.static.has_link or d.static.parent}

    assert records(dump) == records(replay)
    assert dump.pcie_expected == replay.pcie_expected
    assert len([e for e in dump.pcie_expected.values() if e.partner]) >= 8


def test_sosreport_md_arrays_judged_from_its_mdstat(tmp_path):
    """A sosreport keeps /proc/mdstat: its md arrays are judged by the md reader and findings
    (the text is the lab kernel's, tests/unit/data/md_lab_6.1.txt phase 1: md1 raid1 with one
    member failed)."""
    os.makedirs(tmp_path / "sos_commands" / "pci")
    shutil.copy(os.path.join(FIXTURES, "quad-nic-x4.txt"), tmp_path / "sos_commands" / "pci" / "lspci_-nnvv")
    os.makedirs(tmp_path / "proc")
    (tmp_path / "proc" / "mdstat").write_text(
        "Personalities : [raid0] [raid1] [raid10] \n"
        "md1 : active raid1 vdd[1](F) vdc[0]\n      64512 blocks super 1.2 [2/1] [U_]\n      \n"
        "md0 : active raid0 vdb[1] vda[0]\n      126976 blocks super 1.2 512k chunks\n      \n"
        "unused devices: <none>\n")
    data = check_json(tmp_path)
    assert ("md1", "md.degraded") in loud(data) and data["status"] == "critical"
    assert "md" not in data["skipped"]
    assert not any("md arrays" in line for line in data["lspci"]["cannot_show"])
    assert any("md arrays" in line for line in check_json(os.path.join(FIXTURES, "quad-nic-x4.txt"))["lspci"]
               ["cannot_show"])


def test_docs_show_the_report_as_it_prints():
    done = subprocess.run([sys.executable, "-m", "storpath", "check", "--lspci=tests/fixtures/lspci/chipset-switch.txt"],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, **ENV, "COLUMNS": "80"},
                          timeout=120)
    with open(os.path.join(ROOT, "docs", "check.md"), encoding="utf-8") as handle:
        assert "```\n" + done.stdout + "```" in handle.read(), "docs/check.md: the --lspci example is stale"


def _sosreport(folder, lspci_text=None):
    os.makedirs(folder / "sos_commands" / "pci")
    if lspci_text is None:
        shutil.copy(os.path.join(FIXTURES, "quad-nic-x4.txt"), folder / "sos_commands" / "pci" / "lspci_-nnvv")
    os.makedirs(folder / "proc")
    (folder / "proc" / "mdstat").write_text("Personalities : [raid1] \nmd1 : active raid1 vdc[0] vdd[1]\n"
                                            "      64512 blocks super 1.2 [2/2] [UU]\n      \nunused devices: <none>\n")
    os.makedirs(folder / "sys" / "block" / "md1" / "md")
    (folder / "sys" / "block" / "md1" / "md" / "level").write_text("raid1\n")


def test_a_support_folder_is_read_inside_itself(tmp_path):
    """A support folder is data from another machine: a link out of it (a key, a credentials
    file) is neither read nor quoted, a FIFO is never opened (it would hang the command for
    ever), and the report says what was left out; the md arrays it kept are then not judged."""
    secret = tmp_path / "secret"
    secret.write_text("PRIVATE-KEY-MATERIAL\n")
    folder = tmp_path / "sos"
    _sosreport(folder)
    os.symlink(secret, folder / "sys" / "block" / "md1" / "md" / "array_state")
    os.mkfifo(folder / "sys" / "block" / "md1" / "md" / "sync_action")
    done = storpath("check", "--json", f"--lspci={folder}")
    assert "PRIVATE-KEY-MATERIAL" not in done.stdout + done.stderr
    data = json.loads(done.stdout)
    kinds = {f["kind"] for f in data["findings"]}
    assert "lspci.md_not_read" in kinds and data["exit_code"] >= 1


def test_an_unlistable_block_folder_is_a_finding_not_a_traceback(tmp_path):
    folder = tmp_path / "sos"
    _sosreport(folder)
    shutil.rmtree(folder / "sys" / "block")
    os.symlink("block", folder / "sys" / "block")  # a loop: listing it fails (ELOOP), even as root
    done = storpath("check", "--json", f"--lspci={folder}")
    assert "Traceback" not in done.stderr
    data = json.loads(done.stdout)
    assert "lspci.md_not_read" in {f["kind"] for f in data["findings"]}
    assert done.returncode == data["exit_code"] == 1  # a warning: docs/check.md's exit statuses


def test_a_fifo_or_a_link_out_as_the_dump_is_refused_not_opened(tmp_path):
    for make in (lambda p: os.mkfifo(p), lambda p: os.symlink(os.path.join(FIXTURES, "quad-nic-x4.txt"), p)):
        folder = tmp_path / f"sos{len(os.listdir(tmp_path))}"
        _sosreport(folder, lspci_text="")
        make(folder / "sos_commands" / "pci" / "lspci_-nnvv")
        done = storpath("check", f"--lspci={folder}")  # a FIFO opened for reading would hang: timeout=120
        assert done.returncode == 3, done.stderr
        assert "no lspci -vv output" in done.stderr or "not read" in done.stderr


def test_a_device_node_given_as_the_dump_is_refused_unopened():
    done = storpath("check", "--lspci=/dev/null")
    assert done.returncode == 3 and "not a regular file" in done.stderr


def test_a_dump_cut_at_the_bound_is_not_called_clean(tmp_path, monkeypatch):
    """A dump listing more functions than the bound is judged up to the cut and says so: exit status not 0."""
    from storpath.readers import lspci
    monkeypatch.setattr(lspci, "MAX_FUNCTIONS", 3)
    text = open(os.path.join(FIXTURES, "chipset-switch.txt"), encoding="utf-8").read()
    path = tmp_path / "dump.txt"
    path.write_text(text)
    record, problems = lspci.read_dump(str(path))
    assert record.cut and len(record.dump.devices) == 3
    assert [p.message for p in problems if p.message == "lspci dump cut"]


def test_a_dump_of_more_functions_than_a_segment_holds_is_cut_and_says_so(tmp_path):
    path = tmp_path / "dump.txt"
    with open(path, "w", encoding="ascii") as out:
        for n in range(70000):  # domain 0 full (65,536), then domain 1
            domain, rest = divmod(n, 65536)
            out.write(f"{domain:04x}:{rest >> 8:02x}:{(rest >> 3) & 31:02x}.{rest & 7} "
                      f"Ethernet controller [0200]: X [8086:1533]\n")
    done = storpath("check", "--json", f"--lspci={path}")
    data = json.loads(done.stdout)
    cut = [f for f in data["findings"] if f["kind"] == "lspci.dump_cut"]
    assert cut and "65536 functions" in cut[0]["title"] and done.returncode >= 1


def test_links_whose_speed_pciutils_could_not_print_are_named_not_judged():
    """Gen5 ends that an older pciutils printed as `Speed unknown` (ls-caps.c's link_speed()):
    each such link gets a warning naming it and why, no verdict either way; the Gen4 link
    of the same dump is still judged. On the old code the three unknown links were counted
    as checked and silently fine."""
    done = storpath("check", f"--lspci={os.path.join(FIXTURES, 'gen5-speed-unknown.txt')}")
    data = check_json(os.path.join(FIXTURES, "gen5-speed-unknown.txt"))
    unknown = {f["subject"]: f for f in data["findings"] if f["kind"] == "lspci.speed_unknown"}
    assert set(unknown) == {"0000:41:00.0", "0000:42:00.0"}
    for finding in unknown.values():
        assert finding["severity"] == "warning"
        assert "pciutils printed Speed unknown: too old for this link's generation" in finding["evidence"]
    assert "0000:40:01.2" in unknown["0000:42:00.0"]["evidence"]  # the port end that printed it is named
    judged = {(f["subject"], f["kind"]) for f in data["findings"] if f["kind"] in TRAINED_LOW}
    assert judged == {("0000:43:00.0", "pcie.link_speed_below_expected")}
    assert not [f for f in data["findings"] if f["subject"] in unknown and f["kind"].startswith("pcie.")]
    assert data["exit_code"] == 1 == done.returncode
    assert "checked 1 PCIe link." in done.stdout
    assert "PCIe link not judged: pciutils printed Speed unknown" in done.stdout
