"""The topology tree's model (pure: records and findings in, nodes out), its text and
HTML renderers on hand-built records: states, the limiting hop, where findings go,
what is left out, elision to the width, and escaping of what the hardware names."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from storpath.http import landing
from storpath.analysis.pcie import analyse
from storpath.readers.pci import resolve_port_types
from storpath.report.findings import CRITICAL, INFO, WARNING, Finding, worst
from storpath.readers.block import BlockDevice
from storpath.readers.pci import PciDevice, PciStatic
from storpath.scrape.snapshot import Snapshot
from storpath.report.tree import model, text
from storpath.report.tree.model import Array, TreeInput

NVME, BRIDGE, NIC = 0x010802, 0x060400, 0x020000
G3, G4 = 8e9, 16e9


def dev(address, parent, class_code, max_speed, max_width, cur_speed=None, cur_width=None, numa=0):
    static = PciStatic(address=address, parent=parent, class_code=class_code, vendor_id="0x1000", device_id="0x0001",
                       subsystem_vendor_id=None, subsystem_device_id=None, numa_node=numa,
                       max_link_speed=max_speed, max_link_width=max_width, has_link=True, config_port_type=None,
                       aer_files=())
    return PciDevice(static=static, driver=None, current_link_speed=cur_speed if cur_speed is not None else max_speed,
                     current_link_width=cur_width if cur_width is not None else max_width)


def block(name, address):
    return BlockDevice(name=name, real_path=f"/sys/devices/{address}/{name}", pci_address=address,
                       controller=name[:-2] if name.startswith("nvme") else "host0", virtual=False)


def switch_host(uplink_width=8, uplink_current=None):
    """Root port -> switch (uplink x`uplink_width`) -> four Gen3 x4 drives; a NIC on its own root port."""
    devices = [dev("0000:3a:00.0", None, BRIDGE, G3, uplink_width),
               dev("0000:3b:00.0", "0000:3a:00.0", BRIDGE, G3, uplink_width, cur_width=uplink_current),
               dev("0000:10:00.0", None, BRIDGE, G3, 8), dev("0000:11:00.0", "0000:10:00.0", NIC, G3, 8)]
    blocks = []
    for i in range(5):
        down = f"0000:3c:0{i}.0"
        devices.append(dev(down, "0000:3b:00.0", BRIDGE, G3, 4))
        if i < 4:  # the fifth port is empty
            devices.append(dev(f"0000:4{i}:00.0", down, NVME, G3, 4))
            blocks.append(block(f"nvme{i}n1", f"0000:4{i}:00.0"))
    resolve_port_types(devices)
    return devices, blocks


def build(devices, blocks, **extra):
    return model.build(TreeInput(pci=devices, links=analyse(devices), blocks=blocks, **extra))


def finding(subject, severity, title="something", kind="pcie.link_trained_low"):
    return Finding(subject=subject, severity=severity, title=title, evidence="e", impact="i", remedy="r", kind=kind)


def test_switch_uplink_narrower_than_its_drives_together_is_the_limiting_hop():
    topology = build(*switch_host(uplink_width=8))
    uplink = topology.find("0000:3b:00.0")
    assert uplink.limits == ("nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1")
    assert uplink.state == model.HEALTHY
    assert not topology.find("0000:40:00.0").limits


def test_uplink_as_wide_as_its_drives_together_limits_nothing():
    topology = build(*switch_host(uplink_width=16))
    assert not any(node.limits for root in topology.roots for node in root.walk())


def test_uplink_trained_low_is_below_expected_and_shows_its_numbers():
    topology = build(*switch_host(uplink_width=8, uplink_current=4))
    uplink = topology.find("0000:3b:00.0")
    assert uplink.state == model.BELOW_EXPECTED
    assert model.hop_text(uplink.link, uplink.port) == "link 8 GT/s x4 (expected 8 GT/s x8, max 8 GT/s x8)"
    port = topology.find("0000:3a:00.0")
    assert port.port and model.hop_text(port.link, port.port) == "port max 8 GT/s x8"


def test_storage_paths_judged_links_and_empty_switch_ports_kept():
    """Storage paths, and the NICs, GPUs and switches whose links check and the rules judge
    (the NIC below 0000:10:00.0 has no storage but its link is judged)."""
    topology = build(*switch_host())
    assert topology.find("0000:11:00.0") is not None and topology.find("0000:11:00.0").link is not None
    assert topology.find("0000:3c:04.0").empty
    assert [r.id for r in topology.roots] == ["0000:10:00.0", "0000:3a:00.0"]
    assert topology.roots[0].numa_node == 0 and topology.find("0000:3b:00.0").numa_node is None  # shown once


def test_placement_and_unverifiable_states():
    devices = [dev("0000:00:01.0", None, BRIDGE, G3, 4), dev("0000:01:00.0", "0000:00:01.0", NVME, G4, 4, G3, 4)]
    resolve_port_types(devices)
    links = analyse(devices)
    assert model.link_state(links["0000:01:00.0"]) == model.LIMITED_BY_PLACEMENT
    # analysis.virtual's verdict arrives as the link's `speed.verifiable`; the tree reads it in one place.
    link = links["0000:01:00.0"]
    guest = replace(link, speed=replace(link.speed, basis="device_only", reason="emulated_port"))
    assert model.link_state(guest) == model.UNVERIFIABLE
    topology = model.build(TreeInput(pci=devices, links={**links, "0000:01:00.0": guest},
                                         blocks=[block("nvme0n1", "0000:01:00.0")]))
    assert topology.find("0000:01:00.0").state == model.UNVERIFIABLE


def test_findings_go_to_their_node_worst_first_and_the_rest_elsewhere():
    devices, blocks = switch_host()
    found = [finding("0000:40:00.0", INFO, "minor"), finding("0000:40:00.0", CRITICAL, "major"),
             finding("nvme1n1", WARNING, "format", kind="nvme.lba_format_not_best"),
             finding("phy-0:1", WARNING, "phy slow", kind="sas.phy_errors"),
             finding("numa", INFO, "placement", kind="numa.storage_placement")]
    topology = build(devices, blocks, findings=found, groups={"phy-0:1": "0000:41:00.0"})
    assert [f.title for f in topology.find("0000:40:00.0").findings] == ["major", "minor"]
    assert topology.find("nvme1n1").severity == WARNING
    assert topology.find("0000:41:00.0").findings[0].title == "phy slow"
    assert [f.subject for f in topology.elsewhere] == ["numa"]
    storage_root = next(r for r in topology.roots if r.id == "0000:3a:00.0")
    assert worst(f.severity for n in storage_root.walk() for f in n.findings) == CRITICAL


def test_arrays_list_members_with_their_place_and_blocks_name_their_arrays():
    devices, blocks = switch_host()
    arrays = [Array("md0", model.MD, "raid1", ("nvme0n1p2", "nvme1n1p2")),
              Array("tank", model.ZPOOL, "mirror", ("nvme2n1", "sdz"))]
    topology = build(devices, blocks, arrays=arrays)
    assert topology.find("nvme0n1").member_of == ("md0",)
    md0 = topology.find("md0")
    assert md0.what == "md raid1" and [c.what for c in md0.children] == ["0000:40:00.0", "0000:41:00.0"]
    assert [c.what for c in topology.find("tank").children] == ["0000:42:00.0", "no such block device"]
    assert [r.id for r in topology.roots][-2:] == ["md0", "tank"]


def test_text_fits_the_width_eliding_the_model_not_the_state():
    devices = [dev("0000:00:01.0", None, BRIDGE, G4, 4), dev("0000:01:00.0", "0000:00:01.0", NVME, G4, 4, G4, 2)]
    resolve_port_types(devices)
    long_model = "Vendor Extremely Long Model Name Series 9000 PRO 7.68TB ABC-123"
    topology = build(devices, [block("nvme0n1", "0000:01:00.0")], models={"0000:01:00.0": long_model})
    for width, ascii in ((60, False), (80, True)):
        out = text.render(topology, width=width, ascii=ascii)
        assert all(len(line) <= width for line in out.splitlines()), out
        line = next(line for line in out.splitlines() if "0000:01:00.0" in line)
        assert line.endswith("below expected") and ("…" in line or "..." in line) and "ABC-123" in line, line
        assert out.isascii() == ascii


def test_landing_page_escapes_what_the_hardware_says():
    devices = [dev("0000:00:01.0", None, BRIDGE, G4, 4), dev("0000:01:00.0", "0000:00:01.0", NVME, G4, 4, G4, 2)]
    resolve_port_types(devices)
    evil = "<script>alert('x')</script>\" onmouseover=\"alert(1)"
    scrape = Snapshot(taken_at=0.0, pci=devices, blocks=[block("nvme0n1", "0000:01:00.0")],
                      nvme_controllers=[SimpleNamespace(address="0000:01:00.0", model=evil)])
    page = landing.Landing(["pcie"], config={}).page(SimpleNamespace(last_snapshot=lambda: scrape)).decode()
    assert "<script" not in page and "onmouseover=\"" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&quot; onmouseover=&quot;alert(1)" in page
    assert 'class="node pci below-expected"' in page  # the pcie findings ran on the snapshot
    assert "PcieLinkWidthBelowExpected.md" in page


def test_landing_page_before_the_first_scrape_says_so_and_reads_nothing():
    page = landing.Landing([], config={}).page(SimpleNamespace(last_snapshot=lambda: None)).decode()
    assert 'id="no-scrape"' in page and "<ul class=\"tree\">" not in page


def test_every_runbook_the_page_links_exists():
    import os

    from tests.conftest import ROOT

    for name in set(landing.RUNBOOKS.values()):
        assert os.path.exists(os.path.join(ROOT, "docs", "runbooks", f"{name}.md")), name


def test_landing_page_says_which_end_limits_a_sas_disk(tmp_path):
    """The page draws each SAS/SATA disk's link with the rate both ends allow, as `storpath
    tree` does: on the Dell R900 before the fix, SSDs at 1.5 Gbit/s where both ends do 3."""
    import os

    from storpath.report.findings import take_snapshot
    from storpath.base.roots import Roots
    from tests.fixtures import machines

    machines.load("dell-r900-sas1068e").build(str(tmp_path), "before-fix")
    roots = Roots(sysfs=os.path.join(tmp_path, "sys"), procfs=os.path.join(tmp_path, "proc"))
    snapshot = take_snapshot(roots)
    page = landing.Landing(["sas"], config={}).page(SimpleNamespace(last_snapshot=lambda: snapshot)).decode()
    assert page.count("1.5 Gbit/s, expected 3 Gbit/s (both ends alike)") == 8, page


def test_text_and_page_show_controls_and_undecodable_bytes_escaped():
    """A model with terminal controls and a byte that is not UTF-8 (as a lone surrogate)
    reached the terminal raw, and made the page fail to encode (`/` answered 500)."""
    devices = [dev("0000:00:01.0", None, BRIDGE, G4, 4), dev("0000:01:00.0", "0000:00:01.0", NVME, G4, 4, G4, 2)]
    resolve_port_types(devices)
    evil = "PM9A3\x1b]0;t\x07\x1b[2J\r\nX\u202eY\udcff"
    plain = text.render(build(devices, [block("nvme0n1", "0000:01:00.0")], models={"0000:01:00.0": "PM9A3"}))
    for width in (60, 100):
        out = text.render(build(devices, [block("nvme0n1", "0000:01:00.0")], models={"0000:01:00.0": evil}),
                          width=width)
        assert out.count("\n") == plain.count("\n"), out
        assert all(len(line) <= width and line.isprintable() for line in out.splitlines()), out
    assert "nvme0 · PM9A3\\x1b]0;t\\x07\\x1b[2J\\x0d\\x0aX\\u202eY\\xff  ✗ below expected" in out
    scrape = Snapshot(taken_at=0.0, pci=devices, blocks=[block("nvme0n1", "0000:01:00.0")],
                      nvme_controllers=[SimpleNamespace(address="0000:01:00.0", model=evil)])
    page = landing.Landing(["pcie"], config={}).page(SimpleNamespace(last_snapshot=lambda: scrape))
    assert b"PM9A3\\x1b]0;t\\x07\\x1b[2J\\x0d\\x0aX\\u202eY\\xff" in page
    assert b"\x1b" not in page and "\u202e".encode() not in page


def _big_topology(maps):
    """A topology of `maps` multipath maps of two members each (3 nodes a map), after one HBA
    holding every path device: the shape of a host of many dm-multipath maps."""
    from storpath.report.tree.model import MEMBER, PCI, Node, Topology

    paths = tuple(Node(id=f"sd{n}", kind="block", what="") for n in range(2 * maps))
    hba = Node(id="0000:01:00.0", kind=PCI, what="SAS controller", children=paths)
    arrays = tuple(Node(id=f"dm-{m}", kind="multipath", what="multipath",
                        children=(Node(id=f"dm-{m}/sd{2 * m}", kind=MEMBER, what="0000:01:00.0"),
                                  Node(id=f"dm-{m}/sd{2 * m + 1}", kind=MEMBER, what="0000:01:00.0")))
                   for m in range(maps))
    return Topology(roots=(hba,) + arrays)


def _balanced(page):
    """Whether the page's <ul>/<li> nest properly, and the nodes it draws (not the continued ones)."""
    from html.parser import HTMLParser

    class Check(HTMLParser):
        def __init__(self):
            super().__init__()
            self.stack, self.ok, self.nodes, self.continued = [], True, [], []

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if tag in ("ul", "li"):
                if tag == "li" and (not self.stack or self.stack[-1] != "ul"):
                    self.ok = False
                self.stack.append(tag)
            if tag == "div" and "data-node" in attrs:
                (self.continued if "continued" in attrs["class"] else self.nodes).append(attrs["data-node"])

        def handle_endtag(self, tag):
            if tag in ("ul", "li"):
                if not self.stack or self.stack.pop() != tag:
                    self.ok = False

    check = Check()
    check.feed(page)
    return check.ok and not check.stack, check.nodes, check.continued


def test_a_large_tree_is_paged_each_node_once_under_its_ancestors():
    """10,000 dm maps drew one page of 30,000 nodes (5 MB, seconds): now pages of PAGE_NODES,
    every node on exactly one page, each page's first node under its ancestors (continued)."""
    flat = landing._Flat(_big_topology(1500))  # 1 HBA + 3000 paths + 1500 maps * 3 nodes = 7501 nodes
    count = -(-7501 // landing.PAGE_NODES)
    assert flat.pages() == count > 1
    pages = [landing._page_html(flat, n, landing.DEFAULT_RUNBOOK_BASE) for n in range(1, count + 1)]
    assert f"Page 1 of {count}: nodes 1-{landing.PAGE_NODES} of 7501" in pages[0]
    seen = []
    for number, page in enumerate(pages, 1):
        ok, nodes, continued = _balanced(page)
        assert ok, number
        assert len(nodes) == min(landing.PAGE_NODES, 7501 - (number - 1) * landing.PAGE_NODES)
        seen += nodes
        if number == 2:  # starts among the HBA's paths: the HBA drawn above them, links both ways
            assert continued == ["0000:01:00.0"] and '"?page=1"' in page and '"?page=3"' in page
    assert seen == [n.id for root in flat.topology.roots for n in root.walk()]


def test_a_page_past_the_last_is_the_last_and_a_small_tree_has_no_page_links():
    devices = [dev("0000:00:01.0", None, BRIDGE, G4, 4), dev("0000:01:00.0", "0000:00:01.0", NVME, G4, 4, G4, 2)]
    resolve_port_types(devices)
    scrape = Snapshot(taken_at=0.0, pci=devices, blocks=[block("nvme0n1", "0000:01:00.0")])
    page_of = landing.Landing(["pcie"], config={})
    first = page_of.page(SimpleNamespace(last_snapshot=lambda: scrape)).decode()
    assert page_of.page(SimpleNamespace(last_snapshot=lambda: scrape), 7).decode() == first
    assert page_of.drawings == 1 and 'id="pages"' not in first and _balanced(first)[0]


def test_landing_page_names_the_cause_of_a_capped_link(tmp_path):
    """The Z690 fixture's variants: a link held at its port's Target Link Speed shows the target
    and the cause (the bandwidth controller's cooling device, or unknown: firmware, a driver, a
    tool) beside its link, with the PcieLinkCapped runbook; a link below its own target shows no
    cap. The old page showed neither the cap line nor the runbook."""
    import os
    import re

    from storpath.report.findings import take_snapshot
    from storpath.base.roots import Roots
    from tests.fixtures import machines

    def drive_box(variant):
        root = tmp_path / variant
        machines.load("desktop-z690-single-socket").build(str(root), variant)
        snapshot = take_snapshot(Roots(sysfs=os.path.join(root, "sys"), procfs=os.path.join(root, "proc")))
        page = landing.Landing(["pcie"], config={}).page(SimpleNamespace(last_snapshot=lambda: snapshot)).decode()
        return re.search(r'<div [^>]*id="node-0000-02-00-0".*?</div>', page).group(0)

    thermal = drive_box("capped-thermal")
    assert ('<span class="cap">capped at 8 GT/s (Gen3) by the kernel&#x27;s PCIe bandwidth controller, '
            'a thermal cooling device</span>') in thermal
    assert "PcieLinkCapped.md" in thermal
    by_tool = drive_box("capped-by-tool")
    assert '<span class="cap">capped at 8 GT/s (Gen3) (target set below capability, cause unknown' in by_tool
    below = drive_box("below-target")
    assert 'class="cap"' not in below and "PcieLinkSpeedBelowExpected.md" in below
