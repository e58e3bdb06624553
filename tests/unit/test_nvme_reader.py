"""The NVMe reader on sysfs trees (with and without native multipath) and every source of
Identify data: captured files, the ioctl and nvme-cli, including each way they fail."""

import errno
import os
import shutil
import stat
import subprocess

import pytest

from storpath.readers import nvme as reader
from storpath.readers.nvme import (IdentifyError, captured_paths, identify_ioctl, identify_namespace,
                                   read_controllers, read_namespaces)
from storpath.base.roots import Roots
from tests.conftest import require_tool
from tests.fixtures.builders_nvme import Fmt, id_ns_json, identify_namespace as build_id_ns, write_captured
from tests.fixtures.sysfs_builder import MachineBuilder, Namespace


def _machine(tmp_path, multipath=True, namespaces=None):
    b = MachineBuilder(str(tmp_path), nvme_multipath=multipath)
    host = b.host_bridge("0000:00")
    b.root_port(host, "0000:00:01.1", speed=16.0, width=4)
    b.root_port(host, "0000:00:01.2", speed=16.0, width=4)
    b.nvme("0000:00:01.1", "0000:01:00.0", model="Seagate FireCuda 530 ZP2000GM30023", serial="7VR01A2B",
           firmware="SU6SM003", vendor=0x1987, device=0x5018, speed=16.0, width=4,
           namespaces=namespaces or [Namespace(size_bytes=2_000_398_934_016, lba_bytes=512)])
    b.nvme("0000:00:01.2", "0000:02:00.0", model="INTEL SSDPF2NV153TZ", serial="PHAC1234001M15PGN",
           firmware="ACV10031", vendor=0x8086, device=0x0b60, speed=16.0, width=4,
           namespaces=[Namespace(size_bytes=15_362_991_415_296, lba_bytes=4096, optimal_io_bytes=65536)])
    return b


def _roots(b, **kw):
    return Roots(sysfs=b.sys, procfs=b.proc, **kw)


# ---- sysfs -------------------------------------------------------------------------

@pytest.mark.parametrize("multipath", [True, False])
def test_controllers_and_namespaces(tmp_path, multipath):
    b = _machine(tmp_path, multipath)
    ctrls = {c.name: c for c in read_controllers(_roots(b))}
    assert ctrls["nvme0"].address == "0000:01:00.0"
    assert ctrls["nvme0"].model == "Seagate FireCuda 530 ZP2000GM30023"  # padding stripped
    assert ctrls["nvme0"].serial == "7VR01A2B"
    assert ctrls["nvme0"].firmware == "SU6SM003"
    assert ctrls["nvme0"].transport == "pcie"
    assert ctrls["nvme1"].address == "0000:02:00.0"
    spaces = {n.device: n for n in read_namespaces(_roots(b))}
    assert sorted(spaces) == ["nvme0n1", "nvme1n1"]  # no hidden path disks nvme0c0n1
    assert spaces["nvme0n1"].controller == "nvme0" and spaces["nvme0n1"].nsid == 1
    assert spaces["nvme0n1"].logical_block_size == 512
    assert spaces["nvme0n1"].size_bytes == 2_000_398_934_016
    assert spaces["nvme1n1"].controller == "nvme1"
    assert spaces["nvme1n1"].physical_block_size == 4096
    assert spaces["nvme1n1"].optimal_io_size == 65536


def test_multipath_head_named_after_subsystem_not_controller(tmp_path):
    """Controller and subsystem numbers differ (a controller was reset or re-probed):
    the head disk nvme2n1 belongs to controller nvme7 through its path disk nvme2c7n1."""
    b = _machine(tmp_path)
    b._nvme_index, b._subsys_index = 7, 2
    host = "0000:00:01.3"
    b.root_port(b.host_bridge("0000:00"), host, speed=16.0, width=4)
    b.nvme(host, "0000:03:00.0", model="M", serial="S", firmware="F", vendor=1, device=2, speed=16.0, width=4)
    spaces = {n.device: n for n in read_namespaces(_roots(b))}
    assert spaces["nvme2n1"].controller == "nvme7"
    assert spaces["nvme1n1"].controller == "nvme1"


