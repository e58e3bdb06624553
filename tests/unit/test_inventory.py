"""The inventory reader's parsers, the declared layout, and the wide-port verdict, on literal input."""

from storpath.analysis.inventory import parse_expected, shortfalls, wide_ports
from storpath.readers.block import BlockDevice
from storpath.readers.inventory import disk_kind, parse_slot_address, parse_vpd_serial, padded
from storpath.readers.pci import PciDevice, PciStatic


def test_slot_address():
    assert parse_slot_address("0000:03:00\n") == "0000:03:00"
    assert parse_slot_address("") is None  # an empty slot
    assert parse_slot_address("0000:03:00.0") is None
    assert parse_slot_address(None) is None


def test_vpd_serial():
    assert parse_vpd_serial(bytes([0, 0x80, 0, 10]) + b"  S45PN0M5 ") == "S45PN0M5"
    assert parse_vpd_serial(bytes([0, 0x83, 0, 4]) + b"abcd") == ""  # another page
    assert parse_vpd_serial(b"\x00\x80") == "" and parse_vpd_serial(None) == ""
    assert padded("Samsung SSD 970 EVO 1TB          \n") == "Samsung SSD 970 EVO 1TB"


def test_disk_kinds():
    def dev(name, path, virtual=False):
        return BlockDevice(name, path, None, None, virtual)
    assert disk_kind(dev("sda", "/sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda")) \
        == "sata_disk"
    assert disk_kind(dev("sdb", "/sys/devices/pci0000:00/0000:04:00.0/host0/port-0:1/end_device-0:1/target0:0:1/"
                                "0:0:1:0/block/sdb")) == "sas_disk"
    assert disk_kind(dev("sdc", "/sys/devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/"
                                "6:0:0:0/block/sdc")) is None  # USB is not counted
    assert disk_kind(dev("nvme1n1", "/sys/devices/virtual/nvme-subsystem/nvme-subsys1/nvme1n1")) == "nvme_namespace"
    assert disk_kind(dev("md0", "/sys/devices/virtual/block/md0", virtual=True)) is None


def test_expected_layout():
    expected, problems = parse_expected({"nvme_controller": 4, "sas_disk": -1, "tape": 2, "hba": True})
    assert expected == {"nvme_controller": 4}
    assert len(problems) == 3 and any("tape" in p for p in problems)
    assert parse_expected([4])[0] == {}
    assert shortfalls({"nvme_controller": 4, "hba": 1}, {"nvme_controller": 1, "hba": 1}) == {"nvme_controller": (1, 4)}


def _pci(address, parent, class_code, width, port_type):
    static = PciStatic(address=address, parent=parent, class_code=class_code, vendor_id=None, device_id=None,
                       subsystem_vendor_id=None, subsystem_device_id=None, numa_node=0, max_link_speed=8e9,
                       max_link_width=width, has_link=True, config_port_type=port_type, aer_files=())
    return PciDevice(static=static, driver=None, current_link_speed=8e9, current_link_width=width,
                     port_type=port_type)


def test_wide_port_with_one_storage_controller():
    port = _pci("0000:00:03.0", None, 0x060400, 16, "root_port")
    nvme = _pci("0000:03:00.0", "0000:00:03.0", 0x010802, 4, "endpoint")
    assert [(w.port.address, w.device.address) for w in wide_ports([port, nvme])] == [("0000:00:03.0", "0000:03:00.0")]
    # bifurcated: an x4 port per drive
    assert wide_ports([_pci("0000:00:03.0", None, 0x060400, 4, "root_port"), nvme]) == []
    # a network card in a wide slot is not storage; an x8 HBA in an x16 slot is not 4x narrower
    nic = _pci("0000:03:00.0", "0000:00:03.0", 0x020000, 4, "endpoint")
    hba = _pci("0000:03:00.0", "0000:00:03.0", 0x010700, 8, "endpoint")
    assert wide_ports([port, nic]) == [] and wide_ports([port, hba]) == []
