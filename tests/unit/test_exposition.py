"""storpath's text writer must produce exactly what prometheus_client writes."""

from prometheus_client import generate_latest
from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from storpath.scrape import exposition
from storpath.base.background import Scheduler
from storpath.base.config import validate
from storpath.report.exporter import build_collectors, StorpathExporter
from storpath.scrape.families import Family, SeriesColumns
from storpath.base.roots import Roots
from tests.fixtures import machines


class _Static:
    def __init__(self, families):
        self.families = families

    def collect(self):
        return self.families


def _families():
    gauge = GaugeMetricFamily("storpath_t_bytes", 'Help with \\ backslash\nand newline.', labels=["device", "z", "a"])
    gauge.add_metric(["nvme0n1", 'quote " back \\ nl \n', ""], 7.877e9)
    gauge.add_metric(["sda", "x", "y"], 0)
    gauge.add_metric(["sdb", "x", "y"], 1)
    gauge.add_metric(["sdc", "x", "y"], -1)
    gauge.add_metric(["sdd", "x", "y"], float("inf"))
    gauge.add_metric(["sde", "x", "y"], float("nan"))
    gauge.add_metric(["sdf", "x", "y"], 0.000123)
    gauge.add_metric(["sdg", "x", "y"], 123456789.0)
    counter = CounterMetricFamily("storpath_t_errors", "Errors.", labels=["severity"])
    counter.add_metric(["fatal"], 3)
    plain = GaugeMetricFamily("storpath_t_plain", "No labels.", value=2.5)
    stamped = GaugeMetricFamily("storpath_t_stamped", "With a timestamp.", labels=["k"])
    stamped.add_metric(["v"], 1, timestamp=1700000000.5)
    empty = GaugeMetricFamily("storpath_t_empty", "No samples.", labels=["k"])
    return [gauge, counter, plain, stamped, empty]


def test_same_text_as_prometheus_client():
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Static(_families()))
    assert b"".join(exposition.pieces(_families())).decode() == generate_latest(registry).decode()


def test_same_text_on_a_fixture_machine(tmp_path):
    machines.load("am4-x570-firecuda").build(str(tmp_path), "gen3-trained")
    config = validate({}, {})
    registry = StorpathExporter(build_collectors(Roots(sysfs=str(tmp_path / "sys"), procfs=str(tmp_path / "proc"),
                                                    captured=str(tmp_path / "captured")), config, Scheduler()))
    families = list(registry.collect())
    ours = b"".join(exposition.pieces(families)).decode()
    theirs = generate_latest(_StaticRegistry(families)).decode()
    assert ours == theirs
    assert "storpath_pcie_aer_errors_total{" in ours


def _StaticRegistry(families):
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Static(families))
    return registry


def test_a_label_value_that_is_not_utf8_costs_only_its_own_bytes():
    """A member listed as 'sdh\\udcff' (its name's byte 0xff) made the whole family's text fail
    to encode, and with it the md collector on every scrape."""
    family = Family("storpath_t_member_info", "gauge", "Members.", labels=("device", "member"))
    series = SeriesColumns()
    series.add(("md1", "sda"), 1)
    series.add(("md1", "sdh\udcff"), 1)
    series.add(("md1", 'q"\\\n'), 1)
    body = exposition.sample_lines(family, series).decode("utf-8")
    samples = [s.labels["member"] for f in text_string_to_metric_families(body) for s in f.samples]
    assert samples == ["sda", "sdh\\xff", 'q"\\\n']
