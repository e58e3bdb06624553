"""fio's command line and its JSON, on literal inputs (real fio runs are in tests/e2e)."""

from __future__ import annotations

import json

import pytest

from storpath.scrape.probes import fio
from storpath.scrape.probes.config import BUILTIN_PROFILES, check_profile

# Trimmed from fio 3.33 `--output-format=json` of a 1 MiB sequential read (fields storpath reads kept).
FIO_JSON = {
    "fio version": "fio-3.33",
    "jobs": [{
        "jobname": "seqread", "groupid": 0, "error": 0, "elapsed": 3,
        "read": {"io_bytes": 2214592512, "io_kbytes": 2162688, "bw_bytes": 1101239439, "bw": 1075429,
                 "iops": 1050.227332, "runtime": 2011, "total_ios": 2112,
                 "clat_ns": {"min": 1830121, "max": 61236201, "mean": 15190410.3, "stddev": 4381113.5, "N": 2112,
                             "percentile": {"1.000000": 5275648, "50.000000": 15138816, "99.000000": 27394048,
                                            "99.500000": 31064064, "99.900000": 46399488, "99.950000": 61079552}}},
        "write": {"io_bytes": 0, "bw_bytes": 0, "iops": 0.0, "runtime": 0},
    }],
}


def test_parse_output_reads_throughput_iops_and_latency_quantiles():
    result = fio.parse_output(json.dumps(FIO_JSON))
    assert result.read_bytes_per_second == 1101239439
    assert result.read_iops == pytest.approx(1050.227332)
    assert result.io_bytes == 2214592512
    assert result.runtime_seconds == pytest.approx(2.011)
    assert dict(result.latency_seconds) == pytest.approx({"0.5": 0.015138816, "0.99": 0.027394048,
                                                          "0.999": 0.046399488})
    assert result.written_bytes == 0


def test_parse_output_skips_fio_error_lines_before_the_json():
    text = "fio: cache invalidation of /srv/x failed: Bad file descriptor\n" + json.dumps(FIO_JSON, indent=2)
    assert fio.parse_output(text).io_bytes == 2214592512


def test_percentiles_missing_are_left_out_not_zero():
    data = json.loads(json.dumps(FIO_JSON))
    del data["jobs"][0]["read"]["clat_ns"]["percentile"]
    assert fio.parse_output(json.dumps(data)).latency_seconds == ()


@pytest.mark.parametrize("text,reason", [
    ("", "bad_output"),
    ("fio: engine libaio not loadable\n", "bad_output"),
    ('{"jobs": [', "bad_output"),
    ('{"jobs": []}', "bad_output"),
    ('{"jobs": [{"read": {"io_bytes": "many"}}]}', "bad_output"),
])
def test_output_that_does_not_parse(text, reason):
    with pytest.raises(fio.FioError) as error:
        fio.parse_output(text)
    assert error.value.reason == reason


def test_a_job_error_is_a_fio_error_with_the_errno_text():
    data = json.loads(json.dumps(FIO_JSON))
    data["jobs"][0]["error"] = 2
    data["jobs"][0]["read"]["io_bytes"] = 0
    with pytest.raises(fio.FioError, match="No such file or directory") as error:
        fio.parse_output(json.dumps(data))
    assert error.value.reason == "fio_error" and error.value.io_bytes == 0


def test_nothing_read_is_a_failure():
    data = json.loads(json.dumps(FIO_JSON))
    data["jobs"][0]["read"].update(io_bytes=0, runtime=0)
    with pytest.raises(fio.FioError) as error:
        fio.parse_output(json.dumps(data))
    assert error.value.reason == "fio_error"


def test_command_line_is_read_only_direct_idle_and_capped():
    cmd = fio.build_command("/usr/bin/fio", "/dev/nvme0n1", BUILTIN_PROFILES["seqread"], 5, 1 << 30)
    assert cmd[0] == "/usr/bin/fio"
    for flag in ("--readonly", "--output-format=json", "--direct=1", "--prioclass=3", "--rw=read", "--bs=1M",
                 "--iodepth=16", "--filename=/dev/nvme0n1", "--runtime=5s", f"--io_size={1 << 30}", "--thread",
                 "--ioengine=libaio", "--group_reporting"):
        assert flag in cmd, flag
    assert not any(arg.startswith("--time_based") for arg in cmd)


def test_safety_options_come_after_the_profile():
    profile = check_profile("mine", {"rw": "randread", "bs": "64k", "ioengine": "io_uring"})
    cmd = fio.build_command("fio", "/srv/probe", profile, 3, None, io_priority="best-effort", size=1 << 20)
    assert cmd.index("--direct=1") > cmd.index("--bs=64k")
    assert "--ioengine=libaio" not in cmd and "--ioengine=io_uring" in cmd
    assert "--prioclass=2" in cmd and f"--size={1 << 20}" in cmd


def test_find_fio(tmp_path):
    assert fio.find_fio(str(tmp_path / "nope")) is None
    script = tmp_path / "fio"
    script.write_text("#!/bin/sh\n")
    assert fio.find_fio(str(script)) is None  # not executable
    script.chmod(0o755)
    assert fio.find_fio(str(script)) == str(script)
    assert fio.find_fio("no-such-fio-binary-here") is None


def test_a_path_with_colons_reaches_fio_as_one_file():
    """':' is fio's file separator: /dev/disk/by-path/pci-0000:01:00.0-nvme-1 made fio open three files."""
    path = "/dev/disk/by-path/pci-0000:01:00.0-nvme-1"
    cmd = fio.build_command("fio", path, BUILTIN_PROFILES["seqread"], 5, 1 << 30)
    assert "--filename=/dev/disk/by-path/pci-0000\\:01\\:00.0-nvme-1" in cmd


def test_the_budget_covers_every_job_of_a_run():
    """fio's io_size counts per job: numjobs 8 read 8 times the budget left."""
    profile = check_profile("wide", {"rw": "read", "bs": "1M", "numjobs": 8})
    cmd = fio.build_command("fio", "/dev/nvme0n1", profile, 5, 8 << 30)
    assert f"--io_size={1 << 30}" in cmd and "--numjobs=8" in cmd


@pytest.mark.parametrize("read,error", [
    ({"io_bytes": 1e400, "bw_bytes": 1, "iops": 1, "runtime": 1000}, 0),
    ({"io_bytes": 1, "bw_bytes": 1, "iops": 1, "runtime": 1000}, 1e400),
    ({"io_bytes": 10, "bw_bytes": -5, "iops": 1, "runtime": 1000}, 0),
    ({"io_bytes": 10, "bw_bytes": 5, "iops": float("nan"), "runtime": 1000}, 0),
    ({"io_bytes": 10, "bw_bytes": 5, "iops": 1, "runtime": float("inf")}, 0),
])
def test_impossible_numbers_in_fios_json_are_bad_output(read, error):
    """Found by the property tests: 1e400 raised OverflowError, a negative or NaN rate was a result."""
    text = json.dumps({"jobs": [{"error": error, "read": read}]}).replace("Infinity", "1e400")
    with pytest.raises(fio.FioError) as caught:
        fio.parse_output(text)
    assert caught.value.reason == "bad_output"


def test_a_negative_or_nan_latency_is_left_out():
    text = json.dumps({"jobs": [{"error": 0, "read": {"io_bytes": 10, "bw_bytes": 5, "iops": 1, "runtime": 1000,
                                                       "clat_ns": {"percentile": {"50.000000": -1,
                                                                                  "99.000000": float("nan"),
                                                                                  "99.900000": 3000}}}}]})
    assert fio.parse_output(text).latency_seconds == (("0.999", 3e-6),)
