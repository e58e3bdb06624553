"""NVMe health that costs throughput: temperatures from the kernel's hwmon, and the
SMART / Health Information log with the drive's own temperature thresholds.

hwmon (drivers/nvme/host/hwmon.c, kernel 5.5 and later; Documentation/hwmon/sysfs-interface):
the nvme driver registers one hwmon device named `nvme` per controller, below the
controller (/sys/class/nvme/nvmeX/hwmonN, since 5.13) or below its PCI function
(/sys/class/nvme/nvmeX/device/hwmon/hwmonN, 5.5-5.12). Values are millidegrees Celsius:
- temp1 is the Composite Temperature (`temp1_label` "Composite"), temp2..temp9 the
  drive's sensors 1-8 ("Sensor 1"...), only those the drive reports;
- `tempN_input` the temperature now, `tempN_max` / `tempN_min` the over / under
  temperature threshold (Set Features 04h: the point where the drive raises its
  temperature warning; it starts at a vendor value, often WCTEMP), `temp1_crit` the
  Critical Composite Temperature Threshold (CCTEMP), `temp1_alarm` 1 while the
  temperature bit of the SMART log's Critical Warning is set.
No privilege is needed to read them; the kernel fetches the SMART log for each
`_input` or `_alarm` read, one admin command that the drive answers from its controller.

The SMART / Health Information log (Get Log Page, opcode 02h, log identifier 02h, 512
bytes, controller-wide with NSID FFFFFFFFh; NVMe Base Specification, "SMART / Health
Information"), all little endian:
    0       Critical Warning: bit 0 available spare below threshold, 1 temperature
            beyond a threshold, 2 reliability degraded (media or internal errors),
            3 media read only, 4 volatile memory backup failed, 5 persistent memory
            region read only
    1-2     Composite Temperature, kelvin
    3       Available Spare, percent        4  Available Spare Threshold, percent
    5       Percentage Used (may exceed 100)
    160-175 Media and Data Integrity Errors (128-bit)
    192-195 Warning Composite Temperature Time, minutes above WCTEMP
    196-199 Critical Composite Temperature Time, minutes above CCTEMP
    200-215 Temperature Sensors 1-8, kelvin, 0 when not implemented
    216-219 / 220-223  Thermal Management Temperature 1 / 2 Transition Count
    224-227 / 228-231  Total Time For Thermal Management Temperature 1 / 2, seconds
(TMT1 is the light throttle, TMT2 the heavy one: host controlled thermal management or
the drive's own.) Identify Controller (opcode 06h, CNS 01h, 4096 bytes) gives WCTEMP at
bytes 266-267 and CCTEMP at 268-269, kelvin, 0 when the drive does not report them.

Both need the admin ioctl (CAP_SYS_ADMIN) or nvme-cli, so they are read in a background
task only, from (in order): Roots.captured (<captured>/nvme/<controller>/smart-log.bin,
the raw 512 bytes, or smart-log.json, `nvme smart-log -o json`; id-ctrl.bin, the raw
Identify Controller), the ioctl, `nvme smart-log <dev> -o json` / `nvme id-ctrl`. With
`storpath helper` (storpath.base.privhelper configured) the ioctl and nvme-cli run there
(its `smart-log` and `id-ctrl` commands), and this process needs no capability.
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Dict, List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base import atomicfile, privhelper
from storpath.readers.nvme import (CAPTURED_DIR, NO_DEVICES_REASON, OPCODE_IDENTIFY, IdentifyError, admin_command,
                                   identify_nvme_cli, json_object, read_controllers)
from storpath.base.parse import parse_int
from storpath.readers.instances import InstanceCache
from storpath.base.roots import Roots
from storpath.base.sysfs import list_dir, list_entries, read_attr

SMART_LOG_BYTES = 512
OPCODE_GET_LOG_PAGE = 0x02
LOG_SMART = 0x02
CNS_CONTROLLER = 0x01
ALL_NAMESPACES = 0xFFFFFFFF
KELVIN = 273.15
SMART_FILE, SMART_JSON, ID_CTRL_FILE = "smart-log.bin", "smart-log.json", "id-ctrl.bin"

# Critical Warning bits, in bit order, as the label values of their series.
CRITICAL_WARNING_BITS = ("available_spare", "temperature", "reliability", "read_only", "volatile_memory_backup",
                         "persistent_memory_region")

# What this reader reads (storpath capture takes these, and capture_commands' output).
CAPTURE_SYSFS = (
    "class/nvme/*/hwmon*/{name,temp*_input,temp*_max,temp*_min,temp*_crit,temp*_alarm,temp*_label}",
    "class/nvme/*/device/hwmon/hwmon*/{name,temp*_input,temp*_max,temp*_min,temp*_crit,temp*_alarm,temp*_label}",
)

_HWMON = re.compile(r"^hwmon\d+$")
_CONTROLLER = re.compile(r"^nvme\d+$")
_TEMP_INPUT = re.compile(r"^temp(\d+)_input$")


class SmartLogError(IdentifyError):
    """A SMART log that cannot be read or makes no sense."""


# ---- records ---------------------------------------------------------------------

@datarecord(frozen=True)
class HwmonSensor:
    """One temperature sensor of an NVMe controller's hwmon, in Celsius, with its thresholds and alarm."""

    controller: str  # nvme0
    sensor: str  # composite, sensor_1 ... (the label, lower case), else temp3
    celsius: Optional[float]
    max_celsius: Optional[float]
    min_celsius: Optional[float]
    crit_celsius: Optional[float]
    alarm: Optional[int]


