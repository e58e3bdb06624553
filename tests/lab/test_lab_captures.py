"""The committed lab captures (tests/lab/captures/*.tar.gz) replayed through the exporter
on the host: no QEMU needed. They are sysfs/procfs snapshots of the lab guests, so the
values here are a real 6.1 kernel's; this keeps the captures and the exporter in step.
"""

import tarfile
import time
from pathlib import Path

import pytest

import lab
from tests.conftest import run_exporter

CAPTURES = Path(__file__).resolve().parent / "captures"


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    cache = {}

    def get(topology):
        if topology not in cache:
            archive = CAPTURES / f"{topology}.tar.gz"
            root = tmp_path_factory.mktemp(f"capture-{topology}")
            with tarfile.open(archive) as tar:
                tar.extractall(root)
            args = [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc",
                    f"--path.captured={root}/captured", f"--path.dev={root}/dev"]
            with run_exporter(args, str(root)) as exporter:
                # The NVMe Identify task reads the captured files in the background.
                text = exporter.metrics()
                if (root / "captured").is_dir():
                    deadline = time.monotonic() + 20
                    while "storpath_nvme_namespace_best_lba_size_bytes{" not in text \
                            and time.monotonic() < deadline:
                        time.sleep(0.2)
                        text = exporter.metrics()
            cache[topology] = lab.Scrape(text)
        return cache[topology]

    return get


# The multipath machine's captures (one per step) are replayed by test_multipath_captures.py.
@pytest.mark.parametrize("topology", sorted(set(lab.TOPOLOGIES) - {"multipath"}))
def test_capture_is_small_and_replays_cleanly(topology, replay):
    assert (CAPTURES / f"{topology}.tar.gz").stat().st_size < 1024 * 1024
    s = replay(topology)
    failed = [l["collector"] for l, v in s.series("storpath_scrape_collector_success") if v != 1]
    assert not failed


def test_nvme_capture(replay):
    s = replay("nvme")
    assert s.value("storpath_pcie_max_link_speed_transfers_per_second",
                   address="0000:00:04.0") == 1.6e10
    assert s.value("storpath_pcie_max_link_width", address="0000:00:06.0") == 2
    assert s.value("storpath_pcie_current_link_speed_transfers_per_second",
                   address="0000:01:00.0") == 2.5e9
    assert s.value("storpath_numa_storage_controller_node", address="0000:81:00.0") == 1
    # The capture was taken after SPLAB1G3X4 was reformatted to 4 KiB.
    by_serial = {l["serial"]: l["controller"]
                 for l in s.label_sets("storpath_nvme_controller_info")}
    formatted = by_serial["SPLAB1G3X4"] + "n1"
    assert s.value("storpath_nvme_namespace_lba_size_bytes", device=formatted) == 4096
    other = by_serial["SPLAB0G4X4"] + "n1"
    assert s.value("storpath_nvme_namespace_lba_size_bytes", device=other) == 512
    assert s.value("storpath_nvme_namespace_best_lba_size_bytes", device=other) == 4096


def test_sas_capture(replay):
    s = replay("sas")
    rates = [v for _, v in s.series("storpath_sas_phy_negotiated_link_rate_transfers_per_second")]
    assert rates == [3e9] * len(lab.SAS_DISKS)
    assert len(s.series("storpath_sas_phy_link_up")) == lab.SAS_PHYS
    limits = sorted(v for _, v in s.series("storpath_sata_link_limit_transfers_per_second"))
    assert limits == [1.5e9, 3e9]


def test_md_capture(replay):
    s = replay("md")
    assert s.value("storpath_md_degraded_disks", device="md0") == 0
    assert s.value("storpath_md_degraded_disks", device="md1") is None
    assert s.value("storpath_md_degraded_disks", device="md2") == 1
    assert s.value("storpath_md_sync_action", device="md3", action="recover") == 1


def test_sata_identify_of_the_real_kernel(replay, tmp_path):
    """The AHCI disks' IDENTIFY data as Debian's 6.1 kernel prints it (ata_device/*/id):
    256 words parsed, the model where ATA puts it, and QEMU's word 76 (0x0100: NCQ only, no
    Serial ATA generation bit) read as a capability the drive does not report. Such a link
    is unverifiable, never a warning: the forced-low link1 stays judged by libata's limit."""
    from storpath.readers.ata_identify import capability_of, parse_id_text

    with tarfile.open(CAPTURES / "sas.tar.gz") as tar:
        ids = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers()
               if m.isfile() and m.name.endswith("/ata_device/" + m.name.split("/")[-2] + "/id")}
    # The empty ports of the 6-port controller (class "unknown") print 256 zero words: word 76
    # 0x0000, not reported.
    parsed = {name: parse_id_text(text) for name, text in ids.items()}
    empty = [name for name, (words, _) in parsed.items() if words is not None and not any(words)]
    assert len(empty) == 4 and all(capability_of(parsed[name][0]).maximum is None for name in empty)
    ids = {name: text for name, text in ids.items() if name not in empty}
    assert len(ids) == len(lab.SATA_DISKS), sorted(ids)
    for name, text in ids.items():
        words, problem = parse_id_text(text)
        assert problem is None and len(words) == 256, name
        model = b"".join(w.to_bytes(2, "big") for w in words[27:47]).decode().strip()
        assert model == "QEMU HARDDISK", (name, model)
        assert words[76] == 0x0100, (name, hex(words[76]))
        assert capability_of(words).maximum is None, name
    s = replay("sas")
    assert s.series("storpath_sata_device_max_link_speed_transfers_per_second") == []
    verdicts = s.label_sets("storpath_sata_link_verifiable")
    assert verdicts and all(v["basis"] != "both_ends" for v in verdicts), verdicts
    assert all(value == 0 for _, value in s.series("storpath_sata_link_verifiable")), verdicts
