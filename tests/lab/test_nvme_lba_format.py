"""Lab: the nvme collector on a real kernel, with the real NVMe admin ioctl and nvme-cli.

QEMU's nvme-ns offers eight LBA formats (512 and 4096 data bytes, each with 0, 8, 16 and
64 metadata bytes, all rated Best) and starts at format 0 (512 B). `nvme format` switches
formats; the exporter must notice from sysfs, read Identify again in the background and
serve the new format without a restart.
"""

import json
import re
import shlex
import time

import lab

SERIAL = "SPLAB1G3X4"


def _sample(text, name, **labels):
    """The value of one series in an exposition, or None."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def _namespace_of(guest, controller):
    for disk in guest.sh(f"ls /sys/class/nvme/{controller}/").split():
        if re.fullmatch(r"nvme\d+n1", disk):
            return disk
    # native multipath: the head disk lives under the nvme-subsystem
    out = guest.sh(f"ls -d /sys/class/nvme/{controller}/nvme*c*n1 2>/dev/null || true").split()
    assert out, f"no namespace found for {controller}"
    return re.sub(r"c\d+", "", out[0].rsplit("/", 1)[1])


def _reader(guest, code, user=None):
    cmd = f"python3 -c {shlex.quote(code)}"
    if user:
        cmd = f"setpriv --reuid={user} --regid={user} --clear-groups -- {cmd}"
    return guest.sh(cmd)


IDENTIFY = """
import json
from storpath.readers.nvme import identify_namespace
from storpath.base.roots import Roots
r = identify_namespace(Roots(), "{ctrl}", 1, nvme_cli="{cli}")
print(json.dumps({{"source": r.source, "error": r.error, "in_use": r.identify.in_use_index if r.identify else None,
                  "formats": [[f.index, f.data_size, f.metadata_size, f.relative_performance]
                              for f in r.identify.formats] if r.identify else None}}))
"""


def test_ioctl_reads_the_same_formats_as_nvme_cli(nvme_guest):
    ctrl = lab.nvme_ctrl_by_serial(nvme_guest)[SERIAL]
    ours = json.loads(_reader(nvme_guest, IDENTIFY.format(ctrl=ctrl, cli="nvme")))
    assert ours["source"] == "ioctl", ours
    cli = json.loads(nvme_guest.sh(f"nvme id-ns /dev/{ctrl} --namespace-id=1 --output-format=json"))
    expected = [[i, 1 << f["ds"], f["ms"], f["rp"]] for i, f in enumerate(cli["lbafs"][:cli["nlbaf"] + 1])]
    assert ours["formats"] == expected
    assert ours["in_use"] == cli["flbas"] & 0xF
    assert [(f[1], f[2]) for f in ours["formats"]] == [(512, 0), (512, 8), (512, 16), (512, 64),
                                                        (4096, 0), (4096, 8), (4096, 16), (4096, 64)]


def test_unprivileged_process_gets_a_reason_not_a_crash(nvme_guest):
    ctrl = lab.nvme_ctrl_by_serial(nvme_guest)[SERIAL]
    out = json.loads(_reader(nvme_guest, IDENTIFY.format(ctrl=ctrl, cli="nvme"), user=65534))
    assert out["formats"] is None
    assert "permission denied" in out["error"], out
    assert "nvme-cli" in out["error"], out


def test_exporter_follows_nvme_format(nvme_guest):
    ctrl = lab.nvme_ctrl_by_serial(nvme_guest)[SERIAL]
    dev = _namespace_of(nvme_guest, ctrl)
    text = lab.exporter_metrics(nvme_guest)
    assert _sample(text, "storpath_nvme_identify_available", controller=ctrl) == 1, text
    assert _sample(text, "storpath_nvme_namespace_lba_size_bytes", device=dev) == 512
    assert _sample(text, "storpath_nvme_namespace_best_lba_size_bytes", device=dev) == 4096
    assert _sample(text, "storpath_nvme_namespace_lba_format_info", device=dev, index="0", in_use="true") == 1
    assert _sample(text, "storpath_nvme_namespace_lba_format_info", device=dev, index="7",
                   data_size_bytes="4096", metadata_size_bytes="64", relative_performance="best") == 1

    nvme_guest.sh(f"nvme format /dev/{dev} --lbaf=4 --force && nvme ns-rescan /dev/{ctrl}")
    assert nvme_guest.sh(f"cat /sys/class/block/{dev}/queue/logical_block_size").strip() == "4096"
    deadline = time.monotonic() + 60
    while True:
        text = lab.exporter_metrics(nvme_guest)
        if _sample(text, "storpath_nvme_namespace_lba_format_info", device=dev, index="4", in_use="true") == 1:
            break
        assert time.monotonic() < deadline, "the exporter did not follow the format within 60 s:\n" + text
        time.sleep(1)
    assert _sample(text, "storpath_nvme_namespace_lba_size_bytes", device=dev) == 4096
    assert _sample(text, "storpath_nvme_namespace_best_lba_size_bytes", device=dev) == 4096
    assert _sample(text, "storpath_nvme_namespace_lba_format_info", device=dev, index="0", in_use="false") == 1
    log = nvme_guest.sh("cat /tmp/storpath.log")
    assert "reading Identify Namespace again" in log, log