@datarecord(frozen=True)
class SmartLog:
    """What storpath takes from one SMART / Health Information log."""

    critical_warning: int
    composite_kelvin: Optional[int]  # None when the drive reports 0
    available_spare: int  # percent
    available_spare_threshold: int  # percent
    percentage_used: int
    media_errors: int
    warning_temperature_minutes: int
    critical_temperature_minutes: int
    sensors_kelvin: Tuple[Optional[int], ...]  # sensors 1-8, None where not implemented
    tmt_transitions: Tuple[int, int]  # thermal management temperature 1, 2
    tmt_seconds: Tuple[int, int]

    def warning_bits(self) -> List[Tuple[str, int]]:
        return [(name, (self.critical_warning >> bit) & 1) for bit, name in enumerate(CRITICAL_WARNING_BITS)]


@datarecord(frozen=True)
class TemperatureThresholds:
    """WCTEMP / CCTEMP from Identify Controller, kelvin; None when the drive reports 0."""

    warning_kelvin: Optional[int]
    critical_kelvin: Optional[int]


@datarecord(frozen=True)
class HealthResult:
    """One read of a controller's SMART log and temperature thresholds, or why not; its source and time."""

    smart: Optional[SmartLog]
    thresholds: Optional[TemperatureThresholds]
    source: Optional[str]  # captured, ioctl, nvme-cli, helper
    error: Optional[str]  # why the SMART log is unknown
    read_at: float


def celsius(kelvin: Optional[int]) -> Optional[float]:
    return None if kelvin is None else round(kelvin - KELVIN, 2)


# ---- pure parsers ------------------------------------------------------------------

def _le(data: bytes, start: int, size: int) -> int:
    return int.from_bytes(data[start:start + size], "little")


def _kelvin(value: int) -> Optional[int]:
    return value or None  # 0: not reported


def parse_smart_log(data: bytes) -> SmartLog:
    """The 512-byte SMART / Health Information log page (little endian)."""
    if len(data) < 232:
        raise SmartLogError(f"SMART log is {len(data)} bytes, expected {SMART_LOG_BYTES}")
    spare, threshold = data[3], data[4]
    if spare > 100 or threshold > 100:
        raise SmartLogError(f"available spare {spare}% or its threshold {threshold}% above 100%")
    return SmartLog(
        critical_warning=data[0], composite_kelvin=_kelvin(_le(data, 1, 2)), available_spare=spare,
        available_spare_threshold=threshold, percentage_used=data[5], media_errors=_le(data, 160, 16),
        warning_temperature_minutes=_le(data, 192, 4), critical_temperature_minutes=_le(data, 196, 4),
        sensors_kelvin=tuple(_kelvin(_le(data, 200 + 2 * i, 2)) for i in range(8)),
        tmt_transitions=(_le(data, 216, 4), _le(data, 220, 4)), tmt_seconds=(_le(data, 224, 4), _le(data, 228, 4)))


