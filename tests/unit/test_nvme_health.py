"""NVMe health: the SMART / Health log parsers (raw page and nvme-cli JSON) on literal
bytes and text laid out per the NVMe Base Specification, Identify Controller's
thresholds, the hwmon reader on a kernel-shaped tree, and properties of the parsers."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storpath.collectors.nvme_health import CRITICAL_WARNING, THERMAL_TIME, smart_rows
from storpath.readers.nvme_health import (HealthResult, HwmonReader, SmartLogError, TemperatureThresholds, celsius,
                                          parse_id_ctrl_json, parse_id_ctrl_thresholds, parse_millidegrees,
                                          parse_smart_log, parse_smart_log_json, read_health,
                                          sensor_name)
from storpath.scrape.families import Rows
from storpath.base.roots import Roots
from tests.fixtures.builders_health import Health, smart_log, smart_log_json


def _page(**fields):
    """A 512-byte page with fields poked at their specification offsets."""
    buf = bytearray(512)
    for offset, (fmt, value) in fields.items():
        struct.pack_into(fmt, buf, int(offset[1:]), *value if isinstance(value, tuple) else (value,))
    return bytes(buf)


# ---- the raw log page ----------------------------------------------------------------

def test_raw_page_fields_at_their_offsets():
    data = _page(o0=("<B", 0x06), o1=("<H", 357), o3=("<BBB", (9, 10, 103)), o160=("<QQ", (5, 1)),
                 o192=("<II", (412, 3)), o200=("<HHH", (366, 349, 0)), o216=("<IIII", (1873, 37, 14820, 655)))
    log = parse_smart_log(data)
    assert log.critical_warning == 0x06
    assert log.composite_kelvin == 357 and celsius(log.composite_kelvin) == 83.85
    assert (log.available_spare, log.available_spare_threshold, log.percentage_used) == (9, 10, 103)
    assert log.media_errors == 5 + (1 << 64)  # 128-bit counter: the high half counts too
    assert (log.warning_temperature_minutes, log.critical_temperature_minutes) == (412, 3)
    assert log.sensors_kelvin == (366, 349, None, None, None, None, None, None)
    assert log.tmt_transitions == (1873, 37) and log.tmt_seconds == (14820, 655)
    assert [name for name, bit in log.warning_bits() if bit] == ["temperature", "reliability"]


def test_raw_page_zero_temperature_is_not_reported():
    assert parse_smart_log(bytes(512)).composite_kelvin is None


@pytest.mark.parametrize("data,message", [
    (bytes(100), "100 bytes"),
    (_page(o3=("<B", 101)), "above 100%"),
])
def test_raw_page_rejected(data, message):
    with pytest.raises(SmartLogError, match=message):
        parse_smart_log(data)


# ---- nvme-cli JSON -----------------------------------------------------------------

NVME_CLI_2 = """{
  "critical_warning":2,
  "temperature":357,
  "avail_spare":100,
  "spare_thresh":10,
  "percent_used":4,
  "endurance_grp_critical_warning_summary":0,
  "data_units_read":74547585,
  "media_errors":0,
  "num_err_log_entries":0,
  "warning_temp_time":412,
  "critical_comp_time":0,
  "temperature_sensor_1":366,
  "temperature_sensor_2":349,
  "thm_temp1_trans_count":1873,
  "thm_temp2_trans_count":37,
  "thm_temp1_total_time":14820,
  "thm_temp2_total_time":655
}
"""


def test_nvme_cli_json():
    log = parse_smart_log_json(NVME_CLI_2)
    assert log == parse_smart_log(smart_log(Health(composite=357, sensors=(366, 349), critical_warning=2,
                                                   spare_threshold=10, percentage_used=4, warning_minutes=412,
                                                   tmt_transitions=(1873, 37), tmt_seconds=(14820, 655))))


def test_nvme_cli_json_critical_warning_as_object_and_celsius_spelling():
    text = NVME_CLI_2.replace('"critical_warning":2', '"critical_warning":{"value":2,"available_spare":0}')
    text = text.replace('"temperature":357', '"temperature":84')
    log = parse_smart_log_json(text)
    assert log.critical_warning == 2 and log.composite_kelvin == 357


def test_nvme_cli_json_128_bit_counters_as_strings():
    # nvme-cli 2.3 (the lab's, Debian bookworm) prints the 128-bit counters as strings.
    text = NVME_CLI_2.replace('"media_errors":0', '"media_errors":"340282366920938463463374607431768211455"')
    assert parse_smart_log_json(text).media_errors == 2 ** 128 - 1


@pytest.mark.parametrize("text,message", [
    ("not json", "not JSON"),
    ("[1]", "not a JSON object"),
    ('{"avail_spare": 100}', "spare_thresh"),
    (NVME_CLI_2.replace('"media_errors":0', '"media_errors":"many"'), "not a number"),
])
def test_nvme_cli_json_rejected(text, message):
    with pytest.raises(SmartLogError, match=message):
        parse_smart_log_json(text)


def test_identify_controller_thresholds():
    data = bytearray(4096)
    struct.pack_into("<HH", data, 266, 0x157, 0x175)  # QEMU's: 343 K and 373 K
    assert parse_id_ctrl_thresholds(bytes(data)) == TemperatureThresholds(343, 373)
    assert parse_id_ctrl_thresholds(bytes(4096)) == TemperatureThresholds(None, None)
    assert parse_id_ctrl_json('{"wctemp":343,"cctemp":373}') == TemperatureThresholds(343, 373)
    with pytest.raises(SmartLogError):
        parse_id_ctrl_thresholds(bytes(10))


# ---- hwmon -------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [("44850\n", 44.85), ("-5000", -5.0), ("", None), ("hot", None),
                                           (None, None), ("9999999999", None)])
def test_millidegrees(text, expected):
    assert parse_millidegrees(text) == expected


def test_sensor_names():
    assert sensor_name("Composite\n", 1) == "composite"
    assert sensor_name("Sensor 1", 2) == "sensor_1"
    assert sensor_name(None, 3) == "temp3"


def _hwmon_tree(tmp_path, under_pci: bool):
    ctrl = tmp_path / "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/nvme/nvme0"
    ctrl.mkdir(parents=True)
    (tmp_path / "sys/class/nvme").mkdir(parents=True)
    (tmp_path / "sys/class/nvme/nvme0").symlink_to(ctrl)
    (ctrl / "device").symlink_to(ctrl.parent.parent)
    hw = (ctrl.parent.parent / "hwmon" / "hwmon4") if under_pci else (ctrl / "hwmon4")
    hw.mkdir(parents=True)
    for name, value in (("name", "nvme"), ("temp1_label", "Composite"), ("temp1_input", "83850"),
                        ("temp1_max", "81850"), ("temp1_min", "-273150"), ("temp1_crit", "86850"),
                        ("temp1_alarm", "1"), ("temp2_label", "Sensor 1"), ("temp2_input", "92850")):
        (hw / name).write_text(value + "\n")
    return Roots(sysfs=str(tmp_path / "sys"))


@pytest.mark.parametrize("under_pci", [False, True], ids=["below-controller-5.13", "below-pci-function-5.5"])
def test_hwmon_in_both_kernel_layouts(tmp_path, under_pci):
    sensors = HwmonReader(_hwmon_tree(tmp_path, under_pci)).read()[1]
    assert [(s.sensor, s.celsius, s.max_celsius, s.min_celsius, s.crit_celsius, s.alarm) for s in sensors] == [
        ("composite", 83.85, 81.85, None, 86.85, 1), ("sensor_1", 92.85, None, None, None, None)]


def test_no_hwmon_no_sensors(tmp_path):
    assert HwmonReader(Roots(sysfs=str(tmp_path))).read()[1] == []


# ---- reading through captured data and the rows --------------------------------------

def test_captured_json_and_missing(tmp_path):
    folder = tmp_path / "nvme" / "nvme0"
    folder.mkdir(parents=True)
    (folder / "smart-log.json").write_text(NVME_CLI_2)
    roots = Roots(sysfs=str(tmp_path), captured=str(tmp_path))
    result = read_health(roots, "nvme0")
    assert result.smart is not None and result.source == "captured" and result.error is None
    missing = read_health(roots, "nvme1")
    assert missing.smart is None and "no captured SMART log" in missing.error


def test_unprivileged_read_gives_the_reason(tmp_path):
    roots = Roots(sysfs=str(tmp_path), dev=str(tmp_path))
    result = read_health(roots, "nvme0", nvme_cli="storpath-no-such-nvme-cli")
    assert result.smart is None and "no such device" in result.error and "not installed" in result.error


def test_rows_of_one_controller():
    rows = Rows()
    smart_rows("nvme1", HealthResult(parse_smart_log_json(NVME_CLI_2), None, "captured", None, 0.0), rows)
    bits = dict(zip((labels[1] for labels in rows[CRITICAL_WARNING].labels), rows[CRITICAL_WARNING].values))
    assert bits["temperature"] == 1 and sum(bits.values()) == 1
    assert rows[THERMAL_TIME].labels == [("nvme1", "1"), ("nvme1", "2")]
    assert rows[THERMAL_TIME].values == [14820, 655]


# ---- properties ----------------------------------------------------------------------

healths = st.builds(
    Health, composite=st.integers(1, 0xFFFF), sensors=st.lists(st.integers(1, 0xFFFF), max_size=8).map(tuple),
    critical_warning=st.integers(0, 0x3F), available_spare=st.integers(0, 100), spare_threshold=st.integers(0, 100),
    percentage_used=st.integers(0, 255), media_errors=st.integers(0, 2 ** 64),
    warning_minutes=st.integers(0, 2 ** 32 - 1), critical_minutes=st.integers(0, 2 ** 32 - 1),
    tmt_transitions=st.tuples(st.integers(0, 2 ** 32 - 1), st.integers(0, 2 ** 32 - 1)),
    tmt_seconds=st.tuples(st.integers(0, 2 ** 32 - 1), st.integers(0, 2 ** 32 - 1)))


@settings(max_examples=200, deadline=None)
@given(healths)
def test_raw_and_json_spellings_agree(health):
    """nvme-cli's JSON and the raw page of the same log parse to the same record (JSON
    temperatures below 150 are read as Celsius: kept out of this comparison)."""
    raw = parse_smart_log(smart_log(health))
    if health.composite < 150 or any(k < 150 for k in health.sensors):
        return
    assert parse_smart_log_json(smart_log_json(health)) == raw
    assert raw.composite_kelvin == health.composite
    assert raw.media_errors == health.media_errors


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=600))
def test_any_bytes_parse_or_raise_the_parsers_error(data):
    try:
        log = parse_smart_log(data)
    except SmartLogError:
        return
    assert 0 <= log.available_spare <= 100 and 0 <= log.critical_warning <= 0xFF
    assert all(k is None or k > 0 for k in log.sensors_kelvin)
