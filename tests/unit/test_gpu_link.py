"""collectors.gpu and the pcie_observed slow source (storpath.scrape.slow.GpuLinks): a GPU's link sampled between scrapes, the highest over a window served."""

from storpath.analysis.observed import Window
from storpath.base.background import Scheduler
from storpath.collectors.base import Context
from storpath.collectors.gpu import GpuCollector, nvml_bus_id
from storpath.readers.link_samples import parse_sample
from storpath.base.roots import Roots
from tests.fixtures.sysfs_builder import MachineBuilder
from tests.snapshots import snapshot_for

GPU = "0000:01:00.0"


def _machine(tmp_path):
    b = MachineBuilder(str(tmp_path))
    host = b.host_bridge("0000:00")
    b.root_port(host, "0000:00:01.0", speed=16.0, width=16, vendor=0x8086, device=0x460d)
    b.pci("0000:00:01.0", GPU, class_code=0x030200, vendor=0x10de, device=0x2330, max_speed=32.0, max_width=16,
          cur_speed=2.5, cur_width=8, driver="nvidia")
    b.pci("0000:00:01.0", "0000:01:00.1", class_code=0x040300, vendor=0x10de, device=0x22e8, max_speed=32.0,
          max_width=16, cur_speed=2.5, cur_width=8, driver="snd_hda_intel")
    b.finish()
    return b


def _scrape(collector):
    snapshot = snapshot_for(collector)
    return collector.values(snapshot), snapshot


def test_highest_link_of_the_window_is_served_not_the_last(tmp_path):
    b = _machine(tmp_path)
    collector = GpuCollector(Context(roots=Roots(sysfs=b.sys, procfs=b.proc, dev=""),
                                     config=dict(GpuCollector.config_defaults), scheduler=Scheduler()))
    rows, snapshot = _scrape(collector)  # the first scrape reads a new GPU once
    assert rows is not None
    assert snapshot.pcie_observed[GPU].max_speed == 2.5e9 and snapshot.pcie_observed[GPU].samples == 1
    b.set_link(GPU, cur_speed=16.0, cur_width=16)  # busy for a moment between two scrapes
    collector.ctx.scheduler.run_all_once()  # the sampling task's pass
    b.set_link(GPU, cur_speed=2.5, cur_width=8)  # idle again when the scrape comes
    collector.ctx.scheduler.run_all_once()  # the sampling task's pass
    _, snapshot = _scrape(collector)
    seen = snapshot.pcie_observed[GPU]
    assert (seen.max_speed, seen.max_width, seen.samples) == (16e9, 16, 3)
    assert set(snapshot.pcie_observed) == {GPU}  # the audio function (class 0x04) is not sampled


def test_window_forgets_old_samples_and_gone_devices():
    window = Window(60)
    window.add(0.0, {"a": (16e9, 16), "b": (8e9, 4)}, ["a", "b"])
    window.add(30.0, {"a": (2.5e9, 8)}, ["a", "b"])
    assert window.observed()["a"].max_speed == 16e9
    window.add(61.0, {"a": (2.5e9, 8)}, ["a"])
    observed = window.observed()
    assert (observed["a"].max_speed, observed["a"].max_width, observed["a"].samples) == (2.5e9, 8, 2)
    assert "b" not in observed


def test_samples_and_bus_id_spelling():
    assert parse_sample(b"16.0 GT/s PCIe\n", b"16\n") == (16e9, 16)
    assert parse_sample(b"Unknown\n", None) == (None, None)
    assert nvml_bus_id("0000:3b:00.0") == "00000000:3B:00.0"
    assert nvml_bus_id("10000:e1:00.1") == "00010000:E1:00.1"