def _json_int(doc: dict, key: str, default: Optional[int] = None) -> int:
    value = doc.get(key, default)
    if isinstance(value, dict):  # newer nvme-cli prints some fields as {"value": n, ...}
        value = value.get("value")
    if value is None:
        raise SmartLogError(f"nvme-cli JSON lacks {key!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise SmartLogError(f"nvme-cli JSON {key!r} is not a number: {value!r}") from None
    if number < 0:
        raise SmartLogError(f"nvme-cli JSON {key!r} is negative: {number}")
    return number


def _json_kelvin(doc: dict, key: str) -> Optional[int]:
    if key not in doc:
        return None
    value = _json_int(doc, key)
    # nvme-cli prints kelvin, as the log holds it; a value no drive can have in kelvin
    # (below 150 K) is taken as a Celsius spelling.
    if 0 < value < 150:
        return value + 273
    return _kelvin(value)


def parse_smart_log_json(text: str) -> SmartLog:
    """`nvme smart-log <dev> -o json` (nvme-cli 1.x and 2.x): temperatures in kelvin."""
    doc = json_object(text, SmartLogError)
    spare, threshold = _json_int(doc, "avail_spare"), _json_int(doc, "spare_thresh")
    if spare > 100 or threshold > 100:
        raise SmartLogError(f"available spare {spare}% or its threshold {threshold}% above 100%")
    return SmartLog(
        critical_warning=_json_int(doc, "critical_warning") & 0xFF, composite_kelvin=_json_kelvin(doc, "temperature"),
        available_spare=spare, available_spare_threshold=threshold, percentage_used=_json_int(doc, "percent_used"),
        media_errors=_json_int(doc, "media_errors"),
        warning_temperature_minutes=_json_int(doc, "warning_temp_time", 0),
        critical_temperature_minutes=_json_int(doc, "critical_comp_time", 0),
        sensors_kelvin=tuple(_json_kelvin(doc, f"temperature_sensor_{i}") for i in range(1, 9)),
        tmt_transitions=(_json_int(doc, "thm_temp1_trans_count", 0), _json_int(doc, "thm_temp2_trans_count", 0)),
        tmt_seconds=(_json_int(doc, "thm_temp1_total_time", 0), _json_int(doc, "thm_temp2_total_time", 0)))


def parse_id_ctrl_thresholds(data: bytes) -> TemperatureThresholds:
    """WCTEMP and CCTEMP from the 4096-byte Identify Controller data structure."""
    if len(data) < 270:
        raise SmartLogError(f"Identify Controller data is {len(data)} bytes, expected 4096")
    return TemperatureThresholds(_kelvin(_le(data, 266, 2)), _kelvin(_le(data, 268, 2)))


def parse_id_ctrl_json(text: str) -> TemperatureThresholds:
    """`nvme id-ctrl -o json`: wctemp and cctemp in kelvin."""
    doc = json_object(text, SmartLogError)
    return TemperatureThresholds(_kelvin(_json_int(doc, "wctemp", 0)), _kelvin(_json_int(doc, "cctemp", 0)))


def parse_millidegrees(text: Optional[str]) -> Optional[float]:
    """A hwmon temperature file (millidegrees Celsius, may be negative) in degrees."""
    value = parse_int(text, minimum=-273150, maximum=1_000_000)
    return None if value is None else value / 1000


def _threshold(value: Optional[float]) -> Optional[float]:
    """An under-temperature threshold of 0 K (-273.15 °C) is the drive's "none set"."""
    return None if value is not None and value <= -KELVIN else value


def sensor_name(label: Optional[str], index: int) -> str:
    """`Composite` -> composite, `Sensor 1` -> sensor_1; no label: temp<index>."""
    text = re.sub(r"[^a-z0-9]+", "_", (label or "").strip().lower()).strip("_")
    return text or f"temp{index}"


# ---- hwmon -------------------------------------------------------------------------

@datarecord(frozen=True)
class _HwmonSensorFiles:
    """What is fixed for one sensor while its controller exists: its name, the files it
    has that change (input, max, min, alarm) and its critical threshold (CCTEMP, which the
    kernel keeps from Identify Controller)."""

    sensor: str
    changing: Tuple[Tuple[str, str], ...]  # (suffix, path)
    crit_celsius: Optional[float]


def _sensor_files(folder: str) -> Tuple[_HwmonSensorFiles, ...]:
    names = set(list_dir(folder))
    indexes = sorted(int(m.group(1)) for m in map(_TEMP_INPUT.match, names) if m)
    found = []
    for index in indexes:
        def path(suffix: str) -> str:
            return os.path.join(folder, f"temp{index}_{suffix}")
        crit = parse_millidegrees(read_attr(path("crit"))) if f"temp{index}_crit" in names else None
        label = read_attr(path("label")) if f"temp{index}_label" in names else None
        changing = tuple((suffix, path(suffix)) for suffix in ("input", "max", "min", "alarm")
                         if f"temp{index}_{suffix}" in names)
        found.append(_HwmonSensorFiles(sensor_name(label, index), changing, crit))
    return tuple(found)


def _hwmon_of(controller: str, path: str) -> Tuple[_HwmonSensorFiles, ...]:
    """The sensors of a controller's hwmon device: below it (5.13+) or its PCI function."""
    for folder in (path, os.path.join(path, "device", "hwmon")):
        for name in list_dir(folder):
            if _HWMON.match(name) and (read_attr(os.path.join(folder, name, "name")) or "").strip() == "nvme":
                sensors = _sensor_files(os.path.join(folder, name))
                if sensors:
                    return sensors  # one hwmon device per controller
    return ()


def _read_sensor(controller: str, files: _HwmonSensorFiles) -> HwmonSensor:
    values = {suffix: read_attr(path) for suffix, path in files.changing}
    return HwmonSensor(
        controller=controller, sensor=files.sensor, celsius=parse_millidegrees(values.get("input")),
        max_celsius=parse_millidegrees(values.get("max")),
        min_celsius=_threshold(parse_millidegrees(values.get("min"))), crit_celsius=files.crit_celsius,
        alarm=parse_int(values.get("alarm"), minimum=0, maximum=1))


class HwmonReader:
    """The nvme hwmon sensors of every controller, from one listing of /sys/class/nvme.
    Where a controller's hwmon device is, which sensors it has and their labels and
    critical thresholds are found once per controller instance (the hwmon device is
    registered with the controller); a scrape reads only the values that change."""

    def __init__(self, roots: Roots):
        self.roots = roots
        self._places = InstanceCache()
        self._lock = threading.Lock()

    def read(self) -> Tuple[List[str], List[HwmonSensor]]:
        """(controllers, sensors); RootUnreadable when sysfs cannot be read."""
        base = self.roots.sys("class", "nvme")
        entries = [e for e in list_entries(base, self.roots.sysfs) if _CONTROLLER.match(e[0])]
        with self._lock:
            found = self._places.refresh(base, entries, _hwmon_of)
        sensors = [_read_sensor(name, files) for name, _, sensor_files in found for files in sensor_files]
        return [name for name, _, _ in found], sensors


# ---- SMART log and Identify Controller: captured, ioctl, nvme-cli --------------------

def smart_log_ioctl(char_device: str, timeout: float = 10.0) -> bytes:
    numd = SMART_LOG_BYTES // 4 - 1  # dwords, zero-based: NUMDL in bits 31:16 of CDW10
    return admin_command(char_device, OPCODE_GET_LOG_PAGE, ALL_NAMESPACES, LOG_SMART | (numd << 16),
                         SMART_LOG_BYTES, "Get Log Page (SMART / Health)", timeout)


def id_ctrl_ioctl(char_device: str, timeout: float = 10.0) -> bytes:
    return admin_command(char_device, OPCODE_IDENTIFY, 0, CNS_CONTROLLER, 4096, "Identify Controller", timeout)


def _nvme_cli(char_device: str, subcommand: str, nvme_cli: str, timeout: float) -> str:
    return identify_nvme_cli(char_device, 0, nvme_cli, timeout, subcommand=subcommand)


def _from_captured(roots: Roots, controller: str) -> HealthResult:
    folder = roots.captured_path(CAPTURED_DIR, controller) or ""
    raw, text, ctrl = (os.path.join(folder, n) for n in (SMART_FILE, SMART_JSON, ID_CTRL_FILE))
    thresholds = None
    try:
        if os.path.exists(ctrl):
            with open(ctrl, "rb") as handle:
                thresholds = parse_id_ctrl_thresholds(handle.read(4096))
        if os.path.exists(raw):
            with open(raw, "rb") as handle:
                return HealthResult(parse_smart_log(handle.read(SMART_LOG_BYTES)), thresholds, "captured", None,
                                    os.stat(raw).st_mtime)
        if os.path.exists(text):
            with open(text, encoding="utf-8", errors="replace") as handle:
                return HealthResult(parse_smart_log_json(handle.read()), thresholds, "captured", None,
                                    os.stat(text).st_mtime)
    except SmartLogError as exc:
        return HealthResult(None, thresholds, "captured", f"captured data: {exc}", time.time())
    except OSError as exc:
        return HealthResult(None, thresholds, "captured", f"captured data: {exc.filename}: {exc.strerror}",
                            time.time())
    where = f"{CAPTURED_DIR}/{controller}/{SMART_FILE} or {SMART_JSON}"
    return HealthResult(None, thresholds, "captured", f"no captured SMART log ({where})", time.time())


def _ask_helper(command: str, controller: str, timeout: float) -> Tuple[bytes, str]:
    """(the bytes `storpath helper` read, "raw" or "json"); IdentifyError when it could not."""
    try:
        reply = privhelper.ask({"cmd": command, "controller": controller, "timeout": timeout}, timeout + 5.0)
        return privhelper.decode_output(reply.get("stdout")), str(reply.get("format") or "raw")
    except OSError as exc:
        raise IdentifyError(f"helper: {exc}") from None


def read_thresholds(roots: Roots, controller: str, nvme_cli: str = "nvme",
                    timeout: float = 10.0) -> Optional[TemperatureThresholds]:
    """WCTEMP/CCTEMP of a controller (privileged, background only); None when unreadable."""
    if not roots.devices:
        return None
    if privhelper.configured():
        try:
            data, form = _ask_helper("id-ctrl", controller, timeout)
            if form == "json":
                return parse_id_ctrl_json(data.decode("utf-8", "replace"))
            return parse_id_ctrl_thresholds(data)
        except (IdentifyError, SmartLogError):
            return None
    char_device = roots.devpath(controller)
    try:
        return parse_id_ctrl_thresholds(id_ctrl_ioctl(char_device, timeout))
    except IdentifyError:
        pass
    try:
        return parse_id_ctrl_json(_nvme_cli(char_device, "id-ctrl", nvme_cli, timeout))
    except IdentifyError:
        return None


def read_health(roots: Roots, controller: str, nvme_cli: str = "nvme", timeout: float = 10.0,
                thresholds: Optional[TemperatureThresholds] = None) -> HealthResult:
    """The controller's SMART log and temperature thresholds, or why they are unknown.
    Privileged and possibly slow: from a background task only. `thresholds` already
    known (they are fixed per controller) are not read again."""
    if roots.captured:
        return _from_captured(roots, controller)
    if not roots.devices:
        return HealthResult(None, thresholds, None, NO_DEVICES_REASON, time.time())
    if thresholds is None:
        thresholds = read_thresholds(roots, controller, nvme_cli, timeout)
    char_device = roots.devpath(controller)
    now = time.time()
    if privhelper.configured():
        try:
            data, form = _ask_helper("smart-log", controller, timeout)
            smart = parse_smart_log_json(data.decode("utf-8", "replace")) if form == "json" else parse_smart_log(data)
            return HealthResult(smart, thresholds, "helper", None, now)
        except (IdentifyError, SmartLogError) as exc:
            return HealthResult(None, thresholds, None, str(exc), now)
    try:
        return HealthResult(parse_smart_log(smart_log_ioctl(char_device, timeout)), thresholds, "ioctl", None, now)
    except IdentifyError as exc:
        ioctl_error = str(exc)
    try:
        text = _nvme_cli(char_device, "smart-log", nvme_cli, timeout)
        return HealthResult(parse_smart_log_json(text), thresholds, "nvme-cli", None, time.time())
    except IdentifyError as exc:
        return HealthResult(None, thresholds, None, f"ioctl: {ioctl_error}; nvme-cli: {exc}", now)


def capture_commands(roots: Roots, folder: str) -> List[str]:
    """Every controller's SMART log (raw, else nvme-cli JSON) and Identify Controller,
    into the layout read_health reads back."""
    notes = []
    if not roots.devices:
        return [f"NVMe SMART: {NO_DEVICES_REASON}"]
    for ctrl in read_controllers(roots):
        char_device = roots.devpath(ctrl.name)
        files: Dict[str, bytes] = {}
        try:
            files[SMART_FILE] = smart_log_ioctl(char_device)
            files[ID_CTRL_FILE] = id_ctrl_ioctl(char_device)
        except IdentifyError as ioctl_error:
            try:
                files[SMART_JSON] = _nvme_cli(char_device, "smart-log", "nvme", 10.0).encode()
            except IdentifyError as cli_error:
                notes.append(f"{ctrl.name}: SMART log: ioctl: {ioctl_error}; nvme-cli: {cli_error}")
        if not files:
            continue
        target = os.path.join(folder, CAPTURED_DIR, ctrl.name)
        os.makedirs(target, exist_ok=True)
        for name, data in files.items():
            atomicfile.replace_file(os.path.join(target, name), data)
    return notes