def test_partitions_and_other_disks_are_left_out(tmp_path):
    b = _machine(tmp_path, multipath=False)
    b.write("devices/pci0000:00/0000:00:01.1/0000:01:00.0/nvme/nvme0/nvme0n1/nvme0n1p1/partition", 1)
    b.symlink("class/block/nvme0n1p1", "devices/pci0000:00/0000:00:01.1/0000:01:00.0/nvme/nvme0/nvme0n1/nvme0n1p1")
    b.write("devices/virtual/block/md0/size", 100)
    b.symlink("class/block/md0", "devices/virtual/block/md0")
    assert sorted(n.device for n in read_namespaces(_roots(b))) == ["nvme0n1", "nvme1n1"]


def test_no_nvme_class_is_not_an_error(tmp_path):
    (tmp_path / "empty").mkdir()  # a readable sysfs without the class: no nvme driver (a missing root is an error)
    roots = Roots(sysfs=str(tmp_path / "empty"))
    assert read_controllers(roots) == [] and read_namespaces(roots) == []


def test_vanished_and_broken_devices_do_not_hide_others(tmp_path):
    b = _machine(tmp_path, multipath=False)
    # nvme0's namespace goes away between listing and reading: a dangling class link.
    shutil.rmtree(os.path.join(b.sys, "devices/pci0000:00/0000:00:01.1/0000:01:00.0/nvme/nvme0/nvme0n1"))
    # nvme1's namespace has unreadable attributes (a driver returning garbage).
    b.write("devices/pci0000:00/0000:00:01.2/0000:02:00.0/nvme/nvme1/nvme1n1/queue/logical_block_size", "garbage")
    b.remove("devices/pci0000:00/0000:00:01.2/0000:02:00.0/nvme/nvme1/nvme1n1/nsid")
    spaces = read_namespaces(_roots(b))
    assert [n.device for n in spaces] == ["nvme1n1"]
    assert spaces[0].logical_block_size is None  # unknown, not 0
    assert spaces[0].nsid == 1  # from the name without multipath
    assert len(read_controllers(_roots(b))) == 2


def test_fabrics_controller_has_no_pci_address(tmp_path):
    b = _machine(tmp_path)
    b.write("devices/virtual/nvme-fabrics/ctl/nvme9/transport", "tcp")
    b.write("devices/virtual/nvme-fabrics/ctl/nvme9/address", "traddr=192.0.2.7,trsvcid=4420")
    b.write("devices/virtual/nvme-fabrics/ctl/nvme9/model", "Linux")
    b.symlink("class/nvme/nvme9", "devices/virtual/nvme-fabrics/ctl/nvme9")
    ctrl = {c.name: c for c in read_controllers(_roots(b))}["nvme9"]
    assert ctrl.address is None and ctrl.transport == "tcp"


# ---- Identify: captured -----------------------------------------------------------

FIRECUDA = [Fmt(512, 0, 1), Fmt(4096, 0, 0)]


def test_captured_binary_and_json(tmp_path):
    b = _machine(tmp_path)
    write_captured(b, "nvme0", 1, build_id_ns(FIRECUDA, 0, 2_000_398_934_016), "id-ns")
    write_captured(b, "nvme1", 1, id_ns_json(FIRECUDA, 1, 15_362_991_415_296), "json")
    roots = _roots(b, captured=b.captured)
    first = identify_namespace(roots, "nvme0", 1)
    assert first.error is None and first.source == "captured" and first.identify.in_use_index == 0
    assert first.read_at == os.stat(captured_paths(roots, "nvme0", 1)[0]).st_mtime
    second = identify_namespace(roots, "nvme1", 1)
    assert second.error is None and second.identify.in_use.data_size == 4096


