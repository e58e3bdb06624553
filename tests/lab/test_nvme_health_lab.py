"""Lab: NVMe temperature and health on a real kernel (Debian 6.1) with QEMU's NVMe device.

QEMU's controller reports a composite temperature of 323 K (49.85 °C), WCTEMP 343 K and
CCTEMP 373 K in Identify Controller, and answers the SMART / Health log. Set Features
04h (Temperature Threshold) with an over-temperature threshold below the temperature
makes the drive set the temperature bit of its Critical Warning: a real warning, which
the kernel's hwmon shows as temp1_alarm and the exporter serves from both sources. The
hwmon temperatures need no privilege; the SMART log does.
"""

import json
import shlex
import time

import lab

SERIAL = "SPLAB0G4X4"
OVER_THRESHOLD_K = 313  # 39.85 °C: below QEMU's 49.85 °C

READ = """
import json
from storpath.readers.nvme_health import HwmonReader, read_health
from storpath.base.roots import Roots
r = read_health(Roots(), "{ctrl}")
s = r.smart
print(json.dumps({{"source": r.source, "error": r.error,
                  "thresholds": [r.thresholds.warning_kelvin, r.thresholds.critical_kelvin] if r.thresholds else None,
                  "smart": None if s is None else [s.critical_warning, s.composite_kelvin, s.available_spare,
                                                   s.available_spare_threshold, s.percentage_used, s.media_errors],
                  "hwmon": [[h.sensor, h.celsius, h.max_celsius, h.crit_celsius, h.alarm]
                            for h in HwmonReader(Roots()).read()[1] if h.controller == "{ctrl}"]}}))
"""


def _read(guest, ctrl, user=None):
    cmd = f"python3 -c {shlex.quote(READ.format(ctrl=ctrl))}"
    if user:
        cmd = f"setpriv --reuid={user} --regid={user} --clear-groups -- {cmd}"
    return json.loads(guest.sh(cmd))


def _sample(text, name, **labels):
    return lab.Scrape(text).value(name, **labels)


def test_smart_log_through_the_ioctl_agrees_with_nvme_cli(nvme_guest):
    ctrl = lab.nvme_ctrl_by_serial(nvme_guest)[SERIAL]
    ours = _read(nvme_guest, ctrl)
    assert ours["source"] == "ioctl", ours
    assert ours["thresholds"] == [343, 373]
    cli = json.loads(nvme_guest.sh(f"nvme smart-log /dev/{ctrl} --output-format=json"))
    # nvme-cli 2.3 prints the 128-bit counters as strings ("0")
    assert ours["smart"] == [int(cli[k]) for k in ("critical_warning", "temperature", "avail_spare", "spare_thresh",
                                                   "percent_used", "media_errors")]
    assert ours["smart"][1] == 323
    # the kernel's hwmon: composite at 49.85 °C, crit = CCTEMP
    composite = [h for h in ours["hwmon"] if h[0] == "composite"]
    assert composite and composite[0][1] == 49.85 and composite[0][3] == 99.85, ours["hwmon"]


def test_unprivileged_reads_hwmon_but_not_the_smart_log(nvme_guest):
    ctrl = lab.nvme_ctrl_by_serial(nvme_guest)[SERIAL]
    out = _read(nvme_guest, ctrl, user=65534)
    assert out["smart"] is None and "permission denied" in out["error"], out
    assert [h[0] for h in out["hwmon"]][:1] == ["composite"] and out["hwmon"][0][1] == 49.85, out


def test_threshold_below_the_temperature_raises_a_real_critical_warning(nvme_guest):
    ctrl = lab.nvme_ctrl_by_serial(nvme_guest)[SERIAL]
    # Feature 04h, TMPSEL 0 (composite), THSEL 0 (over-temperature): TMPTH in kelvin.
    nvme_guest.sh(f"nvme set-feature /dev/{ctrl} --feature-id=4 --value={OVER_THRESHOLD_K}")
    assert json.loads(nvme_guest.sh(f"nvme smart-log /dev/{ctrl} --output-format=json"))["critical_warning"] & 2
    assert nvme_guest.sh(f"cat /sys/class/nvme/{ctrl}/hwmon*/temp1_alarm").strip() == "1"
    deadline = time.monotonic() + 90
    while True:
        text = lab.exporter_metrics(nvme_guest)
        if _sample(text, "storpath_nvme_critical_warning", controller=ctrl, bit="temperature") == 1:
            break
        assert time.monotonic() < deadline, "no temperature critical warning served within 90 s:\n" + text
        time.sleep(2)
    assert _sample(text, "storpath_nvme_temperature_celsius", controller=ctrl, sensor="composite") == 49.85
    assert _sample(text, "storpath_nvme_temperature_max_celsius", controller=ctrl, sensor="composite") == 39.85
    assert _sample(text, "storpath_nvme_temperature_alarm", controller=ctrl, sensor="composite") == 1
    assert _sample(text, "storpath_nvme_warning_composite_temperature_celsius", controller=ctrl) == 69.85
    assert _sample(text, "storpath_nvme_smart_available", controller=ctrl) == 1
    # every other drive is untouched
    others = [c for s, c in lab.nvme_ctrl_by_serial(nvme_guest).items() if s != SERIAL]
    assert others and all(_sample(text, "storpath_nvme_temperature_alarm", controller=c, sensor="composite") == 0
                          for c in others)
