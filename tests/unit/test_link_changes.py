"""The pcie_link_changes slow source (storpath.scrape.slow.LinkChanges) and its counter in
collectors.pcie: a link that drops and retrains between two scrapes is counted although both
scrapes read the same speed and width."""

from storpath.analysis.observed import ChangeCounter
from storpath.base.background import Scheduler
from storpath.base.roots import Roots
from storpath.collectors.base import Context
from storpath.collectors.pcie import LINK_CHANGES, PcieCollector
from tests.fixtures.sysfs_builder import MachineBuilder
from tests.snapshots import snapshot_for

NVME = "0000:01:00.0"
AUDIO = "0000:02:00.0"


def _machine(tmp_path):
    b = MachineBuilder(str(tmp_path))
    host = b.host_bridge("0000:00")
    b.root_port(host, "0000:00:01.0", speed=16.0, width=4, vendor=0x8086, device=0x460d)
    b.pci("0000:00:01.0", NVME, class_code=0x010802, vendor=0x144d, device=0xa80a, max_speed=16.0, max_width=4,
          cur_speed=16.0, cur_width=4, driver="nvme")
    b.root_port(host, "0000:00:02.0", speed=8.0, width=1, vendor=0x8086, device=0x460e)
    b.pci("0000:00:02.0", AUDIO, class_code=0x040300, vendor=0x8086, device=0x1234, max_speed=8.0, max_width=1,
          cur_speed=8.0, cur_width=1, driver="snd_hda_intel")
    b.finish()
    return b


def _collector(b, **config):
    settings = dict(PcieCollector.config_defaults, **config)
    return PcieCollector(Context(roots=Roots(sysfs=b.sys, procfs=b.proc, dev=""), config=settings,
                                 scheduler=Scheduler()))


def _changes(collector):
    snapshot = snapshot_for(collector)
    rows = collector.values(snapshot)
    series = rows.get(LINK_CHANGES)
    return dict(zip((labels[0] for labels in series.labels), series.values)) if series else {}, snapshot


def test_a_flap_between_two_scrapes_moves_the_counter(tmp_path):
    b = _machine(tmp_path)
    collector = _collector(b)
    first, _ = _changes(collector)  # the scrape names the links; the task samples them
    assert first == {NVME: 0}  # storage is watched by default, the audio function is not
    collector.ctx.scheduler.run_all_once()  # the first sample
    b.set_link(NVME, cur_speed=2.5, cur_width=1)  # the link drops ...
    collector.ctx.scheduler.run_all_once()
    b.set_link(NVME, cur_speed=16.0, cur_width=4)  # ... and retrains before the next scrape
    collector.ctx.scheduler.run_all_once()
    second, snapshot = _changes(collector)
    assert second[NVME] == 2
    assert snapshot.pci[[d.address for d in snapshot.pci].index(NVME)].current_link_speed == 16e9  # gauges: steady


def test_a_steady_link_counts_nothing_and_classes_choose_the_links(tmp_path):
    b = _machine(tmp_path)
    collector = _collector(b, link_sample_classes=["all"])
    _changes(collector)
    for _ in range(3):
        collector.ctx.scheduler.run_all_once()
    counts, _ = _changes(collector)
    assert counts[NVME] == 0 and counts[AUDIO] == 0
    assert "0000:00:01.0" in counts  # "all" takes root ports as well


def test_no_classes_no_sampling(tmp_path):
    b = _machine(tmp_path)
    collector = _collector(b, link_sample_classes=[])
    counts, _ = _changes(collector)
    assert counts == {}


def test_counter_ignores_unreadable_samples_and_forgets_gone_links():
    counter = ChangeCounter()
    counter.watch(["a", "b"])
    counter.add({"a": (16e9, 4), "b": (8e9, 1)})
    counter.add({"a": (None, None), "b": (8e9, None)})  # unreadable: no change
    counter.add({"a": (16e9, 4), "b": (8e9, 1)})
    assert counter.counts() == {"a": 0, "b": 0}
    counter.add({"a": (16e9, 2)})  # width alone changed
    assert counter.counts()["a"] == 1
    counter.watch(["a"])
    assert counter.counts() == {"a": 1}