def test_captured_binary_wins_over_json(tmp_path):
    b = _machine(tmp_path)
    write_captured(b, "nvme0", 1, build_id_ns(FIRECUDA, 1, 1 << 30), "id-ns")
    write_captured(b, "nvme0", 1, id_ns_json(FIRECUDA, 0, 1 << 30), "json")
    assert identify_namespace(_roots(b, captured=b.captured), "nvme0", 1).identify.in_use_index == 1


def test_captured_missing_or_malformed_says_why_and_touches_no_device(tmp_path, monkeypatch):
    b = _machine(tmp_path)
    monkeypatch.setattr(reader, "identify_ioctl", lambda *a, **k: pytest.fail("ioctl with captured data"))
    monkeypatch.setattr(reader, "identify_nvme_cli", lambda *a, **k: pytest.fail("nvme-cli with captured data"))
    roots = _roots(b, captured=b.captured)
    missing = identify_namespace(roots, "nvme0", 1)
    assert missing.identify is None and "no captured Identify data" in missing.error
    assert "nvme/nvme0/ns1.id-ns" in missing.error
    write_captured(b, "nvme0", 1, b"\x00" * 64, "id-ns")
    short = identify_namespace(roots, "nvme0", 1)
    assert short.identify is None and "64 bytes" in short.error
    write_captured(b, "nvme1", 1, "Usage: nvme id-ns <device> [OPTIONS]\n", "json")
    text = identify_namespace(roots, "nvme1", 1)
    assert text.identify is None and "not JSON" in text.error


# ---- Identify: ioctl and nvme-cli ---------------------------------------------------

def test_ioctl_request_number_and_struct_layout():
    # include/uapi/linux/nvme_ioctl.h: _IOWR('N', 0x41, struct nvme_admin_cmd), 72 bytes.
    assert reader.NVME_IOCTL_ADMIN_CMD == 0xC0484E41
    layout = {name: getattr(reader._NvmePassthruCmd, name).offset for name, _ in reader._NvmePassthruCmd._fields_}
    assert layout["nsid"] == 4 and layout["addr"] == 24 and layout["data_len"] == 36
    assert layout["cdw10"] == 40 and layout["timeout_ms"] == 64 and layout["result"] == 68


def test_ioctl_on_missing_node(tmp_path):
    with pytest.raises(IdentifyError, match="no such device"):
        identify_ioctl(str(tmp_path / "nvme0"), 1)


def test_ioctl_on_a_regular_file(tmp_path):
    path = tmp_path / "nvme0"
    path.write_bytes(b"")
    with pytest.raises(IdentifyError, match="not a character device"):
        identify_ioctl(str(path), 1)


def test_ioctl_on_a_character_device_that_is_not_nvme(tmp_path):
    """A real ioctl into the kernel: /dev/null answers ENOTTY."""
    os.symlink("/dev/null", tmp_path / "nvme0")
    assert stat.S_ISCHR(os.stat(tmp_path / "nvme0").st_mode)
    with pytest.raises(IdentifyError, match="not an NVMe controller"):
        identify_ioctl(str(tmp_path / "nvme0"), 1)


@pytest.mark.parametrize("where,code", [("open", errno.EACCES), ("ioctl", errno.EPERM), ("ioctl", errno.EACCES)])
def test_ioctl_without_permission(tmp_path, monkeypatch, where, code):
    os.symlink("/dev/null", tmp_path / "nvme0")

    def refuse(*args, **kwargs):
        raise PermissionError(code, os.strerror(code))

    monkeypatch.setattr(reader.os if where == "open" else reader.fcntl, where, refuse)
    with pytest.raises(IdentifyError, match="permission denied .*CAP_SYS_ADMIN"):
        identify_ioctl(str(tmp_path / "nvme0"), 1)


def test_ioctl_nvme_status_is_an_error(tmp_path, monkeypatch):
    os.symlink("/dev/null", tmp_path / "nvme0")
    monkeypatch.setattr(reader.fcntl, "ioctl", lambda *a: 0x400b)  # Invalid Namespace or Format, DNR
    with pytest.raises(IdentifyError, match="NVMe status 0x400b"):
        identify_ioctl(str(tmp_path / "nvme0"), 7)


