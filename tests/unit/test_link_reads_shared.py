"""The GPU sampler (collectors.gpu, scrape.slow.GpuLinks) and the link change sampler
(collectors.pcie, scrape.slow.LinkChanges) share their reads (readers.link_samples.SharedLinkReads):
a GPU's link is read once per sample, not once per sampler, and never while it sleeps; what each
serves is as before."""

import os

from storpath.base.background import Scheduler
from storpath.base.roots import Roots
from storpath.collectors.base import Context
from storpath.collectors.gpu import GpuCollector
from storpath.collectors.pcie import LINK_CHANGES, PcieCollector
from storpath.readers import link_samples
from tests.fixtures.sysfs_builder import MachineBuilder
from tests.snapshots import snapshot_for

GPU = "0000:01:00.0"


def _machine(tmp_path):
    b = MachineBuilder(str(tmp_path))
    host = b.host_bridge("0000:00")
    b.root_port(host, "0000:00:01.0", speed=32.0, width=16, vendor=0x8086, device=0x460d)
    b.pci("0000:00:01.0", GPU, class_code=0x030200, vendor=0x10de, device=0x2330, max_speed=32.0, max_width=16,
          cur_speed=32.0, cur_width=16, driver="nvidia")
    b.finish()
    return b


def _both(b):
    roots = Roots(sysfs=b.sys, procfs=b.proc, dev="")
    scheduler = Scheduler()
    pcie = PcieCollector(Context(roots=roots, config=dict(PcieCollector.config_defaults), scheduler=scheduler))
    gpu = GpuCollector(Context(roots=roots, config=dict(GpuCollector.config_defaults), scheduler=scheduler))
    return scheduler, pcie, gpu


def _counting_reads(monkeypatch):
    """The real read_many, its reads of the GPU's link speed counted (the reads still happen)."""
    calls = []
    real = link_samples.read_many

    def counted(paths, *args, **kwargs):
        calls.extend(path for path in paths if path.endswith(GPU + "/current_link_speed"))
        return real(paths, *args, **kwargs)

    monkeypatch.setattr(link_samples, "read_many", counted)
    return calls


def test_a_gpus_link_is_read_once_per_sample_for_both_samplers(tmp_path, monkeypatch):
    b = _machine(tmp_path)
    scheduler, pcie, gpu = _both(b)
    pcie.values(snapshot_for(pcie))  # the scrapes name the functions to the samplers
    gpu.values(snapshot_for(gpu))
    calls = _counting_reads(monkeypatch)
    scheduler.run_all_once()  # both samplers' passes: one read of the GPU's link
    assert len(calls) == 1
    b.set_link(GPU, cur_speed=2.5, cur_width=16)  # idle: the link trains down between scrapes
    scheduler.run_all_once()
    b.set_link(GPU, cur_speed=32.0, cur_width=16)
    scheduler.run_all_once()
    scheduler.run_all_once()  # a sampler may take the other's reading of the round before: one round later
    assert len(calls) == 4  # one a sample (two samplers: eight before)
    changes = pcie.values(snapshot_for(pcie)).get(LINK_CHANGES)
    assert dict(zip(changes.labels, changes.values)) == {(GPU,): 2}  # both samplers saw every sample
    observed = snapshot_for(gpu).pcie_observed[GPU]
    assert observed.max_speed == 32e9 and observed.samples >= 4


def test_a_sleeping_gpus_link_is_read_by_neither(tmp_path, monkeypatch):
    b = _machine(tmp_path)
    scheduler, pcie, gpu = _both(b)
    pcie.values(snapshot_for(pcie))
    gpu.values(snapshot_for(gpu))
    with open(os.path.join(b.sys, "bus/pci/devices", GPU, "power/runtime_status"), "w") as f:
        f.write("suspended\n")
    calls = _counting_reads(monkeypatch)
    for _ in range(3):
        scheduler.run_all_once()
    assert calls == []