def test_ioctl_success_is_parsed(tmp_path, monkeypatch):
    """The buffer the kernel fills is what the parser gets."""
    os.symlink("/dev/null", tmp_path / "nvme0")
    data = build_id_ns(FIRECUDA, 0, 1 << 30)

    def fake_ioctl(fd, request, cmd, mutate):
        assert request == reader.NVME_IOCTL_ADMIN_CMD and mutate
        assert (cmd.opcode, cmd.nsid, cmd.cdw10, cmd.data_len) == (0x06, 1, 0, 4096)
        import ctypes
        ctypes.memmove(cmd.addr, data, len(data))
        return 0

    monkeypatch.setattr(reader.fcntl, "ioctl", fake_ioctl)
    result = identify_namespace(Roots(dev=str(tmp_path)), "nvme0", 1)
    assert result.error is None and result.source == "ioctl" and result.identify.in_use.data_size == 512


def _fake_nvme(tmp_path, script):
    path = tmp_path / "nvme"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return str(path)


def test_falls_back_to_nvme_cli_json(tmp_path):
    json_path = tmp_path / "out.json"
    json_path.write_text(id_ns_json(FIRECUDA, 1, 1 << 30))
    cli = _fake_nvme(tmp_path, f'[ "$1" = id-ns ] && [ "$3" = --namespace-id=1 ] && cat {json_path}\n')
    result = identify_namespace(Roots(dev=str(tmp_path / "dev")), "nvme0", 1, nvme_cli=cli)
    assert result.error is None and result.source == "nvme-cli" and result.identify.in_use_index == 1


def test_neither_ioctl_nor_nvme_cli(tmp_path):
    result = identify_namespace(Roots(dev=str(tmp_path)), "nvme0", 1, nvme_cli="nvme-not-installed-here")
    assert result.identify is None
    assert result.error.startswith("ioctl: ") and "no such device" in result.error
    assert "nvme-cli: nvme-cli not installed ('nvme-not-installed-here' not found)" in result.error


def test_nvme_cli_that_hangs_is_cut_off(tmp_path):
    cli = _fake_nvme(tmp_path, "exec sleep 30\n")
    result = identify_namespace(Roots(dev=str(tmp_path)), "nvme0", 1, nvme_cli=cli, timeout=0.5)
    assert result.identify is None and "did not finish within 0.5 s" in result.error


def test_nvme_cli_printing_garbage(tmp_path):
    cli = _fake_nvme(tmp_path, "echo 'NVMe status: Invalid Field in Command(0x2)'\n")
    result = identify_namespace(Roots(dev=str(tmp_path)), "nvme0", 1, nvme_cli=cli)
    assert result.identify is None and "nvme-cli: nvme-cli output is not JSON" in result.error


def test_real_nvme_cli_on_a_missing_device(tmp_path):
    """Debian's nvme-cli, for real, on a device path that does not exist here."""
    require_tool("nvme", "nvme-cli")
    result = identify_namespace(Roots(dev=str(tmp_path)), "nvme0", 1)
    assert result.identify is None
    assert "nvme-cli: `" in result.error and "id-ns" in result.error and "exited 1" in result.error
    assert "No such file or directory" in result.error, result.error


def test_real_nvme_cli_on_a_device_that_is_not_nvme(tmp_path):
    require_tool("nvme", "nvme-cli")
    os.symlink("/dev/null", tmp_path / "nvme0")
    result = identify_namespace(Roots(dev=str(tmp_path)), "nvme0", 1)
    assert result.identify is None
    assert "ioctl: " in result.error and "not an NVMe controller" in result.error
    assert "nvme-cli: `" in result.error and "exited" in result.error


def test_real_nvme_cli_json_keys_are_what_the_parser_reads():
    """nvme-cli's own help lists the json output format the fallback relies on."""
    nvme = require_tool("nvme", "nvme-cli")
    done = subprocess.run([nvme, "id-ns", "--help"], capture_output=True, text=True, timeout=30)
    assert "--output-format" in done.stdout + done.stderr and "--namespace-id" in done.stdout + done.stderr
